//! What the scenario-loader fuzz target (`fuzz/`) runs, here so that the inputs a fuzzer found
//! are also regression tests of the normal build (`tests/fuzz_regressions.rs`).

use super::{ManifestFiles, ScenarioError, load_str};

/// No file can be read: a `file:` manifest is an error like any other.
struct NoFiles;

impl ManifestFiles for NoFiles {
    fn read(&self, relative: &str) -> Result<(String, String), ScenarioError> {
        Err(ScenarioError::Io {
            file: relative.to_string(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no files when fuzzing"),
        })
    }
}

/// Loads `data` as a scenario file: a scenario or an error, never a panic.
pub fn load(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = load_str(text, "fuzz.yaml", &NoFiles);
    }
}
