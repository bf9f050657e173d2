//! Commands: what the core asks the world to do. Each carries the reason a user reads in the
//! log, in the Kubernetes event, and in `nodewright explain`.

use serde::{Deserialize, Serialize};

use crate::model::nodeclaim::{LaunchReason, NodeClaimSpec, TerminationReason};
use crate::model::pod::PodKey;

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Command {
    /// Create the NodeClaim and launch an instance for it (one EC2 CreateFleet over its options).
    LaunchNodeClaim {
        nodeclaim: Box<NodeClaimSpec>,
        reason: LaunchReason,
    },
    /// Tell the pod where it is expected to run (Kubernetes event `Nominated`).
    NominatePod {
        pod: PodKey,
        /// A node name, or a NodeClaim name while the machine is on its way.
        target: String,
        reason: String,
    },
    /// The pod fits nowhere nodewright may launch (event `FailedScheduling`).
    ReportUnschedulable { pod: PodKey, reason: String },
    /// The pod sets no CPU or memory request: it is scheduled as zero and packs badly.
    WarnMissingRequests { pod: PodKey },
    /// Remove the machine: taint `karpenter.sh/disrupted:NoSchedule`, drain, terminate the
    /// instance, delete the node and the NodeClaim.
    TerminateNodeClaim {
        nodeclaim: String,
        node: Option<String>,
        instance_id: Option<String>,
        reason: TerminationReason,
        /// What allowed it: the rule, the idle time, the budget.
        detail: String,
    },
    /// The NodePool's disruption is blocked until it is fixed (event `DisruptionBlocked`).
    DisruptionBlocked { nodepool: String, reason: String },
    /// Taint the node `karpenter.sh/disrupted:NoSchedule`: no new pod lands on it.
    CordonNode {
        node: String,
        nodeclaim: String,
        reason: String,
    },
    /// Evict a pod through the Eviction API (PodDisruptionBudgets apply), or delete it when
    /// `forced` (the NodePool's terminationGracePeriod ran out).
    EvictPod {
        pod: PodKey,
        node: String,
        forced: bool,
        reason: String,
    },
    /// An annotation nodewright reads has a value it cannot use (event `InvalidAnnotation`):
    /// `object` is `pod namespace/name` or `node name`; `reason` names the annotation and the fix.
    WarnInvalidAnnotation { object: String, reason: String },
    /// Remove the `karpenter.sh/disrupted` taint: the disruption that set it was given up (its
    /// replacement failed to come up).
    UncordonNode {
        node: String,
        nodeclaim: String,
        reason: String,
    },
    /// What an interruption message led to (event `Interrupted` on the NodeClaim, when there is
    /// one): the message, the instance, and the action taken or why none was.
    ReportInterruption {
        message_id: String,
        instance_id: String,
        nodeclaim: Option<String>,
        interruption: String,
        action: String,
    },
    /// Terminate an instance of this cluster that no NodeClaim owns (a launch whose result was
    /// lost, say), so that nothing runs, and costs, unseen.
    TerminateOrphanInstance {
        instance_id: String,
        /// Its `karpenter.sh/nodeclaim` tag.
        nodeclaim: Option<String>,
        detail: String,
    },
    /// Take the `nodewright.dev/awaiting-siblings` startup taint off the node: the machines of
    /// its provisioning decision have registered (or its hold ran out), so pods may land.
    /// Appended last: the variants' order is the log's format.
    ReleaseNode {
        node: String,
        nodeclaim: String,
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
