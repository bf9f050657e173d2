//! Single-node consolidation: delete when the pods fit elsewhere, replace with one cheaper
//! machine, the payback rule, validation, and what blocks it.

use nodewright_core::catalog::CapacityType;
use nodewright_core::config::{Config, LostWork};
use nodewright_core::model::duration::MaybeNever;
use nodewright_core::model::labels;
use nodewright_core::model::nodeclaim::{NodeClaimSpec, TerminationReason};
use nodewright_core::model::nodepool::{
    BudgetNodes, ConsolidationPolicy, DisruptionBudget, DisruptionReason, NodePool,
};
use nodewright_core::model::pod::{OwnerRef, Pod};
use nodewright_core::model::requirements::{Operator, RequirementSpec};
use nodewright_core::{Command, EventKind};
use nodewright_testkit::harness::{CoreHarness, pdb_of_app, replicated};

const GIB: i64 = 1 << 30;
const MIN: u64 = 60_000;

fn pool() -> NodePool {
    let mut p = NodePool::new("default", "default");
    p.requirements = vec![
        RequirementSpec::new(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]),
        RequirementSpec::new(labels::INSTANCE_CATEGORY, Operator::In, &["c", "m", "r"]),
        RequirementSpec::new(labels::ARCH, Operator::In, &["amd64"]),
    ];
    p.consolidate_after = MaybeNever::After(MIN);
    p
}

/// Launches and joins a machine for `pods` (all bound to it); returns (claim, node).
fn machine(h: &mut CoreHarness, pods: &[(&str, i64)]) -> (NodeClaimSpec, String) {
    let pods = pods
        .iter()
        .map(|(name, cpu)| replicated(Pod::new("default", name, *cpu, GIB)))
        .collect();
    let (claim, _, node) = h.running_machine(pods);
    (claim, node)
}

fn terminations(h: &CoreHarness) -> Vec<(u64, String, TerminationReason, String)> {
    h.terminations()
        .into_iter()
        .map(|t| (t.at_ms, t.nodeclaim, t.reason, t.detail))
        .collect()
}

/// A node whose big pod left: one small pod on a 16-vCPU machine.
fn underused(h: &mut CoreHarness) -> (NodeClaimSpec, String) {
    let (claim, node) = machine(h, &[("big", 14_000), ("small", 500)]);
    h.delete_pod("default", "big");
    (claim, node)
}

#[test]
fn a_node_whose_pods_fit_elsewhere_is_deleted_after_validation() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let (first, _) = machine(&mut h, &[("a", 3000)]);
    let (second, node_b) = machine(&mut h, &[("b", 3000)]);
    // b leaves and a tiny pod takes its place: either machine's pods now fit on the other.
    h.delete_pod("default", "b");
    let mut tiny = replicated(Pod::new("default", "tiny", 100, GIB / 8));
    tiny.node_name = Some(node_b);
    h.send(EventKind::PodApplied(Box::new(tiny)));
    let emptied = h.now_ms;
    h.run_until(emptied + MIN + 60_000);
    // The node is cordoned and its pod evicted; the instance goes once it is empty.
    assert!(
        h.commands
            .iter()
            .any(|(_, c)| matches!(c, Command::CordonNode { .. }))
    );
    h.complete_evictions();
    let t = terminations(&h);
    // Not before consolidateAfter (since the node's last pod event) plus the 15 s validation.
    assert!(t.first().is_some_and(|t| t.0 >= MIN + 15_000), "{t:?}");
    assert_eq!(t.len(), 1, "one of the two goes, not both: {t:?}");
    assert!([first.name.clone(), second.name.clone()].contains(&t[0].1));
    assert_eq!(t[0].2, TerminationReason::Underutilized);
    assert!(
        t[0].3.contains("delete: its pods fit on the other nodes"),
        "{}",
        t[0].3
    );
    assert!(t[0].3.contains("payback rule met"), "{}", t[0].3);
    assert_eq!(h.all_launches().len(), 2, "a delete launches nothing");
}

