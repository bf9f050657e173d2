//! `replay --verify`: re-run the core over a log and check that it returns, for every event,
//! exactly the commands recorded.

use std::collections::VecDeque;
use std::path::Path;

use nodewright_adapters::eventlog::{
    DecisionDigest, LogHeader, LogRecord, NwlogReader, ReadRecord, Snapshot, encode_each,
};
use nodewright_core::{Command, Event};

use crate::replayer::{Replayer, Step};

pub use crate::replayer::ReplayError;

/// Events shown before a divergent one.
const CONTEXT: usize = 3;

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
    /// Up to three events after it, with their indexes.
    pub after: Vec<(u64, Event)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct VerifyOutcome {
    pub header: LogHeader,
    /// Events replayed.
    pub events: u64,
    /// For a log cut from a longer one: the index of its first event there (it starts from a
    /// snapshot of the events before).
    pub started_at_event: Option<u64>,
    pub commands: u64,
    /// Digest of the recorded command stream (equal to the replayed one when verified).
    pub decision_digest: String,
    pub divergence: Option<Divergence>,
    /// Snapshots this build wrote that were compared with the replayed core.
    pub snapshots_checked: u64,
    /// The first snapshot that differs from the replayed core: its record's event count.
    pub snapshot_divergence: Option<u64>,
}

/// Replays every event of the `.nwlog` at `path` through a fresh core built from the log's
/// header. Reading problems are errors; a divergence is an outcome.
pub fn verify_file(path: &Path) -> Result<VerifyOutcome, ReplayError> {
    verify_file_with_progress(path, |_| {})
}

/// How far a replay has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub events: u64,
    pub bytes_read: u64,
    /// The log's size, when it is a file.
    pub bytes_total: Option<u64>,
}

/// Events between two calls of a progress callback.
pub const PROGRESS_EVERY: u64 = 65_536;

/// [`verify_file`], calling `progress` every [`PROGRESS_EVERY`] events.
pub fn verify_file_with_progress(
    path: &Path,
    progress: impl FnMut(Progress),
) -> Result<VerifyOutcome, ReplayError> {
    let total = std::fs::metadata(path).ok().map(|m| m.len());
    let reader: NwlogReader<LogHeader, LogRecord, _> = NwlogReader::open(path)?;
    verify_with_progress(reader, total, progress)
}

/// [`verify_file`] over any reader.
pub fn verify<S: std::io::Read>(
    reader: NwlogReader<LogHeader, LogRecord, S>,
) -> Result<VerifyOutcome, ReplayError> {
    verify_with_progress(reader, None, |_| {})
}

