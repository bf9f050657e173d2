//! What the fuzz targets (`fuzz/`) run, here so that the inputs a fuzzer found are also
//! regression tests of the normal build (`tests/fuzz_regressions.rs`). Each takes any bytes and
//! must return, never panic.

use crate::eventlog::{LogHeader, LogRecord, NwlogReader};

/// Reads `data` as a `.nwlog` log to its end or its first error.
pub fn read_log(data: &[u8]) {
    let Ok(mut reader) = NwlogReader::<LogHeader, LogRecord, _>::new(data) else {
        return;
    };
    while let Some(entry) = reader.next_entry() {
        if entry.is_err() {
            // A reader stops at its first error: nothing after it is read.
            assert!(
                reader.next_entry().is_none(),
                "a reader goes on after an error"
            );
            return;
        }
    }
}

/// Parses `data` as an interruption queue's message body.
pub fn parse_message(data: &[u8]) {
    if let Ok(body) = std::str::from_utf8(data) {
        let _ = crate::eventbridge::parse(body);
    }
}
