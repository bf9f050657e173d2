//! `replay --verify` over a log's parts side by side. The log is read once, in order, and cut
//! at every snapshot this build wrote (one it can restore): the records up to such a snapshot
//! are one part, checked from the part's own start by one of `jobs` threads while the reading
//! goes on, and the part after it starts from that snapshot. The parts' findings are joined in
//! the log's order, into exactly what one check from the start finds:
//!
//! - a part ends with its snapshot, which its check compares with the replayed core; the next
//!   part starts from the recorded snapshot, which is the replayed core when they are equal;
//! - the first part (in the log's order) that diverges, or whose recorded commands do not
//!   decode, ends the check: later parts are not counted, and their threads stop early;
//! - the events after a divergence are read from the rest of its part and the parts after;
//! - where the joined check could say something else than one check from the start — a
//!   snapshot that differs from the replayed core (one check from the start goes on from the
//!   replayed core), or one that does not restore — the log is checked again from the start,
//!   in one piece.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, mpsc};

use nodewright_adapters::eventlog::{
    DecisionDigest, Entry, LogError, LogHeader, LogRecord, NwlogReader, ReadRecord, Snapshot,
    SnapshotParts,
};
use nodewright_core::{Event, EventKind};

use super::{
    CONTEXT, Checker, Digested, Divergence, Progress, ReplayError, Shown, SnapshotCheck,
    VerifyOutcome, verify_with_progress,
};
use crate::replayer::Replayer;

/// Where a part's check starts.
enum Start {
    /// At the log's start (a cut log's starting snapshot included).
    Beginning,
    /// At a snapshot, the `records`-th record, with the newest catalog event before it.
    Snapshot {
        snapshot: Box<Snapshot>,
        records: u64,
        catalog: Option<(u64, Event)>,
    },
}

/// A run of the log's records, checked by one thread.
struct Part {
    /// Its place in the log: 0 for the first.
    index: usize,
    start: Start,
    /// The events just before it, for a divergence's context.
    before: VecDeque<(u64, Event)>,
    records: Vec<Entry<ReadRecord>>,
    /// What comes after its last record.
    end: PartEnd,
}

/// What ends a part.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PartEnd {
    /// Its last record is a snapshot the next part starts from.
    Snapshot,
    /// The log ends.
    Log,
    /// A record that did not read (the reading's error is the log's, if nothing before it
    /// diverged).
    Unread,
}

/// What the check of one part found: what the join reads of it (its core is dropped when the
/// part is checked, not held until every part is).
struct Found {
    /// For a cut log's first part: the index of the log's first event in the log it was cut
    /// from.
    started_at: Option<u64>,
    /// The events replayed when the part's check ended (counted from the log's start).
    events: u64,
    snapshots: SnapshotCheck,
    digested: Digested,
    /// The first divergence, its `after` filled from the rest of the part.
    divergence: Option<Divergence>,
    /// Whether the one check from the start would read on into the next part exactly as the
    /// next part's check starts.
    hands_on: bool,
}

/// What became of a part.
enum Outcome {
    Found(Box<Found>),
    /// Its recorded commands did not decode, or its starting snapshot did not restore.
    Failed(ReplayError),
    /// A part before it already ended the check.
    Skipped,
}

