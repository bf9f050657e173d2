//! What the scenario-loader fuzz target (`fuzz/`) runs, here so that the inputs a fuzzer found
//! are also regression tests of the normal build (`tests/fuzz_regressions.rs`).

use super::{NoFiles, load_str};

/// Loads `data` as a scenario file: a scenario or an error, never a panic.
pub fn load(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = load_str(text, "fuzz.yaml", &NoFiles);
    }
}
