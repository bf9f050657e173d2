//! An event store in memory, for tests and the simulated world: no file, nothing durable, but
//! the same encoding as the durable stores, so a record that does not survive postcard fails
//! here too.

use std::fmt;
use std::marker::PhantomData;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::EventStore;
use super::error::LogError;
use super::frame::{self, MAX_FRAME_PAYLOAD};
use super::nwlog::{DurableWrite, NwlogWriter};

/// An [`EventStore`] in memory. Records are kept postcard-encoded, so reading them back
/// exercises the same round trip as the redb store and the `.nwlog` file, and the large ones
/// packed as a `.nwlog` file packs them (a long simulation's log is a third of its size so).
/// They lie end to end in one buffer (a simulation of many thousands of pods keeps millions of
/// small records).
pub struct MemoryStore<H, R> {
    header: H,
    bytes: Vec<u8>,
    /// `ends[i]` is where record `i` ends in `bytes` (it starts where the one before ends).
    ends: Vec<usize>,
    /// Whether record `i` is kept packed (`frame::pack`).
    packed: Vec<bool>,
    types: PhantomData<fn() -> R>,
}

impl<H, R> fmt::Debug for MemoryStore<H, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("len", &self.ends.len())
            .finish_non_exhaustive()
    }
}

impl<H, R> MemoryStore<H, R>
where
    H: Serialize + DeserializeOwned,
    R: Serialize + DeserializeOwned,
{
    /// An empty store with `header`.
    pub fn new(header: H) -> Self {
        Self {
            header,
            bytes: Vec::new(),
            ends: Vec::new(),
            packed: Vec::new(),
            types: PhantomData,
        }
    }

    /// Writes the whole store as a `.nwlog` log into `out` (for example a `Vec<u8>`), a chunk
    /// of records at a time: a long simulation's log is never held decoded all at once.
    pub fn write_nwlog<W: DurableWrite>(&self, out: W) -> Result<W, LogError> {
        const CHUNK: u64 = 4096;
        let mut writer = NwlogWriter::<H, R, W>::new(out, &self.header)?;
        let len = self.len();
        let mut from = 0;
        while from < len {
            let to = (from + CHUNK).min(len);
            writer.append(&self.read_range(from, to)?)?;
            from = to;
        }
        Ok(writer.into_inner())
    }
}

impl<H, R> EventStore<H, R> for MemoryStore<H, R>
where
    H: Serialize + DeserializeOwned,
    R: Serialize + DeserializeOwned,
{
    fn header(&self) -> &H {
        &self.header
    }

    fn append(&mut self, records: &[R]) -> Result<(), LogError> {
        // A batch is all or nothing: what a failed batch wrote is taken back.
        let (bytes_before, records_before) = (self.bytes.len(), self.ends.len());
        let appended = self.append_each(records);
        if appended.is_err() {
            self.bytes.truncate(bytes_before);
            self.ends.truncate(records_before);
            self.packed.truncate(records_before);
        }
        appended
    }

    fn len(&self) -> u64 {
        self.ends.len() as u64
    }

    fn read_range(&self, from: u64, to: u64) -> Result<Vec<R>, LogError> {
        let out_of_bounds = || LogError::RangeOutOfBounds {
            from,
            to,
            len: self.len(),
        };
        let start = usize::try_from(from).map_err(|_| out_of_bounds())?;
        let end = usize::try_from(to).map_err(|_| out_of_bounds())?;
        if start > end || end > self.ends.len() {
            return Err(out_of_bounds());
        }
        (start..end)
            .zip(from..)
            .map(|(at, index)| {
                let bytes = &self.bytes[self.record_start(at)..self.ends[at]];
                let payload = if self.packed[at] {
                    frame::unpack(bytes).map(std::borrow::Cow::Owned)
                } else {
                    Ok(std::borrow::Cow::Borrowed(bytes))
                };
                // Only a type whose Serialize and Deserialize disagree gets here. There is no
                // file, so the position is given as the frame the record would have in a
                // `.nwlog` log, at byte offset 0.
                payload
                    .and_then(|payload| frame::decode_payload::<R>(&payload))
                    .map_err(|reason| LogError::Undecodable {
                        path: None,
                        frame_index: index + 1,
                        byte_offset: 0,
                        intact_records: index,
                        reason,
                    })
            })
            .collect()
    }
}

impl<H, R: Serialize> MemoryStore<H, R> {
    fn append_each(&mut self, records: &[R]) -> Result<(), LogError> {
        for (index_in_batch, record) in records.iter().enumerate() {
            // Encoded in place, at the end of the buffer (a snapshot is megabytes: no copy).
            let start = self.bytes.len();
            postcard::to_extend(record, Tail(&mut self.bytes)).map_err(|source| {
                LogError::Encode {
                    what: "record",
                    source,
                }
            })?;
            let length = self.bytes.len() - start;
            if length > MAX_FRAME_PAYLOAD as usize {
                return Err(LogError::RecordTooLarge {
                    index_in_batch,
                    length,
                    max: MAX_FRAME_PAYLOAD,
                });
            }
            let packed = frame::pack(&self.bytes[start..]);
            if let Some(packed) = &packed {
                self.bytes.truncate(start);
                self.bytes.extend_from_slice(packed);
            }
            self.packed.push(packed.is_some());
            self.ends.push(self.bytes.len());
        }
        Ok(())
    }

    /// Where record `at` starts in `bytes`.
    fn record_start(&self, at: usize) -> usize {
        at.checked_sub(1).map_or(0, |before| self.ends[before])
    }
}

/// The end of a buffer, as postcard's `Extend` output: what is encoded is appended to it.
struct Tail<'a>(&'a mut Vec<u8>);

impl Extend<u8> for Tail<'_> {
    fn extend<I: IntoIterator<Item = u8>>(&mut self, bytes: I) {
        self.0.extend(bytes);
    }
}
