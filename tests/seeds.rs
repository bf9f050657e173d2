//! Many seeds per test run: 200 of the seed tutorial, 200 of spread landing under start-up
//! jitter, and 1,000 of the mixed scenario (three NodePools, spot and on-demand, a DaemonSet,
//! PodDisruptionBudgets, an interruption storm, insufficient capacity, throttled APIs), each
//! stopped at its first broken invariant. The harness itself is tested too: a seed replays to
//! the same report, another seed draws another fault plan, and a bug planted between the core
//! and the world is caught.
//!
//! `nodewright simulate mixed --seeds 1..5000` is the longer soak.

use nodewright_testkit::scenario::{Scenario, builtin};
use nodewright_testkit::seeds::{FailureCause, run_one, run_seeds};
use nodewright_testkit::sim::PlantedBug;

fn scenario(name: &str) -> Scenario {
    builtin(name).expect("built in").expect("loads")
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn assert_all_pass(name: &str, seeds: std::ops::Range<u64>) {
    let outcome = run_seeds(&scenario(name), seeds.clone(), threads(), None, &|_| {});
    assert_eq!(outcome.runs, seeds.end - seeds.start);
    if let Some(first) = outcome.failures.first() {
        panic!(
            "{} of {} seeds of {name} failed; the first, seed {} (reproduce: nodewright simulate {name} --seed {}):\n{}",
            outcome.failures.len(),
            outcome.runs,
            first.seed,
            first.seed,
            first.summary
        );
    }
}

#[test]
fn two_hundred_seeds_of_the_seed_tutorial_break_no_invariant() {
    assert_all_pass("seed-tutorial", 1..201);
}

/// Zonal and hostname spread and required anti-affinity, machines starting 25 s to 110 s
/// after launch: wherever the pods land, every constraint the plan honoured holds
/// (`placementHonoursConstraints`), for every seed's start-up jitter.
#[test]
fn two_hundred_seeds_of_spread_with_start_up_jitter_land_as_planned() {
    assert_all_pass("spread-lands", 1..201);
}

/// The same without the sibling hold, as Karpenter: kube-scheduler binds each pod to the
/// machine that is ready first, and the landing breaks the spread.
#[test]
fn without_the_sibling_hold_the_same_seeds_land_off_plan() {
    let mut off = scenario("spread-lands");
    off.config.sibling_hold_ms = 0;
    let outcome = run_seeds(&off, 1..21, threads(), None, &|_| {});
    assert_eq!(outcome.runs, 20);
    assert!(
        outcome.failures.len() >= 15,
        "only {} of 20 seeds broke the spread",
        outcome.failures.len()
    );
    assert!(
        outcome
            .failures
            .iter()
            .all(|f| f.causes.iter().all(|c| matches!(
                c,
                FailureCause::Expectation(e) if e.name == "placementHonoursConstraints"
            ))),
        "{}",
        outcome.failures[0].summary
    );
}

#[test]
fn a_thousand_seeds_of_the_mixed_scenario_break_no_invariant() {
    assert_all_pass("mixed", 1..1001);
}

#[test]
fn a_seed_replays_to_the_same_report_and_another_draws_another_fault_plan() {
    let mixed = scenario("mixed");
    let a = run_one(&mixed, 7, None).expect("runs");
    let again = run_one(&mixed, 7, None).expect("runs");
    assert_eq!(
        serde_json::to_value(&a).expect("json"),
        serde_json::to_value(&again).expect("json")
    );
    let b = run_one(&mixed, 8, None).expect("runs");
    assert_ne!(a.decision_digest, b.decision_digest);
    // Not only other names: the world drew other launch latencies and other interruption
    // targets.
    let launch_times = |r: &nodewright_testkit::Report| -> Vec<String> {
        r.machines
            .iter()
            .map(|m| format!("{:.3}", m.launched_at_seconds))
            .collect()
    };
    assert_ne!(launch_times(&a), launch_times(&b));
}

#[test]
fn a_core_that_launches_into_unavailable_offerings_is_caught_within_the_seed_budget() {
    let mixed = scenario("mixed");
    let caught = (1..101u64).find_map(|seed| {
        let report = run_one(&mixed, seed, Some(PlantedBug::LaunchIntoUnavailable)).expect("runs");
        report
            .invariant_violations
            .first()
            .map(|v| (seed, v.clone()))
    });
    let (seed, violation) = caught.expect("caught by one of the first 100 seeds");
    assert_eq!(
        violation.kind, "launch-into-unavailable-offering",
        "seed {seed}"
    );
    assert!(violation.event > 0);
    // The run stopped there (every violation is of that step), and a second run of that seed
    // stops at the same event.
    let again = run_one(&mixed, seed, Some(PlantedBug::LaunchIntoUnavailable)).expect("runs");
    assert!(
        again
            .invariant_violations
            .iter()
            .all(|v| v.event == violation.event),
        "{:?}",
        again.invariant_violations
    );
    assert_eq!(again.invariant_violations[0], violation);
    assert_eq!(again.events, violation.event);
}
