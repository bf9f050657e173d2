//! Disruption budgets: counts and percentages, reasons, cron schedules with durations (UTC),
//! the most restrictive active budget, and invalid schedules.

use nodewright_core::Command;
use nodewright_core::model::duration::MaybeNever;
use nodewright_core::model::nodeclaim::TerminationReason;
use nodewright_core::model::nodepool::{BudgetNodes, DisruptionBudget, DisruptionReason, NodePool};
use nodewright_core::model::pod::Pod;
use nodewright_testkit::harness::{CoreHarness, replicated};

const GIB: i64 = 1 << 30;
const HOUR: u64 = 3_600_000;
/// Monday 2026-01-05 00:00 UTC, in Unix milliseconds.
const MONDAY: u64 = 1_767_571_200_000;

fn budget(
    nodes: BudgetNodes,
    schedule: Option<&str>,
    duration_ms: Option<u64>,
    reasons: Vec<DisruptionReason>,
) -> DisruptionBudget {
    DisruptionBudget {
        nodes,
        schedule: schedule.map(str::to_string),
        duration_ms,
        reasons,
    }
}

fn terminations(h: &CoreHarness) -> Vec<(u64, String, TerminationReason)> {
    h.terminations()
        .into_iter()
        .map(|t| (t.at_ms, t.nodeclaim, t.reason))
        .collect()
}

/// A machine running one pod, launched at the harness's current time.
fn running(h: &mut CoreHarness, pod: &str) -> String {
    h.running_machine(vec![Pod::new("default", pod, 1000, GIB)])
        .0
        .name
}

fn business_hours_pool() -> NodePool {
    let mut p = NodePool::new("default", "default");
    p.consolidate_after = MaybeNever::After(0);
    p.budgets = vec![
        budget(BudgetNodes::Percent(10), None, None, vec![]),
        budget(
            BudgetNodes::Count(0),
            Some("0 9 * * mon-fri"),
            Some(8 * HOUR),
            vec![],
        ),
    ];
    p
}

#[test]
fn a_zero_budget_in_business_hours_blocks_emptiness_exactly_inside_the_window() {
    let mut h = CoreHarness::new();
    h.now_ms = MONDAY + 8 * HOUR;
    h.nodepool(business_hours_pool());
    let early = running(&mut h, "early");
    let late = running(&mut h, "late");
    // Emptied before 09:00: removed at the next disruption pass (one every 10 s).
    h.delete_pod("default", "early");
    h.advance(10_000);
    assert_eq!(terminations(&h).len(), 1);
    assert_eq!(terminations(&h)[0].1, early);
    let early_node = h.core.state().nodeclaims[&early]
        .node_name
        .clone()
        .expect("joined");
    h.send(nodewright_core::EventKind::NodeClaimTerminated {
        nodeclaim: early.clone(),
    });
    // Its node goes with it (else "late"'s pod could move there, and consolidation would take
    // "late" before 09:00).
    h.send(nodewright_core::EventKind::NodeDeleted { name: early_node });
    // Emptied at 09:30, inside the window: kept until 17:00.
    h.run_until(MONDAY + 9 * HOUR + 30 * 60_000);
    h.delete_pod("default", "late");
    h.run_until(MONDAY + 17 * HOUR - 1);
    assert_eq!(
        terminations(&h).len(),
        1,
        "blocked all day: {:?}",
        h.terminations()
    );
    h.run_until(MONDAY + 17 * HOUR + 10_000);
    let t = terminations(&h);
    assert_eq!(t.len(), 2);
    assert_eq!(t[1].1, late);
    assert!(
        t[1].0 >= MONDAY + 17 * HOUR && t[1].0 <= MONDAY + 17 * HOUR + 10_000,
        "at {}",
        t[1].0
    );
}

