//! Recorded commands kept as the bytes they were logged as: a check of replayed commands
//! against a recording encodes the replayed ones and compares bytes, and decodes the recorded
//! ones only when the bytes differ. Postcard writes one encoding of a value, so equal bytes
//! are equal commands; bytes that differ are decoded and compared as commands.
//!
//! A reader that only cuts a log into parts, for others to check side by side, may keep events
//! as their bytes too ([`ReadRecord::read_deferring_events`]): decoding them is most of what
//! reading a log costs, and it is then done by whoever checks them.

use nodewright_core::{Command, Event};

use super::frame;
use super::record::LogRecord;

/// The first byte of a `Commands` record's payload: postcard writes an enum's variant index as
/// a varint, and `Commands` is variant 1 (the variants' order is the log's format).
const COMMANDS_TAG: u8 = 1;
/// The first byte of an `Event` record's payload: `Event` is variant 0.
const EVENT_TAG: u8 = 0;
/// An event's kind follows its time; `CatalogUpdated` is variant 0 of the kinds (their order is
/// the log's format).
const CATALOG_UPDATED: u32 = 0;

/// A record as a check against replayed commands reads it.
#[derive(Debug)]
pub enum ReadRecord {
    /// A whole `Commands` record, undecoded.
    Commands(EncodedCommands),
    /// An `Event` record, undecoded ([`ReadRecord::read_deferring_events`] only).
    Event(EncodedEvent),
    /// Any other record, decoded.
    Decoded(LogRecord),
}

impl ReadRecord {
    /// Reads a record's payload: a `Commands` record is kept as its bytes (its count read),
    /// any other is decoded.
    pub fn read(payload: Vec<u8>) -> Result<ReadRecord, String> {
        if payload.first() == Some(&COMMANDS_TAG) {
            let (count, rest) = postcard::take_from_bytes::<u64>(&payload[1..])
                .map_err(|e| format!("the count of the commands: {e}"))?;
            let start = payload.len() - rest.len();
            return Ok(ReadRecord::Commands(EncodedCommands {
                payload,
                start,
                count,
            }));
        }
        frame::decode_payload(&payload).map(ReadRecord::Decoded)
    }

    /// As [`ReadRecord::read`], but an event is kept as its bytes too, unless it updates the
    /// catalog (the one kind a reader cutting the log into parts must see) or its time and kind
    /// do not read (then it is decoded at once, and fails as [`ReadRecord::read`] would).
    pub fn read_deferring_events(payload: Vec<u8>) -> Result<ReadRecord, String> {
        if payload.first() == Some(&EVENT_TAG)
            && kind_of_event(&payload[1..]).is_some_and(|kind| kind != CATALOG_UPDATED)
        {
            return Ok(ReadRecord::Event(EncodedEvent { payload }));
        }
        ReadRecord::read(payload)
    }
}

/// The variant index of an event's kind, from the event's bytes: its time (a varint), then the
/// kind's index (a varint).
fn kind_of_event(bytes: &[u8]) -> Option<u32> {
    let (_at_ms, rest) = postcard::take_from_bytes::<u64>(bytes).ok()?;
    let (kind, _) = postcard::take_from_bytes::<u32>(rest).ok()?;
    Some(kind)
}

/// One `Event` record, as logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedEvent {
    /// The record's whole payload.
    payload: Vec<u8>,
}

impl EncodedEvent {
    /// The event, decoded: the error is the one [`ReadRecord::read`] gives the same bytes.
    pub fn decode(&self) -> Result<Event, String> {
        match frame::decode_payload::<LogRecord>(&self.payload)? {
            LogRecord::Event(event) => Ok(event),
            // The tag was read when the record was: only an `Event` record gets here.
            _ => Err("not an event record".to_string()),
        }
    }
}

/// The commands of one `Commands` record, as logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedCommands {
    /// The record's whole payload.
    payload: Vec<u8>,
    /// Where the first command starts in `payload` (after the tag and the count).
    start: usize,
    count: u64,
}

impl EncodedCommands {
    /// How many commands the record holds.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Whether the record holds exactly the commands whose encodings, one after the other, are
    /// `concatenated` (`count` of them).
    pub fn holds(&self, count: usize, concatenated: &[u8]) -> bool {
        self.count == count as u64 && &self.payload[self.start..] == concatenated
    }

    /// The commands, decoded.
    pub fn decode(&self) -> Result<Vec<Command>, String> {
        match frame::decode_payload::<LogRecord>(&self.payload)? {
            LogRecord::Commands(commands) => Ok(commands),
            // The tag was read when the record was: only a `Commands` record gets here.
            _ => Err("not a commands record".to_string()),
        }
    }
}

/// Each command's postcard encoding, one after the other, in `out` (cleared first); `ends`
/// gets where each ends. What [`EncodedCommands::holds`] and a digest of the commands read.
pub fn encode_each(commands: &[Command], out: &mut Vec<u8>, ends: &mut Vec<usize>) {
    out.clear();
    ends.clear();
    for command in commands {
        // Encoding a core command into a Vec cannot fail: every type in it is serde-derived
        // with no custom serializer that errors.
        let encoded = std::mem::take(out);
        *out = postcard::to_extend(command, encoded).unwrap_or_default();
        ends.push(out.len());
    }
}