/// Checks the `.nwlog` at `path` with `jobs` threads (1: in one piece, as
/// [`super::verify_file_with_progress`]); the outcome is the same as one check from the start.
pub(crate) fn verify_file_in_parts(
    path: &Path,
    jobs: usize,
    mut progress: impl FnMut(Progress),
) -> Result<VerifyOutcome, ReplayError> {
    let bytes_total = std::fs::metadata(path).ok().map(|m| m.len());
    let in_one_piece = |progress: &mut dyn FnMut(Progress)| {
        let reader: NwlogReader<LogHeader, LogRecord, _> = NwlogReader::open(path)?;
        verify_with_progress(reader, bytes_total, progress)
    };
    if jobs <= 1 {
        return in_one_piece(&mut progress);
    }
    let mut reader: NwlogReader<LogHeader, LogRecord, _> = NwlogReader::open(path)?;
    let header = reader.header().clone();
    // A part is handed over only when a thread takes it: the reading is at most one part
    // ahead of the checks, so at most `jobs + 1` parts are held at once (a queue of parts
    // waiting cost more memory, and time, than it saved).
    let (send, receive) = mpsc::sync_channel::<Part>(0);
    let receive = Mutex::new(Some(receive));
    let live = AtomicUsize::new(jobs);
    let joiner: Mutex<Joiner> = Mutex::new(Joiner::default());
    // The first part (in the log's order) known to end the check; parts after it are skipped.
    let ended_at = AtomicUsize::new(usize::MAX);
    // Set when the log turns out to be assembled from pieces: it is checked in one piece.
    let assembled = AtomicBool::new(false);
    let read = std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                let _leaving = Leaving {
                    live: &live,
                    receive: &receive,
                };
                loop {
                    // No part left (the reading ended), or a thread panicked while it took one:
                    // this one stops too, and the scope reports the panic.
                    let next = match receive.lock() {
                        Ok(receiver) => receiver.as_ref().map(|r| r.recv()),
                        Err(_) => None,
                    };
                    let Some(Ok(part)) = next else { break };
                    let index = part.index;
                    let outcome = if index > ended_at.load(Ordering::SeqCst) {
                        Outcome::Skipped
                    } else {
                        check_part(&header, path, part)
                    };
                    if ends_check(&outcome) {
                        ended_at.fetch_min(index, Ordering::SeqCst);
                    }
                    if let Ok(mut joiner) = joiner.lock() {
                        joiner.take(index, outcome);
                    }
                }
            });
        }
        read_parts(
            &mut reader,
            send,
            bytes_total,
            &mut progress,
            (&ended_at, &assembled),
        )
    });
    if assembled.load(Ordering::SeqCst) {
        // Each piece starts a core of its own, and a continuing one is checked against the
        // core the piece before left: the pieces are checked one after the other.
        return in_one_piece(&mut progress);
    }
    let joiner = joiner.into_inner().unwrap_or_default();
    match joiner.outcome(path, header, read)? {
        Some(outcome) => Ok(outcome),
        None => in_one_piece(&mut progress),
    }
}

/// A checking thread on its way out, even by a panic: the last one out drops the receiving end
/// of the parts, so that the reading, waiting to hand a part over, stops instead of waiting
/// for ever.
struct Leaving<'s> {
    live: &'s AtomicUsize,
    receive: &'s Mutex<Option<mpsc::Receiver<Part>>>,
}

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        if self.live.fetch_sub(1, Ordering::SeqCst) == 1 {
            let mut receiver = self
                .receive
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            receiver.take();
        }
    }
}

/// Whether a part's outcome ends the check: a divergence, a failure, or a snapshot after which
/// the parts cannot be joined.
fn ends_check(outcome: &Outcome) -> bool {
    match outcome {
        Outcome::Found(found) => found.divergence.is_some() || !found.hands_on,
        Outcome::Failed(_) => true,
        Outcome::Skipped => false,
    }
}

/// What reading the log ended with: its end, or a record that did not read (after the parts
/// sent).
type Read = Result<(), LogError>;

