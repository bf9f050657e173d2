//! proptest strategies for the core's inputs: pods, NodePools, and whole event sequences.

use std::sync::Arc;

use nodewright_core::catalog::{CapacityType, Catalog, Price};
use nodewright_core::model::labels;
use nodewright_core::model::listing::ListedAt;
use nodewright_core::model::node::Node;
use nodewright_core::model::nodeclaim::{Instance, ListedInstance, OfferingKey};
use nodewright_core::model::nodeclass::NodeClass;
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::observed::{ObservedInstance, ObservedNodeClaim};
use nodewright_core::model::pod::{Pod, PodKey};
use nodewright_core::model::requirements::{Operator, RequirementSpec};
use nodewright_core::model::resources::Resources;
use nodewright_core::model::taints::{Taint, TaintEffect, Toleration, TolerationOperator};
use nodewright_core::{Event, EventKind};
use proptest::prelude::*;

/// A small slice of the real catalog (every 40th type), cheap to clone in every case.
pub fn small_catalog() -> Arc<Catalog> {
    static SMALL: std::sync::OnceLock<Arc<Catalog>> = std::sync::OnceLock::new();
    SMALL
        .get_or_init(|| {
            let full = crate::us_east_1_catalog();
            Arc::new(Catalog {
                region: full.region.clone(),
                instance_types: full.instance_types.iter().step_by(40).cloned().collect(),
                nested_virtualization: full.nested_virtualization.clone(),
                reservations: Vec::new(),
                ..Catalog::default()
            })
        })
        .clone()
}

const ZONES: &[&str] = &["us-east-1a", "us-east-1b", "us-east-1c"];
const POD_NAMES: &[&str] = &["a", "b", "c", "d", "e", "f", "g", "h"];
const NODE_NAMES: &[&str] = &["n1", "n2", "n3"];
const CLAIM_NAMES: &[&str] = &["default-aaaaa", "spot-bbbbb", "default-ccccc"];

pub fn pod() -> impl Strategy<Value = Pod> {
    (
        prop::sample::select(POD_NAMES),
        prop::sample::select(vec![0i64, 100, 250, 1000, 3500, 16_000, 200_000]),
        prop::sample::select(vec![0i64, 128 << 20, 1 << 30, 8 << 30, 600 << 30]),
        prop::option::of(prop::sample::select(vec!["amd64", "arm64"])),
        prop::option::of(prop::sample::select(ZONES)),
        any::<bool>(),
        prop::option::of(0i64..3),
    )
        .prop_map(|(name, cpu, mem, arch, zone, tolerate, gpus)| {
            let mut p = Pod::new("default", name, cpu, mem);
            if let Some(a) = arch {
                p.node_selector.insert(labels::ARCH.into(), a.into());
            }
            if let Some(z) = zone {
                p.required_node_affinity =
                    vec![vec![RequirementSpec::new(labels::ZONE, Operator::In, &[z])]];
            }
            if tolerate {
                p.tolerations.push(Toleration {
                    key: Some("dedicated".into()),
                    operator: TolerationOperator::Exists,
                    value: None,
                    effect: None,
                });
            }
            if let Some(g) = gpus.filter(|g| *g > 0) {
                p.requests
                    .set_extended(nodewright_core::model::resources::NVIDIA_GPU, g);
            }
            p.missing_requests = cpu == 0 && mem == 0;
            p
        })
}

pub fn nodepool() -> impl Strategy<Value = NodePool> {
    (
        prop::sample::select(vec!["default", "spot"]),
        prop::option::of(prop::sample::select(vec!["spot", "on-demand"])),
        prop::option::of(prop::sample::select(vec![
            vec!["c", "m", "r"],
            vec!["g", "p"],
            vec!["t"],
        ])),
        any::<bool>(),
        prop::option::of(1u32..100),
        prop::option::of(prop::sample::select(vec![4_000i64, 64_000, 1_000_000])),
        prop::sample::select(vec![0u64, 30_000, 60_000]),
    )
        .prop_map(|(name, ct, cats, taint, weight, cpu_limit, after)| {
            let mut pool = NodePool::new(name, "default");
            if let Some(ct) = ct {
                pool.requirements.push(RequirementSpec::new(
                    labels::CAPACITY_TYPE,
                    Operator::In,
                    &[ct],
                ));
            }
            if let Some(cats) = cats {
                pool.requirements.push(RequirementSpec::new(
                    labels::INSTANCE_CATEGORY,
                    Operator::In,
                    &cats,
                ));
            }
            if taint {
                pool.taints
                    .push(Taint::new("dedicated", Some("x"), TaintEffect::NoSchedule));
            }
            pool.weight = weight;
            if let Some(cpu) = cpu_limit {
                pool.limits.insert("cpu".into(), cpu);
            }
            pool.consolidate_after = nodewright_core::model::duration::MaybeNever::After(after);
            pool
        })
}

fn node() -> impl Strategy<Value = Node> {
    (
        prop::sample::select(NODE_NAMES),
        any::<bool>(),
        prop::option::of(prop::sample::select(CLAIM_NAMES)),
    )
        .prop_map(|(name, ready, claim)| Node {
            name: name.into(),
            provider_id: claim.map(|c| format!("aws:///us-east-1a/i-{c}")),
            labels: [(labels::ARCH.to_string(), "amd64".to_string())].into(),
            annotations: Default::default(),
            taints: Vec::new(),
            allocatable: Resources::new(4000, 16 << 30, 58),
            ready,
            unschedulable: false,
        })
}

