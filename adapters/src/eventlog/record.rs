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

impl super::Header for LogHeader {
    fn decode(version: u16, payload: &[u8]) -> Result<Self, String> {
        super::upgrade::log_header(version, payload)
    }
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
    /// wrote still reads.
    pub core: Vec<u8>,
}

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
        })
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

/// `value` postcard-encoded into a buffer of exactly its size: a snapshot of a large cluster is
/// megabytes, and a buffer grown by doubling would hold up to twice that while it is written.
fn encode_exactly<T: Serialize>(value: &T) -> Result<Vec<u8>, postcard::Error> {
    let size = postcard::serialize_with_flavor(value, postcard::ser_flavors::Size::default())?;
    postcard::to_extend(value, Vec::with_capacity(size))
}
