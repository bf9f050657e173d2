//! Static NodePools (`spec.replicas`, Karpenter's static capacity): a fixed machine count kept
//! whatever the pods ask, never consolidated, scaled by its replicas, replaced when its machines
//! go.

use nodewright_core::model::duration::MaybeNever;
use nodewright_core::model::labels;
use nodewright_core::model::nodeclaim::{NodeClaimSpec, TerminationReason};
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::pod::Pod;
use nodewright_core::model::requirements::{Operator, RequirementSpec};
use nodewright_core::{Command, EventKind};
use nodewright_testkit::harness::CoreHarness;

const GIB: i64 = 1 << 30;

fn static_pool(replicas: u32) -> NodePool {
    let mut pool = NodePool::new("static", "default");
    pool.requirements = vec![
        RequirementSpec::new(labels::INSTANCE_TYPE, Operator::In, &["m5.large"]),
        RequirementSpec::new(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]),
    ];
    pool.replicas = Some(replicas);
    pool
}

/// Launches and joins every machine launched so far that has no node yet; returns the nodes.
fn join_all(h: &mut CoreHarness, claims: &[NodeClaimSpec]) -> Vec<String> {
    claims
        .iter()
        .map(|claim| {
            let instance = h.launch_cheapest(claim);
            h.join(claim, &instance)
        })
        .collect()
}

