//! `replay --verify --jobs N`: a log cut at its snapshots and checked part by part, side by
//! side, says exactly what one check from the start says — when it replays, when a command
//! differs (in any part, its context running across parts), when the last commands are
//! missing, when a snapshot differs from the replayed core, when the file is cut short, when a
//! record after a divergence does not decode.

use std::path::Path;
use std::process::Command as Process;

use nodewright_adapters::eventlog::{LogHeader, LogRecord, NwlogWriter, Snapshot};
use nodewright_core::Command;
use nodewright_replay::{VerifyOutcome, verify_file, verify_file_in_parts};
use nodewright_testkit::scenario::builtin;
use nodewright_testkit::sim::{self, RunOptions};

/// The records of the `mixed` scenario's log, snapshotted every 16 events (many parts).
fn mixed_records() -> (LogHeader, Vec<LogRecord>) {
    let scenario = builtin("mixed").expect("built in").expect("loads");
    let options = RunOptions {
        snapshot_every: 16,
        ..RunOptions::default()
    };
    sim::logged_records(&scenario, options).expect("runs and reads back")
}

fn write(path: &Path, header: &LogHeader, records: &[LogRecord]) {
    let mut writer = NwlogWriter::<LogHeader, LogRecord>::create(path, header).expect("creates");
    writer.append(records).expect("writes");
}

/// What an outcome says, in short: its counts, digest, and where it diverged with the
/// indexes of the events around.
fn gist(outcome: &Result<VerifyOutcome, String>) -> String {
    match outcome {
        Err(e) => format!("error: {e}"),
        Ok(o) => format!(
            "{} events from {:?}, {} commands, digest {}, divergence {:?}, snapshots {} (differs {:?})",
            o.events,
            o.started_at_event,
            o.commands,
            o.decision_digest,
            o.divergence.as_ref().map(|d| (
                d.event_index,
                d.before.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
                d.after.iter().map(|(i, _)| *i).collect::<Vec<_>>()
            )),
            o.snapshots_checked,
            o.snapshot_divergence
        ),
    }
}

/// One check from the start, and the checks in parts with 2, 3 and 8 threads: all the same.
fn same_in_parts(log: &Path) -> Result<VerifyOutcome, String> {
    let whole = verify_file(log).map_err(|e| e.to_string());
    for jobs in [2, 3, 8] {
        let parts = verify_file_in_parts(log, jobs, |_| {}).map_err(|e| e.to_string());
        assert_eq!(gist(&parts), gist(&whole), "{jobs} threads");
        assert!(
            parts == whole,
            "{jobs} threads: the same in short, not in full"
        );
    }
    whole
}

fn launch_records(records: &[LogRecord]) -> Vec<usize> {
    records
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            matches!(r, LogRecord::Commands(cs) if cs.iter().any(|c| matches!(c, Command::LaunchNodeClaim { .. })))
        })
        .map(|(i, _)| i)
        .collect()
}

fn edit_launch(record: &mut LogRecord) {
    let LogRecord::Commands(commands) = record else {
        unreachable!("a commands record")
    };
    for c in commands.iter_mut() {
        if let Command::LaunchNodeClaim { nodeclaim, .. } = c {
            nodeclaim.name.push_str("-edited");
        }
    }
}

