//! The cluster is the truth: a core that starts knowing nothing (a lost store, a new leader
//! with a store of its own, Karpenter's machines) adopts every NodeClaim the API server has,
//! with its instance, node and pods; terminates none that is in use; and then treats them as
//! its own (emptiness, expiration, drift). What it knew whose object is gone goes; a Node
//! being deleted is drained.

use std::sync::Arc;

use nodewright_core::disruption::drift::{
    NODECLASS_HASH, NODECLASS_HASH_VERSION, NODEPOOL_HASH, NODEPOOL_HASH_VERSION,
};
use nodewright_core::model::duration::MaybeNever;
use nodewright_core::model::labels;
use nodewright_core::model::nodeclaim::{
    Instance, ListedInstance, NodeClaimSpec, TerminationReason,
};
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::observed::{ObservedInstance, ObservedNodeClaim};
use nodewright_core::model::pod::{Pod, PodKey};
use nodewright_core::model::requirements::{Operator, RequirementSpec};
use nodewright_core::{Command, EventKind};
use nodewright_testkit::harness::{CoreHarness, replicated};

const GIB: i64 = 1 << 30;
const MIN: u64 = 60_000;

fn pool() -> NodePool {
    let mut p = NodePool::new("default", "default");
    p.requirements = vec![
        RequirementSpec::new(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]),
        RequirementSpec::new(labels::INSTANCE_CATEGORY, Operator::In, &["c", "m"]),
    ];
    p.consolidate_after = MaybeNever::After(30_000);
    p
}

/// What the API server and EC2 say of a machine the first core launched.
fn observed(claim: &NodeClaimSpec, instance: &Instance, node: Option<&str>) -> ObservedNodeClaim {
    ObservedNodeClaim {
        name: claim.name.clone(),
        nodepool: claim.nodepool.clone(),
        nodeclass: claim.nodeclass.clone(),
        labels: claim.labels.clone(),
        annotations: claim.annotations.clone(),
        taints: claim.taints.clone(),
        startup_taints: claim.startup_taints.clone(),
        requirements: claim.requirements.clone(),
        requests: claim.requests.clone(),
        expire_after_ms: claim.expire_after_ms,
        created_at_ms: 1_000,
        instance: Some(ObservedInstance {
            instance_id: instance.instance_id.clone(),
            instance_type: instance.instance_type.clone(),
            zone: instance.zone.clone(),
            capacity_type: instance.capacity_type,
            launched_at_ms: 2_000,
            running: true,
        }),
        node_name: node.map(str::to_string),
        initialized: node.is_some(),
        deleting: false,
    }
}

fn listed(instance: &Instance, nodeclaim: &str) -> ListedInstance {
    ListedInstance {
        instance_id: instance.instance_id.clone(),
        nodeclaim: Some(nodeclaim.to_string()),
        launched_at_ms: 2_000,
        running: true,
    }
}

/// A machine the first core launched, running pod `a`, and a second core that knows nothing
/// of it: it has been told the pool, the node and the bound pod, as the watchers tell them.
fn first_and_second() -> (CoreHarness, CoreHarness, NodeClaimSpec, Instance, String) {
    let mut first = CoreHarness::new();
    first.nodepool(pool());
    let (claim, instance, node) =
        first.running_machine(vec![replicated(Pod::new("default", "a", 1000, GIB))]);
    let mut second = CoreHarness::new();
    second.now_ms = first.now_ms + 10 * MIN;
    second.nodepool(pool());
    let node_state = Arc::clone(&first.core.state().nodes.get(&node).expect("its node").node);
    second.send(EventKind::NodeApplied(node_state));
    let pod = first
        .core
        .state()
        .pods
        .get(&PodKey::new("default", "a"))
        .expect("the pod")
        .clone();
    second.send(EventKind::PodApplied(Box::new(pod)));
    (first, second, claim, instance, node)
}

