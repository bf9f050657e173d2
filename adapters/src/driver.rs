//! The driver: the one loop between the world and the core. For every event it
//! 1. appends the event to the log (durably, before anything acts on it),
//! 2. asks the core,
//! 3. appends the commands, then hands them to the executor.
//!
//! The controller runs it over the Kubernetes and AWS adapters; the simulated world runs the
//! same code over simulated adapters.

use nodewright_core::{Command, Config, Core, Event, EventKind};
use thiserror::Error;

use crate::eventlog::{
    CommandParts, EventStore, LogError, LogHeader, LogRecord, Snapshot, SnapshotError,
    commands_records,
};

/// The driver appends a snapshot of the core every this many events, so that a restart replays
/// at most this many.
pub const DEFAULT_SNAPSHOT_EVERY: u64 = 10_000;

/// Recovery looks for the newest snapshot this many records at a time, from the end.
const SNAPSHOT_SCAN_CHUNK: u64 = 4_096;

/// Something that carries out the core's commands.
pub trait CommandExecutor {
    fn execute(&mut self, command: &Command);

    /// Called once the event is logged, right before the core handles it: the controller
    /// times the decision from here to [`CommandExecutor::stepped`].
    fn stepping(&mut self, _core: &Core, _event: &Event) {}

    /// Called once a step's commands are dispatched, with the core as the step left it: the
    /// controller counts the step in its metrics, the simulator checks its invariants.
    fn stepped(&mut self, _core: &Core, _event: &Event, _commands: &[Command]) {}
}

#[derive(Debug, Error)]
pub enum DriverError {
    /// Its message says the log's error: it names no `source`, so that a chain of errors
    /// prints it once.
    #[error("the event log refused an append; the event was not handled: {0}")]
    Log(LogError),
    #[error(
        "an earlier append failed after the core had decided: the driver must be recovered from the log (Driver::recover) before it handles another event"
    )]
    NeedsRecovery,
    #[error(
        "recovery replayed record {record} and the core decided differently than the log says (logged {logged} commands, now {now}): the log was written by another version of nodewright; replay it with that version, or start a new log"
    )]
    Diverged {
        record: u64,
        logged: usize,
        now: usize,
    },
    /// The core panicked handling the event of record `record`: a replay of the log from
    /// there panics again, so the log is set aside and a new one begun from observation.
    #[error(
        "the core panicked handling the event of record {record}: {message}; the log from there cannot be replayed by this build: set it aside and begin a new one from what the cluster shows"
    )]
    Panicked { record: u64, message: String },
    /// Record `record` begins another log's piece: only a log assembled by `log export
    /// --segments` holds one, never a store a controller writes.
    #[error(
        "record {record} begins a piece of another log: this is a log assembled from segments, not a controller's store; replay it (`nodewright replay --verify`), or start the controller on its own store"
    )]
    Assembled { record: u64 },
}

impl DriverError {
    /// Whether the log, not the world, is at fault: a record that does not decode, a replay
    /// that decides differently than the log says, or an event that panics the core. Such a
    /// log is set aside and a new one begun from observation; going on with it, or starting
    /// again on it, would fail the same way.
    pub fn poisons_the_log(&self) -> bool {
        match self {
            DriverError::Log(e) => e.is_damaged_or_foreign(),
            DriverError::Diverged { .. }
            | DriverError::Panicked { .. }
            | DriverError::Assembled { .. } => true,
            DriverError::NeedsRecovery => false,
        }
    }
}

/// The core's decision on one event, a panic caught: the message it panicked with.
fn decide(core: &mut Core, event: &Event) -> Result<Vec<Command>, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| core.handle(event))).map_err(
        |payload| {
            payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string())
        },
    )
}

impl From<LogError> for DriverError {
    fn from(error: LogError) -> Self {
        DriverError::Log(error)
    }
}

/// Whether two commands ask the world for the same thing (their reasons aside).
fn same_request(a: &Command, b: &Command) -> bool {
    match (a, b) {
        (
            Command::LaunchNodeClaim { nodeclaim: x, .. },
            Command::LaunchNodeClaim { nodeclaim: y, .. },
        ) => x.name == y.name,
        (
            Command::TerminateNodeClaim { nodeclaim: x, .. },
            Command::TerminateNodeClaim { nodeclaim: y, .. },
        ) => x == y,
        (Command::CordonNode { node: x, .. }, Command::CordonNode { node: y, .. }) => x == y,
        (Command::EvictPod { pod: x, .. }, Command::EvictPod { pod: y, .. })
        | (Command::NominatePod { pod: x, .. }, Command::NominatePod { pod: y, .. })
        | (
            Command::ReportUnschedulable { pod: x, .. },
            Command::ReportUnschedulable { pod: y, .. },
        ) => x == y,
        _ => a == b,
    }
}

