//! The one walk over a log's records that every replay shares (`replay --verify`, `explain`,
//! `log export`): fed the records in order, it keeps the core deciding over the events, joins
//! the pieces of split snapshots (and, if asked, of split commands), starts a log cut from a
//! longer one from its snapshot, starts each piece of an assembled log anew (checking, where a
//! piece goes on from the one before, that it starts where that one left off), and counts the
//! events and commands. It reads nothing itself:
//! each command reads its own source (a `.nwlog`, a store) and hands the records over, so the
//! walk is tested without a file.

use nodewright_adapters::eventlog::{
    CommandParts, LogError, LogHeader, LogRecord, Snapshot, SnapshotParts, Term,
};
use nodewright_core::{Command, Core, Event, EventKind};
use thiserror::Error;

/// Why a log could not be replayed at all.
#[derive(Debug, Error)]
pub enum ReplayError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(
        "the log starts at event {events} from a snapshot that cannot be restored here ({reason}); replay it with the nodewright version that exported it, or export the range from the store's start"
    )]
    StartingSnapshot { events: u64, reason: String },
}

/// What one record meant to the replay.
#[derive(Debug)]
pub enum Step {
    /// An event, handled by the core: its index among the log's events, and the commands the
    /// core gave for it.
    Event {
        index: u64,
        event: Event,
        given: Vec<Command>,
    },
    /// Recorded commands, of the last event: a whole record, or with
    /// [`Replayer::joining_commands`] off, a piece of one as it comes.
    Recorded(Vec<Command>),
    /// A snapshot of the events so far, with the parts read before it (join them to read its
    /// core: `parts.join(snapshot)`).
    Snapshot {
        snapshot: Snapshot,
        parts: SnapshotParts,
    },
    /// The log (or a piece of an assembled one) was cut from a longer one: the core now holds
    /// its starting snapshot, the state after `events` events and `commands` commands.
    /// `seamless`, for a piece that goes on from the one before: whether the snapshot holds
    /// exactly the core that piece left (same events, commands, catalog and state).
    Started {
        events: u64,
        commands: u64,
        seamless: Option<bool>,
    },
    /// Another log's piece begins ([`LogRecord::Term`]): a new core of its header.
    Term { continues: bool },
}

/// What the piece before a continuing one left: its starting snapshot must hold it.
struct Left {
    core: Core,
    events: u64,
    commands: u64,
    catalog: Option<Event>,
}

/// The replay of one log, a record at a time.
pub struct Replayer {
    header: LogHeader,
    core: Core,
    /// Events so far (a cut log counts from its starting snapshot's).
    events: u64,
    /// Recorded commands so far (likewise).
    commands: u64,
    /// Records fed so far, pieces included.
    records: u64,
    /// The record index the current piece of an assembled log starts at (0: the log's
    /// first): a snapshot names records counted from there.
    piece_start: u64,
    /// Events handled, in every piece.
    replayed: u64,
    /// What the piece before left, when the current one goes on from it and has not yet
    /// reached its starting snapshot.
    left: Option<Left>,
    /// The newest catalog event's record index (counted from the piece's start), for a
    /// snapshot's check.
    catalog_record: Option<u64>,
    /// The newest catalog event.
    catalog: Option<Event>,
    /// The log's first record when it is a catalog event: what a cut log's starting snapshot
    /// names.
    opening: Option<LogRecord>,
    /// For a cut log: the event count it starts at.
    started_at: Option<u64>,
    parts: SnapshotParts,
    /// Joins split commands when set.
    pieces: Option<CommandParts>,
}

impl Replayer {
    /// A replay from the start of a log with this header: a fresh core of its configuration.
    pub fn new(header: LogHeader) -> Self {
        Replayer {
            core: Core::new(header.config.clone()),
            header,
            events: 0,
            commands: 0,
            records: 0,
            piece_start: 0,
            replayed: 0,
            left: None,
            catalog_record: None,
            catalog: None,
            opening: None,
            started_at: None,
            parts: SnapshotParts::default(),
            pieces: None,
        }
    }