fn terminations(commands: &[Command]) -> Vec<(String, TerminationReason)> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::TerminateNodeClaim {
                nodeclaim, reason, ..
            } => Some((nodeclaim.clone(), *reason)),
            Command::TerminateOrphanInstance { instance_id, .. } => {
                Some((instance_id.clone(), TerminationReason::InstanceGone))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn an_adopted_machine_is_no_orphan_and_goes_only_once_empty() {
    let (_, mut second, claim, instance, node) = first_and_second();
    let adopted = second.send(EventKind::NodeClaimsObserved {
        nodeclaims: vec![observed(&claim, &instance, Some(&node))],
    });
    assert!(terminations(&adopted).is_empty(), "{adopted:?}");
    let state = second.core.state();
    let known = state.nodeclaims.get(&claim.name).expect("adopted");
    assert_eq!(
        known.instance.as_ref().map(|i| &i.instance_id),
        Some(&instance.instance_id)
    );
    assert_eq!(
        known.instance.as_ref().map(|i| i.price),
        Some(instance.price),
        "priced from the catalog"
    );
    assert_eq!(known.node_name.as_deref(), Some(node.as_str()));
    assert!(known.is_initialized());
    assert_eq!(
        state.nodes.get(&node).and_then(|n| n.nodeclaim.as_deref()),
        Some(claim.name.as_str())
    );

    // The garbage collector's listing, long past its grace: the instance is the NodeClaim's.
    let mut after = second.send(EventKind::InstancesListed {
        instances: vec![listed(&instance, &claim.name)].into(),
    });
    after.extend(second.advance(5 * MIN));
    assert!(terminations(&after).is_empty(), "{after:?}");
    // Its pod stays where it runs: no launch, no eviction.
    assert!(CoreHarness::launches(&after).is_empty(), "{after:?}");
    assert!(!after.iter().any(|c| matches!(c, Command::EvictPod { .. })));

    // Its workload gone, it is removed as any machine of the core's.
    second.delete_pod("default", "a");
    let emptied = second.advance(2 * MIN);
    assert_eq!(
        terminations(&emptied),
        [(claim.name.clone(), TerminationReason::Empty)],
        "{emptied:?}"
    );
}

#[test]
fn an_instance_no_nodeclaim_owns_is_still_collected_after_adoption() {
    let (_, mut second, claim, instance, node) = first_and_second();
    second.send(EventKind::NodeClaimsObserved {
        nodeclaims: vec![observed(&claim, &instance, Some(&node))],
    });
    let stray = ListedInstance {
        instance_id: "i-stray".into(),
        nodeclaim: Some("default-gone".into()),
        launched_at_ms: 2_000,
        running: true,
    };
    let after = second.send(EventKind::InstancesListed {
        instances: vec![listed(&instance, &claim.name), stray].into(),
    });
    assert_eq!(
        terminations(&after),
        [("i-stray".to_string(), TerminationReason::InstanceGone)],
        "{after:?}"
    );
}

#[test]
fn a_known_machine_whose_nodeclaim_vanished_while_down_is_drained_and_terminated() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let (claim, instance, _) =
        h.running_machine(vec![replicated(Pod::new("default", "a", 1000, GIB))]);
    // The next start lists no NodeClaim at all: it was deleted (and its finalizer taken off)
    // while no controller ran.
    let cmds = h.send(EventKind::NodeClaimsObserved { nodeclaims: vec![] });
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::EvictPod { pod, .. } if pod.name == "a")),
        "{cmds:?}"
    );
    let done = h.complete_evictions();
    assert_eq!(
        terminations(&done),
        [(claim.name.clone(), TerminationReason::Deleted)]
    );
    assert!(done.iter().any(|c| matches!(c, Command::TerminateNodeClaim { instance_id: Some(id), .. } if *id == instance.instance_id)));
}

#[test]
fn a_nodeclaim_with_no_instance_is_given_up() {
    let (_, mut second, claim, instance, _) = first_and_second();
    let mut never = observed(&claim, &instance, None);
    never.name = "default-never".into();
    never.instance = None;
    let cmds = second.send(EventKind::NodeClaimsObserved {
        nodeclaims: vec![never, observed(&claim, &instance, None)],
    });
    assert_eq!(
        terminations(&cmds),
        [(
            "default-never".to_string(),
            TerminationReason::LaunchTimeout
        )],
        "{cmds:?}"
    );
    let detail = cmds
        .iter()
        .find_map(|c| match c {
            Command::TerminateNodeClaim { detail, .. } => Some(detail.clone()),
            _ => None,
        })
        .unwrap_or_default();
    assert!(detail.contains("adopted without an instance"), "{detail}");
}

