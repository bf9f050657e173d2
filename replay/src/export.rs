//! `nodewright log export`: a time range of the controller's store as a portable `.nwlog`.
//!
//! A range that starts at the store's first event is copied as it is. A range that starts later
//! cannot replay from its first event alone: the core's state then is the sum of everything
//! before. So the export starts with the catalog event in force then and a snapshot of the core
//! at that point (rebuilt by replaying the store up to it), then the records of the range:
//!
//! ```text
//! record 0   the last CatalogUpdated event before the range (as recorded)
//! record 1   Snapshot { events: <events before the range>, commands, catalog_record: 0 }
//! record 2.. the range's events and commands, as recorded
//! ```
//!
//! `replay --verify` and `explain` start such a log from its snapshot, with the original
//! event and command indexes; a snapshot restores only in the nodewright version that wrote it.
//!
//! With `--redact` ([`crate::redact`]), every event of the store is read twice: once to learn
//! the values to replace, once to replace them. The core runs over the redacted events from the
//! store's first, and the export holds the commands it gives: they must decide what the
//! recorded ones did, one for one, or the export fails and says where. The snapshots of the
//! store are left out (they hold the names), and the starting snapshot of a later range is the
//! redacted core's.

use std::fs;
use std::path::{Path, PathBuf};

use nodewright_adapters::eventlog::{
    LogError, LogHeader, LogRecord, NwlogWriter, RedbStore, commands_records,
};
use nodewright_core::Command;
use thiserror::Error;

use crate::redact::{Learner, RedactionCounts, Redactor};
use crate::replayer::{Replayer, Step};

/// Records read from the store at once.
const CHUNK: usize = 4096;

#[derive(Debug, Error)]
pub enum ExportError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Replay(#[from] crate::replayer::ReplayError),
    #[error("the store holds no event in the range {0}: nothing to export")]
    Empty(String),
    #[error(
        "{0} is a portable .nwlog log, not a controller's store; it replays as it is (`nodewright replay {0} --verify`, `explain`, `log inspect`); `log export` cuts a store, the controller's events.redb"
    )]
    PortableLog(String),
    #[error("the core's state before the range does not encode: {0}")]
    Snapshot(String),
    #[error(
        "redaction changed a decision at event {event_index} (at {at_ms} ms): recorded {recorded:?}, redacted {redacted:?}; export without --redact, or report this log"
    )]
    RedactionChangedDecision {
        event_index: u64,
        at_ms: u64,
        recorded: Vec<String>,
        redacted: Vec<String>,
    },
}

/// What was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// Events and commands of the range.
    pub events: u64,
    pub commands: u64,
    /// Events before the range, summed up in the starting snapshot (0: none).
    pub events_before: u64,
    /// With `--redact`: how many distinct values were replaced.
    pub redacted: Option<RedactionCounts>,
}

/// Writes the events with `from_ms <= at_ms < until_ms` (and their commands) of the store at
/// `store` to `out`.
pub fn export(
    store: &Path,
    out: &Path,
    from_ms: Option<u64>,
    until_ms: Option<u64>,
    redact: bool,
) -> Result<Exported, ExportError> {
    let opened = RedbStore::<LogHeader, LogRecord>::open(store);
    let store = match opened {
        Ok(store) => store,
        Err(error) if is_nwlog(store) => {
            drop(error);
            return Err(ExportError::PortableLog(store.display().to_string()));
        }
        Err(error) => return Err(error.into()),
    };
    export_store(&store, out, from_ms, until_ms, redact)
}

/// Whether the file at `path` begins as a `.nwlog` does.
fn is_nwlog(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == nodewright_adapters::eventlog::MAGIC)
}