/// What a restart found in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Events replayed into the core.
    pub events: u64,
    /// The last event's commands had not been logged (the process stopped between deciding and
    /// logging): they are logged now.
    pub logged_missing_commands: bool,
    /// The last event's commands: they may not have been carried out.
    pub last_commands: Vec<Command>,
    /// Every other command whose result is still missing.
    pub outstanding: Vec<Command>,
    /// The record index of the snapshot replay started from (none: from the first event).
    pub from_snapshot: Option<u64>,
    /// Newer snapshots that could not be used, and why (their events were replayed instead).
    pub passed_over: Vec<(u64, SnapshotError)>,
}

impl Recovery {
    /// What to hand to the executor again, in order.
    pub fn reissue(&self) -> impl Iterator<Item = &Command> {
        self.last_commands.iter().chain(&self.outstanding)
    }
}

/// The core, its log, and nothing else.
pub struct Driver<S> {
    core: Core,
    store: S,
    events: u64,
    commands: u64,
    /// The core decided, and logging what it decided failed: it is ahead of the log.
    poisoned: bool,
    /// A snapshot every this many events (0: never).
    snapshot_every: u64,
    /// The last snapshot append that failed (the next one is tried at the next interval).
    snapshot_error: Option<LogError>,
    /// The record index of the last `CatalogUpdated` event: a snapshot names it.
    catalog_record: Option<u64>,
    /// See [`Driver::with_fault`].
    fault: Option<fn(&Event) -> bool>,
}

fn is_catalog(event: &Event) -> bool {
    matches!(event.kind, EventKind::CatalogUpdated(_))
}

/// The newest snapshot this build can restore, with its record index, and the newer ones it
/// passed over.
/// The records the scan read: `records` are those of `from..len()`, in order, so that replay
/// does not read them again.
struct Scanned {
    from: u64,
    records: Vec<LogRecord>,
}

impl Scanned {
    /// The records of `start..len()`, read again only where the scan did not reach.
    fn records_after<S: EventStore<LogHeader, LogRecord>>(
        &self,
        store: &S,
        start: u64,
    ) -> Result<std::borrow::Cow<'_, [LogRecord]>, LogError> {
        if start >= self.from {
            let skip = usize::try_from(start - self.from).unwrap_or(usize::MAX);
            return Ok(std::borrow::Cow::Borrowed(
                self.records.get(skip..).unwrap_or(&[]),
            ));
        }
        let mut records = store.read_range(start, self.from)?;
        records.extend(self.records.iter().cloned());
        Ok(std::borrow::Cow::Owned(records))
    }
}

type FoundSnapshot = (
    Option<(u64, Snapshot, Core)>,
    Vec<(u64, SnapshotError)>,
    Scanned,
);

fn newest_snapshot<S: EventStore<LogHeader, LogRecord>>(
    store: &S,
    config: &Config,
) -> Result<FoundSnapshot, LogError> {
    let mut passed_over = Vec::new();
    // Chunks read, newest first.
    let mut chunks: Vec<Vec<LogRecord>> = Vec::new();
    let mut to = store.len();
    let mut found = None;
    'scan: while to > 0 {
        let from = to.saturating_sub(SNAPSHOT_SCAN_CHUNK);
        let records = store.read_range(from, to)?;
        for (offset, record) in records.iter().enumerate().rev() {
            if let LogRecord::Snapshot(snapshot) = record {
                let index = from + offset as u64;
                let read = |i: u64| store.read_range(i, i + 1).ok().and_then(|mut r| r.pop());
                let restored = snapshot
                    .clone()
                    .joined(index, read)
                    .and_then(|whole| whole.restore(config, read).map(|core| (whole, core)));
                match restored {
                    Ok((whole, core)) => {
                        found = Some((index, whole, core));
                        chunks.push(records);
                        to = from;
                        break 'scan;
                    }
                    Err(why) => passed_over.push((index, why)),
                }
            }
        }
        chunks.push(records);
        to = from;
    }
    let records = chunks.into_iter().rev().flatten().collect();
    Ok((found, passed_over, Scanned { from: to, records }))
}

/// A core caught up with the log, and where the log left it.
struct Replayed {
    core: Core,
    events: u64,
    commands: u64,
    /// The last event's record index, its commands, and whether they were logged.
    last: Option<(u64, Vec<Command>, bool)>,
    catalog_record: Option<u64>,
}

