//! What nodewright stores in its event log: a header with the core's configuration, then one
//! record per event and, after it, the commands the core returned for it (when there were any),
//! and now and then a snapshot of the core's whole state.

use nodewright_core::{Command, Config, Core, Event, EventKind};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The first frame of every log: who wrote it and the exact configuration of the core, so that
/// a replay builds an identical core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogHeader {
    /// `nodewright <version>`.
    pub producer: String,
    pub config: Config,
    /// The scenario that produced the log, or `controller` for a live cluster.
    pub source: String,
}

impl LogHeader {
    pub fn new(config: Config, source: &str) -> Self {
        LogHeader {
            producer: format!("nodewright {}", env!("CARGO_PKG_VERSION")),
            config,
            source: source.to_string(),
        }
    }
}

/// One record of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogRecord {
    /// An event, appended before the core handled it.
    Event(Event),
    /// The commands the core returned for the event just before (omitted when there were none).
    Commands(Vec<Command>),
    /// The core's state after every record before this one: recovery and replay may start here
    /// instead of at the first event.
    Snapshot(Snapshot),
    /// A leading piece of the core's bytes of the snapshot that follows, when they are too
    /// large for one record ([`Snapshot::into_records`]). Appended last: the variants' order is
    /// the log's format.
    SnapshotPart(Vec<u8>),
    /// Piece `part` (from 0) of `parts` of the commands for the event before, when they are
    /// too many for one record ([`commands_records`]): the pieces in order hold what one
    /// `Commands` record would. Appended last: the variants' order is the log's format.
    CommandsPart {
        part: u32,
        parts: u32,
        commands: Vec<Command>,
    },
    /// Only in a log assembled from several logs (`log export --segments`): the records after it
    /// are another log's, read as if that log began here: a new core of `header`'s
    /// configuration, record indexes counted from the record after this one, and — when the
    /// piece does not start at its log's first event — the catalog event and snapshot it starts
    /// from. `continues` says the piece goes on from the one before (the same store, the record
    /// after its last): its starting snapshot must then hold the core the records before it
    /// left, which `replay --verify` checks. A controller's store never holds one. Appended
    /// last: the variants' order is the log's format.
    Term(Box<Term>),
}

/// Where one piece of an assembled log begins (see [`LogRecord::Term`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Term {
    /// The header of the log the piece was cut from.
    pub header: LogHeader,
    /// Whether the piece goes on from the one before it, in the same store.
    pub continues: bool,
}

/// The most bytes the commands of one record take: more are split into pieces of about this
/// size, each well inside one frame (16 MiB).
pub const COMMANDS_RECORD_BYTES: usize = 8 * 1024 * 1024;

/// The records that log the commands for one event: one `Commands` record, or — when they
/// encode to more than [`COMMANDS_RECORD_BYTES`] (a decision over 100,000 pods) — the
/// `CommandsPart` pieces of them.
pub fn commands_records(commands: Vec<Command>) -> Vec<LogRecord> {
    commands_records_of(commands, COMMANDS_RECORD_BYTES)
}

/// [`commands_records`] with pieces of at most `piece_bytes` (a command larger than that is a
/// piece of its own).
pub fn commands_records_of(commands: Vec<Command>, piece_bytes: usize) -> Vec<LogRecord> {
    // Every command is well under 64 KiB: a short list is one record without measuring it.
    const MEASURED_FROM: usize = 64;
    if commands.len() < MEASURED_FROM && piece_bytes >= COMMANDS_RECORD_BYTES {
        return vec![LogRecord::Commands(commands)];
    }
    let size = |c: &Command| {
        postcard::serialize_with_flavor(c, postcard::ser_flavors::Size::default()).unwrap_or(0)
    };
    let mut pieces: Vec<Vec<Command>> = vec![Vec::new()];
    let mut bytes = 0usize;
    for command in commands {
        let n = size(&command);
        let last = pieces.last_mut().expect("there is always a last piece");
        if bytes + n > piece_bytes && !last.is_empty() {
            pieces.push(Vec::new());
            bytes = 0;
        }
        bytes += n;
        pieces
            .last_mut()
            .expect("there is always a last piece")
            .push(command);
    }
    if pieces.len() == 1 {
        return vec![LogRecord::Commands(pieces.pop().unwrap_or_default())];
    }
    let parts = pieces.len() as u32;
    pieces
        .into_iter()
        .enumerate()
        .map(|(part, commands)| LogRecord::CommandsPart {
            part: part as u32,
            parts,
            commands,
        })
        .collect()
}