#[cfg(test)]
mod tests {
    use nodewright_core::model::nodeclaim::TerminationReason;

    use super::*;

    fn commands() -> Vec<Command> {
        (0..3).map(|i| terminate(&format!("default-{i}"))).collect()
    }

    fn terminate(nodeclaim: &str) -> Command {
        Command::TerminateNodeClaim {
            nodeclaim: nodeclaim.to_string(),
            node: None,
            instance_id: None,
            reason: TerminationReason::Empty,
            detail: "ran no workload pod".to_string(),
        }
    }

    fn read(record: &LogRecord) -> ReadRecord {
        ReadRecord::read(postcard::to_stdvec(record).unwrap()).unwrap()
    }

    #[test]
    fn a_commands_record_is_kept_as_bytes_that_hold_exactly_its_commands() {
        let recorded = commands();
        let ReadRecord::Commands(encoded) = read(&LogRecord::Commands(recorded.clone())) else {
            panic!("a commands record is kept as bytes");
        };
        assert_eq!(encoded.count(), 3);
        assert_eq!(encoded.decode().unwrap(), recorded);
        let (mut out, mut ends) = (Vec::new(), Vec::new());
        encode_each(&recorded, &mut out, &mut ends);
        assert_eq!(ends.len(), 3);
        assert!(encoded.holds(3, &out));
        // One command fewer, or another command, is not what was recorded.
        encode_each(&recorded[..2], &mut out, &mut ends);
        assert!(!encoded.holds(2, &out));
        let mut other = recorded.clone();
        other[1] = terminate("default-9");
        encode_each(&other, &mut out, &mut ends);
        assert!(!encoded.holds(3, &out));
    }

    #[test]
    fn no_commands_and_other_records_read_as_before() {
        let ReadRecord::Commands(none) = read(&LogRecord::Commands(Vec::new())) else {
            panic!("an empty commands record is kept as bytes");
        };
        assert_eq!(none.count(), 0);
        assert!(none.holds(0, &[]));
        let part = LogRecord::CommandsPart {
            part: 0,
            parts: 2,
            commands: commands(),
        };
        let ReadRecord::Decoded(decoded) = read(&part) else {
            panic!("a piece of commands is decoded");
        };
        assert_eq!(decoded, part);
        let ReadRecord::Decoded(decoded) = read(&LogRecord::SnapshotPart(vec![1, 2, 3])) else {
            panic!("a snapshot part is decoded");
        };
        assert_eq!(decoded, LogRecord::SnapshotPart(vec![1, 2, 3]));
    }

    #[test]
    fn an_event_is_kept_as_bytes_unless_it_updates_the_catalog() {
        use std::sync::Arc;

        use nodewright_core::EventKind;
        use nodewright_core::catalog::Catalog;

        let deferring = |record: &LogRecord| {
            ReadRecord::read_deferring_events(postcard::to_stdvec(record).unwrap())
        };
        let event = Event::new(
            1_234_567,
            EventKind::PodDeleted {
                pod: nodewright_core::model::pod::PodKey::new("default", "p"),
            },
        );
        let ReadRecord::Event(kept) = deferring(&LogRecord::Event(event.clone())).unwrap() else {
            panic!("an event is kept as bytes");
        };
        assert_eq!(kept.decode().unwrap(), event);
        let catalog = LogRecord::Event(Event::new(
            5,
            EventKind::CatalogUpdated(Arc::new(Catalog::default())),
        ));
        let ReadRecord::Decoded(decoded) = deferring(&catalog).unwrap() else {
            panic!("a catalog update is decoded");
        };
        assert_eq!(decoded, catalog);
        // Commands and other records read as `read` reads them.
        assert!(matches!(
            deferring(&LogRecord::Commands(commands())).unwrap(),
            ReadRecord::Commands(_)
        ));
        // A damaged event whose time and kind read fails when it is decoded, as `read` fails at
        // once, with the same reason.
        let mut damaged = postcard::to_stdvec(&LogRecord::Event(event)).unwrap();
        damaged.truncate(damaged.len() - 1);
        let ReadRecord::Event(kept) = ReadRecord::read_deferring_events(damaged.clone()).unwrap()
        else {
            panic!("its time and kind read");
        };
        assert_eq!(
            kept.decode().unwrap_err(),
            ReadRecord::read(damaged).unwrap_err()
        );
        // One whose kind does not read fails at once.
        assert!(ReadRecord::read_deferring_events(vec![EVENT_TAG, 0x80]).is_err());
    }

    #[test]
    fn a_damaged_count_is_an_error_not_a_panic() {
        assert!(ReadRecord::read(vec![COMMANDS_TAG]).is_err());
        assert!(ReadRecord::read(vec![COMMANDS_TAG, 0xff, 0xff]).is_err());
    }
}
