//! `nodewright log repair DAMAGED.nwlog --out F.nwlog`: the intact prefix of a damaged log as a
//! log of its own, which replays, explains and exports like any other.
//!
//! A log is read up to its first damaged frame. Every record before it is intact, but one more
//! thing is unsure: when the damage comes right after an event, the damaged frame may have held
//! that event's commands (an event without commands has no commands record, so the two cannot be
//! told apart). That last event is left out, so the repaired log never holds an event whose
//! recorded commands are missing; `replay --verify` then checks every event it keeps.

use std::path::Path;

use nodewright_adapters::eventlog::{LogError, LogHeader, LogRecord, NwlogReader, NwlogWriter};

/// What a repair kept and why it stopped.
#[derive(Debug)]
pub struct Repaired {
    /// Records written to the repaired log.
    pub records: u64,
    /// Events among them.
    pub events: u64,
    /// The last event was left out: the damage came right after it, where its commands were.
    pub dropped_last_event: bool,
    /// The reader's account of the damage (none when the log was intact).
    pub damage: Option<LogError>,
}

/// Writes the intact prefix of the `.nwlog` at `damaged` to `out` (which must not exist).
pub fn repair(damaged: &Path, out: &Path) -> Result<Repaired, LogError> {
    let mut reader = NwlogReader::<LogHeader, LogRecord>::open(damaged)?;
    let header = reader.header().clone();
    let mut kept: Vec<LogRecord> = Vec::new();
    let mut damage = None;
    for record in reader.by_ref() {
        match record {
            Ok(record) => kept.push(record),
            Err(error) => {
                damage = Some(error);
                break;
            }
        }
    }
    let dropped_last_event = damage.is_some() && matches!(kept.last(), Some(LogRecord::Event(_)));
    if dropped_last_event {
        kept.pop();
    }
    let mut writer = NwlogWriter::<LogHeader, LogRecord>::create_new(out, &header)?;
    writer.append(&kept)?;
    Ok(Repaired {
        records: kept.len() as u64,
        events: kept
            .iter()
            .filter(|r| matches!(r, LogRecord::Event(_)))
            .count() as u64,
        dropped_last_event,
        damage,
    })
}