/// [`export`] from a store already open: a running controller's, through
/// [`RedbStore::reader`], which sees what was committed when it was made.
pub fn export_store(
    store: &RedbStore<LogHeader, LogRecord>,
    out: &Path,
    from_ms: Option<u64>,
    until_ms: Option<u64>,
    redact: bool,
) -> Result<Exported, ExportError> {
    if redact {
        return export_redacted(store, out, from_ms, until_ms);
    }
    let header = store.header().clone();
    let from = from_ms.unwrap_or(0);
    let until = until_ms.unwrap_or(u64::MAX);

    // One pass: the core replays what comes before the range; the range is found by its
    // events' times (commands go with the event before them) and copied as it is.
    let mut replay = Replayer::new(header.clone());
    let mut records = store_records(store);
    let mut first: Option<LogRecord> = None;
    for record in records.by_ref() {
        let record = record?;
        if let LogRecord::Event(event) = &record {
            if event.at_ms >= until {
                break;
            }
            if event.at_ms >= from {
                first = Some(record);
                break;
            }
        }
        replay.feed(record)?;
    }
    let Some(first) = first else {
        return Err(ExportError::Empty(range_text(from_ms, until_ms)));
    };

    let partial = partial_path(out);
    let mut writer = open_writer(&partial, &header, &replay)?;
    let (mut events, mut commands) = (0, 0);
    let mut batch: Vec<LogRecord> = Vec::new();
    for record in std::iter::once(Ok(first)).chain(records) {
        let record = record?;
        match &record {
            LogRecord::Event(event) if event.at_ms >= until => break,
            LogRecord::Event(_) => events += 1,
            LogRecord::Commands(cs) | LogRecord::CommandsPart { commands: cs, .. } => {
                commands += cs.len() as u64
            }
            // A store holds no `Term` (the controller refuses one that does).
            LogRecord::Snapshot(_) | LogRecord::SnapshotPart(_) | LogRecord::Term(_) => {}
        }
        batch.push(record);
        if batch.len() >= CHUNK {
            // One durable write a chunk.
            writer.append(&batch)?;
            batch.clear();
        }
    }
    writer.append(&batch)?;
    finish(writer, &partial, out)?;
    Ok(Exported {
        events,
        commands,
        events_before: replay.events(),
        redacted: None,
    })
}

/// The store's records in order, read [`CHUNK`] at a time.
fn store_records(
    store: &RedbStore<LogHeader, LogRecord>,
) -> impl Iterator<Item = Result<LogRecord, LogError>> + '_ {
    let len = store.len();
    let mut next = 0u64;
    let mut chunk = std::collections::VecDeque::new();
    std::iter::from_fn(move || {
        if chunk.is_empty() && next < len {
            let to = (next + CHUNK as u64).min(len);
            match store.read_range(next, to) {
                Ok(records) => chunk.extend(records),
                Err(error) => {
                    // Nothing after a chunk that does not read.
                    next = len;
                    return Some(Err(error));
                }
            }
            next = to;
        }
        chunk.pop_front().map(Ok)
    })
}

/// [`export`] with names and values replaced by tokens. On failure nothing is left behind.
fn export_redacted(
    store: &RedbStore<LogHeader, LogRecord>,
    out: &Path,
    from_ms: Option<u64>,
    until_ms: Option<u64>,
) -> Result<Exported, ExportError> {
    let partial = partial_path(out);
    let result = write_redacted(store, &partial, out, from_ms, until_ms);
    if result.is_err() {
        // Best effort: the error at hand is the one to report.
        let _ = fs::remove_file(&partial);
    }
    result
}

