//! The driver: the one loop between the world and the core. For every event it
//! 1. appends the event to the log (durably, before anything acts on it),
//! 2. asks the core,
//! 3. appends the commands, then hands them to the executor.
//!
//! The controller runs it over the Kubernetes and AWS adapters; the simulated world runs the
//! same code over simulated adapters.

use nodewright_core::{Command, Config, Core, Event};
use thiserror::Error;

use crate::eventlog::{EventStore, LogError, LogHeader, LogRecord};

/// Something that carries out the core's commands.
pub trait CommandExecutor {
    fn execute(&mut self, command: &Command);
}

#[derive(Debug, Error)]
pub enum DriverError {
    #[error("the event log refused an append; the event was not handled: {0}")]
    Log(#[from] LogError),
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
        }
    }

    /// A driver restarted over an existing log: every event is replayed into a fresh core (the
    /// commands must come out as logged), the last event's commands are logged if they were
    /// not, and what may not have been carried out is returned to be carried out again.
    pub fn recover(mut store: S) -> Result<(Self, Recovery), DriverError> {
        let config: Config = store.header().config.clone();
        let mut core = Core::new(config);
        let records = store.read_range(0, store.len())?;
        let mut events = 0u64;
        let mut commands = 0u64;
        let mut last: Option<(u64, Vec<Command>, bool)> = None;
        for (index, record) in records.iter().enumerate() {
            match record {
                LogRecord::Event(event) => {
                    if let Some((at, decided, false)) = &last {
                        // An earlier event's commands were never logged: only the last event
                        // may be in that state.
                        return Err(DriverError::Diverged {
                            record: *at,
                            logged: 0,
                            now: decided.len(),
                        });
                    }
                    let decided = core.handle(event);
                    events += 1;
                    // An event that called for nothing has nothing to log.
                    let logged = decided.is_empty();
                    last = Some((index as u64, decided, logged));
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
            }
        }
        let mut last_commands = Vec::new();
        let mut logged_missing_commands = false;
        if let Some((_, decided, logged)) = last {
            if !logged {
                store.append(std::slice::from_ref(&LogRecord::Commands(decided.clone())))?;
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
        };
        Ok((
            driver,
            Recovery {
                events,
                logged_missing_commands,
                last_commands,
                outstanding,
            },
        ))
    }

    /// Appends an event without handling it: what a process that stops right after the append
    /// leaves behind (for crash tests).
    pub fn append_only(&mut self, event: Event) -> Result<(), DriverError> {
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
        self.store
            .append(std::slice::from_ref(&LogRecord::Event(event.clone())))?;
        self.events += 1;
        let commands = self.core.handle(&event);
        if !commands.is_empty() {
            if let Err(e) = self
                .store
                .append(std::slice::from_ref(&LogRecord::Commands(commands.clone())))
            {
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
