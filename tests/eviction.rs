//! The termination flow: cordon, evict in tiers through the Eviction API (PodDisruptionBudgets
//! apply, refusals are retried), do-not-disrupt and terminationGracePeriod, then terminate.

use nodewright_core::model::duration::MaybeNever;
use nodewright_core::model::labels;
use nodewright_core::model::pdb::{IntOrPercent, PodDisruptionBudget};
use nodewright_core::model::pod::{Pod, PodKey};
use nodewright_core::{Command, EventKind};
use nodewright_testkit::harness::{CoreHarness, expiring_pool, pdb_of_app, replicated};

const GIB: i64 = 1 << 30;
const MIN: u64 = 60_000;

/// A Deployment's web pod: evicted at expiry as in Karpenter (a Job's would be left to finish,
/// `expirationWaitsForJobs`).
fn web(name: &str) -> Pod {
    let mut p = replicated(Pod::new("default", name, 500, GIB / 2));
    p.labels.insert("app".into(), "web".into());
    p
}

/// One machine running `pods`; returns its node.
fn machine(h: &mut CoreHarness, pods: Vec<Pod>) -> String {
    h.running_machine(pods).2
}

fn evictions(h: &CoreHarness) -> Vec<(u64, String, bool)> {
    h.commands
        .iter()
        .filter_map(|(t, c)| match c {
            Command::EvictPod { pod, forced, .. } => Some((*t, pod.name.clone(), *forced)),
            _ => None,
        })
        .collect()
}

fn terminated(h: &CoreHarness) -> bool {
    h.commands
        .iter()
        .any(|(_, c)| matches!(c, Command::TerminateNodeClaim { .. }))
}

fn pdb_max_unavailable_1() -> PodDisruptionBudget {
    pdb_of_app("web", None, Some(1))
}

#[test]
fn a_pdb_with_max_unavailable_1_never_has_two_pods_evicted_at_once() {
    let mut h = CoreHarness::new();
    h.nodepool(expiring_pool(None));
    h.send(EventKind::PodDisruptionBudgetApplied(Box::new(
        pdb_max_unavailable_1(),
    )));
    machine(&mut h, vec![web("w1"), web("w2"), web("w3")]);
    h.run_until(31 * MIN);
    assert!(
        h.commands
            .iter()
            .any(|(_, c)| matches!(c, Command::CordonNode { .. }))
    );
    assert_eq!(evictions(&h).len(), 1, "one at a time");
    h.advance(60_000);
    assert_eq!(evictions(&h).len(), 1, "still one while it has not left");
    let first = evictions(&h)[0].1.clone();
    h.send(EventKind::PodDeleted {
        pod: PodKey::new("default", &first),
    });
    assert_eq!(evictions(&h).len(), 2, "the next once the first is gone");
    let second = evictions(&h)[1].1.clone();
    h.send(EventKind::PodDeleted {
        pod: PodKey::new("default", &second),
    });
    let third = evictions(&h)[2].1.clone();
    assert!(!terminated(&h));
    h.send(EventKind::PodDeleted {
        pod: PodKey::new("default", &third),
    });
    assert!(terminated(&h), "the instance goes when the node is empty");
}

#[test]
fn a_refused_eviction_is_retried_not_forced() {
    let mut h = CoreHarness::new();
    h.nodepool(expiring_pool(None));
    machine(&mut h, vec![web("w1")]);
    h.run_until(31 * MIN);
    assert_eq!(evictions(&h).len(), 1);
    h.send(EventKind::EvictionRefused {
        pod: PodKey::new("default", "w1"),
        reason: "Cannot evict pod as it would violate the pod's disruption budget".into(),
    });
    h.advance(4_000);
    assert_eq!(evictions(&h).len(), 1);
    h.advance(2_000);
    let e = evictions(&h);
    assert_eq!(e.len(), 2, "asked again after 5 s");
    assert!(!e[1].2, "not forced");
}