fn write_redacted(
    store: &RedbStore<LogHeader, LogRecord>,
    partial: &Path,
    out: &Path,
    from_ms: Option<u64>,
    until_ms: Option<u64>,
) -> Result<Exported, ExportError> {
    let header = store.header().clone();
    let from = from_ms.unwrap_or(0);
    let until = until_ms.unwrap_or(u64::MAX);

    // First reading: the values of the whole store, so that every export of it agrees.
    let mut learner = Learner::default();
    for record in store_records(store) {
        if let LogRecord::Event(mut event) = record? {
            learner.learn(&mut event.kind);
        }
    }
    let redactor = learner.finish();

    // Second reading: the core decides over the redacted events; the range is written, a
    // chunk at a time (one durable write each).
    let mut writer: Option<NwlogWriter<LogHeader, LogRecord>> = None;
    let mut batch: Vec<LogRecord> = Vec::new();
    let mut replay = Replayer::new(header.clone());
    let (mut events, mut commands) = (0u64, 0u64);
    // The last event: its index and time, the commands the core gave for it, and the
    // recorded ones seen so far.
    let mut open: Option<(u64, u64, Vec<Command>, Vec<Command>)> = None;
    for record in store_records(store) {
        let mut record = record?;
        match &mut record {
            LogRecord::Event(event) => {
                if event.at_ms >= until {
                    break;
                }
                if let Some(done) = open.take() {
                    let keep = writer.is_some().then_some(&mut batch);
                    close(&redactor, done, keep, &mut commands)?;
                }
                if event.at_ms >= from && writer.is_none() {
                    writer = Some(open_writer(partial, &header, &replay)?);
                }
                redactor.redact(&mut event.kind);
            }
            // Snapshots hold the names: left out.
            LogRecord::Snapshot(_) | LogRecord::SnapshotPart(_) | LogRecord::Term(_) => continue,
            LogRecord::Commands(_) | LogRecord::CommandsPart { .. } => {}
        }
        match replay.feed(record)? {
            Some(Step::Event {
                index,
                event,
                given,
            }) => {
                open = Some((index, event.at_ms, given, Vec::new()));
                if writer.is_some() {
                    batch.push(LogRecord::Event(event));
                    events += 1;
                }
            }
            Some(Step::Recorded(recorded)) => {
                if let Some((_, _, _, seen)) = open.as_mut() {
                    seen.extend(recorded);
                }
            }
            Some(Step::Snapshot { .. } | Step::Started { .. } | Step::Term { .. }) | None => {}
        }
        if let Some(w) = writer.as_mut()
            && batch.len() >= CHUNK
        {
            w.append(&batch)?;
            batch.clear();
        }
    }
    if let Some(done) = open.take() {
        let keep = writer.is_some().then_some(&mut batch);
        close(&redactor, done, keep, &mut commands)?;
    }
    let Some(mut writer) = writer else {
        return Err(ExportError::Empty(range_text(from_ms, until_ms)));
    };
    writer.append(&batch)?;
    finish(writer, partial, out)?;
    Ok(Exported {
        events,
        commands,
        events_before: replay.events() - events,
        redacted: Some(redactor.counts()),
    })
}

/// Closes the finished export and moves it into place.
fn finish(
    writer: NwlogWriter<LogHeader, LogRecord>,
    partial: &Path,
    out: &Path,
) -> Result<(), ExportError> {
    drop(writer);
    fs::rename(partial, out).map_err(|source| LogError::Io {
        path: Some(out.to_path_buf()),
        action: "move the finished export into place",
        source,
    })?;
    Ok(())
}

/// The range as the user gave it, for a message.
fn range_text(from_ms: Option<u64>, until_ms: Option<u64>) -> String {
    format!("{}..{}", describe(from_ms), describe(until_ms))
}

/// Starts the export file: for a range that starts later, with the catalog in force and a
/// snapshot of the (redacted) core before it.
fn open_writer(
    partial: &Path,
    header: &LogHeader,
    before: &Replayer,
) -> Result<NwlogWriter<LogHeader, LogRecord>, ExportError> {
    let mut writer = NwlogWriter::<LogHeader, LogRecord>::create(partial, header)?;
    let opening = before
        .starting_records()
        .map_err(|e| ExportError::Snapshot(e.to_string()))?;
    if !opening.is_empty() {
        writer.append(&opening)?;
    }
    Ok(writer)
}

/// Checks that the core's commands for a redacted event decide what the recorded ones did,
/// and keeps them for writing when the event is in the range.
fn close(
    redactor: &Redactor,
    (event_index, at_ms, given, recorded): (u64, u64, Vec<Command>, Vec<Command>),
    keep: Option<&mut Vec<LogRecord>>,
    commands: &mut u64,
) -> Result<(), ExportError> {
    let recorded: Vec<String> = recorded
        .iter()
        .map(|c| Redactor::decision(c, Some(redactor)))
        .collect();
    let redacted: Vec<String> = given.iter().map(|c| Redactor::decision(c, None)).collect();
    if recorded != redacted {
        return Err(ExportError::RedactionChangedDecision {
            event_index,
            at_ms,
            recorded,
            redacted,
        });
    }
    if let Some(batch) = keep
        && !given.is_empty()
    {
        *commands += given.len() as u64;
        batch.extend(commands_records(given));
    }
    Ok(())
}

fn describe(ms: Option<u64>) -> String {
    ms.map_or(String::new(), |ms| format!("{ms}ms"))
}

/// Where a log is written until it is whole: `out` with `.partial` added.
pub(crate) fn partial_path(out: &Path) -> PathBuf {
    let mut partial = out.as_os_str().to_os_string();
    partial.push(".partial");
    PathBuf::from(partial)
}
