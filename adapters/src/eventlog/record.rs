//! What nodewright stores in its event log: a header with the core's configuration, then one
//! record per event and, after it, the commands the core returned for it (when there were any).

use nodewright_core::{Command, Config, Event};
use serde::{Deserialize, Serialize};

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
}