#[test]
fn a_do_not_disrupt_pod_keeps_its_node_until_termination_grace_period() {
    let mut h = CoreHarness::new();
    h.nodepool(expiring_pool(Some(60 * MIN)));
    let mut keeper = web("keeper");
    keeper
        .annotations
        .insert(labels::DO_NOT_DISRUPT.into(), "true".into());
    machine(&mut h, vec![keeper, web("other")]);
    h.run_until(31 * MIN);
    let e = evictions(&h);
    assert_eq!(
        e.iter().map(|x| x.1.as_str()).collect::<Vec<_>>(),
        vec!["other"]
    );
    h.send(EventKind::PodDeleted {
        pod: PodKey::new("default", "other"),
    });
    h.run_until(31 * MIN + 59 * MIN);
    assert_eq!(
        evictions(&h).len(),
        1,
        "the keeper stays inside the grace period"
    );
    assert!(!terminated(&h));
    h.run_until(31 * MIN + 61 * MIN);
    let e = evictions(&h);
    assert_eq!(e.len(), 2);
    assert_eq!(e[1].1, "keeper");
    assert!(e[1].2, "forced once terminationGracePeriod ran out");
    h.send(EventKind::PodDeleted {
        pod: PodKey::new("default", "keeper"),
    });
    assert!(terminated(&h));
}

#[test]
fn termination_grace_period_overrides_a_blocking_pdb() {
    let mut h = CoreHarness::new();
    h.nodepool(expiring_pool(Some(10 * MIN)));
    let mut pdb = pdb_max_unavailable_1();
    pdb.max_unavailable = Some(IntOrPercent::Int(0));
    h.send(EventKind::PodDisruptionBudgetApplied(Box::new(pdb)));
    machine(&mut h, vec![web("w1")]);
    h.run_until(31 * MIN + 9 * MIN);
    assert!(evictions(&h).is_empty(), "the PDB allows nothing");
    h.run_until(31 * MIN + 11 * MIN);
    let e = evictions(&h);
    assert_eq!(e.len(), 1);
    assert!(e[0].2);
}

#[test]
fn critical_pods_leave_after_the_others() {
    let mut h = CoreHarness::new();
    h.nodepool(expiring_pool(None));
    let mut critical = web("critical");
    critical.labels.clear();
    critical.priority = 2_000_000_000;
    let mut plain = web("plain");
    plain.labels.clear();
    machine(&mut h, vec![critical, plain]);
    h.run_until(31 * MIN);
    assert_eq!(
        evictions(&h)
            .iter()
            .map(|e| e.1.as_str())
            .collect::<Vec<_>>(),
        vec!["plain"]
    );
    h.send(EventKind::PodDeleted {
        pod: PodKey::new("default", "plain"),
    });
    assert_eq!(evictions(&h).last().map(|e| e.1.as_str()), Some("critical"));
}

#[test]
fn an_empty_node_is_terminated_without_a_drain() {
    let mut h = CoreHarness::new();
    let mut p = expiring_pool(None);
    p.consolidate_after = MaybeNever::After(0);
    h.nodepool(p);
    machine(&mut h, vec![web("w1")]);
    h.delete_pod("default", "w1");
    // At the next disruption pass.
    h.advance(10_000);
    assert!(terminated(&h));
    assert!(
        !h.commands
            .iter()
            .any(|(_, c)| matches!(c, Command::CordonNode { .. }))
    );
}

#[test]
fn the_simulator_flags_a_voluntary_eviction_of_a_do_not_disrupt_pod() {
    let mut h = CoreHarness::new();
    h.nodepool(expiring_pool(None));
    let mut keeper = web("keeper");
    keeper
        .annotations
        .insert(labels::DO_NOT_DISRUPT.into(), "true".into());
    let node = machine(&mut h, vec![keeper]);
    // A core that evicted it would be caught.
    let bad = vec![Command::EvictPod {
        pod: PodKey::new("default", "keeper"),
        node,
        forced: false,
        reason: "a planted bug".into(),
    }];
    let violations = nodewright_testkit::invariants::check_step(&h.core, &bad, h.now_ms);
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].kind, "do-not-disrupt-pod-evicted");
    // The real drain never does it (checked on every step of every simulation).
    let forced = vec![Command::EvictPod {
        pod: PodKey::new("default", "keeper"),
        node: "n".into(),
        forced: true,
        reason: "terminationGracePeriod".into(),
    }];
    assert!(nodewright_testkit::invariants::check_step(&h.core, &forced, h.now_ms).is_empty());
}

