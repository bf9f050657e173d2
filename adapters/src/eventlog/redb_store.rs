//! The controller's event store: one redb file.
//!
//! ```text
//! table "records": u64 -> bytes   record index (0, 1, 2, ... without gaps) ->
//!                                 CRC-32 of the payload (u32 LE) ++ postcard of R
//! table "meta":    &str -> bytes  "format_version" -> u16 LE (1)
//!                                 "header"         -> CRC-32 (u32 LE) ++ postcard of H
//! ```
//!
//! redb already checksums its pages; the CRC-32 in each value is the same check the `.nwlog`
//! frames carry, so a record damaged anywhere between encoder and decoder is named by index.
//! One `append` is one write transaction with `Durability::Immediate`: the group commit.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io;
use std::marker::PhantomData;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::backends::FileBackend;
use redb::{
    Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition,
    TableError,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::LogError;
use super::frame::{self, EncodeFault, MAX_FRAME_PAYLOAD};
use super::nwlog::{NwlogWriter, sync_parent_dir};
use super::{EventStore, Header};

/// redb's page cache. Records are appended and read in order, so a small cache serves as well
/// as redb's default (up to 1 GiB, which a long-running controller would fill with pages it
/// wrote and never reads again).
const CACHE_BYTES: usize = 4 << 20;

/// A header as the store keeps it (checksum and postcard payload).
fn encode_header<H: serde::Serialize>(header: &H) -> Result<Vec<u8>, LogError> {
    frame::encode_checked_value(header).map_err(|fault| match fault {
        EncodeFault::Postcard(source) => LogError::Encode {
            what: "header",
            source,
        },
        EncodeFault::TooLarge { length } => LogError::RecordTooLarge {
            index_in_batch: 0,
            length,
            max: MAX_FRAME_PAYLOAD,
        },
    })
}

/// The store format version this build writes.
pub const STORE_FORMAT_VERSION: u16 = 8;

/// The store format versions this build opens.
pub const READABLE_STORE_VERSIONS: &[u16] = &[1, 2, 3, 4, 5, 6, 7, 8];

const RECORDS: TableDefinition<u64, &[u8]> = TableDefinition::new("records");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const META_FORMAT_VERSION: &str = "format_version";
const META_HEADER: &str = "header";

/// Records per group commit when exporting: bounds the memory an export holds.
const EXPORT_BATCH: usize = 4096;

/// The controller's event store: a header and an append-only sequence of records in one redb
/// file, opened by one process at a time (redb locks the file).
pub struct RedbStore<H, R> {
    /// Shared with the readers made by [`RedbStore::reader`] (redb reads in parallel with the
    /// one writer, each from the last committed state).
    db: Arc<Database>,
    path: PathBuf,
    header: H,
    len: u64,
    /// False for a reader: its appends are refused.
    writable: bool,
    records: PhantomData<fn() -> R>,
}

impl<H, R> fmt::Debug for RedbStore<H, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedbStore")
            .field("path", &self.path)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl<H, R> RedbStore<H, R>
where
    H: Header,
    R: Serialize + DeserializeOwned,
{
    /// Creates a new store at `path` holding `header` and no records. Refuses an existing file,
    /// so a store is never overwritten by accident.
    pub fn create(path: impl AsRef<Path>, header: &H) -> Result<Self, LogError> {
        let path = path.as_ref().to_path_buf();
        let header_value = encode_header(header)?;
        // Keep the header as it reads back, which also proves it survives the round trip.
        let header_back = frame::check_value(&header_value)
            .and_then(|payload| H::decode(STORE_FORMAT_VERSION, payload))
            .map_err(|reason| LogError::StoreMetaCorrupt {
                path: path.clone(),
                key: META_HEADER,
                reason: format!(
                    "the header does not read back as written ({reason}); its Serialize and \
                     Deserialize implementations disagree"
                ),
            })?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|source| {
                if source.kind() == io::ErrorKind::AlreadyExists {
                    LogError::StoreExists { path: path.clone() }
                } else {
                    LogError::Io {
                        path: Some(path.clone()),
                        action: "create the store file",
                        source,
                    }
                }
            })?;
        match Self::initialise(file, &path, &header_value) {
            Ok(db) => Ok(Self {
                db: Arc::new(db),
                path,
                header: header_back,
                len: 0,
                writable: true,
                records: PhantomData,
            }),
            Err(error) => {
                // The file is ours and holds nothing yet; leave no half-made store behind.
                let _ = fs::remove_file(&path);
                Err(error)
            }
        }
    }

    fn initialise(file: fs::File, path: &Path, header_value: &[u8]) -> Result<Database, LogError> {
        let backend = FileBackend::new(file).map_err(store_error(path, "create the store"))?;
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create_with_backend(backend)
            .map_err(store_error(path, "create the store"))?;
        let mut txn = db
            .begin_write()
            .map_err(store_error(path, "begin a write transaction"))?;
        txn.set_durability(Durability::Immediate)
            .map_err(store_error(path, "set the durability"))?;
        {
            let mut meta = txn
                .open_table(META)
                .map_err(store_error(path, "create the meta table"))?;
            meta.insert(
                META_FORMAT_VERSION,
                STORE_FORMAT_VERSION.to_le_bytes().as_slice(),
            )
            .map_err(store_error(path, "write the format version"))?;
            meta.insert(META_HEADER, header_value)
                .map_err(store_error(path, "write the header"))?;
            txn.open_table(RECORDS)
                .map_err(store_error(path, "create the records table"))?;
        }
        txn.commit()
            .map_err(store_error(path, "commit the new store"))?;
        sync_parent_dir(path).map_err(|source| LogError::Io {
            path: Some(path.to_path_buf()),
            action: "sync the directory holding the store",
            source,
        })?;
        Ok(db)
    }

    /// Opens an existing store. Refuses a file that is not a nodewright store, or whose format
    /// version this build does not know; checks that the record indexes have no gap.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, LogError> {
        let path = path.as_ref().to_path_buf();
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .open(&path)
            .map_err(store_error(&path, "open the store"))?;
        let store = Self::over(Arc::new(db), path, true)?;
        store.upgrade_meta()?;
        Ok(store)
    }

    /// Marks a store of an older format version as this build's, with its header in this
    /// version's layout (as it read, older settings made explicit), before anything is
    /// appended: the records this build appends (an instance listing as its changes, say)
    /// may not read in the older version, so an older build must refuse the store by its
    /// version rather than fail on a record.
    fn upgrade_meta(&self) -> Result<(), LogError> {
        let path = &self.path;
        let txn = self
            .db
            .begin_write()
            .map_err(store_error(path, "begin a write transaction"))?;
        {
            let mut meta = txn
                .open_table(META)
                .map_err(store_error(path, "open the meta table"))?;
            let version = meta
                .get(META_FORMAT_VERSION)
                .map_err(store_error(path, "read the format version"))?
                .map(|v| v.value().to_vec());
            if version.as_deref() == Some(STORE_FORMAT_VERSION.to_le_bytes().as_slice()) {
                return Ok(());
            }
            let header_value = encode_header(&self.header)?;
            meta.insert(META_HEADER, header_value.as_slice())
                .map_err(store_error(path, "write the header"))?;
            meta.insert(
                META_FORMAT_VERSION,
                STORE_FORMAT_VERSION.to_le_bytes().as_slice(),
            )
            .map_err(store_error(path, "write the format version"))?;
        }
        txn.commit()
            .map_err(store_error(path, "commit the store's new format version"))
    }

    /// A reader of this store, in this process (another process cannot open the file while
    /// it is open here): it sees every record committed so far and shares the file with this
    /// store, which goes on appending. For exports from a running controller.
    pub fn reader(&self) -> Result<Self, LogError> {
        Self::over(Arc::clone(&self.db), self.path.clone(), false)
    }

    /// The store in `db`: its header and length as last committed, checked.
    fn over(db: Arc<Database>, path: PathBuf, writable: bool) -> Result<Self, LogError> {
        let (header, len) = {
            let txn = db
                .begin_read()
                .map_err(store_error(&path, "begin a read transaction"))?;
            let meta = txn.open_table(META).map_err(|error| match error {
                TableError::TableDoesNotExist(_) | TableError::TableTypeMismatch { .. } => {
                    LogError::NotAStore {
                        path: path.clone(),
                        detail: "it has no nodewright meta table".to_string(),
                    }
                }
                other => store_error(&path, "open the meta table")(other),
            })?;
            let version = meta
                .get(META_FORMAT_VERSION)
                .map_err(store_error(&path, "read the format version"))?
                .ok_or_else(|| LogError::NotAStore {
                    path: path.clone(),
                    detail: "its meta table has no format_version".to_string(),
                })?;
            let version = match version.value() {
                [low, high] => u16::from_le_bytes([*low, *high]),
                other => {
                    return Err(LogError::StoreMetaCorrupt {
                        path,
                        key: META_FORMAT_VERSION,
                        reason: format!("it is {} bytes long instead of 2", other.len()),
                    });
                }
            };
            if !READABLE_STORE_VERSIONS.contains(&version) {
                return Err(LogError::UnsupportedStoreVersion {
                    path,
                    version,
                    supported: READABLE_STORE_VERSIONS,
                });
            }
            let header_value = meta
                .get(META_HEADER)
                .map_err(store_error(&path, "read the header"))?
                .ok_or_else(|| LogError::StoreMetaCorrupt {
                    path: path.clone(),
                    key: META_HEADER,
                    reason: "it is missing".to_string(),
                })?;
            // The header as its version laid it out (version 1: the configuration before
            // the sibling hold).
            let header = frame::check_value(header_value.value())
                .and_then(|payload| H::decode(version, payload))
                .map_err(|reason| LogError::StoreMetaCorrupt {
                    path: path.clone(),
                    key: META_HEADER,
                    reason,
                })?;
            let records = txn.open_table(RECORDS).map_err(|error| match error {
                TableError::TableDoesNotExist(_) | TableError::TableTypeMismatch { .. } => {
                    LogError::NotAStore {
                        path: path.clone(),
                        detail: "it has no records table".to_string(),
                    }
                }
                other => store_error(&path, "open the records table")(other),
            })?;
            let len = records
                .len()
                .map_err(store_error(&path, "count the records"))?;
            if len > 0 {
                let last = records
                    .last()
                    .map_err(store_error(&path, "read the last record"))?
                    .map(|(key, _)| key.value());
                if last != Some(len - 1) {
                    let index = first_gap(&records, &path)?;
                    return Err(LogError::StoreRecordCorrupt {
                        path,
                        index,
                        reason: format!(
                            "it is missing: the store holds {len} records whose indexes are \
                             not 0..{len}"
                        ),
                    });
                }
            }
            (header, len)
        };
        Ok(Self {
            db,
            path,
            header,
            len,
            writable,
            records: PhantomData,
        })
    }

    /// The header.
    pub fn header(&self) -> &H {
        &self.header
    }

    /// The number of records stored.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when no record is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `records` in one write transaction, committed with immediate durability: when
    /// this returns `Ok`, all of them survive a crash; otherwise none of them is stored.
    pub fn append(&mut self, records: &[R]) -> Result<(), LogError> {
        if !self.writable {
            return Err(LogError::ReadOnlyStore {
                path: self.path.clone(),
            });
        }
        if records.is_empty() {
            return Ok(());
        }
        // Encode everything first: a record that does not encode leaves the store untouched.
        let mut values = Vec::with_capacity(records.len());
        for (index_in_batch, record) in records.iter().enumerate() {
            let value = frame::encode_checked_value(record).map_err(|fault| match fault {
                EncodeFault::Postcard(source) => LogError::Encode {
                    what: "record",
                    source,
                },
                EncodeFault::TooLarge { length } => LogError::RecordTooLarge {
                    index_in_batch,
                    length,
                    max: MAX_FRAME_PAYLOAD,
                },
            })?;
            values.push(value);
        }
        let path = &self.path;
        let mut txn = self
            .db
            .begin_write()
            .map_err(store_error(path, "begin a write transaction"))?;
        txn.set_durability(Durability::Immediate)
            .map_err(store_error(path, "set the durability"))?;
        {
            let mut table = txn
                .open_table(RECORDS)
                .map_err(store_error(path, "open the records table"))?;
            for (index, value) in (self.len..).zip(&values) {
                table
                    .insert(index, value.as_slice())
                    .map_err(store_error(path, "write a record"))?;
            }
        }
        txn.commit()
            .map_err(store_error(path, "commit the records"))?;
        self.len += records.len() as u64;
        Ok(())
    }

    /// The records `from..to` (half-open).
    pub fn read_range(&self, from: u64, to: u64) -> Result<Vec<R>, LogError> {
        let capacity = usize::try_from(to.saturating_sub(from))
            .unwrap_or(0)
            .min(EXPORT_BATCH);
        let mut records = Vec::with_capacity(capacity);
        self.for_each_in_range(from, to, |_, record| {
            records.push(record);
            Ok(())
        })?;
        Ok(records)
    }

    /// Writes the records of `range` as a portable `.nwlog` file at `path`, with this store's
    /// header, passing each record through `redact` first (`|r| r` to keep them as they are).
    /// Returns the number of records written.
    ///
    /// The file is written under `<path>.partial`, made durable, then renamed to `path`, so
    /// `path` never holds half an export.
    pub fn export_nwlog(
        &self,
        path: impl AsRef<Path>,
        range: Range<u64>,
        mut redact: impl FnMut(R) -> R,
    ) -> Result<u64, LogError> {
        self.check_range(range.start, range.end)?;
        let path = path.as_ref();
        let mut partial = path.as_os_str().to_os_string();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        let mut writer = NwlogWriter::<H, R>::create(&partial, &self.header)?;
        let mut batch = Vec::with_capacity(EXPORT_BATCH);
        let written = self
            .for_each_in_range(range.start, range.end, |_, record| {
                batch.push(redact(record));
                if batch.len() >= EXPORT_BATCH {
                    writer.append(&batch)?;
                    batch.clear();
                }
                Ok(())
            })
            .and_then(|()| writer.append(&batch))
            .and_then(|()| {
                drop(writer);
                fs::rename(&partial, path).map_err(|source| LogError::Io {
                    path: Some(path.to_path_buf()),
                    action: "move the finished export into place",
                    source,
                })
            })
            .and_then(|()| {
                sync_parent_dir(path).map_err(|source| LogError::Io {
                    path: Some(path.to_path_buf()),
                    action: "sync the directory holding the export",
                    source,
                })
            });
        match written {
            Ok(()) => Ok(range.end - range.start),
            Err(error) => {
                // Best effort: the partial file is of no use to anyone.
                let _ = fs::remove_file(&partial);
                Err(error)
            }
        }
    }

    fn check_range(&self, from: u64, to: u64) -> Result<(), LogError> {
        if from <= to && to <= self.len {
            Ok(())
        } else {
            Err(LogError::RangeOutOfBounds {
                from,
                to,
                len: self.len,
            })
        }
    }

    /// Decodes the records `from..to` in order, in one read transaction, checking that none is
    /// missing, each passes its checksum and decodes completely.
    fn for_each_in_range(
        &self,
        from: u64,
        to: u64,
        mut each: impl FnMut(u64, R) -> Result<(), LogError>,
    ) -> Result<(), LogError> {
        self.check_range(from, to)?;
        if from == to {
            return Ok(());
        }
        let path = &self.path;
        let txn = self
            .db
            .begin_read()
            .map_err(store_error(path, "begin a read transaction"))?;
        let table = txn
            .open_table(RECORDS)
            .map_err(store_error(path, "open the records table"))?;
        let mut expected = from;
        for entry in table
            .range(from..to)
            .map_err(store_error(path, "read the records"))?
        {
            let (key, value) = entry.map_err(store_error(path, "read a record"))?;
            if key.value() != expected {
                return Err(LogError::StoreRecordCorrupt {
                    path: path.clone(),
                    index: expected,
                    reason: "it is missing".to_string(),
                });
            }
            // Only store version 1 exists; a later version adds its own record decoder here.
            let record = frame::check_value(value.value())
                .and_then(frame::decode_payload::<R>)
                .map_err(|reason| LogError::StoreRecordCorrupt {
                    path: path.clone(),
                    index: expected,
                    reason,
                })?;
            each(expected, record)?;
            expected += 1;
        }
        if expected != to {
            return Err(LogError::StoreRecordCorrupt {
                path: path.clone(),
                index: expected,
                reason: "it is missing".to_string(),
            });
        }
        Ok(())
    }
}

