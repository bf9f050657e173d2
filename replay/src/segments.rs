//! Sealed segments of a controller's store, and one log assembled from them.
//!
//! Each replica keeps its own store, which lives no longer than its pod. So that an incident's
//! log outlives pods and leader changes, the leader seals its store now and then (it appends a
//! snapshot of its core) and ships what came before the seal as a *segment*: a portable
//! `.nwlog` of the store's records `from..to`, that replays on its own:
//!
//! ```text
//! header     the store's
//! record 0   the catalog event the starting snapshot names (when it names one)
//! record 1.. the snapshot the controller sealed at `from` (catalog_record: 0)
//!            then the store's records up to `to`, its other snapshots left out
//! ```
//!
//! A store's first segment starts at its first record, with no snapshot. Segments are named
//! `<store>/<from>-<to>-<first event ms>-<last event ms>.nwlog` ([`SegmentName`]), `<store>`
//! being the store's seed in hex: each store's segments are listed by that prefix, and every
//! name says the time it covers without being read.
//!
//! [`assemble`] joins segments into one log for a time range: they are put in time order; the
//! first is cut at the range's start (its core replayed up to there and written as a snapshot,
//! as `log export --from` does), and each later one follows a [`LogRecord::Term`] record saying
//! whether it goes on from the one before (the same store, from the record where that one
//! ended). `replay --verify` starts a new core at each such record, and for one that goes on,
//! checks that its starting snapshot holds exactly the core the records before it left: the
//! seam between two segments is verified, not trusted. Segments of two stores (two leader
//! terms, or a store set aside) are two pieces, each replayed from what its own log says.

use std::fs;
use std::path::Path;

use nodewright_adapters::eventlog::{
    EventStore, LogError, LogHeader, LogRecord, NwlogReader, NwlogWriter, Snapshot, Term,
};
use nodewright_core::EventKind;
use thiserror::Error;

use crate::export::partial_path;
use crate::replayer::{ReplayError, Replayer};

/// What ends a segment's name.
pub const SEGMENT_SUFFIX: &str = ".nwlog";

/// Records read from a store at once.
const CHUNK: u64 = 4096;

#[derive(Debug, Error)]
pub enum SegmentError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Replay(#[from] ReplayError),
    #[error(
        "record {0} of the store does not begin a snapshot: a segment starts at the store's first record or at a snapshot the controller sealed"
    )]
    NotASeal(u64),
    #[error(
        "the snapshot sealed at record {record} names record {catalog} as its catalog, which is not a catalog event: the store is damaged there"
    )]
    NoCatalog { record: u64, catalog: u64 },
    #[error("the core's state at the range's start does not encode: {0}")]
    Snapshot(String),
    #[error("segment {name}: {source}")]
    Segment {
        name: String,
        #[source]
        source: LogError,
    },
    #[error("no segment holds an event in the range {0}: nothing to assemble")]
    Empty(String),
}

/// Where a segment comes from and what it covers: all of it is in its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SegmentName {
    /// The store's id: its seed, in hex ([`SegmentName::store_of`]).
    pub store: String,
    /// The store's records `from..to`.
    pub from: u64,
    pub to: u64,
    /// The times of its first and last events.
    pub first_ms: u64,
    pub last_ms: u64,
}

impl SegmentName {
    /// The id of the store whose header is `header`: the seed the controller drew for it, which
    /// no other store of the cluster shares.
    pub fn store_of(header: &LogHeader) -> String {
        format!("{:016x}", header.config.seed)
    }

    /// The name, under a prefix: `<store>/<from>-<to>-<first ms>-<last ms>.nwlog`, numbers
    /// padded so that names sort as their numbers do.
    pub fn path(&self) -> String {
        format!(
            "{}/{:012}-{:012}-{:013}-{:013}{SEGMENT_SUFFIX}",
            self.store, self.from, self.to, self.first_ms, self.last_ms
        )
    }

    /// The name a [`SegmentName::path`] spells (any prefix before the store's folder is
    /// ignored); `None` for any other name.
    pub fn parse(path: &str) -> Option<SegmentName> {
        let file = path.rsplit('/').next()?;
        let store = path
            .strip_suffix(file)?
            .strip_suffix('/')?
            .rsplit('/')
            .next()?;
        let numbers = file.strip_suffix(SEGMENT_SUFFIX)?;
        let mut parts = numbers.split('-').map(|n| n.parse::<u64>().ok());
        let (from, to, first_ms, last_ms) = (
            parts.next()??,
            parts.next()??,
            parts.next()??,
            parts.next()??,
        );
        let valid = parts.next().is_none()
            && from < to
            && first_ms <= last_ms
            && store.len() == 16
            && store.bytes().all(|b| b.is_ascii_hexdigit());
        valid.then(|| SegmentName {
            store: store.to_string(),
            from,
            to,
            first_ms,
            last_ms,
        })
    }
}