#[test]
fn a_mostly_empty_big_node_is_replaced_by_one_cheaper_machine() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let (old, _) = underused(&mut h);
    let old_price = old.options[0].price;
    h.run_until(h.now_ms + MIN + 30_000);
    let launches = h.all_launches();
    assert_eq!(launches.len(), 2, "a replacement was launched");
    let replacement = launches[1].clone();
    assert!(
        replacement.options.iter().all(|o| o.price < old_price),
        "replace never raises cost"
    );
    assert!(
        terminations(&h).is_empty(),
        "the old node waits for its replacement"
    );
    let instance = h.launch_cheapest(&replacement);
    h.join(&replacement, &instance);
    h.complete_evictions();
    let t = terminations(&h);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].1, old.name);
    assert_eq!(t[0].2, TerminationReason::Underutilized);
}

#[test]
fn the_payback_rule_keeps_a_node_when_the_saving_is_too_small() {
    let mut h = CoreHarness::with_config(Config {
        // A day's saving must beat $1,000 per evicted pod: nothing ever does.
        eviction_cost_micro_usd: 1_000_000_000,
        ..Config::default()
    });
    h.nodepool(pool());
    underused(&mut h);
    h.run_until(h.now_ms + 10 * MIN);
    assert_eq!(h.all_launches().len(), 1);
    assert!(terminations(&h).is_empty());
}

#[test]
fn zero_payback_settings_give_karpenters_behaviour() {
    let mut h = CoreHarness::with_config(Config {
        consolidation_payback_horizon_ms: 0,
        eviction_cost_micro_usd: 0,
        ..Config::default()
    });
    h.nodepool(pool());
    underused(&mut h);
    h.run_until(h.now_ms + 2 * MIN);
    assert_eq!(h.all_launches().len(), 2);
    let summary = h
        .commands
        .iter()
        .find_map(|(_, c)| match c {
            Command::LaunchNodeClaim { reason, .. } if reason.summary.starts_with("replaces") => {
                Some(reason.summary.clone())
            }
            _ => None,
        })
        .expect("a replacement");
    assert!(summary.contains("payback rule off"), "{summary}");
}

#[test]
fn consolidate_after_is_waited_for() {
    let mut h = CoreHarness::new();
    let mut p = pool();
    p.consolidate_after = MaybeNever::After(10 * MIN);
    h.nodepool(p);
    underused(&mut h);
    h.run_until(h.now_ms + 9 * MIN);
    assert_eq!(h.all_launches().len(), 1);
    h.run_until(h.now_ms + 2 * MIN);
    assert_eq!(h.all_launches().len(), 2);
}

#[test]
fn when_empty_pools_are_not_consolidated_for_underutilization() {
    let mut h = CoreHarness::new();
    let mut p = pool();
    p.consolidation_policy = ConsolidationPolicy::WhenEmpty;
    h.nodepool(p);
    underused(&mut h);
    h.run_until(h.now_ms + 30 * MIN);
    assert_eq!(h.all_launches().len(), 1);
}

#[test]
fn a_do_not_disrupt_pod_keeps_its_node() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let (_, node) = machine(&mut h, &[("big", 14_000)]);
    let mut keeper = replicated(Pod::new("default", "keeper", 500, GIB));
    keeper
        .annotations
        .insert(labels::DO_NOT_DISRUPT.into(), "true".into());
    keeper.node_name = Some(node);
    h.send(EventKind::PodApplied(Box::new(keeper)));
    h.delete_pod("default", "big");
    h.run_until(h.now_ms + 30 * MIN);
    assert_eq!(h.all_launches().len(), 1);
    assert!(terminations(&h).is_empty());
}

#[test]
fn an_underutilized_budget_of_zero_blocks_consolidation() {
    let mut h = CoreHarness::new();
    let mut p = pool();
    p.budgets = vec![DisruptionBudget {
        nodes: BudgetNodes::Count(0),
        schedule: None,
        duration_ms: None,
        reasons: vec![DisruptionReason::Underutilized],
    }];
    h.nodepool(p);
    underused(&mut h);
    h.run_until(h.now_ms + 30 * MIN);
    assert_eq!(h.all_launches().len(), 1);
}