#[test]
fn a_log_that_replays_replays_in_parts_with_the_same_digest() {
    let (header, records) = mixed_records();
    let snapshots = records
        .iter()
        .filter(|r| matches!(r, LogRecord::Snapshot(_)))
        .count();
    assert!(
        snapshots >= 8,
        "{snapshots} snapshots: the log is cut in many parts"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("mixed.nwlog");
    write(&log, &header, &records);
    let outcome = same_in_parts(&log).expect("readable");
    assert!(outcome.divergence.is_none(), "{outcome:?}");
    assert_eq!(outcome.snapshots_checked, snapshots as u64);
    assert_eq!(outcome.snapshot_divergence, None);
}

#[test]
fn a_changed_command_in_any_part_is_found_with_the_events_around_it() {
    let (header, records) = mixed_records();
    let dir = tempfile::tempdir().expect("temp dir");
    let launches = launch_records(&records);
    // Early, late, and those right before a snapshot (their following events are in the next
    // part).
    let mut edits = vec![
        launches[0],
        launches[launches.len() / 2],
        launches[launches.len() - 1],
    ];
    edits.extend(
        launches
            .iter()
            .copied()
            .filter(|&i| {
                records[i + 1..]
                    .iter()
                    .take(3)
                    .any(|r| matches!(r, LogRecord::Snapshot(_)))
            })
            .take(3),
    );
    assert!(
        edits.len() >= 4,
        "launches right before a snapshot: {edits:?}"
    );
    for at in edits {
        let mut edited = records.clone();
        edit_launch(&mut edited[at]);
        let log = dir.path().join(format!("edited-{at}.nwlog"));
        write(&log, &header, &edited);
        let outcome = same_in_parts(&log).expect("readable");
        let d = outcome.divergence.expect("the edit is found");
        assert_eq!(d.before.len(), 3, "record {at}: {d:?}");
        assert!(!d.after.is_empty(), "record {at}: {d:?}");
    }
}

/// Replaces record `at` of the log at `path` with a sound frame whose record says one command,
/// then bytes that are none (it reads as commands, and does not decode).
fn damage_record(path: &Path, at: usize) {
    let mut reader =
        nodewright_adapters::eventlog::NwlogReader::<LogHeader, LogRecord, _>::open(path)
            .expect("opens");
    let mut offsets = Vec::new();
    loop {
        offsets.push(reader.next_byte_offset());
        if reader.next_entry().is_none() {
            break;
        }
    }
    let (start, end) = (offsets[at] as usize, offsets[at + 1] as usize);
    let mut frame = Vec::new();
    nodewright_adapters::eventlog::frame::encode_frame(&[1, 1, 0xff, 0xff, 0xff], &mut frame)
        .expect("a frame");
    let mut bytes = std::fs::read(path).expect("written");
    bytes.splice(start..end, frame);
    std::fs::write(path, bytes).expect("rewritten");
}

#[test]
fn the_events_after_a_divergence_stop_at_a_record_that_does_not_decode() {
    let (header, records) = mixed_records();
    let is_event = |r: &LogRecord| matches!(r, LogRecord::Event(_));
    let is_snapshot =
        |r: &LogRecord| matches!(r, LogRecord::Snapshot(_) | LogRecord::SnapshotPart(_));
    // A launch, then events in the same part: the launch edited and its second event
    // replaced by a record that reads as commands and does not decode, one check from the start
    // shows the one event after the divergence and stops reading at the damage.
    let (launch, damaged) = launch_records(&records)
        .into_iter()
        .find(|&at| {
            let rest = records[at + 1..].iter().take_while(|r| !is_snapshot(r));
            records.len() > at + 2
                && is_event(&records[at + 1])
                && is_event(&records[at + 2])
                && rest.filter(|r| is_event(r)).count() >= 4
        })
        .map(|at| (at, at + 2))
        .expect("a launch followed by events in its part");
    let mut edited = records.clone();
    edit_launch(&mut edited[launch]);
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("damaged-after.nwlog");
    write(&log, &header, &edited);
    damage_record(&log, damaged);
    let outcome = same_in_parts(&log).expect("the divergence comes first");
    let d = outcome.divergence.expect("the edit is found");
    assert_eq!(d.after.len(), 1, "{d:?}");
}

#[test]
fn a_dropped_last_command_record_is_found_in_parts_too() {
    let (header, mut records) = mixed_records();
    let last = records
        .iter()
        .rposition(|r| matches!(r, LogRecord::Commands(_)))
        .expect("commands");
    records.remove(last);
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("dropped.nwlog");
    write(&log, &header, &records);
    let outcome = same_in_parts(&log).expect("readable");
    assert!(outcome.divergence.is_some(), "{outcome:?}");
}

#[test]
fn a_snapshot_that_differs_from_the_replayed_core_reads_as_in_one_check() {
    let (header, mut records) = mixed_records();
    let whole: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r, LogRecord::Snapshot(s) if s.parts == 0))
        .map(|(i, _)| i)
        .collect();
    assert!(whole.len() >= 4, "snapshots in one record: {whole:?}");
    // The third snapshot holds the second's core: it restores, but is not the replayed state.
    let LogRecord::Snapshot(second) = records[whole[1]].clone() else {
        unreachable!("a snapshot")
    };
    let LogRecord::Snapshot(third) = &mut records[whole[2]] else {
        unreachable!("a snapshot")
    };
    third.core = second.core.clone();
    assert_eq!(third.producer, Snapshot::this_producer());
    let events = third.events;
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("snapshot.nwlog");
    write(&log, &header, &records);
    let outcome = same_in_parts(&log).expect("readable");
    assert_eq!(outcome.snapshot_divergence, Some(events), "{outcome:?}");
}

#[test]
fn a_log_cut_short_is_the_same_error_or_the_same_divergence_before_it() {
    let (header, mut records) = mixed_records();
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("whole.nwlog");
    write(&log, &header, &records);
    let bytes = std::fs::read(&log).expect("reads");
    // Cut in the middle of a frame, two thirds in.
    let cut = dir.path().join("cut.nwlog");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).expect("writes");
    let error = same_in_parts(&cut).expect_err("a log cut short");
    assert!(!error.is_empty());
    // With a changed command before the cut, the divergence is what is reported.
    let at = launch_records(&records)[1];
    edit_launch(&mut records[at]);
    let edited = dir.path().join("edited.nwlog");
    write(&edited, &header, &records);
    let bytes = std::fs::read(&edited).expect("reads");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).expect("writes");
    let outcome = same_in_parts(&cut).expect("the divergence comes first");
    assert!(outcome.divergence.is_some(), "{outcome:?}");
}

#[test]
fn the_command_line_says_the_same_with_any_number_of_jobs() {
    let (header, mut records) = mixed_records();
    let at = launch_records(&records)[2];
    edit_launch(&mut records[at]);
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("edited.nwlog");
    write(&log, &header, &records);
    let said = |jobs: &str| {
        let run = Process::new(env!("CARGO_BIN_EXE_nodewright"))
            .args([
                "replay",
                log.to_str().expect("utf-8"),
                "--verify",
                "--jobs",
                jobs,
            ])
            .output()
            .expect("runs");
        (
            run.status.code(),
            String::from_utf8_lossy(&run.stdout).into_owned(),
        )
    };
    let one = said("1");
    assert_eq!(one.0, Some(1), "{}", one.1);
    assert!(one.1.contains("DIVERGENCE at event"), "{}", one.1);
    assert_eq!(said("4"), one);
    let refused = Process::new(env!("CARGO_BIN_EXE_nodewright"))
        .args([
            "replay",
            log.to_str().expect("utf-8"),
            "--verify",
            "--jobs",
            "0",
        ])
        .output()
        .expect("runs");
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--jobs"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}
