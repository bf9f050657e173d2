//! Format evolution: a log written by nodewright 0.1.0 in format version 1 (the seed tutorial
//! over a slice of the catalog, `examples/test_logs.rs --golden`) stays readable, and replays.
//! The file is never written again: when the format changes, readers of version 1 stay.

use std::collections::BTreeMap;
use std::path::Path;

use nodewright_adapters::eventlog::{LogHeader, LogRecord, NwlogReader};

const GOLDEN: &str = "tests/golden/v1-seed-tutorial.nwlog";
const DIGEST: &str = "36df568b759fcb7c3be31dce15762302d631796cfa6196b427892dbed327a96c";

#[test]
fn the_version_1_log_reads_record_by_record() {
    let mut reader: NwlogReader<LogHeader, LogRecord, _> =
        NwlogReader::open(Path::new(GOLDEN)).expect("the golden log opens");
    assert_eq!(reader.format_version(), 1);
    assert_eq!(reader.header().producer, "nodewright 0.1.0");
    assert_eq!(reader.header().source, "seed-tutorial");
    let mut kinds: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut commands = Vec::new();
    while let Some(entry) = reader.next_entry() {
        match entry.expect("every record decodes").record {
            LogRecord::Event(e) => *kinds.entry(e.kind.name()).or_default() += 1,
            LogRecord::Commands(cs) => commands.extend(cs.iter().map(|c| c.name())),
            LogRecord::Snapshot(_) => *kinds.entry("Snapshot").or_default() += 1,
            LogRecord::SnapshotPart(_) => *kinds.entry("SnapshotPart").or_default() += 1,
            LogRecord::CommandsPart { .. } => *kinds.entry("CommandsPart").or_default() += 1,
            LogRecord::Term(_) => *kinds.entry("Term").or_default() += 1,
        }
    }
    let expected: BTreeMap<&str, u64> = [
        ("CatalogUpdated", 1),
        ("InstancesListed", 15),
        ("LaunchSucceeded", 1),
        ("NodeApplied", 4),
        ("NodeClaimTerminated", 1),
        ("NodeClassApplied", 1),
        ("NodeDeleted", 1),
        ("NodePoolApplied", 1),
        ("PodApplied", 7),
        ("PodBound", 5),
        ("PodDeleted", 5),
        ("Tick", 9),
    ]
    .into_iter()
    .collect();
    assert_eq!(kinds, expected);
    assert_eq!(commands, ["LaunchNodeClaim", "TerminateNodeClaim"]);
}

#[test]
fn the_version_1_log_replays_to_its_recorded_commands() {
    let outcome = nodewright_replay::verify_file(Path::new(GOLDEN)).expect("readable");
    // A change of the core's decisions made on purpose shows here first: the log stays, and
    // this test then names the event where the new behaviour departs from it.
    assert_eq!(outcome.divergence, None);
    assert_eq!((outcome.events, outcome.commands), (51, 2));
    assert_eq!(outcome.decision_digest, DIGEST);
}

#[test]
fn the_version_1_log_is_explained_and_replayed_under_a_policy() {
    let path = Path::new(GOLDEN);
    let story = nodewright_replay::explain_file(path, &nodewright_replay::Subject::Command(1))
        .expect("a story");
    assert!(story.lines[0].text.starts_with("TerminateNodeClaim "));
    let recording = nodewright_testkit::whatif::Recording::read(path).expect("readable");
    let policy = nodewright_testkit::whatif::Policy::load(Path::new(
        "tests/policies/seed-tutorial/spot-allowed.yaml",
    ))
    .expect("a policy");
    let outcome = nodewright_testkit::whatif::what_if(&recording, &policy).expect("runs");
    assert!(outcome.what_if.total_usd < outcome.baseline.total_usd);
}
