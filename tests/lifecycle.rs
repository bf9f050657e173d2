//! NodeClaim lifecycle and the first disruption rules: launch and registration timeouts,
//! emptiness after consolidateAfter within budgets, and forced expiration.

use nodewright_core::model::duration::MaybeNever;
use nodewright_core::model::labels;
use nodewright_core::model::nodeclaim::{Instance, NodeClaimSpec, TerminationReason};
use nodewright_core::model::nodepool::{BudgetNodes, DisruptionBudget, NodePool};
use nodewright_core::model::pod::{OwnerRef, Pod, PodKey};
use nodewright_core::{Command, EventKind};
use nodewright_testkit::harness::{CoreHarness, replicated};

const GIB: i64 = 1 << 30;
const MIN: u64 = 60_000;

fn pool(consolidate_after_ms: u64) -> NodePool {
    let mut p = NodePool::new("default", "default");
    p.consolidate_after = MaybeNever::After(consolidate_after_ms);
    p
}

/// A budget of zero nodes at all times, for every reason.
fn no_disruptions() -> DisruptionBudget {
    DisruptionBudget {
        nodes: BudgetNodes::Count(0),
        schedule: None,
        duration_ms: None,
        reasons: vec![],
    }
}

fn terminations(commands: &[Command]) -> Vec<(String, TerminationReason, String)> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::TerminateNodeClaim {
                nodeclaim,
                reason,
                detail,
                ..
            } => Some((nodeclaim.clone(), *reason, detail.clone())),
            _ => None,
        })
        .collect()
}

fn all_terminations(h: &CoreHarness) -> Vec<(String, TerminationReason, String)> {
    h.terminations()
        .into_iter()
        .map(|t| (t.nodeclaim, t.reason, t.detail))
        .collect()
}

/// Provisions one machine for one pod, launches and joins it, binds the pod. Returns the
/// claim, its instance and node name.
fn running_machine(h: &mut CoreHarness, pod: &str) -> (NodeClaimSpec, Instance, String) {
    h.pod(Pod::new("default", pod, 1000, GIB));
    let claim = CoreHarness::launches(&h.advance(2_000)).remove(0);
    let instance = h.launch_cheapest(&claim);
    h.advance(30_000);
    let node = h.join(&claim, &instance);
    h.bind("default", pod, &node);
    (claim, instance, node)
}

/// A machine running pod `a` whose node carries `karpenter.sh/do-not-disrupt: <value>`.
fn annotated_machine(h: &mut CoreHarness, value: &str) {
    let (claim, instance, node) = running_machine(h, "a");
    let it = h
        .catalog()
        .get(&instance.instance_type)
        .expect("known")
        .clone();
    let resources = nodewright_core::catalog::capacity(&it, &Default::default());
    let mut labels_map = it.labels.clone();
    labels_map.extend(claim.labels.clone());
    h.send(EventKind::NodeApplied(std::sync::Arc::new(
        nodewright_core::model::node::Node {
            name: node,
            provider_id: Some(instance.provider_id()),
            labels: labels_map,
            annotations: [(labels::DO_NOT_DISRUPT.to_string(), value.to_string())].into(),
            taints: vec![],
            allocatable: resources.allocatable,
            ready: true,
            unschedulable: false,
        },
    )));
}

#[test]
fn a_launch_without_result_is_given_up_after_five_minutes() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(0));
    h.pod(Pod::new("default", "a", 1000, GIB));
    let claim = CoreHarness::launches(&h.advance(2_000)).remove(0);
    let created = h.now_ms - 1_000;
    assert!(terminations(&h.run_until(created + 5 * MIN - 1)).is_empty());
    let t = terminations(&h.run_until(created + 5 * MIN));
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].0, claim.name);
    assert_eq!(t[0].1, TerminationReason::LaunchTimeout);
}