/// Reads the log, cutting it into parts at the snapshots this build wrote, and sends each part
/// when it is whole. Stops early when a part sent already ended the check, or when the log is
/// one assembled from pieces (`assembled` is then set).
fn read_parts<S: std::io::Read>(
    reader: &mut NwlogReader<LogHeader, LogRecord, S>,
    send: mpsc::SyncSender<Part>,
    bytes_total: Option<u64>,
    progress: &mut dyn FnMut(Progress),
    (ended_at, assembled): (&AtomicUsize, &AtomicBool),
) -> Read {
    let ours = Snapshot::this_producer();
    let mut part = Part {
        index: 0,
        start: Start::Beginning,
        before: VecDeque::new(),
        records: Vec::new(),
        end: PartEnd::Unread,
    };
    // Events before the next record (a cut log's count starting at its snapshot's), the
    // newest catalog event with its record index, and the snapshot parts read since the last
    // snapshot.
    let mut events = 0u64;
    let mut catalog: Option<(u64, Event)> = None;
    let mut parts = SnapshotParts::default();
    let mut shown = Shown::default();
    // Events other than catalog updates are decoded by the checks, side by side.
    while let Some(entry) = reader.next_entry_read(ReadRecord::read_deferring_events) {
        if ended_at.load(Ordering::SeqCst) < part.index {
            return Ok(());
        }
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                // The records before it are checked first: a divergence among them is what
                // one check from the start reports.
                let _ = send.send(part);
                return Err(e);
            }
        };
        let record_index = entry.record_index;
        let mut cut: Option<Start> = None;
        match &entry.record {
            ReadRecord::Decoded(LogRecord::Event(event)) => {
                if matches!(event.kind, EventKind::CatalogUpdated(_)) {
                    catalog = Some((record_index, event.clone()));
                }
                events += 1;
            }
            ReadRecord::Event(_) => events += 1,
            ReadRecord::Decoded(LogRecord::SnapshotPart(bytes)) => parts.push(bytes.clone()),
            ReadRecord::Decoded(LogRecord::Term(_)) => {
                assembled.store(true, Ordering::SeqCst);
                return Ok(());
            }
            ReadRecord::Decoded(LogRecord::Snapshot(snapshot)) => {
                let joined = parts.join(snapshot.clone());
                if snapshot.events > events {
                    // A cut log's starting snapshot: its part starts there.
                    events = snapshot.events;
                } else if let Ok(joined) = joined
                    && joined.producer == ours
                    && joined.catalog_record == catalog.as_ref().map(|(i, _)| *i)
                {
                    cut = Some(Start::Snapshot {
                        snapshot: Box::new(joined),
                        records: record_index + 1,
                        catalog: catalog.clone(),
                    });
                }
            }
            ReadRecord::Decoded(_) | ReadRecord::Commands(_) => {}
        }
        part.records.push(entry);
        if let Some(start) = cut {
            let before = last_events(&part.records, part.before.clone(), events);
            let next = Part {
                index: part.index + 1,
                start,
                before,
                // The parts between snapshots are alike: room for as many records as this
                // one held, instead of growing to it by doubling.
                records: Vec::with_capacity(part.records.len()),
                end: PartEnd::Unread,
            };
            part.end = PartEnd::Snapshot;
            let whole = std::mem::replace(&mut part, next);
            if send.send(whole).is_err() {
                return Ok(());
            }
        }
        shown.tell(events, reader.next_byte_offset(), bytes_total, progress);
    }
    // The last part; a log that ends with a snapshot sends an empty one.
    part.end = PartEnd::Log;
    let _ = send.send(part);
    Ok(())
}

/// The last [`CONTEXT`] events of a part's records (`earlier`: those before the part), with
/// their indexes; `events` is the count after the records.
fn last_events(
    records: &[Entry<ReadRecord>],
    earlier: VecDeque<(u64, Event)>,
    events: u64,
) -> VecDeque<(u64, Event)> {
    let mut last: Vec<(u64, Event)> = Vec::with_capacity(CONTEXT);
    let mut index = events;
    for entry in records.iter().rev() {
        if last.len() == CONTEXT {
            break;
        }
        let Some(event) = event_of(&entry.record) else {
            continue;
        };
        index -= 1;
        match event {
            Ok(event) => last.push((index, event)),
            // The check of this part fails there: no part after it is checked.
            Err(_) => break,
        }
    }
    let mut out: VecDeque<(u64, Event)> = earlier;
    out.extend(last.into_iter().rev());
    while out.len() > CONTEXT {
        out.pop_front();
    }
    out
}

/// The event a record holds, decoded (`None` for any other record).
fn event_of(record: &ReadRecord) -> Option<Result<Event, String>> {
    match record {
        ReadRecord::Decoded(LogRecord::Event(event)) => Some(Ok(event.clone())),
        ReadRecord::Event(encoded) => Some(encoded.decode()),
        ReadRecord::Decoded(_) | ReadRecord::Commands(_) => None,
    }
}

