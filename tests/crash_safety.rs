//! Crash-safety: the controller is stopped right after an event is appended to the log, before
//! it is handled, and restarted from the log. At every such boundary the restarted controller
//! must decide exactly what the uninterrupted one did: no event lost, no instance launched
//! twice, no orphan left, the same final state.

use std::path::Path;

use nodewright_adapters::eventlog::{EventStore, LogHeader, LogRecord, MemoryStore};
use nodewright_testkit::scenario::{Scenario, builtin, load_file};
use nodewright_testkit::{Report, sim};

fn store(scenario: &Scenario) -> MemoryStore<LogHeader, LogRecord> {
    MemoryStore::new(LogHeader::new(scenario.config.clone(), &scenario.name))
}

fn run(scenario: &Scenario, crash_at: Option<u64>) -> (Report, Vec<LogRecord>) {
    let (report, store) =
        sim::run_with_crash(scenario, store(scenario), crash_at).expect("the run completes");
    let records = store.read_range(0, store.len()).expect("records");
    (report, records)
}

/// Runs the scenario once uninterrupted, then once per boundary in `boundaries`, and compares.
fn crash_everywhere(scenario: &Scenario, boundaries: impl Iterator<Item = u64>) -> usize {
    let (baseline, baseline_log) = run(scenario, None);
    assert!(baseline.passed(), "{}", baseline.summary());
    let baseline_json = serde_json::to_value(&baseline).expect("json");
    let mut runs = 0;
    for k in boundaries.take_while(|k| *k < baseline.events) {
        let (report, log) = run(scenario, Some(k));
        runs += 1;
        assert!(
            report.invariant_violations.is_empty(),
            "crash at event {k}: {:?}",
            report.invariant_violations
        );
        // No event lost: the uninterrupted run's records all appear, in order. (A restart asks
        // again for what it cannot know was answered, so the world may answer twice: an
        // eviction refused again, say.)
        assert!(
            is_subsequence(&baseline_log, &log),
            "crash at event {k}: a record of the uninterrupted run is missing"
        );
        // The same decisions (the digest), the same machines (none launched twice), the same
        // pods, the same costs.
        let json = comparable(serde_json::to_value(&report).expect("json"));
        assert_eq!(
            json,
            comparable(baseline_json.clone()),
            "crash at event {k}: the outcome differs"
        );
    }
    runs
}

/// Whether `short` appears in `long` in order (not necessarily contiguous).
fn is_subsequence(short: &[LogRecord], long: &[LogRecord]) -> bool {
    let mut rest = long.iter();
    short.iter().all(|r| rest.any(|l| l == r))
}

/// The report without what counts records and answers rather than outcomes.
fn comparable(mut report: serde_json::Value) -> serde_json::Value {
    if let Some(map) = report.as_object_mut() {
        map.remove("events");
        map.remove("commands");
    }
    if let Some(d) = report
        .get_mut("disruptions")
        .and_then(|d| d.as_object_mut())
    {
        d.remove("refused_evictions");
    }
    report
}

#[test]
fn the_seed_tutorial_survives_a_crash_at_every_event_boundary() {
    let scenario = builtin("seed-tutorial").expect("built in").expect("loads");
    let runs = crash_everywhere(&scenario, 0..u64::MAX);
    assert!(runs >= 30, "{runs} boundaries");
}

#[test]
fn a_two_hundred_pod_run_survives_crashes_at_its_event_boundaries() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/crash-recovery.yaml");
    let scenario = load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    // Every boundary with NODEWRIGHT_CRASH_EVERY=1; by default every 32nd (about 30 runs).
    let stride: u64 = std::env::var("NODEWRIGHT_CRASH_EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    let runs = crash_everywhere(&scenario, (0..u64::MAX).step_by(stride.max(1) as usize));
    assert!(runs >= 25, "{runs} boundaries");
}
