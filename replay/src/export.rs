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

use std::fs;
use std::path::{Path, PathBuf};

use nodewright_adapters::eventlog::{
    LogError, LogHeader, LogRecord, NwlogWriter, RedbStore, Snapshot,
};
use nodewright_core::{Core, EventKind};
use thiserror::Error;

/// Records read from the store at once.
const CHUNK: u64 = 4096;

#[derive(Debug, Error)]
pub enum ExportError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("the store holds no event in the range {0}: nothing to export")]
    Empty(String),
    #[error("the core's state before the range does not encode: {0}")]
    Snapshot(String),
}

/// What was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// Events and commands of the range.
    pub events: u64,
    pub commands: u64,
    /// Events before the range, summed up in the starting snapshot (0: none).
    pub events_before: u64,
}

/// Writes the events with `from_ms <= at_ms < until_ms` (and their commands) of the store at
/// `store` to `out`.
pub fn export(
    store: &Path,
    out: &Path,
    from_ms: Option<u64>,
    until_ms: Option<u64>,
) -> Result<Exported, ExportError> {
    let store: RedbStore<LogHeader, LogRecord> = RedbStore::open(store)?;
    let header = store.header().clone();
    let len = store.len();
    let from = from_ms.unwrap_or(0);
    let until = until_ms.unwrap_or(u64::MAX);
    let shown = || format!("{}..{}", describe(from_ms), describe(until_ms));

    // One pass: the core replays what comes before the range; the range is found by its
    // events' times (commands go with the event before them).
    let mut core = Core::new(header.config.clone());
    let mut catalog: Option<LogRecord> = None;
    let mut before = (0u64, 0u64);
    let mut start: Option<u64> = None;
    let mut end = len;
    let mut index = 0;
    'scan: while index < len {
        let to = (index + CHUNK).min(len);
        for (i, record) in (index..to).zip(store.read_range(index, to)?) {
            if let LogRecord::Event(event) = &record {
                if event.at_ms >= until {
                    end = i;
                    break 'scan;
                }
                if start.is_none() && event.at_ms >= from {
                    start = Some(i);
                }
            }
            if start.is_none() {
                match &record {
                    LogRecord::Event(event) => {
                        if matches!(event.kind, EventKind::CatalogUpdated(_)) {
                            catalog = Some(record.clone());
                        }
                        core.handle(event);
                        before.0 += 1;
                    }
                    LogRecord::Commands(cs) => before.1 += cs.len() as u64,
                    LogRecord::Snapshot(_) => {}
                }
            }
        }
        index = to;
    }
    let Some(start) = start.filter(|s| *s < end) else {
        return Err(ExportError::Empty(shown()));
    };

    let partial = partial_path(out);
    let mut writer = NwlogWriter::<LogHeader, LogRecord>::create(&partial, &header)?;
    if start > 0 {
        let mut opening = Vec::new();
        let catalog_record = catalog.map(|c| {
            opening.push(c);
            0
        });
        let snapshot = Snapshot::of(&core, before.0, before.1, catalog_record)
            .map_err(|e| ExportError::Snapshot(e.to_string()))?;
        opening.push(LogRecord::Snapshot(snapshot));
        writer.append(&opening)?;
    }
    let (mut events, mut commands) = (0, 0);
    let mut index = start;
    while index < end {
        let to = (index + CHUNK).min(end);
        let records = store.read_range(index, to)?;
        for record in &records {
            match record {
                LogRecord::Event(_) => events += 1,
                LogRecord::Commands(cs) => commands += cs.len() as u64,
                LogRecord::Snapshot(_) => {}
            }
        }
        writer.append(&records)?;
        index = to;
    }
    drop(writer);
    fs::rename(&partial, out).map_err(|source| LogError::Io {
        path: Some(out.to_path_buf()),
        action: "move the finished export into place",
        source,
    })?;
    Ok(Exported {
        events,
        commands,
        events_before: before.0,
    })
}

fn describe(ms: Option<u64>) -> String {
    ms.map_or(String::new(), |ms| format!("{ms}ms"))
}

fn partial_path(out: &Path) -> PathBuf {
    let mut partial = out.as_os_str().to_os_string();
    partial.push(".partial");
    PathBuf::from(partial)
}