/// A sealed segment, ready to ship.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub name: SegmentName,
    /// The `.nwlog` file's bytes.
    pub bytes: Vec<u8>,
    /// Events in it (the starting snapshot's aside).
    pub events: u64,
}

/// The segment of the store's records `from..to`; `from` is 0 or where the controller sealed
/// the store (a snapshot begins there). `None` when they hold no event: nothing to ship yet,
/// and the next segment starts at `from` again.
pub fn cut<S: EventStore<LogHeader, LogRecord>>(
    store: &S,
    from: u64,
    to: u64,
) -> Result<Option<Segment>, SegmentError> {
    let header = store.header();
    let mut writer = NwlogWriter::<LogHeader, LogRecord, Vec<u8>>::new(Vec::new(), header)?;
    let mut next = from;
    if from > 0 {
        // The sealed snapshot: its parts, then itself.
        let mut opening = Vec::new();
        let snapshot = loop {
            if next >= to {
                return Err(SegmentError::NotASeal(from));
            }
            match store.read_range(next, next + 1)?.pop() {
                Some(LogRecord::SnapshotPart(bytes)) => {
                    opening.push(LogRecord::SnapshotPart(bytes))
                }
                Some(LogRecord::Snapshot(snapshot)) => break snapshot,
                _ => return Err(SegmentError::NotASeal(from)),
            }
            next += 1;
        };
        next += 1;
        let catalog_record = match snapshot.catalog_record {
            Some(catalog) => {
                let event = match store.read_range(catalog, catalog + 1)?.pop() {
                    Some(LogRecord::Event(event))
                        if matches!(event.kind, EventKind::CatalogUpdated(_)) =>
                    {
                        event
                    }
                    _ => {
                        return Err(SegmentError::NoCatalog {
                            record: from,
                            catalog,
                        });
                    }
                };
                opening.insert(0, LogRecord::Event(event));
                Some(0)
            }
            None => None,
        };
        opening.push(LogRecord::Snapshot(Snapshot {
            catalog_record,
            ..snapshot
        }));
        writer.append(&opening)?;
    }
    let (mut events, mut first_ms, mut last_ms) = (0u64, None, 0u64);
    while next < to {
        let end = (next + CHUNK).min(to);
        let records: Vec<LogRecord> = store
            .read_range(next, end)?
            .into_iter()
            // The store's later snapshots are a cache of its records: left out, so that a
            // segment's one snapshot is the one it starts from.
            .filter(|r| !matches!(r, LogRecord::Snapshot(_) | LogRecord::SnapshotPart(_)))
            .inspect(|r| {
                if let LogRecord::Event(event) = r {
                    events += 1;
                    first_ms.get_or_insert(event.at_ms);
                    last_ms = event.at_ms;
                }
            })
            .collect();
        writer.append(&records)?;
        next = end;
    }
    let Some(first_ms) = first_ms else {
        return Ok(None);
    };
    Ok(Some(Segment {
        name: SegmentName {
            store: SegmentName::store_of(header),
            from,
            to,
            first_ms,
            last_ms: last_ms.max(first_ms),
        },
        bytes: writer.into_inner(),
        events,
    }))
}

/// The segments that hold events in `from_ms..until_ms`, in the order they are assembled: by
/// their first event's time, then store and place in it.
pub fn select(
    names: impl IntoIterator<Item = SegmentName>,
    from_ms: Option<u64>,
    until_ms: Option<u64>,
) -> Vec<SegmentName> {
    let (from, until) = (from_ms.unwrap_or(0), until_ms.unwrap_or(u64::MAX));
    let mut chosen: Vec<SegmentName> = names
        .into_iter()
        .filter(|n| n.last_ms >= from && n.first_ms < until)
        .collect();
    chosen.sort_by(|a, b| (a.first_ms, &a.store, a.from).cmp(&(b.first_ms, &b.store, b.from)));
    chosen.dedup();
    chosen
}

/// What [`assemble`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assembled {
    /// Segments read.
    pub segments: u64,
    /// Pieces of the log: one, and one more for each segment that does not go on from the one
    /// before (another store: another leader term).
    pub pieces: u64,
    /// Events and commands of the range.
    pub events: u64,
    pub commands: u64,
    /// Events before the range in its first segment, summed up in the starting snapshot.
    pub events_before: u64,
}

