//! Crash-safety: the controller is stopped right after an event is appended to the log, before
//! it is handled, and restarted from the log. At every such boundary the restarted controller
//! must decide exactly what the uninterrupted one did: no event lost, no instance launched
//! twice, no orphan left, the same final state. With snapshots every few events, the restart
//! starts from the newest one and must decide the same.
//!
//! Stopped instead before the event is appended, the controller loses it and everything in
//! flight with it: the restart re-lists the world and asks again for missing results, and the
//! run must still end clean (no invariant broken, the core's view equal to the cluster).

use std::path::Path;

use nodewright_adapters::eventlog::{EventStore, LogHeader, LogRecord, MemoryStore};
use nodewright_core::model::listing;
use nodewright_core::model::nodeclaim::ListedInstance;
use nodewright_core::{Event, EventKind};
use nodewright_testkit::scenario::{Scenario, builtin, load_file};
use nodewright_testkit::sim::{Crash, RunOptions};
use nodewright_testkit::{Report, sim};

fn store(scenario: &Scenario) -> MemoryStore<LogHeader, LogRecord> {
    MemoryStore::new(LogHeader::new(scenario.config.clone(), &scenario.name))
}

/// The records of a run, snapshots left out (they are a cache: a restart moves them), and
/// each instance listing whole: a listing is logged as what changed since the one before, and
/// a restart's re-list is one more before it.
fn run(scenario: &Scenario, options: RunOptions) -> (Report, Vec<LogRecord>) {
    let (report, store) =
        sim::run_with(scenario, store(scenario), options).expect("the run completes");
    let mut last: Vec<ListedInstance> = Vec::new();
    let records = store
        .read_range(0, store.len())
        .expect("records")
        .into_iter()
        .filter(|r| !matches!(r, LogRecord::Snapshot(_) | LogRecord::SnapshotPart(_)))
        .map(|record| match record {
            LogRecord::Event(Event {
                at_ms,
                kind: EventKind::InstancesRelisted { changed, gone },
            }) => {
                last = listing::rebuild(&last, &changed, &gone);
                LogRecord::Event(Event::new(
                    at_ms,
                    EventKind::InstancesListed {
                        instances: last.clone().into(),
                    },
                ))
            }
            LogRecord::Event(Event {
                kind: EventKind::InstancesListed { instances },
                at_ms,
            }) => {
                last = instances.to_vec();
                LogRecord::Event(Event::new(at_ms, EventKind::InstancesListed { instances }))
            }
            other => other,
        })
        .collect();
    (report, records)
}

fn options(crash: Crash, snapshot_every: u64) -> RunOptions {
    RunOptions {
        crash,
        snapshot_every,
        ..RunOptions::default()
    }
}

/// Runs the scenario once uninterrupted, then once per boundary in `boundaries`, and compares.
fn crash_everywhere(
    scenario: &Scenario,
    boundaries: impl Iterator<Item = u64>,
    snapshot_every: u64,
) -> usize {
    let (baseline, baseline_log) = run(scenario, options(Crash::Never, snapshot_every));
    assert!(baseline.passed(), "{}", baseline.summary());
    let baseline_json = serde_json::to_value(&baseline).expect("json");
    let mut runs = 0;
    for k in boundaries.take_while(|k| *k < baseline.events) {
        let (report, log) = run(scenario, options(Crash::AfterAppend(k), snapshot_every));
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
    let runs = crash_everywhere(&scenario, 0..u64::MAX, 0);
    assert!(runs >= 30, "{runs} boundaries");
}

#[test]
fn the_seed_tutorial_restarted_from_snapshots_decides_the_same() {
    let scenario = builtin("seed-tutorial").expect("built in").expect("loads");
    // A snapshot every 7 events: most boundaries restart from one, a few from the start.
    let runs = crash_everywhere(&scenario, 0..u64::MAX, 7);
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
    let runs = crash_everywhere(&scenario, (0..u64::MAX).step_by(stride.max(1) as usize), 64);
    assert!(runs >= 25, "{runs} boundaries");
}

/// Loses the event at each boundary in `boundaries` and all in flight with it; the run must end
/// clean and place every pod the uninterrupted run placed.
fn lose_in_flight_everywhere(scenario: &Scenario, boundaries: impl Iterator<Item = u64>) -> usize {
    let (baseline, _) = run(scenario, options(Crash::Never, 0));
    let mut runs = 0;
    for k in boundaries.take_while(|k| *k < baseline.events) {
        let (report, _) = run(scenario, options(Crash::BeforeAppend(k), 16));
        runs += 1;
        assert!(
            report.invariant_violations.is_empty(),
            "events lost at {k}: {:?}",
            report.invariant_violations
        );
        assert!(report.passed(), "events lost at {k}: {}", report.summary());
        assert_eq!(
            report.pods.never_scheduled,
            baseline.pods.never_scheduled,
            "events lost at {k}: {}",
            report.summary()
        );
        assert_eq!(
            report.nodes.final_count,
            baseline.nodes.final_count,
            "events lost at {k}: {}",
            report.summary()
        );
    }
    runs
}

#[test]
fn the_seed_tutorial_recovers_from_losing_the_events_in_flight_at_every_boundary() {
    let scenario = builtin("seed-tutorial").expect("built in").expect("loads");
    let runs = lose_in_flight_everywhere(&scenario, 0..u64::MAX);
    assert!(runs >= 30, "{runs} boundaries");
}

#[test]
fn a_faulty_cloud_recovers_from_losing_the_events_in_flight() {
    // Throttling, capacity errors and interruptions: lost launch results, lost failures and
    // lost interruption messages (which the queue delivers again).
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/cloud-faults.yaml");
    let scenario = load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let runs = lose_in_flight_everywhere(&scenario, (0..u64::MAX).step_by(5));
    assert!(runs >= 20, "{runs} boundaries");
}
