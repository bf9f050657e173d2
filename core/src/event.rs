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
    /// When it was observed, in milliseconds on the cluster's clock.
    pub at_ms: u64,
    /// What was observed.
    pub kind: EventKind,
}

impl Event {
    /// An event of `kind` observed at `at_ms`.
    pub fn new(at_ms: u64, kind: EventKind) -> Self {
        Event { at_ms, kind }
    }
}

/// What was observed. The variants' order is the event log's format: a new kind is appended.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventKind {
    /// The instance types, offerings and prices the cloud offers now.
    CatalogUpdated(Arc<Catalog>),
    /// A NodePool was created or changed.
    NodePoolApplied(Box<NodePool>),
    /// A NodePool was deleted: its NodeClaims are drained and terminated.
    NodePoolDeleted {
        /// The NodePool's name.
        name: String,
    },
    /// An EC2NodeClass was created or changed.
    NodeClassApplied(Box<NodeClass>),
    /// An EC2NodeClass was deleted.
    NodeClassDeleted {
        /// The EC2NodeClass's name.
        name: String,
    },
    /// A pod was created or changed (bound or not: `node_name` says).
    PodApplied(Box<Pod>),
    /// The scheduler bound a pod to a node.
    PodBound {
        /// The pod.
        pod: PodKey,
        /// The node it was bound to.
        node: String,
    },
    /// A pod is gone (deleted, evicted, finished).
    PodDeleted {
        /// The pod.
        pod: PodKey,
    },
    /// A node object appeared (or changed); the state keeps the node it carries, not a copy.
    NodeApplied(Arc<Node>),
    /// A node object was deleted.
    NodeDeleted {
        /// The node's name.
        name: String,
    },
    /// The cloud started an instance for a NodeClaim.
    LaunchSucceeded {
        /// The NodeClaim launched.
        nodeclaim: String,
        /// The instance: its id, type, zone, capacity type and price.
        instance: Instance,
    },
    /// The cloud could not start an instance for a NodeClaim.
    LaunchFailed {
        /// The NodeClaim that did not launch.
        nodeclaim: String,
        /// The error code EC2 gave (`InsufficientInstanceCapacity`, ...).
        code: String,
        /// EC2's message.
        message: String,
        /// Offerings that had no capacity.
        unavailable: Vec<OfferingKey>,
    },
    /// The instance behind a NodeClaim is terminated; the NodeClaim is gone.
    NodeClaimTerminated {
        /// The NodeClaim.
        nodeclaim: String,
    },
    /// A timer the core asked for fired.
    Tick,
    /// A DaemonSet was created or changed: its pods run on every node they fit, and count as
    /// overhead when sizing a machine.
    DaemonSetApplied(Box<DaemonSet>),
    /// A DaemonSet was deleted.
    DaemonSetDeleted {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A PodDisruptionBudget was created or changed.
    PodDisruptionBudgetApplied(Box<crate::model::pdb::PodDisruptionBudget>),
    /// A PodDisruptionBudget was deleted.
    PodDisruptionBudgetDeleted {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The Eviction API refused to evict a pod (a PodDisruptionBudget allows no disruption).
    EvictionRefused {
        /// The pod not evicted.
        pod: PodKey,
        /// What the API said.
        reason: String,
    },
    /// An interruption message arrived (the SQS queue fed by EventBridge); `message_id` is the
    /// EventBridge event's id.
    InterruptionReceived {
        /// The EventBridge event's id (a message delivered twice has the same).
        message_id: String,
        /// The instance it is about.
        instance_id: String,
        /// What it announces: a spot interruption, a rebalance recommendation, a scheduled
        /// change, a state change.
        interruption: Interruption,
    },
    /// The cloud's listing of this cluster's instances (every garbage-collection period).
    InstancesListed {
        /// Every instance listed, in the cloud's order: shared, as a listing is often the one
        /// before (written as the list it is).
        instances: Arc<[crate::model::nodeclaim::ListedInstance]>,
    },
    /// What an EC2NodeClass's selectors found in the cloud (subnets, security groups, AMIs).
    /// Appended last: the variants' order is the log's format.
    NodeClassResolved(Box<crate::model::nodeclass::ResolvedNodeClass>),
    /// A NodeClaim was deleted from outside nodewright (`kubectl delete nodeclaim`): its
    /// machine is drained and terminated, as Karpenter's termination finalizer does.
    /// Appended last: the variants' order is the log's format.
    NodeClaimDeleted {
        /// The NodeClaim.
        nodeclaim: String,
    },
    /// The cloud's listing of this cluster's instances again, as what changed since the
    /// listing before it (`model::listing`): the instances new or different, with their places
    /// in the new listing, and the ids no longer listed. The driver logs a listing so when the changes
    /// rebuild it exactly, which is nearly always: most listings are the one before.
    /// Appended last: the variants' order is the log's format.
    InstancesRelisted {
        /// The instances new or different since the listing before, with their places.
        changed: Vec<crate::model::listing::ListedAt>,
        /// The ids no longer listed.
        gone: Vec<String>,
    },
    /// What a start observed of the machines the cluster says are its own: every NodeClaim in
    /// the API server, each with its instance. The core adopts those it does not know (its
    /// store was lost, or Karpenter launched them), and lets go of the launched ones it knows
    /// whose object is gone (deleted while no controller ran). Appended last: the variants'
    /// order is the log's format.
    NodeClaimsObserved {
        /// Every NodeClaim of the API server, in name order.
        nodeclaims: Vec<crate::model::observed::ObservedNodeClaim>,
    },
    /// A Node is being deleted (its `deletionTimestamp` is set): a machine of the core's is
    /// drained, then terminated, as Karpenter's termination finalizer does. Appended last: the
    /// variants' order is the log's format.
    NodeDeleting {
        /// The node's name.
        name: String,
    },
    /// A NodeClaim's termination could not be finished: a step (tainting the node, finding or
    /// terminating the instance, deleting the node, releasing the NodeClaim) failed past the
    /// executor's bounded retries. The core asks again after a wait that doubles with each
    /// failure. Appended last: the variants' order is the log's format.
    TerminationFailed {
        /// The NodeClaim.
        nodeclaim: String,
        /// Whether trying again may succeed by itself (throttled, unreachable, a server
        /// error); false when the answer stands until a person acts (forbidden, denied by a
        /// webhook): it is asked again after the longest wait.
        retryable: bool,
        /// Which step failed, and the service's answer.
        reason: String,
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
            EventKind::NodeClaimsObserved { .. } => "NodeClaimsObserved",
            EventKind::NodeDeleting { .. } => "NodeDeleting",
            EventKind::TerminationFailed { .. } => "TerminationFailed",
        }
    }
}