#[test]
fn a_decision_is_dropped_when_the_world_changes_during_validation() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let (_, node) = underused(&mut h);
    // Let the decision be taken, then fill the node before the 15 s validation ends.
    h.run_until(h.now_ms + MIN + 10_000);
    let decided_launches = h.all_launches().len();
    let mut filler = replicated(Pod::new("default", "filler", 12_000, GIB));
    filler.node_name = Some(node);
    h.send(EventKind::PodApplied(Box::new(filler)));
    h.run_until(h.now_ms + 20_000);
    assert_eq!(
        h.all_launches().len(),
        decided_launches,
        "no replacement for a node that is busy again"
    );
    assert!(terminations(&h).is_empty());
}

#[test]
fn no_consolidation_while_pods_are_pending() {
    let mut h = CoreHarness::new();
    let mut p = pool();
    p.limits.insert("nodes".into(), 1);
    h.nodepool(p);
    underused(&mut h);
    // A pod that cannot get a machine (the pool is at its node limit) stays pending.
    h.pod(replicated(Pod::new("default", "waiting", 60_000, GIB)));
    h.run_until(h.now_ms + 10 * MIN);
    assert!(terminations(&h).is_empty());
}

#[test]
fn spot_replacements_need_fifteen_cheaper_spot_types() {
    let mut h = CoreHarness::new();
    let mut p = pool();
    p.requirements = vec![
        RequirementSpec::new(labels::CAPACITY_TYPE, Operator::In, &["spot"]),
        RequirementSpec::new(labels::INSTANCE_FAMILY, Operator::In, &["m5", "c5"]),
    ];
    h.nodepool(p);
    let (claim, _) = underused(&mut h);
    assert_eq!(claim.options[0].capacity_type, CapacityType::Spot);
    h.run_until(h.now_ms + 10 * MIN);
    assert_eq!(
        h.all_launches().len(),
        1,
        "m5 and c5 offer fewer than 15 cheaper spot types"
    );
}

#[test]
fn multi_node_consolidation_takes_several_nodes_in_one_decision() {
    let mut h = CoreHarness::new();
    let mut p = pool();
    // The default 10 % would allow one node at a time.
    p.budgets = vec![DisruptionBudget {
        nodes: BudgetNodes::Percent(100),
        schedule: None,
        duration_ms: None,
        reasons: vec![],
    }];
    h.nodepool(p);
    let mut claims = Vec::new();
    let mut nodes = Vec::new();
    for i in 0..3 {
        // Each big pod needs a machine of its own (3.5 CPU) ...
        let (claim, node) = machine(&mut h, &[(&format!("big{i}"), 3500)]);
        claims.push(claim);
        nodes.push(node);
    }
    for (i, node) in nodes.into_iter().enumerate() {
        // ... then shrinks to a small one.
        let mut small = replicated(Pod::new("default", &format!("small{i}"), 250, GIB / 2));
        small.node_name = Some(node);
        h.send(EventKind::PodApplied(Box::new(small)));
        h.delete_pod("default", &format!("big{i}"));
    }
    let before: u64 = claims.iter().map(|c| c.options[0].price.0).sum();
    h.run_until(h.now_ms + 2 * MIN);
    let launches = h.all_launches();
    let decision_detail = h
        .commands
        .iter()
        .find_map(|(_, c)| match c {
            Command::LaunchNodeClaim { reason, .. } if reason.summary.starts_with("replaces") => {
                Some(reason.summary.clone())
            }
            Command::TerminateNodeClaim {
                reason: TerminationReason::Underutilized,
                detail,
                ..
            } => Some(detail.clone()),
            _ => None,
        })
        .expect("a consolidation");
    assert!(
        decision_detail.contains("nodes "),
        "several nodes in one decision: {decision_detail}"
    );
    if launches.len() == 4 {
        // A replacement for several nodes: every one of them is tainted before it launches.
        let launch_at = h
            .commands
            .iter()
            .position(|(_, c)| matches!(c, Command::LaunchNodeClaim { reason, .. } if reason.summary.starts_with("replaces")))
            .expect("the replacement");
        let cordoned_before: Vec<String> = h.commands[..launch_at]
            .iter()
            .filter_map(|(_, c)| match c {
                Command::CordonNode { nodeclaim, .. } => Some(nodeclaim.clone()),
                _ => None,
            })
            .collect();
        assert!(cordoned_before.len() >= 2, "{cordoned_before:?}");
        assert!(
            cordoned_before
                .iter()
                .all(|name| claims.iter().any(|c| &c.name == name)),
            "{cordoned_before:?}"
        );
        let replacement = launches[3].clone();
        assert!(replacement.options[0].price.0 < before);
        let instance = h.launch_cheapest(&replacement);
        h.join(&replacement, &instance);
    }
    h.complete_evictions();
    let gone: Vec<String> = terminations(&h).into_iter().map(|t| t.1).collect();
    assert!(gone.len() >= 2, "{gone:?}");
    assert!(gone.iter().all(|g| claims.iter().any(|c| &c.name == g)));
}

