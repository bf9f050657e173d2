//! `replay --verify`: re-run the core over a log and check that it returns, for every event,
//! exactly the commands recorded.

use std::collections::VecDeque;
use std::path::Path;

use nodewright_adapters::eventlog::{
    DecisionDigest, Entry, LogError, LogHeader, LogRecord, NwlogReader, ReadRecord, Snapshot,
    encode_each,
};
use nodewright_core::{Command, Event};

use crate::replayer::{Replayer, Step};

mod parallel;

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

/// [`verify_file_with_progress`] with `jobs` threads: the log is cut at the snapshots this
/// build wrote and its parts are checked side by side, with the outcome of one check from the
/// start (see [`parallel`]). `jobs` 1 checks it in one piece.
pub fn verify_file_in_parts(
    path: &Path,
    jobs: usize,
    progress: impl FnMut(Progress),
) -> Result<VerifyOutcome, ReplayError> {
    parallel::verify_file_in_parts(path, jobs, progress)
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
    let header = reader.header().clone();
    let mut check = Checker::new(
        Replayer::new(header.clone()).joining_commands(),
        VecDeque::new(),
        Digested::starting_the_log(true),
    );
    let mut shown = Shown::default();
    // The first divergence, with the events after it; `None` when the whole log replays.
    let divergence = loop {
        let Some(entry) = reader.next_entry_read(ReadRecord::read) else {
            break check.finish();
        };
        let entry = entry?;
        if let Some(d) = check.record(entry, |frame, offset, reason| {
            reader.undecodable(frame, offset, reason)
        })? {
            break Some(with_following(&mut reader, d));
        }
        shown.tell(
            check.replay.replayed(),
            reader.next_byte_offset(),
            bytes_total,
            &mut progress,
        );
    };
    let digest = check.digested.after(DecisionDigest::new());
    Ok(VerifyOutcome::of(
        header,
        check.replay.replayed(),
        check.replay.started_at(),
        &digest,
        divergence,
        check.snapshots,
    ))
}

impl VerifyOutcome {
    /// The outcome of a check that replayed `replayed` events (a cut log's first at event
    /// `started_at` of the log it was cut from), with the recorded commands hashed into
    /// `digest`.
    fn of(
        header: LogHeader,
        replayed: u64,
        started_at: Option<u64>,
        digest: &DecisionDigest,
        divergence: Option<Divergence>,
        snapshots: SnapshotCheck,
    ) -> VerifyOutcome {
        VerifyOutcome {
            header,
            events: replayed,
            started_at_event: started_at,
            commands: digest.commands(),
            decision_digest: digest.hex(),
            divergence,
            snapshots_checked: snapshots.checked,
            snapshot_divergence: snapshots.first_divergence,
        }
    }
}

/// How far the progress told has come: every [`PROGRESS_EVERY`] events, once.
#[derive(Default)]
pub(crate) struct Shown(u64);

impl Shown {
    /// Tells `progress` where a replay is, when it passed another [`PROGRESS_EVERY`] events.
    pub(crate) fn tell(
        &mut self,
        events: u64,
        bytes_read: u64,
        bytes_total: Option<u64>,
        progress: &mut dyn FnMut(Progress),
    ) {
        if events / PROGRESS_EVERY > self.0 {
            self.0 = events / PROGRESS_EVERY;
            progress(Progress {
                events,
                bytes_read,
                bytes_total,
            });
        }
    }
}

/// Every command of a check in order, as its encoding, for the decision digest: kept rather
/// than hashed as it comes, so that the checks of a log's later parts hash in the log's order
/// ([`Digested::Kept`]).
#[derive(Debug, Default)]
pub(crate) struct CommandBytes {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl CommandBytes {
    /// Commands already encoded one after the other, `ends` where each ends.
    fn push_encoded(&mut self, encoded: &[u8], ends: &[usize]) {
        let base = self.bytes.len();
        self.bytes.extend_from_slice(encoded);
        self.ends.extend(ends.iter().map(|end| base + end));
    }

