//! An event store that keeps nothing: for a run whose log nobody reads (`simulate` asked for no
//! `--log` and no `--store`). It numbers the records as a store does, so the driver's indexes
//! (a snapshot's catalog record, the next record) stay what they would be, but it neither
//! encodes nor keeps them: on the default trace that was a tenth of a simulation's time and a
//! log's worth of memory, for bytes that were dropped at the end. Reading a record back is an
//! error that says so; only a restart reads, and a run that keeps no log never restarts.

use super::EventStore;
use super::error::LogError;

/// An [`EventStore`] that counts its records and keeps none of them.
#[derive(Debug, Clone)]
pub struct DiscardStore<H> {
    header: H,
    len: u64,
}

impl<H> DiscardStore<H> {
    /// An empty store with `header`.
    pub fn new(header: H) -> Self {
        DiscardStore { header, len: 0 }
    }
}

impl<H, R> EventStore<H, R> for DiscardStore<H> {
    fn header(&self) -> &H {
        &self.header
    }

    fn append(&mut self, records: &[R]) -> Result<(), LogError> {
        self.len += records.len() as u64;
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_range(&self, from: u64, to: u64) -> Result<Vec<R>, LogError> {
        if from > to || to > self.len {
            return Err(LogError::RangeOutOfBounds {
                from,
                to,
                len: self.len,
            });
        }
        if from == to {
            return Ok(Vec::new());
        }
        Err(LogError::NotKept { from, to })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eventlog::{LogHeader, LogRecord};
    use nodewright_core::config::Config;

    #[test]
    fn it_numbers_the_records_and_keeps_none() {
        let mut discard = DiscardStore::new(LogHeader::new(Config::default(), "test"));
        let store: &mut dyn EventStore<LogHeader, LogRecord> = &mut discard;
        let records = vec![LogRecord::SnapshotPart(vec![1, 2, 3]); 3];
        store.append(&records).unwrap();
        store.append(&records[..1]).unwrap();
        assert_eq!(store.len(), 4);
        let read = store.read_range(1, 2);
        assert!(matches!(read, Err(LogError::NotKept { from: 1, to: 2 })));
        let message = read.unwrap_err().to_string();
        assert!(message.contains("kept no log"), "{message}");
        assert!(store.read_range(4, 4).unwrap().is_empty());
        let beyond = store.read_range(2, 5);
        assert!(matches!(
            beyond,
            Err(LogError::RangeOutOfBounds { len: 4, .. })
        ));
    }
}
