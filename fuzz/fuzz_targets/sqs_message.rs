//! Any text as an SQS message body of the interruption queue: a message or an error, never a
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nodewright_adapters::fuzzing::parse_message(data);
});
