//! `log inspect`: what a log holds.

use std::collections::BTreeMap;
use std::path::Path;

use nodewright_adapters::eventlog::{LogError, LogHeader, LogRecord, NwlogReader};

#[derive(Debug, Clone, PartialEq)]
pub struct LogSummary {
    pub format_version: u16,
    pub header: LogHeader,
    pub events: u64,
    pub commands: u64,
    pub first_event_ms: Option<u64>,
    pub last_event_ms: Option<u64>,
    pub events_by_kind: BTreeMap<&'static str, u64>,
    pub commands_by_kind: BTreeMap<&'static str, u64>,
    /// Snapshots of the core, and their encoded size in bytes.
    pub snapshots: u64,
    pub snapshot_bytes: u64,
    pub bytes: u64,
}

pub fn inspect_file(path: &Path) -> Result<LogSummary, LogError> {
    let mut reader: NwlogReader<LogHeader, LogRecord, _> = NwlogReader::open(path)?;
    let mut summary = LogSummary {
        format_version: reader.format_version(),
        header: reader.header().clone(),
        events: 0,
        commands: 0,
        first_event_ms: None,
        last_event_ms: None,
        events_by_kind: BTreeMap::new(),
        commands_by_kind: BTreeMap::new(),
        snapshots: 0,
        snapshot_bytes: 0,
        bytes: 0,
    };
    while let Some(entry) = reader.next_entry() {
        match entry?.record {
            LogRecord::Event(e) => {
                summary.events += 1;
                summary.first_event_ms.get_or_insert(e.at_ms);
                summary.last_event_ms = Some(e.at_ms);
                *summary.events_by_kind.entry(e.kind.name()).or_default() += 1;
            }
            LogRecord::Commands(cs) => {
                for c in cs {
                    summary.commands += 1;
                    *summary.commands_by_kind.entry(c.name()).or_default() += 1;
                }
            }
            LogRecord::Snapshot(snapshot) => {
                summary.snapshots += 1;
                summary.snapshot_bytes += snapshot.core.len() as u64;
            }
        }
    }
    summary.bytes = reader.next_byte_offset();
    Ok(summary)
}
