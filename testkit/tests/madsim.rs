#![cfg(madsim)]
//! The madsim harness: the controller's own loop over simulated adapters, in virtual time,
//! under seeded fault plans (late and failing API calls, late watches, interruption messages
//! lost and delivered twice, the controller killed and started again over its log). Only in
//! the simulated build:
//! `RUSTFLAGS="--cfg madsim" cargo test -p nodewright-testkit --test madsim`.
//!
//! A failing seed is reproduced with
//! `RUSTFLAGS="--cfg madsim" cargo run --release -- simulate SCENARIO --madsim --seed N`.

use nodewright_adapters::driver::Driver;
use nodewright_adapters::eventlog::EventStore;
use nodewright_testkit::scenario::{Scenario, builtin, load_file};
use nodewright_testkit::sim::PlantedBug;
use nodewright_testkit::sim::faults::FaultPlan;
use nodewright_testkit::sim::madsim_world::{MadsimOptions, MadsimRun, run};

fn scenario(name: &str, seed: u64) -> Scenario {
    builtin(name)
        .expect("built in")
        .expect("loads")
        .with_seed(seed)
}

fn run_drawn(name: &str, seed: u64, options: MadsimOptions) -> MadsimRun {
    let scenario = scenario(name, seed);
    let plan = FaultPlan::draw(seed, scenario.duration_ms);
    run(&scenario, plan, options).expect("runs")
}

fn stop_at_violation() -> MadsimOptions {
    MadsimOptions {
        stop_at_violation: true,
        ..MadsimOptions::default()
    }
}

fn assert_all_pass(name: &str, seeds: std::ops::Range<u64>) {
    for seed in seeds {
        let r = run_drawn(name, seed, stop_at_violation());
        assert!(
            r.report.passed(),
            "{name}, seed {seed} (reproduce: RUSTFLAGS=\"--cfg madsim\" cargo run --release -- simulate {name} --madsim --seed {seed})\nfaults: {}\n{}",
            r.plan,
            r.report.summary()
        );
    }
}

// The seeds are split over several tests so that the test harness spreads them over the cores.

#[test]
fn tutorial_seeds_1_to_50_under_their_fault_plans_break_no_invariant() {
    assert_all_pass("seed-tutorial", 1..51);
}

#[test]
fn tutorial_seeds_51_to_100_under_their_fault_plans_break_no_invariant() {
    assert_all_pass("seed-tutorial", 51..101);
}

#[test]
fn mixed_seeds_1_to_12_under_their_fault_plans_break_no_invariant() {
    assert_all_pass("mixed", 1..13);
}

#[test]
fn mixed_seeds_13_to_24_under_their_fault_plans_break_no_invariant() {
    assert_all_pass("mixed", 13..25);
}

#[test]
fn the_same_seed_gives_the_same_run_and_another_seed_another() {
    let a = run_drawn("mixed", 7, MadsimOptions::default());
    let again = run_drawn("mixed", 7, MadsimOptions::default());
    assert_eq!(a.plan, again.plan);
    assert_eq!(
        serde_json::to_value(&a.report).expect("json"),
        serde_json::to_value(&again.report).expect("json")
    );
    assert_eq!(a.log.len(), again.log.len());
    let b = run_drawn("mixed", 8, MadsimOptions::default());
    assert_ne!(a.plan, b.plan);
    assert_ne!(a.report.decision_digest, b.report.decision_digest);
}

#[test]
fn other_scheduling_seeds_keep_every_invariant() {
    // The same scenario and a plan without delays, so that many tasks are ready at the same
    // instants; madsim polls them in another order under each scheduling seed.
    let mixed = scenario("mixed", 3);
    for scheduling in 1..5 {
        let options = MadsimOptions {
            scheduling_seed: Some(scheduling),
            ..stop_at_violation()
        };
        let r = run(&mixed, FaultPlan::calm(3), options).expect("runs");
        assert!(
            r.report.passed(),
            "scheduling seed {scheduling}: {}",
            r.report.summary()
        );
    }
}

#[test]
fn a_core_that_launches_into_unavailable_offerings_is_caught() {
    let options = MadsimOptions {
        stop_at_violation: true,
        planted: Some(PlantedBug::LaunchIntoUnavailable),
        ..MadsimOptions::default()
    };
    let caught = (1..25u64).find_map(|seed| {
        let r = run_drawn("mixed", seed, options);
        r.report
            .invariant_violations
            .first()
            .map(|v| (seed, v.clone()))
    });
    let (seed, violation) = caught.expect("caught by one of the first 24 seeds");
    assert_eq!(
        violation.kind, "launch-into-unavailable-offering",
        "seed {seed}: {violation:?}"
    );
    assert!(violation.event > 0, "the event index is given");
}

#[test]
fn every_planned_crash_is_a_restart_over_the_log_and_the_log_replays() {
    let mut crashed = 0;
    for seed in 1..40u64 {
        let name = "seed-tutorial";
        let plan = FaultPlan::draw(seed, scenario(name, seed).duration_ms);
        if plan.crashes.len() < 2 {
            continue;
        }
        // Snapshots often, so that the restarts recover from them.
        let options = MadsimOptions {
            snapshot_every: 16,
            ..MadsimOptions::default()
        };
        let r = run_drawn(name, seed, options);
        assert_eq!(r.restarts, 2, "seed {seed}: {}", r.plan);
        assert!(r.report.passed(), "seed {seed}: {}", r.report.summary());
        // Everything the restarts wrote is a log the core replays exactly.
        let (_, recovery) = Driver::recover(r.log).expect("the log replays");
        assert_eq!(recovery.events, r.report.events);
        assert!(
            recovery.from_snapshot.is_some(),
            "seed {seed}: from a snapshot"
        );
        crashed += 1;
    }
    assert!(crashed >= 3, "only {crashed} seeds with two crashes");
}

#[test]
fn lost_and_repeated_interruption_messages_are_all_handled_and_deleted() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/spot-storm.yaml");
    let storm = load_file(&path).expect("loads").with_seed(5);
    let plan = FaultPlan {
        sqs_loss_permille: 500,
        sqs_duplicate_permille: 500,
        ..FaultPlan::calm(5)
    };
    let r = run(&storm, plan, MadsimOptions::default()).expect("runs");
    assert!(r.report.passed(), "{}", r.report.summary());
    let (sent, received, deleted) = r.queue;
    assert!(sent >= 6, "the storm sends its messages: {sent}");
    assert!(
        received > sent,
        "lost receives come again: {received} of {sent}"
    );
    assert_eq!(deleted, sent, "every copy is deleted once handled");
    assert!(
        r.report.disruptions.interrupted >= 6,
        "{}",
        r.report.summary()
    );
}

#[test]
fn a_calm_plan_runs_the_tutorial_as_the_guide_says() {
    let tutorial = scenario("seed-tutorial", 1);
    let r = run(&tutorial, FaultPlan::calm(1), stop_at_violation()).expect("runs");
    assert!(r.report.passed(), "{}", r.report.summary());
    assert_eq!(r.restarts, 0);
    assert!(r.report.nodes.launched >= 1);
    assert_eq!(r.report.nodes.final_count, 0, "{}", r.report.summary());
    assert_eq!(r.report.pods.never_scheduled, 0);
}