/// Replays the events after `snapshot` (or all of them) into its core (or a fresh one),
/// checking that the commands come out as logged.
fn replay<S: EventStore<LogHeader, LogRecord>>(
    store: &S,
    scanned: &Scanned,
    snapshot: Option<(u64, Snapshot, Core)>,
) -> Result<Replayed, DriverError> {
    let (mut core, start, mut events, mut commands, mut catalog_record) = match snapshot {
        Some((index, snapshot, core)) => (
            core,
            index + 1,
            snapshot.events,
            snapshot.commands,
            snapshot.catalog_record,
        ),
        None => (Core::new(store.header().config.clone()), 0, 0, 0, None),
    };
    let records = scanned.records_after(store, start)?;
    let mut last: Option<(u64, Vec<Command>, bool)> = None;
    let mut parts = CommandParts::default();
    for (offset, record) in records.iter().enumerate() {
        let index = start + offset as u64;
        // The pieces of split commands are checked once joined.
        let joined;
        let record = match record {
            LogRecord::CommandsPart { .. } => match parts.take(record.clone()) {
                Some(whole) => {
                    joined = whole;
                    &joined
                }
                None => continue,
            },
            other => other,
        };
        match record {
            LogRecord::Event(event) => {
                parts = CommandParts::default();
                if let Some((at, decided, false)) = &last {
                    // An earlier event's commands were never logged: only the last event
                    // may be in that state.
                    return Err(DriverError::Diverged {
                        record: *at,
                        logged: 0,
                        now: decided.len(),
                    });
                }
                if is_catalog(event) {
                    catalog_record = Some(index);
                }
                let decided =
                    decide(&mut core, event).map_err(|message| DriverError::Panicked {
                        record: index,
                        message,
                    })?;
                events += 1;
                // An event that called for nothing has nothing to log.
                let logged = decided.is_empty();
                last = Some((index, decided, logged));
            }
            LogRecord::Commands(logged) => {
                let Some((at, decided, seen)) = &mut last else {
                    continue;
                };
                if decided != logged {
                    return Err(DriverError::Diverged {
                        record: *at,
                        logged: logged.len(),
                        now: decided.len(),
                    });
                }
                *seen = true;
                commands += logged.len() as u64;
            }
            // Older snapshots than the one restored, or ones passed over, and their parts.
            LogRecord::Snapshot(_) | LogRecord::SnapshotPart(_) => {}
            // Joined into a `Commands` record above.
            LogRecord::CommandsPart { .. } => {}
            LogRecord::Term(_) => return Err(DriverError::Assembled { record: index }),
        }
    }
    Ok(Replayed {
        core,
        events,
        commands,
        last,
        catalog_record,
    })
}

impl<S: EventStore<LogHeader, LogRecord>> Driver<S> {
    /// A driver whose core is configured from the store's header.
    pub fn new(store: S) -> Self {
        let config: Config = store.header().config.clone();
        Driver {
            core: Core::new(config),
            store,
            events: 0,
            commands: 0,
            poisoned: false,
            snapshot_every: DEFAULT_SNAPSHOT_EVERY,
            snapshot_error: None,
            catalog_record: None,
            fault: None,
        }
    }

    /// Snapshots every `every` events instead of [`DEFAULT_SNAPSHOT_EVERY`] (0: never).
    /// Test hook: the step of an event for which `fault` says true fails as if the core had
    /// panicked on it (after the event is logged, as a real panic would be).
    pub fn with_fault(mut self, fault: fn(&Event) -> bool) -> Self {
        self.fault = Some(fault);
        self
    }

    pub fn with_snapshot_every(mut self, every: u64) -> Self {
        self.snapshot_every = every;
        self
    }

    /// Appends a snapshot of the core now. A failure stops nothing: recovery then replays from
    /// an older snapshot, or from the start.
    pub fn snapshot(&mut self) -> Result<(), LogError> {
        let snapshot = Snapshot::of(&self.core, self.events, self.commands, self.catalog_record)
            .map_err(|source| LogError::Encode {
                what: "snapshot",
                source,
            })?;
        self.store.append(&snapshot.into_records())
    }

    /// Seals the log: appends a snapshot of the core now and returns the record index it begins
    /// at. The records before it, cut from the last seal (or the first record), are a segment
    /// that replays on its own (`nodewright_replay::segments`).
    pub fn seal(&mut self) -> Result<u64, LogError> {
        let at = self.store.len();
        self.snapshot()?;
        Ok(at)
    }

    /// The last snapshot append that failed, if the last attempt failed.
    pub fn snapshot_error(&self) -> Option<&LogError> {
        self.snapshot_error.as_ref()
    }