fn unschedulable_reasons(h: &CoreHarness) -> Vec<String> {
    h.commands
        .iter()
        .filter_map(|(_, c)| match c {
            Command::ReportUnschedulable { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_static_pool_launches_its_replicas_with_no_pod_and_nothing_more() {
    let mut h = CoreHarness::new();
    let launched = CoreHarness::launches(&h.nodepool(static_pool(3)));
    assert_eq!(launched.len(), 3);
    for claim in &launched {
        assert_eq!(claim.nodepool, "static");
        assert_eq!(claim.options[0].instance_type, "m5.large");
    }
    let reason = h
        .commands
        .iter()
        .find_map(|(_, c)| match c {
            Command::LaunchNodeClaim { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .expect("a launch");
    assert!(reason.pods.is_empty());
    assert!(
        reason
            .summary
            .starts_with("static nodepool static keeps 3 machine(s) and has 0; nodepool static"),
        "{}",
        reason.summary
    );
    // The machines on their way count: a relist, time and their joining launch nothing more.
    h.nodepool(static_pool(3));
    h.advance(60_000);
    join_all(&mut h, &launched);
    h.advance(3_600_000);
    assert_eq!(h.all_launches().len(), 3);
    assert!(h.terminations().is_empty(), "{:?}", h.terminations());
}

#[test]
fn pending_pods_land_on_static_machines_but_launch_none() {
    let mut h = CoreHarness::new();
    let launched = CoreHarness::launches(&h.nodepool(static_pool(1)));
    join_all(&mut h, &launched);
    // The m5.large holds one of the two pods (the larger first, as the solver packs); the
    // static pool launches nothing for the other.
    h.pod(Pod::new("default", "small", 1000, GIB));
    h.pod(Pod::new("default", "large", 1500, GIB));
    let commands = h.advance(11_000);
    assert!(CoreHarness::launches(&commands).is_empty());
    let nominated: Vec<&str> = commands
        .iter()
        .filter_map(|c| match c {
            Command::NominatePod { pod, .. } => Some(pod.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(nominated, ["large"]);
    let reasons = unschedulable_reasons(&h);
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].contains("nodepool static: static (replicas 1), it keeps its machine count and launches none for pending pods"),
        "{reasons:?}"
    );
}

#[test]
fn static_machines_are_never_consolidated_even_empty() {
    let mut h = CoreHarness::new();
    let mut pool = static_pool(2);
    pool.consolidate_after = MaybeNever::After(0);
    let launched = CoreHarness::launches(&h.nodepool(pool));
    join_all(&mut h, &launched);
    h.advance(6 * 3_600_000);
    assert!(h.terminations().is_empty(), "{:?}", h.terminations());
    assert_eq!(h.all_launches().len(), 2);
}

#[test]
fn lowering_the_replicas_terminates_the_emptiest_machines_without_a_budget() {
    let mut h = CoreHarness::new();
    let mut pool = static_pool(3);
    // A budget of zero nodes: scaling down does not wait for it, as in Karpenter.
    pool.budgets[0].nodes = nodewright_core::model::nodepool::BudgetNodes::Count(0);
    let launched = CoreHarness::launches(&h.nodepool(pool.clone()));
    let nodes = join_all(&mut h, &launched);
    h.advance(60_000);
    h.pod(Pod::new("default", "busy", 500, GIB));
    h.bind("default", "busy", &nodes[0]);
    pool.replicas = Some(1);
    h.nodepool(pool);
    h.complete_evictions();
    h.advance(60_000);
    let gone: Vec<(String, TerminationReason)> = h
        .terminations()
        .into_iter()
        .map(|t| (t.nodeclaim, t.reason))
        .collect();
    assert_eq!(gone.len(), 2, "{gone:?}");
    assert!(
        gone.iter()
            .all(|(_, r)| *r == TerminationReason::ScaledDown)
    );
    assert!(
        gone.iter().all(|(name, _)| *name != launched[0].name),
        "the machine with a pod stays: {gone:?}"
    );
    assert_eq!(h.all_launches().len(), 3, "nothing replaces them");
}

#[test]
fn raising_the_replicas_launches_as_far_as_limits_nodes_allows() {
    let mut h = CoreHarness::new();
    let mut pool = static_pool(1);
    pool.limits.insert("nodes".into(), 3);
    let launched = CoreHarness::launches(&h.nodepool(pool.clone()));
    join_all(&mut h, &launched);
    pool.replicas = Some(5);
    let more = CoreHarness::launches(&h.nodepool(pool));
    assert_eq!(
        more.len(),
        2,
        "limits.nodes 3 holds the pool at three machines"
    );
    let summary = h
        .commands
        .iter()
        .rev()
        .find_map(|(_, c)| match c {
            Command::LaunchNodeClaim { reason, .. } => Some(reason.summary.clone()),
            _ => None,
        })
        .expect("a launch");
    assert!(
        summary.contains("(limits.nodes 3 allows 2 more now)"),
        "{summary}"
    );
}

#[test]
fn an_expired_static_machine_is_replaced_to_keep_the_count() {
    let mut h = CoreHarness::new();
    let mut pool = static_pool(2);
    pool.expire_after = MaybeNever::After(3_600_000);
    let launched = CoreHarness::launches(&h.nodepool(pool));
    join_all(&mut h, &launched);
    h.advance(3_600_000 + 60_000);
    h.complete_evictions();
    let expired: Vec<_> = h
        .terminations()
        .into_iter()
        .filter(|t| t.reason == TerminationReason::Expired)
        .collect();
    assert_eq!(expired.len(), 2);
    // Each expiring machine is replaced as soon as it starts to go: the pool keeps two.
    assert_eq!(h.all_launches().len(), 4);
    for t in &expired {
        h.send(EventKind::NodeClaimTerminated {
            nodeclaim: t.nodeclaim.clone(),
        });
    }
    h.advance(60_000);
    assert_eq!(h.all_launches().len(), 4);
}

#[test]
fn a_failed_static_launch_is_tried_again_on_another_offering() {
    let mut h = CoreHarness::new();
    let launched = CoreHarness::launches(&h.nodepool(static_pool(1)));
    let unavailable = launched[0]
        .options
        .iter()
        .map(|o| o.key())
        .take(1)
        .collect();
    h.fail_launch(&launched[0], unavailable);
    h.advance(1_000);
    let launches = h.all_launches();
    assert_eq!(launches.len(), 2, "{launches:?}");
    assert_ne!(
        launches[1].options[0].zone, launched[0].options[0].zone,
        "the unavailable offering is avoided"
    );
}