#[test]
fn an_instance_that_never_registers_is_terminated_after_fifteen_minutes() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(0));
    h.pod(Pod::new("default", "a", 1000, GIB));
    let claim = CoreHarness::launches(&h.advance(2_000)).remove(0);
    let instance = h.launch_cheapest(&claim);
    let launched = h.now_ms;
    assert!(terminations(&h.run_until(launched + 15 * MIN - 1)).is_empty());
    let cmds = h.run_until(launched + 15 * MIN);
    let t = terminations(&cmds);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].1, TerminationReason::RegistrationTimeout);
    assert!(cmds.iter().any(|c| matches!(c, Command::TerminateNodeClaim { instance_id: Some(id), .. } if *id == instance.instance_id)));
    // The pod is provisioned again.
    h.send(EventKind::NodeClaimTerminated {
        nodeclaim: claim.name.clone(),
    });
    assert_eq!(CoreHarness::launches(&h.advance(2_000)).len(), 1);
}

#[test]
fn a_late_launch_result_for_a_given_up_claim_terminates_its_instance() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(0));
    h.pod(Pod::new("default", "a", 1000, GIB));
    let claim = CoreHarness::launches(&h.advance(2_000)).remove(0);
    h.advance(5 * MIN);
    h.send(EventKind::NodeClaimTerminated {
        nodeclaim: claim.name.clone(),
    });
    let before = h.commands.len();
    let instance = h.launch_cheapest(&claim);
    let after: Vec<Command> = h.commands[before..]
        .iter()
        .map(|(_, c)| c.clone())
        .collect();
    assert!(after.iter().any(|c| matches!(c, Command::TerminateNodeClaim { instance_id: Some(id), .. } if *id == instance.instance_id)));
}

#[test]
fn an_empty_node_is_removed_once_consolidate_after_has_passed() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(MIN));
    let (claim, _, _) = running_machine(&mut h, "a");
    h.advance(5 * MIN);
    assert!(
        all_terminations(&h).is_empty(),
        "a node running a pod stays"
    );
    h.delete_pod("default", "a");
    let emptied = h.now_ms;
    assert!(
        terminations(&h.run_until(emptied + MIN - 1)).is_empty(),
        "not before consolidateAfter"
    );
    let t = terminations(&h.run_until(emptied + MIN + 10_000));
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].0, claim.name);
    assert_eq!(t[0].1, TerminationReason::Empty);
    assert!(t[0].2.contains("consolidateAfter 1m0s"), "{}", t[0].2);
}

#[test]
fn consolidate_after_never_keeps_empty_nodes() {
    let mut h = CoreHarness::new();
    let mut p = pool(0);
    p.consolidate_after = MaybeNever::Never;
    h.nodepool(p);
    running_machine(&mut h, "a");
    h.delete_pod("default", "a");
    h.advance(60 * MIN);
    assert!(all_terminations(&h).is_empty());
}

#[test]
fn a_do_not_disrupt_node_is_not_removed_when_empty() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(0));
    annotated_machine(&mut h, "true");
    h.delete_pod("default", "a");
    h.advance(30 * MIN);
    assert!(all_terminations(&h).is_empty());
}

#[test]
fn a_node_running_only_daemonset_pods_is_empty() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(0));
    let (claim, _, node) = running_machine(&mut h, "a");
    let mut ds = Pod::new("kube-system", "aws-node-x", 50, 64 << 20);
    ds.owner = Some(OwnerRef {
        kind: "DaemonSet".into(),
        name: "aws-node".into(),
    });
    ds.node_name = Some(node.clone());
    h.send(EventKind::PodApplied(Box::new(ds)));
    h.delete_pod("default", "a");
    h.advance(20_000);
    // Empty: chosen at once; its DaemonSet pods are drained (their own tier) before it goes.
    assert!(all_terminations(&h).is_empty());
    let evicted: Vec<PodKey> = h
        .commands
        .iter()
        .filter_map(|(_, c)| match c {
            Command::EvictPod { pod, .. } => Some(pod.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(evicted, vec![PodKey::new("kube-system", "aws-node-x")]);
    h.complete_evictions();
    let t = all_terminations(&h);
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!(t[0].0, claim.name);
    assert_eq!(t[0].1, TerminationReason::Empty);
}

#[test]
fn a_node_running_only_a_static_pod_is_empty_and_its_mirror_pod_is_not_evicted() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(0));
    let (claim, _, node) = running_machine(&mut h, "a");
    // The kubelet runs a static pod from a file; the API shows its mirror, owned by the node.
    let mut mirror = Pod::new(
        "kube-system",
        &format!("node-exporter-{node}"),
        50,
        64 << 20,
    );
    mirror.owner = Some(OwnerRef {
        kind: "Node".into(),
        name: node.clone(),
    });
    mirror.node_name = Some(node.clone());
    h.send(EventKind::PodApplied(Box::new(mirror)));
    h.delete_pod("default", "a");
    h.advance(20_000);
    // Empty, and nothing to evict: the kubelet would run it again whatever the API said.
    assert!(
        !h.commands
            .iter()
            .any(|(_, c)| matches!(c, Command::EvictPod { .. })),
        "{:?}",
        h.commands
    );
    let t = all_terminations(&h);
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!(t[0].0, claim.name);
    assert_eq!(t[0].1, TerminationReason::Empty);
}