    /// A driver restarted over an existing log: the core is restored from the newest usable
    /// snapshot and every later event is replayed into it (the commands must come out as
    /// logged; with no snapshot, replay starts at the first event), the last event's commands
    /// are logged if they were not, and what may not have been carried out is returned to be
    /// carried out again.
    pub fn recover(mut store: S) -> Result<(Self, Recovery), DriverError> {
        let config: Config = store.header().config.clone();
        let (found, mut passed_over, scanned) = newest_snapshot(&store, &config)?;
        let from_snapshot = found.as_ref().map(|(index, _, _)| *index);
        let replayed = match replay(&store, &scanned, found) {
            // The snapshot led the replay astray: the events, which are the truth, are
            // replayed from the start instead.
            Err(DriverError::Diverged { .. } | DriverError::Panicked { .. })
                if from_snapshot.is_some() =>
            {
                let index = from_snapshot.unwrap_or_default();
                passed_over.push((index, SnapshotError::LedAstray));
                replay(&store, &scanned, None).map(|r| (r, None))
            }
            other => other.map(|r| (r, from_snapshot)),
        };
        let (
            Replayed {
                core,
                events,
                mut commands,
                last,
                catalog_record,
            },
            from_snapshot,
        ) = replayed?;
        let mut last_commands = Vec::new();
        let mut logged_missing_commands = false;
        if let Some((_, decided, logged)) = last {
            if !logged {
                store.append(&commands_records(decided.clone()))?;
                commands += decided.len() as u64;
                logged_missing_commands = true;
            }
            last_commands = decided;
        }
        // What the last event asks for already is not asked twice.
        let outstanding = core
            .outstanding()
            .into_iter()
            .filter(|c| !last_commands.iter().any(|l| same_request(l, c)))
            .collect();
        let driver = Driver {
            core,
            store,
            events,
            commands,
            poisoned: false,
            snapshot_every: DEFAULT_SNAPSHOT_EVERY,
            snapshot_error: None,
            catalog_record,
            fault: None,
        };
        Ok((
            driver,
            Recovery {
                events,
                logged_missing_commands,
                last_commands,
                outstanding,
                from_snapshot,
                passed_over,
            },
        ))
    }

    /// Appends an event without handling it: what a process that stops right after the append
    /// leaves behind (for crash tests).
    pub fn append_only(&mut self, event: Event) -> Result<(), DriverError> {
        let event = self.core.compact(event);
        if is_catalog(&event) {
            self.catalog_record = Some(self.store.len());
        }
        self.store
            .append(std::slice::from_ref(&LogRecord::Event(event)))?;
        self.events += 1;
        Ok(())
    }

    /// Log, decide, log, dispatch.
    pub fn step(
        &mut self,
        event: Event,
        executor: &mut impl CommandExecutor,
    ) -> Result<Vec<Command>, DriverError> {
        if self.poisoned {
            return Err(DriverError::NeedsRecovery);
        }
        // An instance listing is logged as what changed since the core's last one.
        let event = self.core.compact(event);
        let index = self.store.len();
        self.store
            .append(std::slice::from_ref(&LogRecord::Event(event.clone())))?;
        self.events += 1;
        if is_catalog(&event) {
            self.catalog_record = Some(index);
        }
        executor.stepping(&self.core, &event);
        let fault = self.fault;
        let decided = decide(&mut self.core, &event).and_then(|commands| match fault {
            Some(fault) if fault(&event) => Err(format!("a fault injected at record {index}")),
            _ => Ok(commands),
        });
        let commands = match decided {
            Ok(commands) => commands,
            Err(message) => {
                // The core's state is whatever the panic left: nothing more is decided on it.
                self.poisoned = true;
                return Err(DriverError::Panicked {
                    record: index,
                    message,
                });
            }
        };
        if !commands.is_empty() {
            if let Err(e) = self.store.append(&commands_records(commands.clone())) {
                // The event is logged and decided, its commands are not: only a recovery,
                // which logs and re-issues them, may go on.
                self.poisoned = true;
                return Err(e.into());
            }
            self.commands += commands.len() as u64;
        }
        for command in &commands {
            executor.execute(command);
        }
        executor.stepped(&self.core, &event, &commands);
        if self.snapshot_every > 0 && self.events.is_multiple_of(self.snapshot_every) {
            self.snapshot_error = self.snapshot().err();
        }
        Ok(commands)
    }

    /// When the core next wants a tick.
    pub fn next_timer_ms(&self) -> Option<u64> {
        self.core.next_timer_ms()
    }

    pub fn core(&self) -> &Core {
        &self.core
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    pub fn into_store(self) -> S {
        self.store
    }

    /// Events handled so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Commands issued so far.
    pub fn commands(&self) -> u64 {
        self.commands
    }
}