    /// A replay that picks a log up at one of its snapshots, as if it had replayed every record
    /// before it: `snapshot` (its parts joined) is the `records`-th record's, and `catalog` the
    /// newest catalog event before it with its record index (what the snapshot names). For
    /// checking a log's parts side by side ([`crate::verify`]).
    pub fn resume(
        header: LogHeader,
        snapshot: &Snapshot,
        records: u64,
        catalog: Option<(u64, Event)>,
    ) -> Result<Self, ReplayError> {
        let named = catalog
            .as_ref()
            .filter(|(index, _)| Some(*index) == snapshot.catalog_record)
            .map(|(_, event)| LogRecord::Event(event.clone()));
        let core = snapshot.restore(&header.config, |_| named).map_err(|e| {
            ReplayError::StartingSnapshot {
                events: snapshot.events,
                reason: e.to_string(),
            }
        })?;
        let (catalog_record, catalog) = match catalog {
            Some((index, event)) => (Some(index), Some(event)),
            None => (None, None),
        };
        Ok(Replayer {
            header,
            core,
            events: snapshot.events,
            commands: snapshot.commands,
            records,
            piece_start: 0,
            replayed: 0,
            left: None,
            catalog_record,
            catalog,
            opening: None,
            started_at: None,
            parts: SnapshotParts::default(),
            pieces: None,
        })
    }

    /// Gives split commands as one [`Step::Recorded`] when their last piece comes (what a
    /// comparison with the core's commands needs), instead of piece by piece.
    pub fn joining_commands(mut self) -> Self {
        self.pieces = Some(CommandParts::default());
        self
    }

    /// The next record of the log, in order. `None` when it means nothing yet (a piece of a
    /// split snapshot, or of split commands being joined).
    pub fn feed(&mut self, record: LogRecord) -> Result<Option<Step>, ReplayError> {
        let index = self.records;
        self.records += 1;
        let record = match self.pieces.as_mut() {
            Some(pieces) => match pieces.take(record) {
                Some(record) => record,
                None => return Ok(None),
            },
            None => record,
        };
        Ok(match record {
            LogRecord::Event(event) => {
                if matches!(event.kind, EventKind::CatalogUpdated(_)) {
                    let local = index - self.piece_start;
                    self.catalog_record = Some(local);
                    if local == 0 {
                        self.opening = Some(LogRecord::Event(event.clone()));
                    }
                    self.catalog = Some(event.clone());
                }
                let given = self.core.handle(&event);
                let index = self.events;
                self.events += 1;
                self.replayed += 1;
                Some(Step::Event {
                    index,
                    event,
                    given,
                })
            }
            LogRecord::Commands(recorded)
            | LogRecord::CommandsPart {
                commands: recorded, ..
            } => {
                self.commands += recorded.len() as u64;
                Some(Step::Recorded(recorded))
            }
            LogRecord::SnapshotPart(bytes) => {
                self.parts.push(bytes);
                None
            }
            LogRecord::Snapshot(snapshot) if snapshot.events > self.events => {
                // A log cut from a longer one (`log export --from`) starts from the snapshot
                // of the events before it.
                let events = snapshot.events;
                let snapshot =
                    self.parts
                        .join(snapshot)
                        .map_err(|e| ReplayError::StartingSnapshot {
                            events,
                            reason: e.to_string(),
                        })?;
                let opening = self.opening.take();
                // A continuing piece's opening catalog event only names the catalog its
                // snapshot holds: the piece before handled it already.
                let seamless = self.left.take().map(|left| {
                    let catalog = left.catalog.map(LogRecord::Event);
                    snapshot.holds(
                        &left.core,
                        left.events,
                        left.commands,
                        snapshot.catalog_record,
                    ) && catalog == opening
                });
                if opening.is_some() {
                    // Counted as replayed by the core of the piece before, or by none.
                    self.replayed -= 1;
                }
                self.core = snapshot
                    .restore(&self.header.config, |i| if i == 0 { opening } else { None })
                    .map_err(|e| ReplayError::StartingSnapshot {
                        events,
                        reason: e.to_string(),
                    })?;
                self.events = snapshot.events;
                self.commands = snapshot.commands;
                if self.piece_start == 0 {
                    self.started_at = Some(snapshot.events);
                }
                Some(Step::Started {
                    events: snapshot.events,
                    commands: snapshot.commands,
                    seamless,
                })
            }
            LogRecord::Snapshot(snapshot) => Some(Step::Snapshot {
                snapshot,
                parts: std::mem::take(&mut self.parts),
            }),
            LogRecord::Term(term) => Some(self.begin_piece(index, *term)),
        })
    }