#[test]
fn a_budget_of_zero_nodes_blocks_emptiness() {
    let mut h = CoreHarness::new();
    let mut p = pool(0);
    p.budgets = vec![no_disruptions()];
    h.nodepool(p);
    running_machine(&mut h, "a");
    h.delete_pod("default", "a");
    h.advance(30 * MIN);
    assert!(all_terminations(&h).is_empty());
}

#[test]
fn the_default_budget_removes_ten_percent_at_a_time_rounded_up() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(30_000));
    let mut claims = Vec::new();
    for i in 0..12 {
        // Each pod needs its own machine: 1 machine per pod via a large request.
        h.pod(Pod::new("default", &format!("p{i}"), 7_000, GIB));
        let claim = CoreHarness::launches(&h.advance(2_000)).remove(0);
        let instance = h.launch_cheapest(&claim);
        let node = h.join(&claim, &instance);
        h.bind("default", &format!("p{i}"), &node);
        claims.push(claim);
    }
    for i in 0..12 {
        h.delete_pod("default", &format!("p{i}"));
    }
    // 10 % of 12 rounds up to 2: two in the first pass, then none while they terminate.
    let first = terminations(&h.advance(40_000));
    assert_eq!(first.len(), 2, "{first:?}");
    let second = terminations(&h.advance(30_000));
    assert!(
        second.is_empty(),
        "terminating nodes use up the budget: {second:?}"
    );
    for (name, _, _) in &first {
        h.send(EventKind::NodeClaimTerminated {
            nodeclaim: name.clone(),
        });
    }
    // The next pass (one every 10 s) sees both gone: ten nodes left, none disrupting.
    h.advance(10_000);
    let all = all_terminations(&h);
    assert_eq!(all.len(), 3, "one more once the slots free: {all:?}");
    assert!(
        all[2]
            .2
            .contains("10% of 10 allows 1, 0 already disrupting"),
        "{}",
        all[2].2
    );
}

#[test]
fn expire_after_replaces_the_machine_outside_budgets() {
    let mut h = CoreHarness::new();
    let mut p = pool(0);
    p.expire_after = MaybeNever::After(60 * MIN);
    p.budgets = vec![no_disruptions()];
    h.nodepool(p);
    // A Deployment's pod, which expiration evicts (a Job's would be left to finish first).
    let claim = h
        .running_machine(vec![replicated(Pod::new("default", "a", 1000, GIB))])
        .0;
    let created = h
        .commands
        .iter()
        .find_map(|(t, c)| matches!(c, Command::LaunchNodeClaim { .. }).then_some(*t))
        .expect("launched");
    assert!(terminations(&h.run_until(created + 60 * MIN - 1)).is_empty());
    h.run_until(created + 60 * MIN);
    h.complete_evictions();
    let t = all_terminations(&h);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].0, claim.name);
    assert_eq!(t[0].1, TerminationReason::Expired);
}

#[test]
fn the_core_never_asks_for_a_timer_in_the_past() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(MIN));
    running_machine(&mut h, "a");
    for _ in 0..200 {
        let Some(t) = h.core.next_timer_ms() else {
            break;
        };
        assert!(
            t > h.core.now_ms(),
            "timer {t} not after now {}",
            h.core.now_ms()
        );
        h.now_ms = t;
        h.send(EventKind::Tick);
    }
}