/// [`verify`], calling `progress` every [`PROGRESS_EVERY`] events.
pub fn verify_with_progress<S: std::io::Read>(
    mut reader: NwlogReader<LogHeader, LogRecord, S>,
    bytes_total: Option<u64>,
    mut progress: impl FnMut(Progress),
) -> Result<VerifyOutcome, ReplayError> {
    let mut replay = Replayer::new(reader.header().clone()).joining_commands();
    let mut digest = DecisionDigest::new();
    // The last events, newest last: the newest is the one whose recorded commands are awaited
    // when `open` holds what the core returned for it.
    let mut before: VecDeque<(u64, Event)> = VecDeque::with_capacity(CONTEXT + 1);
    let mut open: Option<Vec<Command>> = None;
    let mut snapshots = SnapshotCheck::default();

    // Compares the commands the core returned for the newest event with the recorded ones.
    let check = |open: Option<Vec<Command>>,
                 recorded: Vec<Command>,
                 before: &VecDeque<(u64, Event)>|
     -> Option<Divergence> {
        let replayed = open?;
        if replayed == recorded {
            return None;
        }
        let (event_index, event) = before.back().cloned()?;
        Some(Divergence {
            event_index,
            event,
            recorded,
            replayed,
            before: before.iter().take(before.len() - 1).cloned().collect(),
            after: Vec::new(),
        })
    };

    // The replayed commands' encodings, one after the other, and where each ends.
    let (mut encoded, mut ends) = (Vec::new(), Vec::new());

    // The first divergence, with the events after it; `None` when the whole log replays.
    let divergence = loop {
        let Some(entry) = reader.next_entry_read(ReadRecord::read) else {
            break check(open.take(), Vec::new(), &before);
        };
        let entry = entry?;
        let (frame_index, byte_offset) = (entry.frame_index, entry.byte_offset);
        let record = match entry.record {
            ReadRecord::Decoded(record) => record,
            ReadRecord::Commands(recorded) => {
                replay.feed_encoded_commands(recorded.count());
                if let Some(replayed) = &open {
                    encode_each(replayed, &mut encoded, &mut ends);
                    if recorded.holds(replayed.len(), &encoded) {
                        let mut from = 0;
                        for &end in &ends {
                            digest.add_encoded(&encoded[from..end]);
                            from = end;
                        }
                        open = None;
                        continue;
                    }
                }
                // Not the replayed commands byte for byte (or no event before them): compared
                // as commands.
                let recorded = recorded
                    .decode()
                    .map_err(|reason| reader.undecodable(frame_index, byte_offset, reason))?;
                digest.add_all(&recorded);
                if let Some(d) = check(open.take(), recorded, &before) {
                    break Some(with_following(&mut reader, d));
                }
                continue;
            }
        };
        let Some(step) = replay.feed(record)? else {
            continue;
        };
        match step {
            Step::Event {
                index,
                event,
                given,
            } => {
                if let Some(mut d) = check(open.take(), Vec::new(), &before) {
                    d.after.push((index, event));
                    break Some(with_following(&mut reader, d));
                }
                open = Some(given);
                if before.len() > CONTEXT {
                    before.pop_front();
                }
                before.push_back((index, event));
                let events = index + 1;
                if events.is_multiple_of(PROGRESS_EVERY) {
                    progress(Progress {
                        events,
                        bytes_read: reader.next_byte_offset(),
                        bytes_total,
                    });
                }
            }
            Step::Recorded(recorded) => {
                digest.add_all(&recorded);
                if let Some(d) = check(open.take(), recorded, &before) {
                    break Some(with_following(&mut reader, d));
                }
            }
            // What the core gave for the records before a cut log's snapshot was recorded
            // as nothing.
            Step::Started { .. } => {
                if let Some(d) = check(open.take(), Vec::new(), &before) {
                    break Some(with_following(&mut reader, d));
                }
            }
            Step::Snapshot {
                snapshot,
                mut parts,
            } => {
                if let Some(d) = check(open.take(), Vec::new(), &before) {
                    break Some(with_following(&mut reader, d));
                }
                match parts.join(snapshot) {
                    Ok(recorded) => snapshots.compare(&recorded, &replay),
                    // Its parts are not all there: it holds no core at all.
                    Err(_) => snapshots.broken(replay.events()),
                }
            }
        }
    };
    Ok(outcome(&replay, &digest, divergence, snapshots))
}

/// Reads on to the events after a divergence, until it shows [`CONTEXT`] of them (or the log
/// ends, or its tail does not read: what was shown is the evidence, not the rest).
fn with_following<S: std::io::Read>(
    reader: &mut NwlogReader<LogHeader, LogRecord, S>,
    mut divergence: Divergence,
) -> Divergence {
    let mut index = divergence
        .after
        .last()
        .map_or(divergence.event_index, |(i, _)| *i)
        + 1;
    while divergence.after.len() < CONTEXT {
        match reader.next_entry() {
            Some(Ok(entry)) => {
                if let LogRecord::Event(event) = entry.record {
                    divergence.after.push((index, event));
                    index += 1;
                }
            }
            _ => break,
        }
    }
    divergence
}

/// Snapshots written by this build must hold exactly the replayed core (others are skipped:
/// another version's state has another shape).
#[derive(Default)]
struct SnapshotCheck {
    checked: u64,
    first_divergence: Option<u64>,
}

impl SnapshotCheck {
    fn compare(&mut self, recorded: &Snapshot, replay: &Replayer) {
        if recorded.producer != Snapshot::this_producer() {
            return;
        }
        self.checked += 1;
        let events = replay.events();
        let same = recorded.holds(
            replay.core(),
            events,
            replay.commands(),
            replay.catalog_record(),
        );
        if !same && self.first_divergence.is_none() {
            self.first_divergence = Some(events);
        }
    }

    /// A snapshot whose parts are missing.
    fn broken(&mut self, events: u64) {
        self.checked += 1;
        self.first_divergence.get_or_insert(events);
    }
}

fn outcome(
    replay: &Replayer,
    digest: &DecisionDigest,
    divergence: Option<Divergence>,
    snapshots: SnapshotCheck,
) -> VerifyOutcome {
    let started_at = replay.started_at();
    VerifyOutcome {
        header: replay.header().clone(),
        events: replay.events() - started_at.unwrap_or(0),
        started_at_event: started_at,
        commands: digest.commands(),
        decision_digest: digest.hex(),
        divergence,
        snapshots_checked: snapshots.checked,
        snapshot_divergence: snapshots.first_divergence,
    }
}
