//! `nodewright explain`: the story of a pod, a node and a command, told from the tutorial's log.

use std::path::{Path, PathBuf};
use std::process::Command as Process;

use nodewright_adapters::eventlog::{LogHeader, LogRecord, NwlogReader};
use nodewright_core::Command;
use nodewright_replay::explain::ExplainError;
use nodewright_replay::{Story, Subject, explain_file};

/// The tutorial's log, written by the binary.
fn tutorial_log(dir: &tempfile::TempDir) -> PathBuf {
    let log = dir.path().join("tutorial.nwlog");
    let out = Process::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(["simulate", "--log", log.to_str().expect("utf-8 path")])
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    log
}

/// The log's commands, in order.
fn commands(log: &Path) -> Vec<Command> {
    let mut reader: NwlogReader<LogHeader, LogRecord, _> =
        NwlogReader::open(log).expect("the log opens");
    let mut out = Vec::new();
    while let Some(entry) = reader.next_entry() {
        if let LogRecord::Commands(cs) = entry.expect("readable").record {
            out.extend(cs);
        }
    }
    out
}

fn texts(story: &Story) -> Vec<String> {
    story.lines.iter().map(|l| l.text.clone()).collect()
}

#[test]
fn a_pods_story_goes_from_pending_to_the_machine_launched_for_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = tutorial_log(&dir);
    let (claim, pods) = commands(&log)
        .into_iter()
        .find_map(|c| match c {
            Command::LaunchNodeClaim { nodeclaim, reason } => Some((nodeclaim.name, reason.pods)),
            _ => None,
        })
        .expect("the tutorial launches a machine");
    let pod = &pods[0];
    let story = explain_file(&log, &Subject::pod(&pod.to_string())).expect("a story");
    let lines = texts(&story);

    let pending = story
        .lines
        .iter()
        .position(|l| l.text.starts_with("created, pending"))
        .expect("it went pending");
    // When it went pending, the two existing nodes were too small and the NodePool could launch.
    let details = &story.lines[pending].details;
    assert_eq!(
        details
            .iter()
            .filter(|d| d.contains("node ip-") && d.contains("ruled out: not enough cpu"))
            .count(),
        2,
        "{details:#?}"
    );
    assert!(
        details
            .iter()
            .any(|d| d.contains("nodepool default: a new machine")),
        "{details:#?}"
    );
    let launched = lines
        .iter()
        .position(|t| t.starts_with(&format!("NodeClaim {claim} decided for it")))
        .expect("the launch names it");
    let bound = lines
        .iter()
        .position(|t| t.starts_with("bound to node "))
        .expect("it landed");
    assert!(pending < launched && launched < bound, "{lines:#?}");

    // It landed on the node of the machine launched for it.
    let node_story = explain_file(&log, &Subject::Node(claim.clone())).expect("a node story");
    let node = node_story
        .lines
        .iter()
        .find_map(|l| {
            l.text
                .strip_prefix("node ")?
                .strip_suffix(" registered, ready")
        })
        .expect("the machine registered")
        .to_string();
    assert!(lines[bound].starts_with(&format!("bound to node {node}, after ")));
    assert!(
        story
            .summary
            .as_deref()
            .is_some_and(|s| s.starts_with("pending 1 time(s)"))
    );
}

#[test]
fn a_nodes_story_is_the_same_by_node_name_and_by_nodeclaim_name() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = tutorial_log(&dir);
    let claim = commands(&log)
        .into_iter()
        .find_map(|c| match c {
            Command::LaunchNodeClaim { nodeclaim, .. } => Some(nodeclaim.name),
            _ => None,
        })
        .expect("a launch");
    let by_claim = explain_file(&log, &Subject::Node(claim.clone())).expect("a story");
    let lines = texts(&by_claim);
    let order = [
        "NodeClaim ",
        "launched: ",
        "node ip-",
        "removal decided (Empty)",
        "node ip-",
        "instance terminated",
    ];
    let mut at = 0;
    for prefix in order {
        at += lines[at..]
            .iter()
            .position(|t| t.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} after line {at}: {lines:#?}"))
            + 1;
    }
    let node = by_claim
        .title
        .split(' ')
        .nth(1)
        .expect("a title")
        .to_string();
    let by_node = explain_file(&log, &Subject::Node(node)).expect("a story");
    assert_eq!(by_node.lines, by_claim.lines);
    assert_eq!(by_node.title, by_claim.title);
}

#[test]
fn a_commands_story_names_the_event_that_gave_it_and_the_events_about_its_node() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = tutorial_log(&dir);
    let all = commands(&log);
    let index = all
        .iter()
        .position(|c| matches!(c, Command::TerminateNodeClaim { .. }))
        .expect("the tutorial removes its machine");
    let story = explain_file(&log, &Subject::Command(index as u64)).expect("a story");
    let lines = texts(&story);
    assert!(lines[0].starts_with("TerminateNodeClaim "), "{lines:#?}");
    assert!(lines[1].starts_with("gave it: "), "{lines:#?}");
    // The five pods that ran on it came and went before it was found empty.
    assert_eq!(
        lines.iter().filter(|t| t.starts_with("PodBound ")).count(),
        5,
        "{lines:#?}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|t| t.starts_with("PodDeleted "))
            .count(),
        5,
        "{lines:#?}"
    );
    assert!(lines.iter().any(|t| t.starts_with("LaunchSucceeded ")));
}

#[test]
fn unknown_subjects_are_named_and_the_cli_exits_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = tutorial_log(&dir);
    let count = commands(&log).len() as u64;
    assert!(matches!(
        explain_file(&log, &Subject::pod("default/nobody")),
        Err(ExplainError::UnknownPod(_))
    ));
    assert!(matches!(
        explain_file(&log, &Subject::Node("nowhere".into())),
        Err(ExplainError::UnknownNode(_))
    ));
    let err = explain_file(&log, &Subject::Command(count)).expect_err("past the end");
    assert_eq!(
        err.to_string(),
        format!(
            "the log holds {count} commands (#0 to #{}); there is no command #{count}",
            count - 1
        )
    );
    let out = Process::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(["explain", log.to_str().expect("utf-8"), "--pod", "ghost"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pod default/ghost"));
    let none = Process::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(["explain", log.to_str().expect("utf-8")])
        .output()
        .expect("runs");
    assert_eq!(
        none.status.code(),
        Some(2),
        "one of --pod, --node, --command is required"
    );
}