#[test]
fn a_machine_whose_node_is_deleted_from_outside_is_terminated() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(0));
    let (claim, instance, node) = running_machine(&mut h, "a");
    let cmds = h.send(EventKind::NodeDeleted { name: node });
    let t = terminations(&cmds);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].0, claim.name);
    assert_eq!(t[0].1, TerminationReason::NodeDeleted);
    assert!(cmds.iter().any(|c| matches!(c, Command::TerminateNodeClaim { instance_id: Some(id), .. } if *id == instance.instance_id)));
}

#[test]
fn a_deleted_nodeclaim_is_drained_then_terminated_once() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(0));
    let (claim, instance, node) = running_machine(&mut h, "a");
    let cmds = h.send(EventKind::NodeClaimDeleted {
        nodeclaim: claim.name.clone(),
    });
    // Its pod is evicted first (PodDisruptionBudgets apply): no termination yet.
    assert!(terminations(&cmds).is_empty(), "{cmds:?}");
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::CordonNode { node: n, .. } if *n == node)),
        "{cmds:?}"
    );
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::EvictPod { pod, forced: false, .. } if pod.name == "a")),
        "{cmds:?}"
    );
    // Told twice (the watcher sees the object again): nothing more.
    let again = h.send(EventKind::NodeClaimDeleted {
        nodeclaim: claim.name.clone(),
    });
    assert!(again.is_empty(), "{again:?}");
    let after = h.complete_evictions();
    let t = terminations(&after);
    assert_eq!(t.len(), 1, "{after:?}");
    assert_eq!(t[0].0, claim.name);
    assert_eq!(t[0].1, TerminationReason::Deleted);
    assert!(after.iter().any(|c| matches!(c, Command::TerminateNodeClaim { instance_id: Some(id), .. } if *id == instance.instance_id)));
    // Unknown NodeClaims (deleted before the core heard of them) change nothing.
    let unknown = h.send(EventKind::NodeClaimDeleted {
        nodeclaim: "default-unknown".into(),
    });
    assert!(unknown.is_empty(), "{unknown:?}");
}

#[test]
fn deleting_a_nodepool_drains_and_terminates_its_machines_outside_budgets() {
    let mut h = CoreHarness::new();
    // A budget of zero nodes: it paces the disruption controller, not a deletion.
    let mut p = pool(0);
    p.budgets = vec![no_disruptions()];
    h.nodepool(p);
    let (claim, instance, node) = running_machine(&mut h, "a");
    let cmds = h.send(EventKind::NodePoolDeleted {
        name: "default".into(),
    });
    // Drained first, through the Eviction API.
    assert!(terminations(&cmds).is_empty(), "{cmds:?}");
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::CordonNode { node: n, .. } if *n == node)),
        "{cmds:?}"
    );
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::EvictPod { pod, forced: false, .. } if pod.name == "a")),
        "{cmds:?}"
    );
    let after = h.complete_evictions();
    let t = terminations(&after);
    assert_eq!(t.len(), 1, "{after:?}");
    assert_eq!(t[0].0, claim.name);
    assert_eq!(t[0].1, TerminationReason::NodePoolDeleted);
    assert!(
        t[0].2.contains("NodePool default was deleted"),
        "{}",
        t[0].2
    );
    assert!(after.iter().any(|c| matches!(c, Command::TerminateNodeClaim { instance_id: Some(id), .. } if *id == instance.instance_id)));
    // Told again (a relist): nothing more; and nothing launches for the deleted pool.
    let again = h.send(EventKind::NodePoolDeleted {
        name: "default".into(),
    });
    assert!(again.is_empty(), "{again:?}");
    assert!(CoreHarness::launches(&h.advance(5 * MIN)).is_empty());
}

#[test]
fn deleting_a_nodepool_leaves_the_machines_of_other_pools() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(0));
    let (kept, _, _) = running_machine(&mut h, "a");
    let mut other = pool(0);
    other.name = "other".into();
    h.nodepool(other);
    h.send(EventKind::NodePoolDeleted {
        name: "other".into(),
    });
    h.advance(5 * MIN);
    assert!(
        all_terminations(&h).iter().all(|t| t.0 != kept.name),
        "{:?}",
        all_terminations(&h)
    );
}

