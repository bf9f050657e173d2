//! Any text as a scenario file (and so as Kubernetes manifests): a scenario or an error that
//! names the field, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nodewright_testkit::scenario::fuzzing::load(data);
});