/// Joins the pieces of split commands for a reader that goes through the log in order.
#[derive(Debug, Default)]
pub struct CommandParts {
    next: u32,
    commands: Vec<Command>,
}

impl CommandParts {
    /// Drops the pieces held: a record other than a piece came.
    pub fn clear(&mut self) {
        self.commands.clear();
        self.next = 0;
    }

    /// The record a reader acts on: the pieces of split commands are held until the last
    /// one, which comes out as the whole `Commands` record; every other record comes out as it
    /// is. A piece out of order (the torn rest of an interrupted append, written again after
    /// recovery) starts the collection over.
    pub fn take(&mut self, record: LogRecord) -> Option<LogRecord> {
        match record {
            LogRecord::CommandsPart {
                part,
                parts,
                commands,
            } => {
                if part == 0 || part != self.next {
                    self.commands.clear();
                    self.next = 0;
                }
                if part != self.next {
                    return None;
                }
                self.commands.extend(commands);
                self.next += 1;
                if self.next < parts {
                    return None;
                }
                self.next = 0;
                Some(LogRecord::Commands(std::mem::take(&mut self.commands)))
            }
            other => {
                self.clear();
                Some(other)
            }
        }
    }
}

/// The core's whole state at one event boundary. It is a cache of the events before it, never
/// the truth: one that cannot be used (another producer wrote it, or its bytes do not decode)
/// is passed over, and the events are replayed instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// `nodewright <version> (core state <layout>)` of the core that wrote it: only the same
    /// version and layout restore it.
    pub producer: String,
    /// Events before it.
    pub events: u64,
    /// Commands before it.
    pub commands: u64,
    /// The record index of the `CatalogUpdated` event whose catalog the core holds (the core's
    /// bytes leave the catalog out: it is most of them, and changes rarely).
    pub catalog_record: Option<u64>,
    /// The core, postcard-encoded. Kept as bytes, so that a log whose snapshots another version
    /// wrote still reads. In the log, its last piece when `parts` came before it.
    pub core: Vec<u8>,
    /// How many [`LogRecord::SnapshotPart`] records right before it hold the leading bytes of
    /// `core` (0: it holds them all). Added after log format 2: see
    /// [`nodewright_core::model::trailing`].
    #[serde(default, deserialize_with = "nodewright_core::model::trailing")]
    pub parts: u32,
}

/// The most core bytes one record carries: a snapshot larger than this (a cluster of 100,000
/// pods and more) is split into parts of this size, each well inside one frame (16 MiB).
pub const SNAPSHOT_PART_BYTES: usize = 8 * 1024 * 1024;

/// Why a snapshot was passed over.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SnapshotError {
    #[error("the snapshot was written by {found}, this is {ours}: its events are replayed instead")]
    OtherProducer { found: String, ours: String },
    #[error("the snapshot's state does not decode ({0}): its events are replayed instead")]
    Undecodable(String),
    #[error(
        "the snapshot's core has another configuration than the log's header: its events are replayed instead"
    )]
    OtherConfig,
    #[error(
        "the snapshot names record {0} for its catalog, and that record is not a CatalogUpdated event: its events are replayed instead"
    )]
    CatalogMissing(u64),
    #[error(
        "the snapshot is split into {0} parts, and the records before it are not all of them: its events are replayed instead"
    )]
    PartsMissing(u32),
    #[error(
        "replay from the snapshot decided otherwise than the log says: the events were replayed from the start instead"
    )]
    LedAstray,
}