#[test]
fn the_drain_goes_in_karpenters_four_tiers() {
    use nodewright_core::model::pod::OwnerRef;
    let mut h = CoreHarness::new();
    h.nodepool(expiring_pool(None));
    let daemon = |name: &str, priority: i32| {
        let mut p = Pod::new("kube-system", name, 100, GIB / 8);
        p.owner = Some(OwnerRef {
            kind: "DaemonSet".into(),
            name: name.into(),
        });
        p.priority = priority;
        p
    };
    let mut critical = web("critical");
    critical.labels.clear();
    critical.priority = 2_000_000_000;
    let mut plain = web("plain");
    plain.labels.clear();
    let node = machine(&mut h, vec![critical, plain]);
    for mut d in [daemon("agent", 0), daemon("cni", 2_000_001_000)] {
        d.node_name = Some(node.clone());
        h.send(EventKind::PodApplied(Box::new(d)));
    }
    // Expiry (30 m) starts the drain; each tier goes once the one before has left.
    h.run_until(31 * MIN);
    let mut order = Vec::new();
    for _ in 0..4 {
        let asked: Vec<(String, String)> = h
            .commands
            .iter()
            .filter_map(|(_, c)| match c {
                Command::EvictPod { pod, .. } => Some((pod.namespace.clone(), pod.name.clone())),
                _ => None,
            })
            .filter(|p| !order.contains(&p.1))
            .collect();
        assert_eq!(asked.len(), 1, "one tier at a time: {asked:?}");
        order.push(asked[0].1.clone());
        assert!(!terminated(&h), "pods are left");
        h.send(EventKind::PodDeleted {
            pod: PodKey::new(&asked[0].0, &asked[0].1),
        });
    }
    assert_eq!(order, vec!["plain", "agent", "critical", "cni"]);
    assert!(terminated(&h), "terminated once the last pod is gone");
}

#[test]
fn a_do_not_disrupt_duration_holds_the_drain_only_until_it_runs_out() {
    let mut h = CoreHarness::new();
    h.nodepool(expiring_pool(None));
    let mut keeper = web("keeper");
    keeper.labels.clear();
    keeper
        .annotations
        .insert(labels::DO_NOT_DISRUPT.into(), "40m".into());
    machine(&mut h, vec![keeper]);
    // Expired at 30 m (forced, no terminationGracePeriod): the pod is protected until 40 m.
    h.run_until(39 * MIN);
    assert!(evictions(&h).is_empty(), "{:?}", evictions(&h));
    h.run_until(41 * MIN);
    let e = evictions(&h);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].0 >= 40 * MIN && !e[0].2,
        "a graceful eviction once it ran out: {e:?}"
    );
}

#[test]
fn a_refused_eviction_under_a_budget_is_asked_again_not_counted_as_leaving() {
    let mut h = CoreHarness::new();
    h.nodepool(expiring_pool(None));
    h.send(EventKind::PodDisruptionBudgetApplied(Box::new(
        pdb_max_unavailable_1(),
    )));
    // One web pod on the machine that expires, one elsewhere (bound, healthy).
    machine(&mut h, vec![web("w1")]);
    let mut other = web("w2");
    other.node_name = Some("elsewhere".into());
    h.send(EventKind::PodApplied(Box::new(other)));
    h.run_until(31 * MIN);
    assert_eq!(evictions(&h).len(), 1);
    // The API server saw another web pod shutting down and refused.
    h.send(EventKind::EvictionRefused {
        pod: PodKey::new("default", "w1"),
        reason: "Cannot evict pod as it would violate the pod's disruption budget".into(),
    });
    h.advance(6_000);
    let e = evictions(&h);
    assert_eq!(
        e.len(),
        2,
        "the refused pod is still running, not leaving: the budget allows asking again"
    );
    assert!(!e[1].2, "not forced");
}

#[test]
fn pods_that_tolerate_the_disrupted_taint_are_not_drained() {
    use nodewright_core::model::pod::OwnerRef;
    use nodewright_core::model::taints::{Toleration, TolerationOperator};
    let mut h = CoreHarness::new();
    h.nodepool(expiring_pool(None));
    let mut plain = web("plain");
    plain.labels.clear();
    let node = machine(&mut h, vec![plain]);
    // A DaemonSet pod that tolerates everything would be recreated on the tainted node at once.
    let mut agent = Pod::new("kube-system", "agent", 100, GIB / 8);
    agent.owner = Some(OwnerRef {
        kind: "DaemonSet".into(),
        name: "agent".into(),
    });
    agent.tolerations = vec![Toleration {
        key: None,
        operator: TolerationOperator::Exists,
        value: None,
        effect: None,
    }];
    agent.node_name = Some(node);
    h.send(EventKind::PodApplied(Box::new(agent)));
    h.run_until(31 * MIN);
    h.complete_evictions();
    let asked: Vec<String> = evictions(&h).into_iter().map(|e| e.1).collect();
    assert_eq!(asked, vec!["plain"]);
    assert!(terminated(&h), "the tolerating pod goes with the machine");
}
