//! Events: everything the core learns about the world. Time arrives inside each event; the core
//! never reads a clock.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
pub use crate::model::daemonset::DaemonSet;
use crate::model::interruption::Interruption;
use crate::model::node::Node;
use crate::model::nodeclaim::{Instance, OfferingKey};
use crate::model::nodeclass::NodeClass;
use crate::model::nodepool::NodePool;
use crate::model::pod::{Pod, PodKey};

/// One observation, stamped with the time (milliseconds on the cluster's clock) it was made.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Event {
    pub at_ms: u64,
    pub kind: EventKind,
}

impl Event {
    pub fn new(at_ms: u64, kind: EventKind) -> Self {
        Event { at_ms, kind }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventKind {
    /// The instance types, offerings and prices the cloud offers now.
    CatalogUpdated(Arc<Catalog>),
    NodePoolApplied(Box<NodePool>),
    NodePoolDeleted {
        name: String,
    },
    NodeClassApplied(Box<NodeClass>),
    NodeClassDeleted {
        name: String,
    },
    /// A pod was created or changed (bound or not: `node_name` says).
    PodApplied(Box<Pod>),
    /// The scheduler bound a pod to a node.
    PodBound {
        pod: PodKey,
        node: String,
    },
    /// A pod is gone (deleted, evicted, finished).
    PodDeleted {
        pod: PodKey,
    },
    /// A node object appeared (or changed).
    NodeApplied(Box<Node>),
    NodeDeleted {
        name: String,
    },
    /// The cloud started an instance for a NodeClaim.
    LaunchSucceeded {
        nodeclaim: String,
        instance: Instance,
    },
    /// The cloud could not start an instance for a NodeClaim.
    LaunchFailed {
        nodeclaim: String,
        /// The error code EC2 gave (`InsufficientInstanceCapacity`, ...).
        code: String,
        message: String,
        /// Offerings that had no capacity.
        unavailable: Vec<OfferingKey>,
    },
    /// The instance behind a NodeClaim is terminated; the NodeClaim is gone.
    NodeClaimTerminated {
        nodeclaim: String,
    },
    /// A timer the core asked for fired.
    Tick,
    /// A DaemonSet was created or changed: its pods run on every node they fit, and count as
    /// overhead when sizing a machine.
    DaemonSetApplied(Box<DaemonSet>),
    DaemonSetDeleted {
        namespace: String,
        name: String,
    },
    PodDisruptionBudgetApplied(Box<crate::model::pdb::PodDisruptionBudget>),
    PodDisruptionBudgetDeleted {
        namespace: String,
        name: String,
    },
    /// The Eviction API refused to evict a pod (a PodDisruptionBudget allows no disruption).
    EvictionRefused {
        pod: PodKey,
        reason: String,
    },
    /// An interruption message arrived (the SQS queue fed by EventBridge); `message_id` is the
    /// EventBridge event's id.
    InterruptionReceived {
        message_id: String,
        instance_id: String,
        interruption: Interruption,
    },
    /// The cloud's listing of this cluster's instances (every garbage-collection period).
    InstancesListed {
        instances: Vec<crate::model::nodeclaim::ListedInstance>,
    },
    /// What an EC2NodeClass's selectors found in the cloud (subnets, security groups, AMIs).
    /// Appended last: the variants' order is the log's format.
    NodeClassResolved(Box<crate::model::nodeclass::ResolvedNodeClass>),
    /// A NodeClaim was deleted from outside nodewright (`kubectl delete nodeclaim`): its
    /// machine is drained and terminated, as Karpenter's termination finalizer does.
    /// Appended last: the variants' order is the log's format.
    NodeClaimDeleted {
        nodeclaim: String,
    },
    /// The cloud's listing of this cluster's instances again, as what changed since the
    /// listing before it (`model::listing`): the instances new or different, with their places
    /// in the new listing, and the ids no longer listed. The driver logs a listing so when the changes
    /// rebuild it exactly, which is nearly always: most listings are the one before.
    /// Appended last: the variants' order is the log's format.
    InstancesRelisted {
        changed: Vec<crate::model::listing::ListedAt>,
        gone: Vec<String>,
    },
}

impl EventKind {
    /// A short name for summaries (`log inspect`, counts by kind).
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::CatalogUpdated(_) => "CatalogUpdated",
            EventKind::NodePoolApplied(_) => "NodePoolApplied",
            EventKind::NodePoolDeleted { .. } => "NodePoolDeleted",
            EventKind::NodeClassApplied(_) => "NodeClassApplied",
            EventKind::NodeClassDeleted { .. } => "NodeClassDeleted",
            EventKind::PodApplied(_) => "PodApplied",
            EventKind::PodBound { .. } => "PodBound",
            EventKind::PodDeleted { .. } => "PodDeleted",
            EventKind::NodeApplied(_) => "NodeApplied",
            EventKind::NodeDeleted { .. } => "NodeDeleted",
            EventKind::LaunchSucceeded { .. } => "LaunchSucceeded",
            EventKind::LaunchFailed { .. } => "LaunchFailed",
            EventKind::NodeClaimTerminated { .. } => "NodeClaimTerminated",
            EventKind::Tick => "Tick",
            EventKind::DaemonSetApplied(_) => "DaemonSetApplied",
            EventKind::DaemonSetDeleted { .. } => "DaemonSetDeleted",
            EventKind::PodDisruptionBudgetApplied(_) => "PodDisruptionBudgetApplied",
            EventKind::PodDisruptionBudgetDeleted { .. } => "PodDisruptionBudgetDeleted",
            EventKind::EvictionRefused { .. } => "EvictionRefused",
            EventKind::InterruptionReceived { .. } => "InterruptionReceived",
            EventKind::InstancesListed { .. } => "InstancesListed",
            EventKind::NodeClassResolved(_) => "NodeClassResolved",
            EventKind::NodeClaimDeleted { .. } => "NodeClaimDeleted",
            EventKind::InstancesRelisted { .. } => "InstancesRelisted",
        }
    }
}