impl Snapshot {
    /// The producer this build writes and restores: the version, and the shape of the core's
    /// state ([`Core::STATE_LAYOUT`]), so that a build whose state has another shape passes the
    /// snapshot over instead of reading it as its own.
    pub fn this_producer() -> String {
        format!(
            "nodewright {} (core state {})",
            env!("CARGO_PKG_VERSION"),
            Core::STATE_LAYOUT
        )
    }

    /// A snapshot of `core` after `events` events and `commands` commands, whose catalog came
    /// with the event at record `catalog_record`.
    pub fn of(
        core: &Core,
        events: u64,
        commands: u64,
        catalog_record: Option<u64>,
    ) -> Result<Self, postcard::Error> {
        Ok(Snapshot {
            producer: Snapshot::this_producer(),
            events,
            commands,
            catalog_record,
            core: encode_exactly(core)?,
            parts: 0,
        })
    }

    /// The records that store it: itself, or — when its core is over [`SNAPSHOT_PART_BYTES`] —
    /// the leading parts, then itself with the last piece.
    pub fn into_records(self) -> Vec<LogRecord> {
        self.into_records_of(SNAPSHOT_PART_BYTES)
    }

    /// [`Snapshot::into_records`] with parts of `part_bytes` (at least 1).
    pub fn into_records_of(mut self, part_bytes: usize) -> Vec<LogRecord> {
        let part_bytes = part_bytes.max(1);
        if self.core.len() <= part_bytes {
            return vec![LogRecord::Snapshot(self)];
        }
        let last = (self.core.len() - 1) / part_bytes * part_bytes;
        let tail = self.core.split_off(last);
        let mut records: Vec<LogRecord> = self
            .core
            .chunks(part_bytes)
            .map(|part| LogRecord::SnapshotPart(part.to_vec()))
            .collect();
        self.parts = records.len() as u32;
        self.core = tail;
        records.push(LogRecord::Snapshot(self));
        records
    }

    /// The whole snapshot, as read at record `index`: its parts, the records right before it
    /// (`record` reads one), joined in front of its core.
    pub fn joined(
        mut self,
        index: u64,
        record: impl Fn(u64) -> Option<LogRecord>,
    ) -> Result<Snapshot, SnapshotError> {
        let mut parts = SnapshotParts::default();
        let first = index
            .checked_sub(u64::from(self.parts))
            .ok_or(SnapshotError::PartsMissing(self.parts))?;
        for i in first..index {
            match record(i) {
                Some(LogRecord::SnapshotPart(bytes)) => parts.push(bytes),
                _ => return Err(SnapshotError::PartsMissing(self.parts)),
            }
        }
        self = parts.join(self)?;
        Ok(self)
    }

    /// Whether it is exactly what [`Snapshot::of`] would write for `core` at this point (this
    /// build's producer, the same counts and catalog record, the same bytes). Encodes the core
    /// once, into a buffer of the recorded size.
    pub fn holds(
        &self,
        core: &Core,
        events: u64,
        commands: u64,
        catalog_record: Option<u64>,
    ) -> bool {
        self.producer == Snapshot::this_producer()
            && self.events == events
            && self.commands == commands
            && self.catalog_record == catalog_record
            && postcard::to_extend(core, Vec::with_capacity(self.core.len()))
                .is_ok_and(|bytes| bytes == self.core)
    }