#[test]
fn multi_node_consolidation_respects_the_budget() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let mut nodes = Vec::new();
    for i in 0..3 {
        let (_, node) = machine(&mut h, &[(&format!("big{i}"), 3500)]);
        nodes.push(node);
    }
    for (i, node) in nodes.into_iter().enumerate() {
        let mut small = replicated(Pod::new("default", &format!("small{i}"), 250, GIB / 2));
        small.node_name = Some(node);
        h.send(EventKind::PodApplied(Box::new(small)));
        h.delete_pod("default", &format!("big{i}"));
    }
    h.run_until(h.now_ms + MIN + 20_000);
    h.complete_evictions();
    // 10 % of 3 nodes rounds up to 1: one node per decision.
    let t = terminations(&h);
    assert_eq!(t.len(), 1, "{t:?}");
    assert!(t[0].3.starts_with("node "), "{}", t[0].3);
}

#[test]
fn a_node_whose_pod_a_pdb_protects_is_not_consolidated() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let (_, node) = machine(&mut h, &[("big", 14_000)]);
    let mut guarded = replicated(Pod::new("default", "guarded", 500, GIB));
    guarded.labels.insert("app".into(), "db".into());
    guarded.node_name = Some(node);
    h.send(EventKind::PodApplied(Box::new(guarded)));
    h.send(EventKind::PodDisruptionBudgetApplied(Box::new(pdb_of_app(
        "db",
        Some(1),
        None,
    ))));
    h.delete_pod("default", "big");
    h.run_until(h.now_ms + 30 * MIN);
    assert_eq!(
        h.all_launches().len(),
        1,
        "no replacement for a node whose pod may not move"
    );
}

/// Pod `keeper` on `node`, started at `at_ms`, annotated `karpenter.sh/do-not-disrupt: <value>`
/// when a value is given.
fn keeper(node: &str, at_ms: u64, value: Option<&str>) -> Pod {
    let mut keeper = replicated(Pod::new("default", "keeper", 500, GIB));
    if let Some(value) = value {
        keeper
            .annotations
            .insert(labels::DO_NOT_DISRUPT.into(), value.into());
    }
    keeper.node_name = Some(node.to_string());
    keeper.created_at_ms = at_ms;
    keeper
}

/// A pod annotated `karpenter.sh/do-not-disrupt: <value>` joins `node`, started now.
fn keeper_on(h: &mut CoreHarness, node: &str, value: &str) {
    let pod = keeper(node, h.now_ms, Some(value));
    h.send(EventKind::PodApplied(Box::new(pod)));
}

#[test]
fn a_do_not_disrupt_duration_keeps_the_node_until_it_runs_out() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let (_, node) = machine(&mut h, &[("big", 14_000)]);
    let started = h.now_ms;
    keeper_on(&mut h, &node, "20m");
    h.delete_pod("default", "big");
    h.run_until(started + 19 * MIN);
    assert_eq!(h.all_launches().len(), 1, "protected for 20 minutes");
    // Once it runs out the node is a candidate again: a cheaper machine replaces it.
    h.run_until(started + 20 * MIN + 30_000);
    let launches = h.all_launches();
    assert_eq!(launches.len(), 2, "replaced once the protection ran out");
    let replaced_at = h
        .commands
        .iter()
        .find_map(|(t, c)| match c {
            Command::LaunchNodeClaim { reason, .. } if reason.summary.starts_with("replaces") => {
                Some(*t)
            }
            _ => None,
        })
        .expect("a replacement");
    assert!(replaced_at >= started + 20 * MIN, "{replaced_at}");
}