#[test]
fn a_do_not_disrupt_duration_on_a_node_counts_from_its_nodeclaim() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(0));
    let created = h.now_ms;
    annotated_machine(&mut h, "45m");
    h.delete_pod("default", "a");
    h.advance(30 * MIN);
    assert!(all_terminations(&h).is_empty(), "empty but protected");
    h.run_until(created + 46 * MIN);
    let t = all_terminations(&h);
    assert_eq!(t.len(), 1, "removed once the 45 minutes are over: {t:?}");
    assert_eq!(t[0].1, TerminationReason::Empty);
}

fn disrupted_taint() -> nodewright_core::model::taints::Taint {
    nodewright_core::model::taints::Taint {
        key: labels::DISRUPTED_TAINT.to_string(),
        value: None,
        effect: nodewright_core::model::taints::TaintEffect::NoSchedule,
    }
}

fn uncordons(commands: &[Command]) -> Vec<String> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::UncordonNode { node, .. } => Some(node.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_node_told_is_kept_as_told_not_copied() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(MIN));
    let (_, _, name) = running_machine(&mut h, "a");
    let mut changed = h.core.state().nodes[&name].node.as_ref().clone();
    changed.labels.insert("touched".into(), "yes".into());
    let told = std::sync::Arc::new(changed);
    h.send(EventKind::NodeApplied(std::sync::Arc::clone(&told)));
    let kept = &h.core.state().nodes[&name];
    assert!(std::sync::Arc::ptr_eq(&kept.node, &told));
    // Still the machine's node, with its pod.
    assert_eq!(kept.pods.len(), 1);
    // A node seen first is kept as told too.
    let mut other = told.as_ref().clone();
    other.name = "seen-first".into();
    other.provider_id = None;
    let told = std::sync::Arc::new(other);
    h.send(EventKind::NodeApplied(std::sync::Arc::clone(&told)));
    assert!(std::sync::Arc::ptr_eq(
        &h.core.state().nodes["seen-first"].node,
        &told
    ));
}

#[test]
fn a_disrupted_taint_no_disruption_stands_behind_is_taken_off_once_and_asked_again_after_a_restart()
{
    let mut h = CoreHarness::new();
    h.nodepool(pool(MIN));
    let (_, _, name) = running_machine(&mut h, "a");
    let mut node = h.core.state().nodes[&name].node.as_ref().clone();
    node.taints.push(disrupted_taint());
    let commands = h.send(EventKind::NodeApplied(std::sync::Arc::new(node.clone())));
    assert_eq!(uncordons(&commands), vec![name.clone()]);
    let why = commands
        .iter()
        .find_map(|c| match c {
            Command::UncordonNode { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .expect("an uncordon");
    assert!(why.contains("no disruption of it is under way"), "{why}");
    // Seen again with the taint before it is off: not asked twice ...
    node.labels.insert("touched".into(), "yes".into());
    let commands = h.send(EventKind::NodeApplied(std::sync::Arc::new(node.clone())));
    assert!(uncordons(&commands).is_empty(), "{commands:?}");
    // ... but a restart asks again, since nothing says it was done.
    assert_eq!(uncordons(&h.core.outstanding()), vec![name.clone()]);
    // Once the node is seen without it, nothing is outstanding.
    node.taints.clear();
    h.send(EventKind::NodeApplied(std::sync::Arc::new(node)));
    assert!(uncordons(&h.core.outstanding()).is_empty());
}

#[test]
fn a_disrupted_taint_on_a_node_of_another_controller_is_left_alone() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(MIN));
    h.existing_node("theirs", "m5.large", "us-east-1a");
    let mut node = h.core.state().nodes["theirs"].node.as_ref().clone();
    node.taints.push(disrupted_taint());
    let commands = h.send(EventKind::NodeApplied(std::sync::Arc::new(node)));
    assert!(uncordons(&commands).is_empty(), "{commands:?}");
}

#[test]
fn a_node_being_terminated_keeps_its_disrupted_taint() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(MIN));
    let (claim, _, node_name) = running_machine(&mut h, "a");
    h.delete_pod("default", "a");
    // Empty after consolidateAfter: terminated.
    let commands = h.advance(2 * MIN);
    assert!(
        terminations(&commands).iter().any(|t| t.0 == claim.name),
        "{commands:?}"
    );
    // The termination taints the node; the core must not take the taint off.
    let mut node = h.core.state().nodes[&node_name].node.as_ref().clone();
    node.taints.push(disrupted_taint());
    let commands = h.send(EventKind::NodeApplied(std::sync::Arc::new(node)));
    assert!(uncordons(&commands).is_empty(), "{commands:?}");
}

