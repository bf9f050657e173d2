//! A log read whole: its header, its events, and the commands each event gave, with what a
//! what-if asks of it (the machines launched, the NodePools and EC2NodeClasses it knew).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use nodewright_adapters::eventlog::{LogError, LogHeader, LogRecord, NwlogReader};
use nodewright_core::catalog::CapacityType;
use nodewright_core::{Command, Event, EventKind};

/// A log read whole: its header, its events, and its commands with the index of the event that
/// gave each.
#[derive(Debug, Clone)]
pub struct Recording {
    pub header: LogHeader,
    pub events: Vec<Event>,
    pub commands: Vec<(usize, Command)>,
    /// For a log cut from a longer one (`log export --from`): the index its first event had
    /// there. Its world before that is only in the snapshot it starts from.
    pub cut_at_event: Option<u64>,
    /// For a log assembled from pieces (`log export --segments`): how many.
    pub pieces: u64,
}

impl Recording {
    pub fn read(path: &Path) -> Result<Recording, LogError> {
        let mut reader: NwlogReader<LogHeader, LogRecord, _> = NwlogReader::open(path)?;
        let header = reader.header().clone();
        let mut records = Vec::new();
        while let Some(entry) = reader.next_entry() {
            records.push(entry?.record);
        }
        Ok(Recording::of(header, records))
    }

    /// A log's records, in order.
    pub fn of(header: LogHeader, records: impl IntoIterator<Item = LogRecord>) -> Recording {
        let mut events = Vec::new();
        let mut commands = Vec::new();
        let mut cut_at_event = None;
        let mut pieces = 1;
        for record in records {
            match record {
                LogRecord::Event(e) => events.push(e),
                LogRecord::Commands(cs) | LogRecord::CommandsPart { commands: cs, .. } => {
                    let at = events.len().saturating_sub(1);
                    commands.extend(cs.into_iter().map(|c| (at, c)));
                }
                LogRecord::Snapshot(s) if s.events > events.len() as u64 => {
                    cut_at_event = Some(s.events);
                }
                LogRecord::Snapshot(_) | LogRecord::SnapshotPart(_) => {}
                // An assembled log: the what-if refuses it (`pieces`).
                LogRecord::Term(_) => pieces += 1,
            }
        }
        Recording {
            header,
            events,
            commands,
            cut_at_event,
            pieces,
        }
    }

    /// Every NodePool name the recording applied.
    pub fn nodepools(&self) -> BTreeSet<String> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::NodePoolApplied(p) => Some(p.name.clone()),
                _ => None,
            })
            .collect()
    }

    /// Every EC2NodeClass name the recording applied.
    pub fn nodeclasses(&self) -> BTreeSet<String> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::NodeClassApplied(c) => Some(c.name.clone()),
                _ => None,
            })
            .collect()
    }

    /// When the recording ends.
    pub fn end_ms(&self) -> u64 {
        self.events.last().map_or(0, |e| e.at_ms)
    }

    /// The instances nodewright launched: id → (NodeClaim, capacity type, launched at).
    pub(super) fn launched(&self) -> BTreeMap<String, (String, CapacityType, u64)> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::LaunchSucceeded {
                    nodeclaim,
                    instance,
                } => Some((
                    instance.instance_id.clone(),
                    (nodeclaim.clone(), instance.capacity_type, e.at_ms),
                )),
                _ => None,
            })
            .collect()
    }
}