#[test]
fn a_running_pod_annotated_later_keeps_its_node() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let (_, node) = machine(&mut h, &[("big", 14_000)]);
    let mut keeper = keeper(&node, h.now_ms, None);
    h.send(EventKind::PodApplied(Box::new(keeper.clone())));
    h.run_until(h.now_ms + 5 * MIN);
    // The node is underutilized, and a pass reads it so, with the pod unprotected...
    h.delete_pod("default", "big");
    // ...then the pod, still running there, is annotated.
    keeper
        .annotations
        .insert(labels::DO_NOT_DISRUPT.into(), "true".into());
    h.send(EventKind::PodApplied(Box::new(keeper)));
    h.run_until(h.now_ms + 30 * MIN);
    assert_eq!(
        h.all_launches().len(),
        1,
        "no replacement for a node whose pod may not move"
    );
    assert!(terminations(&h).is_empty());
}

#[test]
fn an_invalid_do_not_disrupt_value_is_reported_and_protects_nothing() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let (_, node) = machine(&mut h, &[("big", 14_000)]);
    keeper_on(&mut h, &node, "30 minutes");
    let warnings: Vec<String> = h
        .commands
        .iter()
        .filter_map(|(_, c)| match c {
            Command::WarnInvalidAnnotation { object, reason } => {
                Some(format!("{object}: {reason}"))
            }
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("pod default/keeper")
            && warnings[0].contains("karpenter.sh/do-not-disrupt")
            && warnings[0].contains("\"30m\""),
        "names the pod, the annotation and the fix: {}",
        warnings[0]
    );
    h.delete_pod("default", "big");
    h.run_until(h.now_ms + 3 * MIN);
    assert_eq!(h.all_launches().len(), 2, "consolidated as if unannotated");
}

#[test]
fn the_replaced_node_is_tainted_before_its_replacement_launches() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let (old, node) = underused(&mut h);
    h.run_until(h.now_ms + MIN + 30_000);
    let position = |want: &dyn Fn(&Command) -> bool| h.commands.iter().position(|(_, c)| want(c));
    let cordon = position(
        &|c| matches!(c, Command::CordonNode { node: n, nodeclaim, .. } if *n == node && *nodeclaim == old.name),
    )
    .expect("the old node is tainted karpenter.sh/disrupted");
    let launch = position(&|c| {
        matches!(c, Command::LaunchNodeClaim { reason, .. } if reason.summary.starts_with("replaces"))
    })
    .expect("a replacement");
    assert!(cordon < launch, "taint first, then launch");
    assert!(
        terminations(&h).is_empty(),
        "the old node is not drained before its replacement is up"
    );
    assert!(
        !h.commands
            .iter()
            .any(|(_, c)| matches!(c, Command::EvictPod { .. })),
        "nothing is evicted before the replacement is initialized"
    );
}

#[test]
fn a_replacement_that_fails_untaints_the_node_it_was_for() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let (old, node) = underused(&mut h);
    h.run_until(h.now_ms + MIN + 30_000);
    let replacement = h.all_launches()[1].clone();
    h.fail_launch(&replacement, Vec::new());
    h.send(EventKind::NodeClaimTerminated {
        nodeclaim: replacement.name.clone(),
    });
    let uncordon = h.commands.iter().find_map(|(_, c)| match c {
        Command::UncordonNode {
            node: n,
            nodeclaim,
            reason,
        } => Some((n.clone(), nodeclaim.clone(), reason.clone())),
        _ => None,
    });
    let (n, claim, reason) = uncordon.expect("the taint is taken off");
    assert_eq!((n, claim), (node, old.name.clone()));
    assert!(reason.contains(&replacement.name), "{reason}");
    assert!(
        !terminations(&h).iter().any(|t| t.1 == old.name),
        "the old machine stays"
    );
}

const HOUR: u64 = 60 * MIN;