impl<H, R> EventStore<H, R> for RedbStore<H, R>
where
    H: Header,
    R: Serialize + DeserializeOwned,
{
    fn header(&self) -> &H {
        RedbStore::header(self)
    }

    fn append(&mut self, records: &[R]) -> Result<(), LogError> {
        RedbStore::append(self, records)
    }

    fn len(&self) -> u64 {
        RedbStore::len(self)
    }

    fn read_range(&self, from: u64, to: u64) -> Result<Vec<R>, LogError> {
        RedbStore::read_range(self, from, to)
    }
}

/// The first index missing from `records` (which holds fewer keys than its last key implies).
fn first_gap(
    records: &impl ReadableTable<u64, &'static [u8]>,
    path: &Path,
) -> Result<u64, LogError> {
    let mut expected = 0u64;
    for entry in records
        .iter()
        .map_err(store_error(path, "read the records"))?
    {
        let (key, _) = entry.map_err(store_error(path, "read a record"))?;
        if key.value() != expected {
            break;
        }
        expected += 1;
    }
    Ok(expected)
}

fn store_error<E: Into<redb::Error>>(
    path: &Path,
    action: &'static str,
) -> impl FnOnce(E) -> LogError {
    let path = path.to_path_buf();
    move |error| LogError::Store {
        path,
        action,
        source: Box::new(error.into()),
    }
}