    /// Hashes every command, in order, into `digest`.
    fn add_to(&self, digest: &mut DecisionDigest) {
        add_each(digest, &self.bytes, &self.ends);
    }
}

/// Hashes the commands encoded one after the other in `encoded` (`ends` where each ends) into
/// `digest`, one by one.
fn add_each(digest: &mut DecisionDigest, encoded: &[u8], ends: &[usize]) {
    let mut from = 0;
    for &end in ends {
        digest.add_encoded(&encoded[from..end]);
        from = end;
    }
}

/// The recorded commands of a check, for the decision digest, in the log's order. A check that
/// starts at the log's start hashes them as they come; a check of a later part of the log
/// keeps their encodings until the parts before it are hashed, and they are hashed after
/// those ([`parallel`]). Hashing as they come keeps no copy of them: the launches' options
/// make them tens of megabytes on a long log.
#[derive(Debug)]
pub(crate) enum Digested {
    /// Hashed from the log's first command.
    Hashed(DecisionDigest),
    /// Kept, to be hashed after the commands before them.
    Kept(CommandBytes),
}

impl Digested {
    /// For a check that starts at the log's start (`true`), or later in it.
    pub(crate) fn starting_the_log(starts: bool) -> Digested {
        if starts {
            Digested::Hashed(DecisionDigest::new())
        } else {
            Digested::Kept(CommandBytes::default())
        }
    }

    /// Commands already encoded one after the other, `ends` where each ends.
    fn push_encoded(&mut self, encoded: &[u8], ends: &[usize]) {
        match self {
            Digested::Hashed(digest) => add_each(digest, encoded, ends),
            Digested::Kept(bytes) => bytes.push_encoded(encoded, ends),
        }
    }

    fn push_all(&mut self, commands: &[Command]) {
        match self {
            Digested::Hashed(digest) => digest.add_all(commands),
            Digested::Kept(bytes) => {
                let (mut encoded, mut ends) = (Vec::new(), Vec::new());
                encode_each(commands, &mut encoded, &mut ends);
                bytes.push_encoded(&encoded, &ends);
            }
        }
    }

    /// The digest of the commands before these (`before`) and these. A check that hashed from
    /// the log's start has no commands before it: `before` is then empty and is not read.
    pub(crate) fn after(self, mut before: DecisionDigest) -> DecisionDigest {
        match self {
            Digested::Hashed(digest) => {
                debug_assert_eq!(
                    before.commands(),
                    0,
                    "a check from the log's start has no commands before it"
                );
                digest
            }
            Digested::Kept(bytes) => {
                bytes.add_to(&mut before);
                before
            }
        }
    }
}

/// The check of a run of records: the core deciding over them, and what it gave compared with
/// what was recorded. A whole log is one run; `replay --verify` with jobs splits it at its
/// snapshots ([`parallel`]).
pub(crate) struct Checker {
    pub(crate) replay: Replayer,
    /// The last events, newest last: the newest is the one whose recorded commands are awaited
    /// when `open` holds what the core returned for it.
    pub(crate) before: VecDeque<(u64, Event)>,
    open: Option<Vec<Command>>,
    pub(crate) snapshots: SnapshotCheck,
    pub(crate) digested: Digested,
    /// The replayed commands' encodings, one after the other, and where each ends.
    encoded: Vec<u8>,
    ends: Vec<usize>,
}

impl Checker {
    /// A check over `replay`, with the events that came before (for a divergence's context);
    /// its commands digested as `digested` keeps them.
    pub(crate) fn new(
        replay: Replayer,
        before: VecDeque<(u64, Event)>,
        digested: Digested,
    ) -> Checker {
        Checker {
            replay,
            before,
            open: None,
            snapshots: SnapshotCheck::default(),
            digested,
            encoded: Vec::new(),
            ends: Vec::new(),
        }
    }

