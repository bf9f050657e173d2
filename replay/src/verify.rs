//! `replay --verify`: re-run the core over a log and check that it returns, for every event,
//! exactly the commands recorded.

use std::path::Path;

use nodewright_adapters::eventlog::{DecisionDigest, LogError, LogHeader, LogRecord, NwlogReader};
use nodewright_core::{Command, Core, Event};

/// The first event whose commands differ from the recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// 0-based index of the event among the log's events.
    pub event_index: u64,
    pub event: Event,
    pub recorded: Vec<Command>,
    pub replayed: Vec<Command>,
    /// Up to three events before the divergent one, with their indexes.
    pub before: Vec<(u64, Event)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct VerifyOutcome {
    pub header: LogHeader,
    pub events: u64,
    pub commands: u64,
    /// Digest of the recorded command stream (equal to the replayed one when verified).
    pub decision_digest: String,
    pub divergence: Option<Divergence>,
}

/// Replays every event of the `.nwlog` at `path` through a fresh core built from the log's
/// header. Reading problems are errors; a divergence is an outcome.
pub fn verify_file(path: &Path) -> Result<VerifyOutcome, LogError> {
    let reader: NwlogReader<LogHeader, LogRecord, _> = NwlogReader::open(path)?;
    verify(reader)
}

/// [`verify_file`] over any reader.
pub fn verify<S: std::io::Read>(
    mut reader: NwlogReader<LogHeader, LogRecord, S>,
) -> Result<VerifyOutcome, LogError> {
    let header = reader.header().clone();
    let mut core = Core::new(header.config.clone());
    let mut digest = DecisionDigest::new();
    let mut events = 0u64;
    let mut before: Vec<(u64, Event)> = Vec::new();
    // The event whose recorded commands we are waiting to see, with what the core returned.
    let mut open: Option<(u64, Event, Vec<Command>)> = None;

    let check = |open: Option<(u64, Event, Vec<Command>)>,
                 recorded: Vec<Command>,
                 before: &Vec<(u64, Event)>|
     -> Option<Divergence> {
        let (index, event, replayed) = open?;
        if replayed == recorded {
            None
        } else {
            Some(Divergence {
                event_index: index,
                event,
                recorded,
                replayed,
                before: before.clone(),
            })
        }
    };

    while let Some(entry) = reader.next_entry() {
        let record = entry?.record;
        match record {
            LogRecord::Event(event) => {
                if let Some(d) = check(open.take(), Vec::new(), &before) {
                    return Ok(outcome(header, events, &digest, Some(d)));
                }
                let replayed = core.handle(&event);
                open = Some((events, event.clone(), replayed));
                before.push((events, event));
                if before.len() > 4 {
                    before.remove(0);
                }
                events += 1;
            }
            LogRecord::Commands(recorded) => {
                digest.add_all(&recorded);
                let context: Vec<(u64, Event)> = before
                    .iter()
                    .take(before.len().saturating_sub(1))
                    .cloned()
                    .collect();
                if let Some(d) = check(open.take(), recorded, &context) {
                    return Ok(outcome(header, events, &digest, Some(d)));
                }
            }
        }
    }
    let context: Vec<(u64, Event)> = before
        .iter()
        .take(before.len().saturating_sub(1))
        .cloned()
        .collect();
    let divergence = check(open.take(), Vec::new(), &context);
    Ok(outcome(header, events, &digest, divergence))
}

fn outcome(
    header: LogHeader,
    events: u64,
    digest: &DecisionDigest,
    divergence: Option<Divergence>,
) -> VerifyOutcome {
    VerifyOutcome {
        header,
        events,
        commands: digest.commands(),
        decision_digest: digest.hex(),
        divergence,
    }
}
