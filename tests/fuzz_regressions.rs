//! Every input the fuzzers (`fuzz/`, `docs/fuzzing.md`) found to crash a target is kept under
//! `fuzz/regressions/<target>/` and run here through the same function, in the normal build;
//! the seed corpora run too.

use std::path::Path;

/// The contents of every file under `fuzz/<kind>/<target>/`.
fn inputs(kind: &str, target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new("fuzz").join(kind).join(target);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("a directory entry").path();
            let bytes = std::fs::read(&path).expect("readable");
            (path.display().to_string(), bytes)
        })
        .collect();
    out.sort();
    out
}

fn run_all(target: &str, run: fn(&[u8])) -> usize {
    let mut count = 0;
    for kind in ["regressions", "corpus"] {
        for (name, bytes) in inputs(kind, target) {
            if name.ends_with(".md") {
                continue;
            }
            let outcome = std::panic::catch_unwind(|| run(&bytes));
            assert!(outcome.is_ok(), "{name} panics the {target} target");
            count += 1;
        }
    }
    count
}

#[test]
fn log_decoder_inputs_do_not_panic() {
    assert!(run_all("log_decoder", nodewright_adapters::fuzzing::read_log) > 0);
}

#[test]
fn scenario_loader_inputs_do_not_panic() {
    assert!(
        run_all(
            "scenario_loader",
            nodewright_testkit::scenario::fuzzing::load
        ) > 0
    );
}

#[test]
fn sqs_message_inputs_do_not_panic() {
    assert!(run_all("sqs_message", nodewright_adapters::fuzzing::parse_message) > 0);
}