/// Checks one part from its start.
fn check_part(header: &LogHeader, path: &Path, part: Part) -> Outcome {
    let digested = Digested::starting_the_log(matches!(part.start, Start::Beginning));
    let replay = match part.start {
        Start::Beginning => Replayer::new(header.clone()),
        Start::Snapshot {
            snapshot,
            records,
            catalog,
        } => match Replayer::resume(header.clone(), &snapshot, records, catalog) {
            Ok(replay) => replay,
            Err(e) => return Outcome::Failed(e),
        },
    };
    let mut check = Checker::new(replay.joining_commands(), part.before, digested);
    let mut records = part.records.into_iter();
    let mut divergence = None;
    for entry in records.by_ref() {
        let checked = check.record(entry, |frame, offset, reason| {
            LogError::undecodable(Some(path.to_path_buf()), frame, offset, reason)
        });
        match checked {
            Ok(None) => {}
            Ok(Some(d)) => {
                divergence = Some(d);
                break;
            }
            Err(e) => return Outcome::Failed(e),
        }
    }
    // The end of the log: the last event's commands, if awaited, were recorded as none.
    if divergence.is_none() && part.end == PartEnd::Log {
        divergence = check.finish();
    }
    if let Some(d) = divergence.as_mut() {
        let mut index = d.after.last().map_or(d.event_index, |(i, _)| *i) + 1;
        for entry in records {
            if d.after.len() >= CONTEXT {
                break;
            }
            // One check from the start reads the events after a divergence decoding every
            // record, and stops at one that does not decode: so does this.
            if let ReadRecord::Commands(commands) = &entry.record
                && commands.decode().is_err()
            {
                break;
            }
            match event_of(&entry.record) {
                Some(Ok(event)) => {
                    d.after.push((index, event));
                    index += 1;
                }
                Some(Err(_)) => break,
                None => {}
            }
        }
    }
    // The snapshot closing the part holds the replayed core, so the next part, which starts
    // from it, goes on as one check from the start would.
    let hands_on = part.end != PartEnd::Snapshot || check.snapshots.first_divergence.is_none();
    Outcome::Found(Box::new(Found {
        started_at: check.replay.started_at(),
        events: check.replay.events(),
        snapshots: check.snapshots,
        digested: check.digested,
        divergence,
        hands_on,
    }))
}

/// The parts' findings joined in the log's order, as they come, into the outcome of one check
/// from the start. A part is joined as soon as every part before it is: its commands are
/// hashed after theirs and its kept encodings let go, so a log's commands are never all held
/// at once.
#[derive(Default)]
struct Joiner {
    /// The next part to join.
    next: usize,
    /// Parts checked before a part before them.
    waiting: BTreeMap<usize, Outcome>,
    digest: DecisionDigest,
    snapshots: SnapshotCheck,
    started_at: Option<u64>,
    events_replayed: u64,
    divergence: Option<Divergence>,
    /// Set when a part ended the join: the parts after it are not joined.
    ended: Option<JoinEnd>,
}

/// Why the join ended before the parts did.
enum JoinEnd {
    /// A part diverged, or was skipped after the part that ended the check: the outcome is
    /// what was joined.
    Stopped,
    /// A snapshot differs from the replayed core, or one does not restore: the parts cannot
    /// say what one check from the start says.
    CheckInOnePiece,
    /// A part's records did not decode.
    Failed(ReplayError),
}

impl Joiner {
    /// The outcome of part `index`; joined now if every part before it is.
    fn take(&mut self, index: usize, outcome: Outcome) {
        if self.ended.is_some() {
            return;
        }
        self.waiting.insert(index, outcome);
        while self.ended.is_none() {
            let Some(outcome) = self.waiting.remove(&self.next) else {
                break;
            };
            self.join_next(outcome);
            self.next += 1;
        }
        if self.ended.is_some() {
            self.waiting.clear();
        }
    }

    /// Joins the outcome of part `self.next`, the one after those joined.
    fn join_next(&mut self, outcome: Outcome) {
        let found = match outcome {
            Outcome::Found(found) => found,
            Outcome::Failed(ReplayError::StartingSnapshot { .. }) => {
                self.ended = Some(JoinEnd::CheckInOnePiece);
                return;
            }
            Outcome::Failed(e) => {
                self.ended = Some(JoinEnd::Failed(e));
                return;
            }
            Outcome::Skipped => {
                self.ended = Some(JoinEnd::Stopped);
                return;
            }
        };
        let Found {
            started_at,
            events,
            snapshots,
            digested,
            divergence,
            hands_on,
        } = *found;
        if self.next == 0 {
            self.started_at = started_at;
        }
        self.digest = digested.after(std::mem::take(&mut self.digest));
        self.snapshots.checked += snapshots.checked;
        self.snapshots.first_divergence = self
            .snapshots
            .first_divergence
            .or(snapshots.first_divergence);
        self.events_replayed = events;
        if !hands_on {
            self.ended = Some(JoinEnd::CheckInOnePiece);
        } else if divergence.is_some() {
            self.divergence = divergence;
            self.ended = Some(JoinEnd::Stopped);
        }
    }