/// A machine kept full for `age` by a big pod beside `steady` (`cpu` millicores, owned by
/// `owner`, or by nothing), then the big pod leaves: `steady` alone could go to a cheaper
/// machine.
fn steady_pod_left_alone(h: &mut CoreHarness, owner: Option<&str>, cpu: i64, age: u64) {
    let big = replicated(Pod::new("default", "big", 15_000 - cpu, GIB));
    let mut steady = Pod::new("default", "steady", cpu, GIB);
    steady.owner = owner.map(|kind| OwnerRef {
        kind: kind.to_string(),
        name: "work".to_string(),
    });
    h.running_machine(vec![big, steady]);
    h.advance(age);
    assert!(terminations(h).is_empty(), "full, it stays");
    h.delete_pod("default", "big");
    h.advance(10 * MIN);
}

#[test]
fn a_jobs_pod_that_ran_long_is_not_restarted_for_a_smaller_saving() {
    // Three days of work at about a third of the machine: more than a day's saving.
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    steady_pod_left_alone(&mut h, Some("Job"), 6_000, 72 * HOUR);
    assert_eq!(h.all_launches().len(), 1, "no replacement");
    assert!(terminations(&h).is_empty());
}

/// The summary of the launch that replaces a consolidated machine, if any.
fn replacement(h: &CoreHarness) -> Option<String> {
    h.commands.iter().find_map(|(_, c)| match c {
        Command::LaunchNodeClaim { reason, .. } if reason.summary.starts_with("replaces") => {
            Some(reason.summary.clone())
        }
        _ => None,
    })
}

#[test]
fn a_replicated_pod_loses_no_work_and_is_moved() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    steady_pod_left_alone(&mut h, Some("ReplicaSet"), 6_000, 72 * HOUR);
    let summary = replacement(&h).expect("replaced");
    assert!(!summary.contains("work lost"), "{summary}");
}

#[test]
fn a_small_jobs_pod_loses_less_than_the_saving_over_its_age_and_is_moved() {
    // An eighth of the machine for two hours; the saving counted over those two hours (as
    // long as it may yet run) is most of the machine's price.
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    steady_pod_left_alone(&mut h, Some("Job"), 2_000, 2 * HOUR);
    let summary = replacement(&h).expect("replaced");
    assert!(!summary.contains("work lost $0.0000"), "{summary}");
    assert!(
        summary.contains("over 2h"),
        "the saving over the pod's age: {summary}"
    );
}

#[test]
fn a_young_jobs_pod_is_not_moved_for_a_saving_that_may_not_outlast_it() {
    // Twenty minutes old: a pod that has run twenty minutes may end in twenty more, and the
    // saving over that is not worth its restart and its work.
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    steady_pod_left_alone(&mut h, Some("Job"), 6_000, 20 * MIN);
    assert_eq!(replacement(&h), None);
    assert!(terminations(&h).is_empty());
}

#[test]
fn without_counting_lost_work_the_old_jobs_pod_is_moved_as_karpenter_would() {
    let mut h = CoreHarness::with_config(Config {
        count_lost_work: LostWork::Off,
        ..Config::default()
    });
    h.nodepool(pool());
    steady_pod_left_alone(&mut h, Some("Job"), 6_000, 72 * HOUR);
    let summary = replacement(&h).expect("replaced");
    assert!(!summary.contains("work lost"), "{summary}");
}

#[test]
fn an_unowned_pod_that_ran_long_is_not_restarted_for_a_smaller_saving() {
    // Nothing makes an unowned pod again: whoever made it runs it again, three days of work.
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    steady_pod_left_alone(&mut h, None, 6_000, 72 * HOUR);
    assert_eq!(replacement(&h), None);
    assert!(terminations(&h).is_empty());
}

#[test]
fn counting_only_jobs_the_unowned_pod_is_moved_as_karpenter_would() {
    let mut h = CoreHarness::with_config(Config {
        count_lost_work: LostWork::Jobs,
        ..Config::default()
    });
    h.nodepool(pool());
    steady_pod_left_alone(&mut h, None, 6_000, 72 * HOUR);
    let summary = replacement(&h).expect("replaced");
    assert!(!summary.contains("work lost"), "{summary}");
}