    /// Another log's piece begins after record `index`: a new core of its header, counts from
    /// nothing, and — when it goes on from the piece before — what that piece left, for its
    /// starting snapshot to be checked against.
    fn begin_piece(&mut self, index: u64, term: Term) -> Step {
        let Term { header, continues } = term;
        let fresh = Core::new(header.config.clone());
        let core = std::mem::replace(&mut self.core, fresh);
        self.left = continues.then(|| Left {
            core,
            events: self.events,
            commands: self.commands,
            catalog: self.catalog.take(),
        });
        self.header = header;
        self.piece_start = index + 1;
        self.events = 0;
        self.commands = 0;
        self.catalog_record = None;
        self.catalog = None;
        self.opening = None;
        self.parts = SnapshotParts::default();
        if let Some(pieces) = self.pieces.as_mut() {
            pieces.clear();
        }
        Step::Term { continues }
    }

    /// A whole `Commands` record of `count` commands that the caller checks itself, by its
    /// bytes ([`nodewright_adapters::eventlog::EncodedCommands`]): counted as
    /// [`Replayer::feed`] counts it, without decoding it. It ends any split commands being
    /// joined, as every other record does.
    pub fn feed_encoded_commands(&mut self, count: u64) {
        self.records += 1;
        self.commands += count;
        if let Some(pieces) = self.pieces.as_mut() {
            pieces.clear();
        }
    }

    pub fn header(&self) -> &LogHeader {
        &self.header
    }

    /// The core, as the records fed so far left it.
    pub fn core(&self) -> &Core {
        &self.core
    }

