//! `replay --verify` on a log whose recorded commands were changed: the first differing event,
//! both command lists, and the events around it.

use std::path::Path;
use std::process::Command as Process;

use nodewright_adapters::eventlog::{LogError, LogHeader, LogRecord, NwlogWriter};
use nodewright_core::Command;
use nodewright_replay::verify_file;
use nodewright_testkit::scenario::builtin;
use nodewright_testkit::sim;

/// The records of the `mixed` scenario's log.
fn mixed_records() -> (LogHeader, Vec<LogRecord>) {
    let scenario = builtin("mixed").expect("built in").expect("loads");
    sim::logged_records(&scenario, sim::RunOptions::default()).expect("runs and reads back")
}

/// The events' indexes of the records: `Some(i)` for the i-th event.
fn event_indexes(records: &[LogRecord]) -> Vec<Option<u64>> {
    let mut next = 0;
    records
        .iter()
        .map(|r| match r {
            LogRecord::Event(_) => {
                next += 1;
                Some(next - 1)
            }
            _ => None,
        })
        .collect()
}

fn write(path: &Path, header: &LogHeader, records: &[LogRecord]) {
    let mut writer = NwlogWriter::<LogHeader, LogRecord>::create(path, header).expect("creates");
    writer.append(records).expect("writes");
}

#[test]
fn a_changed_command_is_found_at_its_event_with_the_events_around_it() {
    let (header, mut records) = mixed_records();
    let indexes = event_indexes(&records);
    // The tenth record of commands that launches a machine: its NodeClaim is renamed.
    let (at, _) = records
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            matches!(r, LogRecord::Commands(cs) if cs.iter().any(|c| matches!(c, Command::LaunchNodeClaim { .. })))
        })
        .nth(9)
        .expect("ten launches");
    let LogRecord::Commands(commands) = &mut records[at] else {
        unreachable!("a commands record")
    };
    let original = commands.clone();
    for c in commands.iter_mut() {
        if let Command::LaunchNodeClaim { nodeclaim, .. } = c {
            nodeclaim.name.push_str("-edited");
        }
    }
    let event_index = indexes[..at]
        .iter()
        .rev()
        .find_map(|i| *i)
        .expect("an event before its commands");

    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("edited.nwlog");
    write(&log, &header, &records);
    let outcome = verify_file(&log).expect("readable");
    let d = outcome.divergence.expect("the edit is found");
    assert_eq!(d.event_index, event_index);
    assert_eq!(
        d.replayed, original,
        "the core gives what was recorded before the edit"
    );
    assert_ne!(d.recorded, original);
    assert_eq!(
        d.before.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        vec![event_index - 3, event_index - 2, event_index - 1]
    );
    assert_eq!(
        d.after.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        vec![event_index + 1, event_index + 2, event_index + 3]
    );

    let run = Process::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(["replay", log.to_str().expect("utf-8"), "--verify"])
        .output()
        .expect("runs");
    assert_eq!(run.status.code(), Some(1));
    let said = String::from_utf8_lossy(&run.stdout);
    assert!(
        said.contains(&format!("DIVERGENCE at event {event_index} ")),
        "{said}"
    );
    assert!(said.contains("-edited"), "{said}");
    assert_eq!(said.matches("  before: event ").count(), 3, "{said}");
    assert_eq!(said.matches("  after: event ").count(), 3, "{said}");
}

#[test]
fn a_dropped_command_record_is_found_at_the_last_event() {
    let (header, mut records) = mixed_records();
    let indexes = event_indexes(&records);
    let last_commands = records
        .iter()
        .rposition(|r| matches!(r, LogRecord::Commands(_)))
        .expect("commands");
    let event_index = indexes[..last_commands]
        .iter()
        .rev()
        .find_map(|i| *i)
        .expect("an event before");
    let dropped = records.remove(last_commands);
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("dropped.nwlog");
    write(&log, &header, &records);
    let d = verify_file(&log)
        .expect("readable")
        .divergence
        .expect("found");
    assert_eq!(d.event_index, event_index);
    assert!(d.recorded.is_empty());
    let LogRecord::Commands(dropped) = dropped else {
        unreachable!("a commands record")
    };
    assert_eq!(d.replayed, dropped);
    // Whatever follows it in the log (at most three events).
    assert!(d.after.len() <= 3);
    assert!(
        d.after
            .iter()
            .enumerate()
            .all(|(k, (i, _))| *i == event_index + 1 + k as u64)
    );
}

#[test]
fn recorded_commands_that_do_not_decode_are_named_by_their_frame() {
    let (header, records) = mixed_records();
    let last_commands = records
        .iter()
        .rposition(|r| matches!(r, LogRecord::Commands(_)))
        .expect("commands");
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("damaged.nwlog");
    write(&log, &header, &records[..last_commands]);
    // A sound frame in its place whose record says one command, then bytes that are none:
    // the replay compares commands by their bytes and must decode these to report them.
    let mut frame = Vec::new();
    nodewright_adapters::eventlog::frame::encode_frame(&[1, 1, 0xff, 0xff, 0xff], &mut frame)
        .expect("a frame");
    let mut bytes = std::fs::read(&log).expect("written");
    let offset = bytes.len() as u64;
    bytes.extend_from_slice(&frame);
    std::fs::write(&log, bytes).expect("rewritten");
    let error = verify_file(&log).expect_err("a record that does not decode");
    match error {
        nodewright_replay::ReplayError::Log(LogError::Undecodable {
            frame_index,
            byte_offset,
            intact_records,
            ..
        }) => {
            assert_eq!(frame_index, last_commands as u64 + 1);
            assert_eq!(byte_offset, offset);
            assert_eq!(intact_records, last_commands as u64);
        }
        other => panic!("expected the frame named, got {other}"),
    }
}
