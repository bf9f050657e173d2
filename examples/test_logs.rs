//! Writes the event logs the tests replay: `cargo run --release --example test_logs -- DIR`.
//!
//! Each built-in scenario of the library runs in the simulated world over a slice of the
//! built-in catalog (nine c, m and r families, about 100 types: a log of the whole catalog
//! carries 1.1 MB of it), and its log is written to `DIR/NAME.nwlog`.
//! The policy snapshot tests (`tests/policy_snapshots.rs`) replay them under the policies of
//! `tests/policies/NAME/`. Run again when a scenario or the core's decisions change on purpose,
//! and review the snapshots' diff.
//!
//! With `--golden FILE` it writes the seed tutorial's log to FILE instead, for the format's
//! golden log (`tests/golden/`): that one is written once per format version and never again.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nodewright_adapters::eventlog::{LogHeader, LogRecord, MemoryStore};
use nodewright_core::catalog::Catalog;
use nodewright_testkit::scenario::builtin;
use nodewright_testkit::sim;

/// The scenarios of the test library.
const LIBRARY: &[&str] = &["seed-tutorial", "mixed"];
const FAMILIES: &[&str] = &["c5", "c5a", "c6a", "c7a", "m5", "m5a", "m6a", "r5", "r6a"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [flag, file] if flag == "--golden" => {
            let path = Path::new(file);
            if path.exists() {
                return Err(format!(
                    "{file} exists: a golden log is written once per format version and kept"
                )
                .into());
            }
            write_log("seed-tutorial", path)
        }
        [dir] => {
            for name in LIBRARY {
                write_log(name, &PathBuf::from(dir).join(format!("{name}.nwlog")))?;
            }
            Ok(())
        }
        _ => Err("usage: test_logs DIR | test_logs --golden FILE".into()),
    }
}

fn write_log(name: &str, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let mut scenario = builtin(name).ok_or("not a built-in scenario")??;
    scenario.catalog = Arc::new(Catalog {
        region: scenario.catalog.region.clone(),
        instance_types: scenario
            .catalog
            .instance_types
            .iter()
            .filter(|it| {
                let family = it.name.split('.').next().unwrap_or("");
                FAMILIES.contains(&family)
            })
            .cloned()
            .collect(),
        nested_virtualization: scenario.catalog.nested_virtualization.clone(),
        reservations: Vec::new(),
        ..Catalog::default()
    });
    let store: MemoryStore<LogHeader, LogRecord> =
        MemoryStore::new(LogHeader::new(scenario.config.clone(), &scenario.name));
    let (report, store) = sim::run(&scenario, store)?;
    store.write_nwlog(BufWriter::new(File::create(path)?))?;
    println!(
        "{}: {} events, {} commands, digest {}",
        path.display(),
        report.events,
        report.commands,
        report.decision_digest
    );
    Ok(())
}
