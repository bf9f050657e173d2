//! Any bytes as a `.nwlog` log: every outcome is a record or an error, never a panic, and a
//! reader stops after its first error.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nodewright_adapters::fuzzing::read_log(data);
});
