//! `nodewright log export`: a time range of the controller's store as a `.nwlog` that replays
//! on its own.

use std::path::{Path, PathBuf};
use std::process::Command as Process;

use nodewright_adapters::eventlog::{LogHeader, LogRecord, NwlogReader, RedbStore};
use nodewright_replay::export::{ExportError, export};
use nodewright_replay::{Subject, explain_file, verify_file};
use nodewright_testkit::scenario::builtin;
use nodewright_testkit::{Report, sim};

/// The `mixed` scenario run into a redb store, as the controller keeps its log.
fn store(dir: &tempfile::TempDir) -> (PathBuf, Report) {
    let scenario = builtin("mixed").expect("built in").expect("loads");
    let path = dir.path().join("events.redb");
    let store: RedbStore<LogHeader, LogRecord> = RedbStore::create(
        &path,
        &LogHeader::new(scenario.config.clone(), &scenario.name),
    )
    .expect("a store");
    let (report, store) = sim::run(&scenario, store).expect("runs");
    drop(store);
    (path, report)
}

/// The events of a log, with their times.
fn event_times(log: &Path) -> Vec<u64> {
    let mut reader: NwlogReader<LogHeader, LogRecord, _> = NwlogReader::open(log).expect("opens");
    let mut out = Vec::new();
    while let Some(entry) = reader.next_entry() {
        if let LogRecord::Event(e) = entry.expect("readable").record {
            out.push(e.at_ms);
        }
    }
    out
}

#[test]
fn the_whole_store_exports_to_a_log_that_verifies_to_the_same_digest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, report) = store(&dir);
    let out = dir.path().join("all.nwlog");
    let exported = export(&store, &out, None, None).expect("exports");
    assert_eq!(exported.events_before, 0);
    assert_eq!(
        (exported.events, exported.commands),
        (report.events, report.commands)
    );
    let outcome = verify_file(&out).expect("readable");
    assert_eq!(outcome.divergence, None);
    assert_eq!(outcome.started_at_event, None);
    assert_eq!(outcome.decision_digest, report.decision_digest);
}

#[test]
fn a_range_that_starts_later_starts_from_a_snapshot_and_verifies() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, report) = store(&dir);
    let all = dir.path().join("all.nwlog");
    export(&store, &all, None, None).expect("exports");
    let times = event_times(&all);

    let (from, until) = (20 * 60_000, 40 * 60_000);
    let cut = dir.path().join("cut.nwlog");
    let exported = export(&store, &cut, Some(from), Some(until)).expect("exports");
    let before = times.iter().filter(|t| **t < from).count() as u64;
    let inside = times.iter().filter(|t| (from..until).contains(*t)).count() as u64;
    assert_eq!((exported.events_before, exported.events), (before, inside));
    assert!(exported.commands > 0, "the range holds decisions");

    // The catalog event, then the snapshot, then the range.
    let cut_times = event_times(&cut);
    assert_eq!(cut_times.len() as u64, inside + 1);
    assert!(cut_times[1..].iter().all(|t| (from..until).contains(t)));

    let outcome = verify_file(&cut).expect("readable");
    assert_eq!(outcome.divergence, None, "{outcome:?}");
    assert_eq!(outcome.started_at_event, Some(before));
    assert_eq!(outcome.events, inside);
    assert!(report.events > inside);

    // Explained with the original indexes: the first command of the range.
    let first_command = report.commands - exported.commands - count_after(&all, until);
    let story = explain_file(&cut, &Subject::Command(first_command)).expect("a story");
    assert_eq!(story.lines[0].source, format!("command #{first_command}"));
}

/// Commands of the events at or after `until`.
fn count_after(log: &Path, until: u64) -> u64 {
    let mut reader: NwlogReader<LogHeader, LogRecord, _> = NwlogReader::open(log).expect("opens");
    let (mut after, mut n) = (false, 0);
    while let Some(entry) = reader.next_entry() {
        match entry.expect("readable").record {
            LogRecord::Event(e) => after = e.at_ms >= until,
            LogRecord::Commands(cs) if after => n += cs.len() as u64,
            _ => {}
        }
    }
    n
}

#[test]
fn an_empty_range_and_bad_times_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, _) = store(&dir);
    let out = dir.path().join("none.nwlog");
    let err = export(&store, &out, Some(10 * 3_600_000), None).expect_err("after the end");
    assert!(matches!(err, ExportError::Empty(_)), "{err}");
    assert!(!out.exists());

    let nodewright = |args: &[&str]| {
        Process::new(env!("CARGO_BIN_EXE_nodewright"))
            .args(args)
            .output()
            .expect("runs")
    };
    let s = |p: &Path| p.to_str().expect("utf-8").to_string();
    let bad = nodewright(&[
        "log",
        "export",
        &s(&store),
        "--out",
        &s(&out),
        "--from",
        "soon",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--from \"soon\""));
    let backwards = nodewright(&[
        "log",
        "export",
        &s(&store),
        "--out",
        &s(&out),
        "--from",
        "30m",
        "--until",
        "10m",
    ]);
    assert_eq!(backwards.status.code(), Some(2));
    let ok = nodewright(&[
        "log",
        "export",
        &s(&store),
        "--out",
        &s(&out),
        "--from",
        "20m",
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("starting from a snapshot"));
    let verified = nodewright(&["replay", &s(&out), "--verify"]);
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stdout)
    );
    assert!(String::from_utf8_lossy(&verified.stdout).contains("the log starts at event "));
}

#[test]
fn a_what_if_refuses_a_cut_log_and_says_why() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, _) = store(&dir);
    let cut = dir.path().join("cut.nwlog");
    export(&store, &cut, Some(20 * 60_000), None).expect("exports");
    let recording = nodewright_testkit::whatif::Recording::read(&cut).expect("reads");
    let policy = nodewright_testkit::whatif::Policy::load(Path::new(
        "tests/policies/mixed/longer-batches.yaml",
    ))
    .expect("a policy");
    let err = nodewright_testkit::whatif::what_if(&recording, &policy).expect_err("cut");
    assert!(
        err.to_string()
            .contains("needs the workload from the start"),
        "{err}"
    );
}