    /// The outcome of one check from the start, from the parts joined (a part never checked
    /// ends them: the reading stopped before it, at a damaged record); `None` when they cannot
    /// say it, and the log is checked from the start in one piece. `read` is how the reading
    /// ended.
    fn outcome(
        self,
        path: &Path,
        header: LogHeader,
        read: Read,
    ) -> Result<Option<VerifyOutcome>, ReplayError> {
        match self.ended {
            Some(JoinEnd::CheckInOnePiece) => return Ok(None),
            Some(JoinEnd::Failed(e)) => return Err(e),
            Some(JoinEnd::Stopped) | None => {}
        }
        let mut divergence = self.divergence;
        match divergence.as_mut() {
            Some(d) => {
                // Its context runs on past its part: read from the log (the parts after it
                // were not checked).
                if d.after.len() < CONTEXT {
                    let last = d.after.last().map_or(d.event_index, |(i, _)| *i);
                    d.after
                        .extend(events_after(path, last, CONTEXT - d.after.len()));
                }
            }
            // No divergence in the parts checked: a record that did not read is the log's
            // error.
            None => read?,
        }
        Ok(Some(VerifyOutcome::of(
            header,
            self.events_replayed - self.started_at.unwrap_or(0),
            self.started_at,
            &self.digest,
            divergence,
            self.snapshots,
        )))
    }
}

/// Up to `wanted` events of the log at `path` after the one of index `last`, with their
/// indexes (fewer where the log ends, or stops reading).
fn events_after(path: &Path, last: u64, wanted: usize) -> Vec<(u64, Event)> {
    let Ok(mut reader) = NwlogReader::<LogHeader, LogRecord, _>::open(path) else {
        return Vec::new();
    };
    let mut events = 0u64;
    let mut after = Vec::new();
    while let Some(Ok(entry)) = reader.next_entry() {
        match entry.record {
            LogRecord::Event(event) => {
                if events > last {
                    after.push((events, event));
                    if after.len() == wanted {
                        break;
                    }
                }
                events += 1;
            }
            // A cut log counts its events from its starting snapshot's.
            LogRecord::Snapshot(snapshot) if snapshot.events > events => events = snapshot.events,
            _ => {}
        }
    }
    after
}

#[cfg(test)]
mod tests {
    use nodewright_core::Command;
    use nodewright_core::config::Config;
    use nodewright_core::model::nodeclaim::TerminationReason;

    use super::*;

    fn terminate(i: usize) -> Command {
        Command::TerminateNodeClaim {
            nodeclaim: format!("default-{i}"),
            node: None,
            instance_id: None,
            reason: TerminationReason::Empty,
            detail: "ran no workload pod".to_string(),
        }
    }

    /// Part `index` of three parts of two commands each, checked to its end.
    fn part(index: usize) -> Outcome {
        let mut digested = Digested::starting_the_log(index == 0);
        digested.push_all(&[terminate(2 * index), terminate(2 * index + 1)]);
        Outcome::Found(Box::new(Found {
            started_at: None,
            events: 10 * (index as u64 + 1),
            snapshots: SnapshotCheck::default(),
            digested,
            divergence: None,
            hands_on: true,
        }))
    }

    fn joined(order: &[usize]) -> VerifyOutcome {
        let mut joiner = Joiner::default();
        for &index in order {
            joiner.take(index, part(index));
        }
        let header = LogHeader::new(Config::default(), "test");
        match joiner.outcome(Path::new("unused.nwlog"), header, Ok(())) {
            Ok(Some(outcome)) => outcome,
            other => panic!("the parts join: {:?}", other.map(|o| o.map(|o| o.events))),
        }
    }

    #[test]
    fn parts_checked_in_any_order_are_hashed_in_the_logs_order() {
        let mut digest = DecisionDigest::new();
        digest.add_all(&(0..6).map(terminate).collect::<Vec<_>>());
        for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [0, 2, 1]] {
            let outcome = joined(&order);
            assert_eq!(outcome.decision_digest, digest.hex(), "order {order:?}");
            assert_eq!(outcome.commands, 6);
            assert_eq!(outcome.events, 30, "the last part's count");
        }
    }

    #[test]
    fn a_part_missing_ends_the_join_before_it() {
        let mut digest = DecisionDigest::new();
        digest.add_all(&(0..2).map(terminate).collect::<Vec<_>>());
        let outcome = joined(&[2, 0]);
        assert_eq!(outcome.decision_digest, digest.hex());
        assert_eq!(outcome.events, 10);
    }
}