/// Writes one log of the events with `from_ms <= at_ms < until_ms` of `segments` (each with its
/// `.nwlog` bytes, in [`select`]'s order) to `out`. On failure nothing is left behind.
pub fn assemble(
    segments: &[(SegmentName, Vec<u8>)],
    from_ms: Option<u64>,
    until_ms: Option<u64>,
    out: &Path,
) -> Result<Assembled, SegmentError> {
    let partial = partial_path(out);
    let result = write_assembled(segments, from_ms, until_ms, &partial).and_then(|assembled| {
        fs::rename(&partial, out).map_err(|source| LogError::Io {
            path: Some(out.to_path_buf()),
            action: "move the assembled log into place",
            source,
        })?;
        Ok(assembled)
    });
    if result.is_err() {
        // Best effort: the error at hand is the one to report.
        let _ = fs::remove_file(&partial);
    }
    result
}

fn write_assembled(
    segments: &[(SegmentName, Vec<u8>)],
    from_ms: Option<u64>,
    until_ms: Option<u64>,
    partial: &Path,
) -> Result<Assembled, SegmentError> {
    let (from, until) = (from_ms.unwrap_or(0), until_ms.unwrap_or(u64::MAX));
    let range = format!(
        "{}..{}",
        from_ms.map_or(String::new(), |ms| format!("{ms}ms")),
        until_ms.map_or(String::new(), |ms| format!("{ms}ms"))
    );
    let mut writer: Option<NwlogWriter<LogHeader, LogRecord>> = None;
    let mut assembled = Assembled {
        segments: 0,
        pieces: 0,
        events: 0,
        commands: 0,
        events_before: 0,
    };
    let mut before: Option<&SegmentName> = None;
    'segments: for (name, bytes) in segments {
        let named = |source: LogError| SegmentError::Segment {
            name: name.path(),
            source,
        };
        let mut reader =
            NwlogReader::<LogHeader, LogRecord, _>::new(bytes.as_slice()).map_err(named)?;
        let header = reader.header().clone();
        let continues = before.is_some_and(|b| b.store == name.store && b.to == name.from);
        let mut records: Vec<LogRecord> = Vec::new();
        // A later piece cut from its store's middle opens with the catalog event its snapshot
        // names: written, as the piece's start, but not an event of the range.
        let mut opening_catalog = false;
        match writer.as_mut() {
            None => {
                // The first piece: replayed up to the range's start, which is written as the
                // snapshot it starts from.
                let mut replay = Replayer::new(header.clone());
                let mut first = None;
                for entry in reader.by_ref() {
                    let record = entry.map_err(named)?;
                    if let LogRecord::Event(event) = &record
                        && event.at_ms >= from
                    {
                        first = Some(record);
                        break;
                    }
                    replay.feed(record)?;
                }
                let Some(first) = first else { continue };
                let mut file = NwlogWriter::create(partial, &header)?;
                let starting = replay
                    .starting_records()
                    .map_err(|e| SegmentError::Snapshot(e.to_string()))?;
                if !starting.is_empty() {
                    assembled.events_before = replay.events();
                    file.append(&starting)?;
                }
                writer = Some(file);
                records.push(first);
                assembled.events += 1;
            }
            Some(file) => {
                file.append(&[LogRecord::Term(Box::new(Term { header, continues }))])?;
                opening_catalog = name.from > 0;
            }
        }
        assembled.segments += 1;
        assembled.pieces += u64::from(!continues);
        before = Some(name);
        let file = writer.as_mut().expect("the first piece opened the file");
        let mut ended = false;
        for entry in reader {
            let record = entry.map_err(named)?;
            if let LogRecord::Event(event) = &record
                && event.at_ms >= until
            {
                ended = true;
                break;
            }
            match &record {
                LogRecord::Event(event) if opening_catalog => {
                    opening_catalog = false;
                    if !matches!(event.kind, EventKind::CatalogUpdated(_)) {
                        assembled.events += 1;
                    }
                }
                LogRecord::Event(_) => assembled.events += 1,
                LogRecord::Commands(cs) | LogRecord::CommandsPart { commands: cs, .. } => {
                    assembled.commands += cs.len() as u64
                }
                _ => {}
            }
            records.push(record);
            if records.len() as u64 >= CHUNK {
                file.append(&records)?;
                records.clear();
            }
        }
        file.append(&records)?;
        if ended {
            break 'segments;
        }
    }
    match writer {
        Some(_) if assembled.events > 0 => Ok(assembled),
        _ => Err(SegmentError::Empty(range)),
    }
}
