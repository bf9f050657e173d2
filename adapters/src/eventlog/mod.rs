//! The event log: every event the decision core sees is appended here, durably and in order,
//! before the core handles it, and the commands it returns after; so production can be replayed
//! exactly.
//!
//! This module owns the bytes, not their meaning: it is generic over the header type `H` and
//! the record type `R` (anything serde can serialize and deserialize) and never looks inside
//! them. It holds
//!
//! - [`frame`]: the framing shared by all stores (length, CRC-32, payload);
//! - [`NwlogWriter`] / [`NwlogReader`]: the portable `.nwlog` file that `simulate --log` and
//!   `log export` write and `replay` reads;
//! - [`RedbStore`]: the controller's store, one redb file;
//! - [`MemoryStore`]: the same contract in memory, for tests and the simulated world;
//! - [`DiscardStore`]: the contract's numbering without the records, for a run whose log
//!   nobody reads;
//! - [`record`]: the header and record types nodewright itself stores ([`LogHeader`],
//!   [`LogRecord`]); everything else here works for any serde types.
//!
//! The byte format, the redb layout and the compatibility promise are in `docs/event-log.md`.
//! Encoding is postcard 1.x (a stable, specified wire format; see
//! `docs/decisions/0001-postcard-instead-of-bincode.md`), storage is redb 4
//! (`docs/decisions/0002-redb-instead-of-sled.md`).
//!
//! Reading never panics, whatever the bytes: every problem is a [`LogError`] that names the
//! file, the frame and the byte offset, and says what to do.

mod digest;
mod discard;
mod encoded;
mod error;
pub mod frame;
mod memory;
mod nwlog;
mod preamble;
pub mod record;
mod redb_store;
mod upgrade;

pub use digest::DecisionDigest;
pub use discard::DiscardStore;
pub use encoded::{EncodedCommands, EncodedEvent, ReadRecord, encode_each};
pub use error::LogError;
pub use memory::MemoryStore;
pub use nwlog::{DurableWrite, Entry, NwlogReader, NwlogWriter, read_nwlog, read_nwlog_bytes};
pub use preamble::{FORMAT_VERSION, MAGIC, PREAMBLE_LEN, READABLE_VERSIONS};
pub use record::{
    COMMANDS_RECORD_BYTES, CommandParts, LogHeader, LogRecord, SNAPSHOT_PART_BYTES, Snapshot,
    SnapshotError, SnapshotParts, Term, commands_records, commands_records_of,
};
pub use redb_store::{READABLE_STORE_VERSIONS, RedbStore, STORE_FORMAT_VERSION};

/// A header type, read back from every format version this build reads. A header frame holds
/// the header's postcard encoding in the layout of the version that wrote it; a header type
/// whose layout changed decodes the older layouts here and upgrades them. `.nwlog` files and
/// stores share the header layouts: version N of either wrote layout N.
pub trait Header: serde::Serialize + serde::de::DeserializeOwned {
    /// Decodes a header frame's payload written in format `version` (one this build reads).
    /// The default: one layout in every version.
    fn decode(version: u16, payload: &[u8]) -> Result<Self, String> {
        let _ = version;
        frame::decode_payload(payload)
    }
}

/// An append-only, durable sequence of records behind one header: what the driver appends every
/// event and command to before acting on it.
///
/// Records are numbered from 0 without gaps. Implementations need `H` and `R` to be
/// `Serialize + DeserializeOwned`; the trait itself states no bound, so generic code over a store
/// does not have to repeat them.
pub trait EventStore<H, R> {
    /// The header the store was created with (format details and the core's configuration).
    fn header(&self) -> &H;

    /// Appends `records` as one group commit: when this returns `Ok`, all of them are stored
    /// (durably, for a durable store) with the indexes `len()..len() + records.len()`; when it
    /// returns `Err`, the caller must treat the batch as not stored.
    fn append(&mut self, records: &[R]) -> Result<(), LogError>;

    /// The number of records stored.
    fn len(&self) -> u64;

    /// True when no record is stored.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records with indexes `from..to` (half-open), in order. A range that is not within
    /// `0..=len()` is [`LogError::RangeOutOfBounds`].
    fn read_range(&self, from: u64, to: u64) -> Result<Vec<R>, LogError>;
}