    /// The core it holds, when this build wrote it for a log with this configuration.
    /// `record` reads a record of the log: the catalog event the snapshot names.
    pub fn restore(
        &self,
        config: &Config,
        record: impl FnOnce(u64) -> Option<LogRecord>,
    ) -> Result<Core, SnapshotError> {
        let ours = Snapshot::this_producer();
        if self.producer != ours {
            return Err(SnapshotError::OtherProducer {
                found: self.producer.clone(),
                ours,
            });
        }
        let mut core: Core = postcard::from_bytes(&self.core)
            .map_err(|e| SnapshotError::Undecodable(e.to_string()))?;
        // postcard does not describe itself: bytes of another state layout may decode into
        // something. They do not encode back to themselves.
        if postcard::to_stdvec(&core).ok().as_deref() != Some(self.core.as_slice()) {
            return Err(SnapshotError::Undecodable(
                "it does not encode back to its own bytes: another build's state layout"
                    .to_string(),
            ));
        }
        core.check_restored().map_err(|e| {
            SnapshotError::Undecodable(format!("its state does not hold together: {e}"))
        })?;
        if core.config() != config {
            return Err(SnapshotError::OtherConfig);
        }
        if let Some(index) = self.catalog_record {
            match record(index) {
                Some(LogRecord::Event(Event {
                    kind: EventKind::CatalogUpdated(catalog),
                    ..
                })) => core.install_catalog(catalog),
                _ => return Err(SnapshotError::CatalogMissing(index)),
            }
        }
        Ok(core)
    }
}

/// The parts of a split snapshot, collected by a reader that goes through the log in order.
#[derive(Debug, Default)]
pub struct SnapshotParts(Vec<Vec<u8>>);

impl SnapshotParts {
    /// A [`LogRecord::SnapshotPart`] read.
    pub fn push(&mut self, bytes: Vec<u8>) {
        self.0.push(bytes);
    }

    /// The snapshot read next, whole: the last parts collected (as many as it says) joined in
    /// front of its core. The collection starts again empty.
    pub fn join(&mut self, mut snapshot: Snapshot) -> Result<Snapshot, SnapshotError> {
        let parts = std::mem::take(&mut self.0);
        if snapshot.parts == 0 {
            return Ok(snapshot);
        }
        let wanted = snapshot.parts as usize;
        if parts.len() < wanted {
            return Err(SnapshotError::PartsMissing(snapshot.parts));
        }
        let mine = &parts[parts.len() - wanted..];
        let mut core =
            Vec::with_capacity(mine.iter().map(Vec::len).sum::<usize>() + snapshot.core.len());
        for part in mine {
            core.extend_from_slice(part);
        }
        core.extend_from_slice(&snapshot.core);
        snapshot.core = core;
        snapshot.parts = 0;
        Ok(snapshot)
    }
}

