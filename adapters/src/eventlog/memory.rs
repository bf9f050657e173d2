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
/// exercises the same round trip as the redb store and the `.nwlog` file.
pub struct MemoryStore<H, R> {
    header: H,
    records: Vec<Vec<u8>>,
    types: PhantomData<fn() -> R>,
}

impl<H, R> fmt::Debug for MemoryStore<H, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("len", &self.records.len())
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
            records: Vec::new(),
            types: PhantomData,
        }
    }

    /// Writes the whole store as a `.nwlog` log into `out` (for example a `Vec<u8>`).
    pub fn write_nwlog<W: DurableWrite>(&self, out: W) -> Result<W, LogError> {
        let mut writer = NwlogWriter::<H, R, W>::new(out, &self.header)?;
        let records = self.read_range(0, self.len())?;
        writer.append(&records)?;
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
        let mut encoded = Vec::with_capacity(records.len());
        for (index_in_batch, record) in records.iter().enumerate() {
            let bytes = postcard::to_stdvec(record).map_err(|source| LogError::Encode {
                what: "record",
                source,
            })?;
            if bytes.len() > MAX_FRAME_PAYLOAD as usize {
                return Err(LogError::RecordTooLarge {
                    index_in_batch,
                    length: bytes.len(),
                    max: MAX_FRAME_PAYLOAD,
                });
            }
            encoded.push(bytes);
        }
        self.records.extend(encoded);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.records.len() as u64
    }

    fn read_range(&self, from: u64, to: u64) -> Result<Vec<R>, LogError> {
        let out_of_bounds = || LogError::RangeOutOfBounds {
            from,
            to,
            len: self.len(),
        };
        let start = usize::try_from(from).map_err(|_| out_of_bounds())?;
        let end = usize::try_from(to).map_err(|_| out_of_bounds())?;
        let slice = self.records.get(start..end).ok_or_else(out_of_bounds)?;
        slice
            .iter()
            .zip(from..)
            .map(|(bytes, index)| {
                // Only a type whose Serialize and Deserialize disagree gets here. There is no
                // file, so the position is given as the frame the record would have in a
                // `.nwlog` log, at byte offset 0.
                frame::decode_payload::<R>(bytes).map_err(|reason| LogError::Undecodable {
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
