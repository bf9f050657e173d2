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
    /// In a log assembled from pieces (`log export --segments`): the pieces after the first,
    /// and how many of those go on from the one before in the same store.
    pub pieces_after_first: u64,
    pub pieces_continuing: u64,
    pub bytes: u64,
    /// Bytes of the frames of each event kind (frame header and checksum included).
    pub event_bytes_by_kind: BTreeMap<&'static str, u64>,
    /// Bytes of the frames that hold commands.
    pub command_bytes: u64,
    /// Bytes of each command kind's encoding (postcard, without the frames around it).
    pub command_bytes_by_kind: BTreeMap<&'static str, u64>,
}

impl LogSummary {
    /// The mean size of an event's frame, the catalog's aside (it is most of a short log, and
    /// comes once per catalog change).
    pub fn mean_event_bytes(&self) -> f64 {
        let catalog = self
            .event_bytes_by_kind
            .get("CatalogUpdated")
            .copied()
            .unwrap_or(0);
        let catalogs = self
            .events_by_kind
            .get("CatalogUpdated")
            .copied()
            .unwrap_or(0);
        let bytes: u64 = self.event_bytes_by_kind.values().sum::<u64>() - catalog;
        let events = self.events - catalogs;
        if events == 0 {
            0.0
        } else {
            bytes as f64 / events as f64
        }
    }
}

/// What a frame held, for its size.
enum Held {
    Event(&'static str),
    Commands,
    Snapshot,
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
        pieces_after_first: 0,
        pieces_continuing: 0,
        bytes: 0,
        event_bytes_by_kind: BTreeMap::new(),
        command_bytes: 0,
        command_bytes_by_kind: BTreeMap::new(),
    };
    // A frame's size is known when the next one starts.
    let mut previous: Option<(u64, Held)> = None;
    let account = |summary: &mut LogSummary, held: Held, bytes: u64| match held {
        Held::Event(kind) => *summary.event_bytes_by_kind.entry(kind).or_default() += bytes,
        Held::Commands => summary.command_bytes += bytes,
        Held::Snapshot => {}
    };
    while let Some(entry) = reader.next_entry() {
        let entry = entry?;
        if let Some((start, held)) = previous.take() {
            account(&mut summary, held, entry.byte_offset - start);
        }
        let held = match &entry.record {
            LogRecord::Event(e) => Held::Event(e.kind.name()),
            LogRecord::Commands(_) | LogRecord::CommandsPart { .. } => Held::Commands,
            LogRecord::Snapshot(_) | LogRecord::SnapshotPart(_) | LogRecord::Term(_) => {
                Held::Snapshot
            }
        };
        previous = Some((entry.byte_offset, held));
        match entry.record {
            LogRecord::Event(e) => {
                summary.events += 1;
                summary.first_event_ms.get_or_insert(e.at_ms);
                summary.last_event_ms = Some(e.at_ms);
                *summary.events_by_kind.entry(e.kind.name()).or_default() += 1;
            }
            LogRecord::Commands(cs) | LogRecord::CommandsPart { commands: cs, .. } => {
                for c in cs {
                    summary.commands += 1;
                    *summary.commands_by_kind.entry(c.name()).or_default() += 1;
                    // It was decoded from these bytes, so it encodes again.
                    let bytes = postcard::experimental::serialized_size(&c).unwrap_or(0);
                    *summary.command_bytes_by_kind.entry(c.name()).or_default() += bytes as u64;
                }
            }
            LogRecord::Snapshot(snapshot) => {
                summary.snapshots += 1;
                summary.snapshot_bytes += snapshot.core.len() as u64;
            }
            // A leading piece of the snapshot that follows: its bytes count, it is not another.
            LogRecord::SnapshotPart(bytes) => summary.snapshot_bytes += bytes.len() as u64,
            LogRecord::Term(term) => {
                summary.pieces_after_first += 1;
                summary.pieces_continuing += u64::from(term.continues);
            }
        }
    }
    summary.bytes = reader.next_byte_offset();
    if let Some((start, held)) = previous {
        let bytes = summary.bytes - start;
        account(&mut summary, held, bytes);
    }
    Ok(summary)
}
