//! Commands: what the core asks the world to do. Each carries the reason a user reads in the
//! log, in the Kubernetes event, and in `nodewright explain`.

use serde::{Deserialize, Serialize};

use crate::model::nodeclaim::{LaunchReason, NodeClaimSpec, TerminationReason};
use crate::model::pod::PodKey;

/// One thing the core asks the world to do. The adapters carry it out (the EC2 adapter
/// launches and terminates, the Kubernetes adapter writes objects and events); the driver logs
/// it first. Its text fields are for people: the adapters pass them on, never parse them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Command {
    /// Create the NodeClaim and launch an instance for it (one EC2 CreateFleet over its options).
    LaunchNodeClaim {
        /// The NodeClaim as decided: its name, NodePool, labels, taints, requirements and the
        /// offerings to launch into, cheapest first.
        nodeclaim: Box<NodeClaimSpec>,
        /// Which pods it is for and the one line that says why this machine.
        reason: LaunchReason,
    },
    /// Tell the pod where it is expected to run (Kubernetes event `Nominated`).
    NominatePod {
        /// The pending pod.
        pod: PodKey,
        /// A node name, or a NodeClaim name while the machine is on its way.
        target: String,
        /// Why there: the event's message.
        reason: String,
    },
    /// The pod fits nowhere nodewright may launch (event `FailedScheduling`).
    ReportUnschedulable {
        /// The pending pod.
        pod: PodKey,
        /// What ruled out each NodePool (and each node), for the event's message.
        reason: String,
    },
    /// The pod sets no CPU or memory request: it is scheduled as zero and packs badly.
    WarnMissingRequests {
        /// The pod without requests.
        pod: PodKey,
    },
    /// Remove the machine: taint `karpenter.sh/disrupted:NoSchedule`, drain, terminate the
    /// instance, delete the node and the NodeClaim.
    TerminateNodeClaim {
        /// The NodeClaim to remove.
        nodeclaim: String,
        /// Its node, once it registered one.
        node: Option<String>,
        /// Its instance, once launched.
        instance_id: Option<String>,
        /// Why it goes: emptiness, consolidation, drift, expiration, an interruption...
        reason: TerminationReason,
        /// What allowed it: the rule, the idle time, the budget.
        detail: String,
    },
    /// The NodePool's disruption is blocked until it is fixed (event `DisruptionBlocked`).
    DisruptionBlocked {
        /// The NodePool.
        nodepool: String,
        /// What blocks it and how to fix it (a budget's schedule that does not parse, say).
        reason: String,
    },
    /// Taint the node `karpenter.sh/disrupted:NoSchedule`: no new pod lands on it.
    CordonNode {
        /// The node to taint.
        node: String,
        /// Its NodeClaim.
        nodeclaim: String,
        /// The disruption it is taken out of service for.
        reason: String,
    },
    /// Evict a pod through the Eviction API (PodDisruptionBudgets apply), or delete it when
    /// `forced` (the NodePool's terminationGracePeriod ran out).
    EvictPod {
        /// The pod to evict.
        pod: PodKey,
        /// The node being drained.
        node: String,
        /// Delete the pod instead of asking the Eviction API.
        forced: bool,
        /// The disruption that drains the node.
        reason: String,
    },
    /// An annotation nodewright reads has a value it cannot use (event `InvalidAnnotation`):
    /// `object` is `pod namespace/name` or `node name`; `reason` names the annotation and the fix.
    WarnInvalidAnnotation {
        /// `pod namespace/name` or `node name`.
        object: String,
        /// The annotation, its value, and the fix.
        reason: String,
    },
    /// Remove the `karpenter.sh/disrupted` taint: the disruption that set it was given up (its
    /// replacement failed to come up).
    UncordonNode {
        /// The node to untaint.
        node: String,
        /// Its NodeClaim.
        nodeclaim: String,
        /// Why the disruption was given up.
        reason: String,
    },
    /// What an interruption message led to (event `Interrupted` on the NodeClaim, when there is
    /// one): the message, the instance, and the action taken or why none was.
    ReportInterruption {
        /// The queue message it came in.
        message_id: String,
        /// The instance the message is about.
        instance_id: String,
        /// The instance's NodeClaim, when one owns it.
        nodeclaim: Option<String>,
        /// What the message said (a spot interruption warning, a rebalance recommendation...).
        interruption: String,
        /// What was done about it, or why nothing was.
        action: String,
    },
    /// Terminate an instance of this cluster that no NodeClaim owns (a launch whose result was
    /// lost, say), so that nothing runs, and costs, unseen.
    TerminateOrphanInstance {
        /// The instance.
        instance_id: String,
        /// Its `karpenter.sh/nodeclaim` tag.
        nodeclaim: Option<String>,
        /// How long it ran unowned, and why it is taken to be an orphan.
        detail: String,
    },
    /// Take the `nodewright.dev/awaiting-siblings` startup taint off the node: the machines of
    /// its provisioning decision have registered (or its hold ran out), so pods may land.
    /// Appended last: the variants' order is the log's format.
    ReleaseNode {
        /// The held node.
        node: String,
        /// Its NodeClaim.
        nodeclaim: String,
        /// Which siblings registered, or that the hold ran out.
        reason: String,
    },
}

impl Command {
    /// A short name for summaries.
    pub fn name(&self) -> &'static str {
        match self {
            Command::LaunchNodeClaim { .. } => "LaunchNodeClaim",
            Command::NominatePod { .. } => "NominatePod",
            Command::ReportUnschedulable { .. } => "ReportUnschedulable",
            Command::WarnMissingRequests { .. } => "WarnMissingRequests",
            Command::TerminateNodeClaim { .. } => "TerminateNodeClaim",
            Command::DisruptionBlocked { .. } => "DisruptionBlocked",
            Command::CordonNode { .. } => "CordonNode",
            Command::EvictPod { .. } => "EvictPod",
            Command::WarnInvalidAnnotation { .. } => "WarnInvalidAnnotation",
            Command::UncordonNode { .. } => "UncordonNode",
            Command::ReportInterruption { .. } => "ReportInterruption",
            Command::TerminateOrphanInstance { .. } => "TerminateOrphanInstance",
            Command::ReleaseNode { .. } => "ReleaseNode",
        }
    }
}