/// `value` postcard-encoded into a buffer of exactly its size: a snapshot of a large cluster is
/// megabytes, and a buffer grown by doubling would hold up to twice that while it is written.
fn encode_exactly<T: Serialize>(value: &T) -> Result<Vec<u8>, postcard::Error> {
    let size = postcard::serialize_with_flavor(value, postcard::ser_flavors::Size::default())?;
    postcard::to_extend(value, Vec::with_capacity(size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eventlog::frame::MAX_FRAME_PAYLOAD;

    fn snapshot_of(bytes: usize) -> Snapshot {
        Snapshot {
            producer: Snapshot::this_producer(),
            events: 7,
            commands: 3,
            catalog_record: Some(0),
            core: (0..bytes).map(|i| (i % 251) as u8).collect(),
            parts: 0,
        }
    }

    #[test]
    fn a_snapshot_over_the_frame_maximum_is_split_into_records_that_each_fit_and_join_back() {
        let whole = snapshot_of(20 * 1024 * 1024);
        let records = whole.clone().into_records();
        assert_eq!(records.len(), 3, "two 8 MiB parts and the rest");
        for record in &records {
            let encoded = postcard::to_stdvec(record).expect("encodes");
            assert!(
                encoded.len() <= MAX_FRAME_PAYLOAD as usize,
                "{}",
                encoded.len()
            );
        }
        // In order, as a reader goes.
        let mut parts = SnapshotParts::default();
        let mut joined = None;
        for record in records.clone() {
            match record {
                LogRecord::SnapshotPart(bytes) => parts.push(bytes),
                LogRecord::Snapshot(s) => joined = Some(parts.join(s).expect("whole")),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(joined.as_ref(), Some(&whole));
        // By index, as recovery reads back from the end.
        let LogRecord::Snapshot(last) = records[2].clone() else {
            panic!("the snapshot comes last")
        };
        assert_eq!(last.parts, 2);
        let at = |i: u64| records.get(i as usize).cloned();
        assert_eq!(last.clone().joined(2, at).as_ref(), Ok(&whole));
        // A part missing: passed over, named.
        let missing = last.joined(2, |i| if i == 0 { None } else { at(i) });
        assert_eq!(missing, Err(SnapshotError::PartsMissing(2)));
    }

    #[test]
    fn a_small_snapshot_stays_one_record_and_reads_as_before() {
        let small = snapshot_of(1000);
        assert_eq!(
            small.clone().into_records(),
            vec![LogRecord::Snapshot(small.clone())]
        );
        // A snapshot written before parts existed ends where `parts` would start.
        #[derive(Serialize)]
        struct Before<'a> {
            producer: &'a str,
            events: u64,
            commands: u64,
            catalog_record: Option<u64>,
            core: &'a [u8],
        }
        let bytes = postcard::to_stdvec(&Before {
            producer: &small.producer,
            events: small.events,
            commands: small.commands,
            catalog_record: small.catalog_record,
            core: &small.core,
        })
        .expect("encodes");
        let read: Snapshot = postcard::from_bytes(&bytes).expect("decodes");
        assert_eq!(read, small);
    }

    fn tick_commands(n: usize) -> Vec<Command> {
        (0..n)
            .map(|i| Command::ReportUnschedulable {
                pod: nodewright_core::model::pod::PodKey::new("default", &format!("pod-{i}")),
                reason: "fits no existing node".repeat(1 + i % 3),
            })
            .collect()
    }

    #[test]
    fn many_commands_are_split_into_pieces_that_join_back_in_order() {
        let commands = tick_commands(500);
        assert_eq!(
            commands_records(commands.clone()),
            vec![LogRecord::Commands(commands.clone())],
            "500 short commands fit one record"
        );
        let records = commands_records_of(commands.clone(), 4096);
        assert!(records.len() > 3, "{} pieces", records.len());
        for record in &records {
            let LogRecord::CommandsPart {
                commands: piece, ..
            } = record
            else {
                panic!("pieces only: {record:?}")
            };
            let bytes = postcard::to_stdvec(piece).expect("encodes").len();
            assert!(bytes <= 4096 + 200, "{bytes}");
        }
        let mut pieces = CommandParts::default();
        let joined: Vec<LogRecord> = records
            .iter()
            .cloned()
            .filter_map(|r| pieces.take(r))
            .collect();
        assert_eq!(joined, vec![LogRecord::Commands(commands.clone())]);
        // The torn start of an interrupted append, then the whole written again: the whole.
        let mut pieces = CommandParts::default();
        let mut torn = records[..2].to_vec();
        torn.extend(records.iter().cloned());
        let joined: Vec<LogRecord> = torn.into_iter().filter_map(|r| pieces.take(r)).collect();
        assert_eq!(joined, vec![LogRecord::Commands(commands)]);
    }

    #[test]
    fn commands_over_the_frame_maximum_are_split_into_records_that_each_fit() {
        // About 25 MB of commands (80,000 of about 320 bytes), as a decision over 100,000 pods
        // gives: four pieces of at most 8 MiB.
        let commands: Vec<Command> = (0..80_000)
            .map(|i| Command::ReportUnschedulable {
                pod: nodewright_core::model::pod::PodKey::new("default", &format!("web-{i}")),
                reason: "x".repeat(300),
            })
            .collect();
        let records = commands_records(commands);
        assert_eq!(records.len(), 4);
        for record in &records {
            let bytes = postcard::to_stdvec(record).expect("encodes").len();
            assert!(bytes <= MAX_FRAME_PAYLOAD as usize, "{bytes}");
        }
    }
}