    /// Compares the commands the core returned for the newest event with the recorded ones.
    fn check(&mut self, recorded: Vec<Command>) -> Option<Divergence> {
        let replayed = self.open.take()?;
        if replayed == recorded {
            return None;
        }
        let (event_index, event) = self.before.back().cloned()?;
        Some(Divergence {
            event_index,
            event,
            recorded,
            replayed,
            before: self
                .before
                .iter()
                .take(self.before.len() - 1)
                .cloned()
                .collect(),
            after: Vec::new(),
        })
    }

    /// The end of the records: the last event's commands, if awaited, were recorded as none.
    pub(crate) fn finish(&mut self) -> Option<Divergence> {
        self.check(Vec::new())
    }

    /// Checks the next record. `undecodable` names a recorded commands record whose bytes do
    /// not decode. Returns the first divergence, when this record shows it (its `after` holds
    /// at most the event that showed it).
    pub(crate) fn record(
        &mut self,
        entry: Entry<ReadRecord>,
        undecodable: impl FnOnce(u64, u64, String) -> LogError,
    ) -> Result<Option<Divergence>, ReplayError> {
        let record = match entry.record {
            ReadRecord::Decoded(record) => record,
            ReadRecord::Event(event) => LogRecord::Event(
                event
                    .decode()
                    .map_err(|reason| undecodable(entry.frame_index, entry.byte_offset, reason))?,
            ),
            ReadRecord::Commands(recorded) => {
                self.replay.feed_encoded_commands(recorded.count());
                if let Some(replayed) = &self.open {
                    encode_each(replayed, &mut self.encoded, &mut self.ends);
                    if recorded.holds(replayed.len(), &self.encoded) {
                        self.digested.push_encoded(&self.encoded, &self.ends);
                        self.open = None;
                        return Ok(None);
                    }
                }
                // Not the replayed commands byte for byte (or no event before them): compared
                // as commands.
                let recorded = recorded
                    .decode()
                    .map_err(|reason| undecodable(entry.frame_index, entry.byte_offset, reason))?;
                self.digested.push_all(&recorded);
                return Ok(self.check(recorded));
            }
        };
        let Some(step) = self.replay.feed(record)? else {
            return Ok(None);
        };
        Ok(match step {
            Step::Event {
                index,
                event,
                given,
            } => {
                if let Some(mut d) = self.check(Vec::new()) {
                    d.after.push((index, event));
                    return Ok(Some(d));
                }
                self.open = Some(given);
                if self.before.len() > CONTEXT {
                    self.before.pop_front();
                }
                self.before.push_back((index, event));
                None
            }
            Step::Recorded(recorded) => {
                self.digested.push_all(&recorded);
                self.check(recorded)
            }
            // What the core gave for the records before a cut log's snapshot was recorded
            // as nothing.
            Step::Started {
                events, seamless, ..
            } => {
                if let Some(seamless) = seamless {
                    self.snapshots.seam(seamless, events);
                }
                self.check(Vec::new())
            }
            // The piece before ends: what the core gave for its last event was recorded as
            // nothing.
            Step::Term { .. } => self.check(Vec::new()),
            Step::Snapshot {
                snapshot,
                mut parts,
            } => {
                if let Some(d) = self.check(Vec::new()) {
                    return Ok(Some(d));
                }
                match parts.join(snapshot) {
                    Ok(recorded) => self.snapshots.compare(&recorded, &self.replay),
                    // Its parts are not all there: it holds no core at all.
                    Err(_) => self.snapshots.broken(self.replay.events()),
                }
                None
            }
        })
    }
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
pub(crate) struct SnapshotCheck {
    pub(crate) checked: u64,
    pub(crate) first_divergence: Option<u64>,
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

    /// A piece of an assembled log that goes on from the one before: whether its starting
    /// snapshot (at event count `events`) holds the core that piece left.
    fn seam(&mut self, seamless: bool, events: u64) {
        self.checked += 1;
        if !seamless {
            self.first_divergence.get_or_insert(events);
        }
    }

    /// A snapshot whose parts are missing.
    fn broken(&mut self, events: u64) {
        self.checked += 1;
        self.first_divergence.get_or_insert(events);
    }
}
