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
}

/// The core, its log, and nothing else.
pub struct Driver<S> {
    core: Core,
    store: S,
    events: u64,
    commands: u64,
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
        }
    }

    /// Log, decide, log, dispatch.
    pub fn step(
        &mut self,
        event: Event,
        executor: &mut impl CommandExecutor,
    ) -> Result<Vec<Command>, DriverError> {
        self.store
            .append(std::slice::from_ref(&LogRecord::Event(event.clone())))?;
        self.events += 1;
        let commands = self.core.handle(&event);
        if !commands.is_empty() {
            self.store
                .append(std::slice::from_ref(&LogRecord::Commands(commands.clone())))?;
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