#[test]
fn karpenters_hashes_are_not_drift_and_a_changed_pool_after_adoption_is() {
    let (_, mut second, claim, instance, node) = first_and_second();
    let mut karpenters = observed(&claim, &instance, Some(&node));
    // Karpenter's hashes, of its own hashing.
    karpenters
        .annotations
        .insert(NODEPOOL_HASH.into(), "6821555240594823241".into());
    karpenters
        .annotations
        .insert(NODEPOOL_HASH_VERSION.into(), "v3".into());
    karpenters
        .annotations
        .insert(NODECLASS_HASH.into(), "12345678901234567890".into());
    karpenters
        .annotations
        .insert(NODECLASS_HASH_VERSION.into(), "v4".into());
    second.send(EventKind::NodeClaimsObserved {
        nodeclaims: vec![karpenters],
    });
    let quiet = second.advance(10 * MIN);
    assert!(terminations(&quiet).is_empty(), "{quiet:?}");
    assert!(
        CoreHarness::launches(&quiet).is_empty(),
        "no replacement: {quiet:?}"
    );
    // The pool's template changes after adoption: that is drift, and the machine is replaced.
    let mut changed = pool();
    changed
        .template_labels
        .insert("team".into(), "payments".into());
    let mut drifted = second.nodepool(changed);
    drifted.extend(second.advance(2 * MIN));
    assert!(!CoreHarness::launches(&drifted).is_empty(), "{drifted:?}");
}

#[test]
fn a_node_being_deleted_is_drained_then_its_machine_terminated_once() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let (claim, _, node) = h.running_machine(vec![replicated(Pod::new("default", "a", 1000, GIB))]);
    let cmds = h.send(EventKind::NodeDeleting { name: node.clone() });
    assert!(terminations(&cmds).is_empty(), "drained first: {cmds:?}");
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::CordonNode { node: n, .. } if *n == node))
    );
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::EvictPod { pod, .. } if pod.name == "a"))
    );
    // Told again at every update of the node: nothing more.
    assert!(
        h.send(EventKind::NodeDeleting { name: node.clone() })
            .is_empty()
    );
    let done = h.complete_evictions();
    assert_eq!(
        terminations(&done),
        [(claim.name.clone(), TerminationReason::NodeDeleted)]
    );
    // A node that is not a machine of the core's is not its to drain.
    h.existing_node("group-node", "m5.large", "us-east-1a");
    assert!(
        h.send(EventKind::NodeDeleting {
            name: "group-node".into()
        })
        .is_empty()
    );
}

#[test]
fn a_nodeclaim_whose_instance_is_gone_is_collected_and_nothing_else_is_touched() {
    let (_, mut second, claim, instance, node) = first_and_second();
    let mut gone = observed(&claim, &instance, Some(&node));
    if let Some(i) = gone.instance.as_mut() {
        i.running = false;
    }
    let adopted = second.send(EventKind::NodeClaimsObserved {
        nodeclaims: vec![gone],
    });
    assert!(terminations(&adopted).is_empty(), "{adopted:?}");
    // The listing no longer has it: the NodeClaim goes (its pod is not evicted: the machine is
    // gone), as Karpenter's collector does.
    let listed = second.send(EventKind::InstancesListed {
        instances: Vec::new().into(),
    });
    assert_eq!(
        terminations(&listed),
        [(claim.name.clone(), TerminationReason::InstanceGone)],
        "{listed:?}"
    );
    assert!(!listed.iter().any(|c| matches!(c, Command::EvictPod { .. })));
}

#[test]
fn a_nodeclaim_of_a_nodepool_that_no_longer_exists_is_adopted_not_drained() {
    let (_, mut second, claim, instance, node) = first_and_second();
    let mut orphaned = observed(&claim, &instance, Some(&node));
    orphaned.nodepool = "deleted-pool".into();
    let cmds = second.send(EventKind::NodeClaimsObserved {
        nodeclaims: vec![orphaned],
    });
    let mut after = cmds;
    after.extend(second.send(EventKind::InstancesListed {
        instances: vec![listed(&instance, &claim.name)].into(),
    }));
    after.extend(second.advance(30 * MIN));
    assert!(terminations(&after).is_empty(), "{after:?}");
    assert!(second.core.state().nodeclaims.contains_key(&claim.name));
    // Its own deletion still works: `kubectl delete nodeclaim` drains and terminates it.
    let deleted = second.send(EventKind::NodeClaimDeleted {
        nodeclaim: claim.name.clone(),
    });
    assert!(
        deleted
            .iter()
            .any(|c| matches!(c, Command::EvictPod { .. })),
        "{deleted:?}"
    );
}
