//! Snapshot tests of policy changes: every log of `tests/logs/` replayed under every policy of
//! `tests/policies/<log name>/`, the decision summary kept as an insta snapshot. A change of
//! the core that moves a decision shows as a reviewed diff (`cargo insta review`). How a user
//! does the same in their own CI: `docs/policy-testing.md`.

use std::path::Path;

use nodewright_testkit::whatif::{Policy, Recording, what_if};

fn snapshot(log: &str, policy: &str) {
    let recording = Recording::read(Path::new(&format!("tests/logs/{log}.nwlog"))).expect("reads");
    let path = format!("tests/policies/{log}/{policy}.yaml");
    let policy_file = Policy::load(Path::new(&path)).expect("the policy loads");
    let outcome = what_if(&recording, &policy_file).expect("runs");
    insta::assert_snapshot!(format!("{log}__{policy}"), outcome.render());
}

/// Every policy file has its snapshot here: a new one must be added below.
#[test]
fn every_policy_of_the_library_is_snapshotted() {
    let mut found = Vec::new();
    for log in std::fs::read_dir("tests/policies").expect("the policy library") {
        let log = log.expect("an entry").path();
        for policy in std::fs::read_dir(&log).expect("a log's policies") {
            let policy = policy.expect("an entry").path();
            found.push(format!(
                "{}/{}",
                log.file_name().and_then(|n| n.to_str()).unwrap_or_default(),
                policy
                    .file_stem()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default()
            ));
        }
    }
    found.sort();
    assert_eq!(
        found,
        [
            "mixed/longer-batches",
            "mixed/spot-capped",
            "seed-tutorial/longer-batches",
            "seed-tutorial/spot-allowed",
        ]
    );
}

#[test]
fn seed_tutorial_under_spot_allowed() {
    snapshot("seed-tutorial", "spot-allowed");
}

#[test]
fn seed_tutorial_under_longer_batches() {
    snapshot("seed-tutorial", "longer-batches");
}

#[test]
fn mixed_under_spot_capped() {
    snapshot("mixed", "spot-capped");
}

#[test]
fn mixed_under_longer_batches() {
    snapshot("mixed", "longer-batches");
}