#[test]
fn the_business_hours_budget_does_not_apply_at_the_weekend() {
    let mut h = CoreHarness::new();
    let saturday = MONDAY + 5 * 24 * HOUR;
    h.now_ms = saturday + 10 * HOUR;
    h.nodepool(business_hours_pool());
    let claim = running(&mut h, "p");
    h.delete_pod("default", "p");
    h.advance(20_000);
    assert_eq!(terminations(&h).first().map(|t| t.1.clone()), Some(claim));
}

#[test]
fn a_budget_for_other_reasons_does_not_block_emptiness() {
    let mut h = CoreHarness::new();
    let mut p = NodePool::new("default", "default");
    p.consolidate_after = MaybeNever::After(0);
    p.budgets = vec![budget(
        BudgetNodes::Count(0),
        None,
        None,
        vec![DisruptionReason::Drifted, DisruptionReason::Underutilized],
    )];
    h.nodepool(p);
    running(&mut h, "p");
    h.delete_pod("default", "p");
    h.advance(20_000);
    assert_eq!(terminations(&h).len(), 1);
}

#[test]
fn a_budget_for_empty_nodes_blocks_them() {
    let mut h = CoreHarness::new();
    let mut p = NodePool::new("default", "default");
    p.consolidate_after = MaybeNever::After(0);
    p.budgets = vec![budget(
        BudgetNodes::Count(0),
        None,
        None,
        vec![DisruptionReason::Empty],
    )];
    h.nodepool(p);
    running(&mut h, "p");
    h.delete_pod("default", "p");
    h.advance(60_000);
    assert!(terminations(&h).is_empty());
}

#[test]
fn the_most_restrictive_active_budget_wins() {
    let mut h = CoreHarness::new();
    let mut p = NodePool::new("default", "default");
    p.consolidate_after = MaybeNever::After(30_000);
    p.budgets = vec![
        budget(BudgetNodes::Percent(100), None, None, vec![]),
        budget(BudgetNodes::Count(1), None, None, vec![]),
    ];
    h.nodepool(p);
    for i in 0..4 {
        h.pod(Pod::new("default", &format!("p{i}"), 7000, GIB));
        let claim = CoreHarness::launches(&h.advance(2_000)).remove(0);
        let instance = h.launch_cheapest(&claim);
        let node = h.join(&claim, &instance);
        h.bind("default", &format!("p{i}"), &node);
    }
    for i in 0..4 {
        h.delete_pod("default", &format!("p{i}"));
    }
    h.advance(40_000);
    assert_eq!(terminations(&h).len(), 1, "one at a time");
}

#[test]
fn an_invalid_schedule_blocks_disruption_and_is_reported() {
    let mut h = CoreHarness::new();
    let mut p = NodePool::new("default", "default");
    p.consolidate_after = MaybeNever::After(0);
    p.budgets = vec![budget(
        BudgetNodes::Count(5),
        Some("0 25 * * *"),
        Some(HOUR),
        vec![],
    )];
    let cmds = h.nodepool(p);
    assert!(
        cmds.iter().any(|c| matches!(c, Command::DisruptionBlocked { reason, .. } if reason.contains("0 25 * * *"))),
        "{cmds:?}"
    );
    running(&mut h, "p");
    h.delete_pod("default", "p");
    h.advance(10 * 60_000);
    assert!(terminations(&h).is_empty());
}

#[test]
fn expiration_ignores_a_closed_budget() {
    let mut h = CoreHarness::new();
    h.now_ms = MONDAY + 9 * HOUR;
    let mut p = business_hours_pool();
    p.expire_after = MaybeNever::After(HOUR);
    h.nodepool(p);
    // A Deployment's pod, which expiration evicts (a Job's would be left to finish first).
    let claim = h
        .running_machine(vec![replicated(Pod::new("default", "p", 1000, GIB))])
        .0
        .name;
    h.advance(HOUR);
    h.complete_evictions();
    let t = terminations(&h);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].1, claim);
    assert_eq!(t[0].2, TerminationReason::Expired);
}
