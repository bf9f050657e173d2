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

/// Runs the binary.
fn nodewright(args: &[&str]) -> std::process::Output {
    Process::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .output()
        .expect("runs")
}

fn s(path: &Path) -> String {
    path.to_str().expect("utf-8").to_string()
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
    let exported = export(&store, &out, None, None, false).expect("exports");
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
    export(&store, &all, None, None, false).expect("exports");
    let times = event_times(&all);

    let (from, until) = (20 * 60_000, 40 * 60_000);
    let cut = dir.path().join("cut.nwlog");
    let exported = export(&store, &cut, Some(from), Some(until), false).expect("exports");
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
    let err = export(&store, &out, Some(10 * 3_600_000), None, false).expect_err("after the end");
    assert!(matches!(err, ExportError::Empty(_)), "{err}");
    assert!(!out.exists());

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
    export(&store, &cut, Some(20 * 60_000), None, false).expect("exports");
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

/// Every string of the log's events, for looking for names that should be gone.
fn event_strings(log: &Path) -> String {
    let mut reader: NwlogReader<LogHeader, LogRecord, _> = NwlogReader::open(log).expect("opens");
    let mut out = String::new();
    while let Some(entry) = reader.next_entry() {
        match entry.expect("readable").record {
            LogRecord::Event(e)
                if !matches!(e.kind, nodewright_core::EventKind::CatalogUpdated(_)) =>
            {
                out.push_str(&format!("{:?}\n", e.kind));
            }
            LogRecord::Commands(cs) => out.push_str(&format!("{cs:?}\n")),
            _ => {}
        }
    }
    out
}

#[test]
fn a_redacted_export_names_no_pod_namespace_or_label_value_and_still_verifies() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, report) = store(&dir);
    let plain = dir.path().join("plain.nwlog");
    export(&store, &plain, None, None, false).expect("exports");
    let original = event_strings(&plain);
    // The mixed scenario's names and values, there before.
    let names = [
        "namespace: \"default\"",
        "namespace: \"jobs\"",
        "name: \"web-",
        "\"app\": \"web\"",
        "\"app\": \"batch\"",
        "default/",
    ];
    for name in names {
        assert!(original.contains(name), "{name} in the original");
    }

    let out = dir.path().join("redacted.nwlog");
    let exported = export(&store, &out, None, None, true).expect("exports");
    let counts = exported.redacted.expect("redacted");
    assert!(counts.namespaces >= 1 && counts.names > 10 && counts.values >= 1);
    assert_eq!(
        (exported.events, exported.commands),
        (report.events, report.commands)
    );
    let redacted = event_strings(&out);
    // (NodePool, EC2NodeClass and taint names stay: `default` and `batch` are still there.)
    for gone in names {
        assert!(
            !redacted.contains(gone),
            "{gone} is still in the redacted log"
        );
    }
    // Keys, zones and instance types stay: they are what the core decides on.
    assert!(redacted.contains("\"app\""));
    assert!(redacted.contains("us-east-1"));
    assert!(redacted.contains("ns-0001"));

    let outcome = verify_file(&out).expect("readable");
    assert_eq!(outcome.divergence, None);
    assert_eq!(outcome.events, report.events);
}

#[test]
fn a_redacted_range_that_starts_later_verifies_from_its_snapshot() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, _) = store(&dir);
    let whole = dir.path().join("whole.nwlog");
    export(&store, &whole, None, None, true).expect("exports");
    let cut = dir.path().join("cut.nwlog");
    let exported = export(&store, &cut, Some(15 * 60_000), None, true).expect("exports");
    assert!(exported.events_before > 0);
    let outcome = verify_file(&cut).expect("readable");
    assert_eq!(outcome.divergence, None);
    assert_eq!(outcome.started_at_event, Some(exported.events_before));
    // Two exports of one store give a value the same token.
    let whole_text = event_strings(&whole);
    let cut_text = event_strings(&cut);
    let token = cut_text
        .split('"')
        .find(|s| s.starts_with("name-"))
        .expect("a name token");
    assert!(whole_text.contains(token));
}

#[test]
fn the_cli_redacts_and_says_how_much() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, _) = store(&dir);
    let out = dir.path().join("redacted.nwlog");
    let done = nodewright(&["log", "export", &s(&store), "--out", &s(&out), "--redact"]);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let said = String::from_utf8_lossy(&done.stdout);
    assert!(said.contains("redacted: "), "{said}");
    assert!(
        said.contains("label and annotation values replaced by tokens"),
        "{said}"
    );
    let verified = nodewright(&["replay", &s(&out), "--verify"]);
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stdout)
    );
}

#[test]
fn a_store_a_running_controller_holds_is_read_through_it() {
    let dir = tempfile::tempdir().expect("a folder");
    let (path, report) = store(&dir);
    // The controller's process holds the store open (redb locks the file) ...
    let open: RedbStore<LogHeader, LogRecord> = RedbStore::open(&path).expect("opens");
    let out = dir.path().join("out.nwlog");
    let o = nodewright(&["log", "export", &s(&path), "--out", &s(&out)]);
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("a running controller holds this store") && stderr.contains("/log?"),
        "{stderr}"
    );
    assert!(!out.exists());
    // ... and exports through a reader sharing the open file (what `GET /log` does), while it
    // could go on appending.
    let reader = open.reader().expect("a reader");
    nodewright_replay::export::export_store(&reader, &out, None, None, false).expect("exported");
    let verified = verify_file(&out).expect("reads");
    assert!(verified.divergence.is_none());
    assert_eq!(verified.decision_digest, report.decision_digest);
}

#[test]
fn a_portable_log_given_as_a_store_is_named_for_what_it_is() {
    let dir = tempfile::tempdir().expect("a folder");
    let out = dir.path().join("out.nwlog");
    let golden = "tests/golden/v1-seed-tutorial.nwlog";
    let o = nodewright(&["log", "export", golden, "--out", &s(&out)]);
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("is a portable .nwlog log, not a controller's store")
            && stderr.contains("nodewright replay tests/golden/v1-seed-tutorial.nwlog --verify"),
        "{stderr}"
    );
    assert!(!out.exists());
}