/// One event kind from everything the world can say (names drawn from small sets so that
/// events refer to each other).
pub fn event_kind() -> impl Strategy<Value = EventKind> {
    let catalog = small_catalog();
    prop_oneof![
        3 => pod().prop_map(|p| EventKind::PodApplied(Box::new(p))),
        1 => prop::sample::select(POD_NAMES).prop_map(|n| EventKind::PodDeleted { pod: PodKey::new("default", n) }),
        1 => (prop::sample::select(POD_NAMES), prop::sample::select(NODE_NAMES)).prop_map(|(p, n)| EventKind::PodBound { pod: PodKey::new("default", p), node: n.into() }),
        1 => nodepool().prop_map(|p| EventKind::NodePoolApplied(Box::new(p))),
        1 => Just(EventKind::NodeClassApplied(Box::new(NodeClass::new("default")))),
        1 => node().prop_map(|n| EventKind::NodeApplied(Arc::new(n))),
        1 => prop::sample::select(NODE_NAMES).prop_map(|n| EventKind::NodeDeleted { name: n.into() }),
        1 => (prop::sample::select(CLAIM_NAMES), prop::sample::select(ZONES)).prop_map(|(c, z)| EventKind::LaunchSucceeded {
            nodeclaim: c.into(),
            instance: Instance { instance_id: format!("i-{c}"), instance_type: "m5.large".into(), zone: z.into(), capacity_type: CapacityType::OnDemand, price: Price(96_000) },
        }),
        1 => prop::sample::select(CLAIM_NAMES).prop_map(|c| EventKind::LaunchFailed {
            nodeclaim: c.into(), code: "InsufficientInstanceCapacity".into(), message: "none".into(),
            unavailable: vec![OfferingKey { instance_type: "m5.large".into(), zone: "us-east-1a".into(), capacity_type: CapacityType::Spot }],
        }),
        1 => prop::sample::select(CLAIM_NAMES).prop_map(|c| EventKind::NodeClaimTerminated { nodeclaim: c.into() }),
        1 => (prop::sample::select(CLAIM_NAMES), any::<bool>()).prop_map(|(c, retryable)| EventKind::TerminationFailed { nodeclaim: c.into(), retryable, reason: "ec2:TerminateInstances failed with RequestLimitExceeded".into() }),
        3 => Just(EventKind::Tick),
        1 => Just(EventKind::CatalogUpdated(catalog)),
        1 => prop::collection::vec(listed_instance(), 0..4).prop_map(|instances| EventKind::InstancesListed { instances: instances.into() }),
        1 => (prop::collection::vec((0u32..4, listed_instance()), 0..3), prop::collection::vec(prop::sample::select(CLAIM_NAMES), 0..2)).prop_map(|(changed, gone)| EventKind::InstancesRelisted {
            changed: changed.into_iter().map(|(position, instance)| ListedAt { position, instance }).collect(),
            gone: gone.into_iter().map(|c| format!("i-{c}")).collect(),
        }),
        1 => prop::collection::vec(observed_nodeclaim(), 0..3).prop_map(|nodeclaims| EventKind::NodeClaimsObserved { nodeclaims }),
        1 => prop::sample::select(NODE_NAMES).prop_map(|n| EventKind::NodeDeleting { name: n.into() }),
    ]
}

/// A NodeClaim as a start observes it: one the core may know or not, launched or not, its
/// node seen or not, being deleted or not.
fn observed_nodeclaim() -> impl Strategy<Value = ObservedNodeClaim> {
    (
        prop::sample::select(CLAIM_NAMES),
        prop::option::of((prop::sample::select(ZONES), any::<bool>())),
        prop::option::of(prop::sample::select(NODE_NAMES)),
        any::<bool>(),
        any::<bool>(),
        0u64..600_000,
    )
        .prop_map(
            |(c, instance, node, initialized, deleting, at)| ObservedNodeClaim {
                name: c.into(),
                nodepool: "default".into(),
                nodeclass: "default".into(),
                labels: [(labels::NODEPOOL.to_string(), "default".to_string())].into(),
                annotations: Default::default(),
                taints: Vec::new(),
                startup_taints: Vec::new(),
                requirements: Vec::new(),
                requests: Resources::new(1000, 1 << 30, 1),
                expire_after_ms: Some(3_600_000),
                created_at_ms: at,
                instance: instance.map(|(zone, running)| ObservedInstance {
                    instance_id: format!("i-{c}"),
                    instance_type: "m5.large".into(),
                    zone: zone.into(),
                    capacity_type: CapacityType::OnDemand,
                    launched_at_ms: at,
                    running,
                }),
                node_name: node.map(str::to_string),
                initialized,
                deleting,
            },
        )
}

/// An instance of the cluster as the cloud lists it: one of a launched NodeClaim's, or an
/// orphan with no NodeClaim tag.
fn listed_instance() -> impl Strategy<Value = ListedInstance> {
    (
        prop::sample::select(CLAIM_NAMES),
        any::<bool>(),
        any::<bool>(),
        0u64..600_000,
    )
        .prop_map(|(c, tagged, running, launched_at_ms)| ListedInstance {
            instance_id: format!("i-{c}"),
            nodeclaim: tagged.then(|| c.to_string()),
            launched_at_ms,
            running,
        })
}

/// A sequence of events with non-decreasing times, starting with a catalog and a node class.
pub fn event_sequence(max_len: usize) -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec((0u64..120_000, event_kind()), 1..max_len).prop_map(|steps| {
        let mut t = 0;
        let mut events = vec![
            Event::new(0, EventKind::CatalogUpdated(small_catalog())),
            Event::new(
                0,
                EventKind::NodeClassApplied(Box::new(NodeClass::new("default"))),
            ),
        ];
        for (dt, kind) in steps {
            t += dt;
            events.push(Event::new(t, kind));
        }
        events
    })
}