#[test]
fn a_launch_failed_for_another_reason_than_capacity_is_planned_again_within_seconds() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(0));
    h.pod(Pod::new("default", "a", 1000, GIB));
    let claim = CoreHarness::launches(&h.advance(2_000)).remove(0);
    // Throttled past every retry: no offering is out of capacity.
    let t = terminations(&h.send(EventKind::LaunchFailed {
        nodeclaim: claim.name.clone(),
        code: "RequestLimitExceeded".into(),
        message: "Request limit exceeded.".into(),
        unavailable: vec![],
    }));
    assert_eq!(t.len(), 1, "the failed NodeClaim is given up");
    assert_eq!(t[0].1, TerminationReason::LaunchFailed);
    assert!(t[0].2.contains("RequestLimitExceeded"), "{}", t[0].2);
    let again = CoreHarness::launches(&h.advance(2_000));
    assert_eq!(again.len(), 1, "the pod gets a new NodeClaim at once");
    assert_ne!(again[0].name, claim.name);
    assert_eq!(
        again[0].options, claim.options,
        "nothing was marked unavailable"
    );
}

#[test]
fn a_failed_termination_is_asked_again_after_a_wait_that_doubles() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(0));
    h.pod(Pod::new("default", "a", 1000, GIB));
    let claim = CoreHarness::launches(&h.advance(2_000)).remove(0);
    h.send(EventKind::LaunchFailed {
        nodeclaim: claim.name.clone(),
        code: "InsufficientInstanceCapacity".into(),
        message: "none".into(),
        unavailable: vec![],
    });
    let failed = |h: &mut CoreHarness, retryable: bool| {
        h.send(EventKind::TerminationFailed {
            nodeclaim: claim.name.clone(),
            retryable,
            reason: "terminating its instance failed: ec2:TerminateInstances failed with RequestLimitExceeded".into(),
        })
    };
    let asked_again = |commands: &[Command]| {
        terminations(commands)
            .into_iter()
            .filter(|t| t.0 == claim.name)
            .count()
    };
    // 30 s, then 60 s.
    let start = h.now_ms;
    assert_eq!(asked_again(&failed(&mut h, true)), 0);
    assert_eq!(asked_again(&h.run_until(start + 29_999)), 0);
    let again = h.run_until(start + 30_000);
    assert_eq!(asked_again(&again), 1);
    assert!(
        terminations(&again)[0]
            .2
            .contains("asked again after 1 failed attempt"),
        "{:?}",
        terminations(&again)
    );
    let second = h.now_ms;
    failed(&mut h, true);
    assert_eq!(asked_again(&h.run_until(second + 59_999)), 0);
    assert_eq!(asked_again(&h.run_until(second + 60_000)), 1);
    // An answer that stands: the longest wait.
    let third = h.now_ms;
    failed(&mut h, false);
    assert_eq!(asked_again(&h.run_until(third + 10 * MIN - 1)), 0);
    assert_eq!(asked_again(&h.run_until(third + 10 * MIN)), 1);
    // Done: no more.
    h.send(EventKind::NodeClaimTerminated {
        nodeclaim: claim.name.clone(),
    });
    assert_eq!(asked_again(&h.run_until(third + 60 * MIN)), 0);
    // A failure told for a NodeClaim that is gone changes nothing.
    assert_eq!(asked_again(&failed(&mut h, true)), 0);
    assert_eq!(asked_again(&h.run_until(third + 90 * MIN)), 0);
}