    /// Events so far, a cut log's count starting at its snapshot's (in an assembled log, the
    /// current piece's count).
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Events the core handled, in every piece of the log (a starting snapshot's events not
    /// counted).
    pub fn replayed(&self) -> u64 {
        self.replayed
    }

    /// Recorded commands so far, likewise.
    pub fn commands(&self) -> u64 {
        self.commands
    }

    /// For a cut log: the index its first event had in the log it was cut from.
    pub fn started_at(&self) -> Option<u64> {
        self.started_at
    }

    /// The record index of the newest catalog event (what a snapshot names).
    pub fn catalog_record(&self) -> Option<u64> {
        self.catalog_record
    }

    /// The newest catalog event.
    pub fn catalog(&self) -> Option<&Event> {
        self.catalog.as_ref()
    }

    /// The records a log cut here starts with (`log export --from`, an assembled log's first
    /// piece): the catalog event in force and a snapshot of the core naming it (none at a
    /// log's first event).
    pub fn starting_records(&self) -> Result<Vec<LogRecord>, postcard::Error> {
        if self.events == 0 {
            return Ok(Vec::new());
        }
        let mut opening = Vec::new();
        let catalog_record = self.catalog.as_ref().map(|c| {
            opening.push(LogRecord::Event(c.clone()));
            0
        });
        let snapshot = Snapshot::of(&self.core, self.events, self.commands, catalog_record)?;
        opening.extend(snapshot.into_records());
        Ok(opening)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_adapters::eventlog::commands_records_of;
    use nodewright_core::Config;

    fn header() -> LogHeader {
        LogHeader::new(Config::default(), "replayer")
    }

    fn tick(at_ms: u64) -> LogRecord {
        LogRecord::Event(Event::new(at_ms, EventKind::Tick))
    }

    #[test]
    fn events_are_handled_and_counted_in_order() {
        let mut replay = Replayer::new(header());
        for (i, at) in [1_000u64, 2_000, 3_000].into_iter().enumerate() {
            match replay.feed(tick(at)).unwrap() {
                Some(Step::Event { index, event, .. }) => {
                    assert_eq!(index, i as u64);
                    assert_eq!(event.at_ms, at);
                }
                other => panic!("expected an event, got {other:?}"),
            }
        }
        assert_eq!(replay.events(), 3);
        assert_eq!(replay.core().now_ms(), 3_000);
    }

    #[test]
    fn split_commands_come_whole_only_when_joining() {
        let commands: Vec<Command> = (0..5)
            .map(|i| Command::DisruptionBlocked {
                nodepool: format!("pool-{i}"),
                reason: "x".repeat(64),
            })
            .collect();
        let pieces = commands_records_of(commands.clone(), 200);
        assert!(pieces.len() > 1, "the commands are split");

        let mut joined = Replayer::new(header()).joining_commands();
        let mut seen = Vec::new();
        for record in pieces.clone() {
            if let Some(Step::Recorded(cs)) = joined.feed(record).unwrap() {
                seen.push(cs);
            }
        }
        assert_eq!(seen, vec![commands.clone()]);
        assert_eq!(joined.commands(), 5);

        let mut piecewise = Replayer::new(header());
        let mut seen = Vec::new();
        for record in pieces {
            if let Some(Step::Recorded(cs)) = piecewise.feed(record).unwrap() {
                seen.extend(cs);
            }
        }
        assert_eq!(seen, commands);
        assert_eq!(piecewise.commands(), 5);
    }

    #[test]
    fn a_cut_log_starts_from_its_snapshot() {
        // The whole log: three events; its snapshot after two starts the cut log.
        let mut whole = Replayer::new(header());
        whole.feed(tick(1_000)).unwrap();
        whole.feed(tick(2_000)).unwrap();
        let snapshot = Snapshot::of(whole.core(), 2, 0, None).unwrap();
        whole.feed(tick(3_000)).unwrap();

        let mut cut = Replayer::new(header());
        let mut steps = Vec::new();
        // In small parts: the walk joins them.
        let records = snapshot.into_records_of(64);
        assert!(records.len() > 1, "the snapshot is in parts");
        for record in records.into_iter().chain([tick(3_000)]) {
            steps.extend(cut.feed(record).unwrap());
        }
        assert!(matches!(
            steps.first(),
            Some(Step::Started {
                events: 2,
                commands: 0,
                seamless: None
            })
        ));
        assert!(matches!(steps.last(), Some(Step::Event { index: 2, .. })));
        assert_eq!(cut.started_at(), Some(2));
        assert_eq!(cut.events(), whole.events());
        assert_eq!(
            Snapshot::of(cut.core(), 3, 0, None).unwrap(),
            Snapshot::of(whole.core(), 3, 0, None).unwrap()
        );
    }

    #[test]
    fn a_snapshot_that_does_not_restore_is_an_error_naming_its_event() {
        let mut replay = Replayer::new(header());
        let snapshot = Snapshot {
            producer: "another build".to_string(),
            ..Snapshot::of(&Core::new(Config::default()), 7, 0, None).unwrap()
        };
        let mut result = Ok(None);
        for record in snapshot.into_records() {
            result = replay.feed(record);
        }
        match result {
            Err(ReplayError::StartingSnapshot { events, .. }) => assert_eq!(events, 7),
            other => panic!("expected a starting-snapshot error, got {other:?}"),
        }
    }
}
