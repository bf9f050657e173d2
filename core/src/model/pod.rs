//! Pods as the core sees them: what they request and where they may run.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::affinity::{HostPort, PodAffinityTerm, TopologySpreadConstraint};
use super::do_not_disrupt::Protection;
use super::requirements::{RequirementSpec, Requirements};
use super::resources::Resources;
use super::taints::Toleration;

/// `namespace/name`, the pod's identity in logs, reports and commands.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodKey {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl PodKey {
    /// The key of `namespace/name`.
    pub fn new(namespace: &str, name: &str) -> Self {
        PodKey {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

impl fmt::Display for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Who owns a pod (DaemonSet pods are overhead, not workload).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OwnerRef {
    /// `DaemonSet`, `ReplicaSet`, `Job`, `StatefulSet`...
    pub kind: String,
    /// The owner's name.
    pub name: String,
}

/// A pod, with its scheduling constraints already read out of its spec.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Pod {
    /// `namespace/name`.
    pub key: PodKey,
    /// Its labels (what selectors and spread constraints match).
    pub labels: BTreeMap<String, String>,
    /// Its annotations (`karpenter.sh/do-not-disrupt` among them).
    pub annotations: BTreeMap<String, String>,
    /// The pod's effective request: the sum over containers, raised to the largest init
    /// container, plus overhead; `pods` is 1.
    pub requests: Resources,
    /// True when some container sets neither a CPU nor a memory request (scheduled as zero).
    pub missing_requests: bool,
    /// `nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: alternatives (OR) of requirement lists (AND).
    pub required_node_affinity: Vec<Vec<RequirementSpec>>,
    /// Preferred node affinity: (weight, requirements) terms.
    pub preferred_node_affinity: Vec<(i32, Vec<RequirementSpec>)>,
    /// Pod affinity terms, required (`weight: None`) and preferred.
    pub pod_affinity: Vec<PodAffinityTerm>,
    /// Pod anti-affinity terms, required (`weight: None`) and preferred.
    pub pod_anti_affinity: Vec<PodAffinityTerm>,
    /// `topologySpreadConstraints`.
    pub topology_spread: Vec<TopologySpreadConstraint>,
    /// The host ports its containers bind.
    pub host_ports: Vec<HostPort>,
    /// `tolerations`.
    pub tolerations: Vec<Toleration>,
    /// Its priority: it weighs in the cost of evicting it, and critical pods leave a draining
    /// node last.
    pub priority: i32,
    /// Its controller, if any.
    pub owner: Option<OwnerRef>,
    /// Set when the pod is bound to a node.
    pub node_name: Option<String>,
    /// When it was created.
    pub created_at_ms: u64,
}

impl Pod {
    /// Karpenter's disruption cost of the pod: 1 + deletion-cost/2^27 + priority/2^25,
    /// clamped to ±10 (`controller.kubernetes.io/pod-deletion-cost`).
    pub fn disruption_cost(&self) -> f64 {
        let deletion_cost = self
            .annotations
            .get("controller.kubernetes.io/pod-deletion-cost")
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        (1.0 + deletion_cost / 134_217_728.0 + self.priority as f64 / 33_554_432.0)
            .clamp(-10.0, 10.0)
    }

    /// A pod that only requests resources (handy for tests and synthetic workloads).
    pub fn new(namespace: &str, name: &str, cpu_milli: i64, memory_bytes: i64) -> Self {
        Pod {
            key: PodKey::new(namespace, name),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            requests: Resources::new(cpu_milli, memory_bytes, 1),
            missing_requests: false,
            node_selector: BTreeMap::new(),
            required_node_affinity: Vec::new(),
            preferred_node_affinity: Vec::new(),
            pod_affinity: Vec::new(),
            pod_anti_affinity: Vec::new(),
            topology_spread: Vec::new(),
            host_ports: Vec::new(),
            tolerations: Vec::new(),
            priority: 0,
            owner: None,
            node_name: None,
            created_at_ms: 0,
        }
    }

    /// Whether a DaemonSet owns it (overhead on every node, not workload).
    pub fn is_daemonset_pod(&self) -> bool {
        self.owner.as_ref().is_some_and(|o| o.kind == "DaemonSet")
    }

    /// Whether it is a node's own: the mirror of a static pod, which the node's kubelet runs
    /// from a file and makes again itself. It uses room, but it is no workload, and no drain
    /// evicts it (Karpenter's `IsOwnedByNode`).
    pub fn is_mirror_pod(&self) -> bool {
        self.owner.as_ref().is_some_and(|o| o.kind == "Node")
    }

    /// Whether it follows its node rather than being a workload on it: a DaemonSet's pod or
    /// a static pod's mirror.
    pub fn follows_its_node(&self) -> bool {
        self.is_daemonset_pod() || self.is_mirror_pod()
    }

    /// Whether one of its pod anti-affinity terms is required (has no weight).
    pub fn has_required_anti_affinity(&self) -> bool {
        self.pod_anti_affinity.iter().any(|t| t.weight.is_none())
    }

    /// Whether the pod tolerates `karpenter.sh/disrupted:NoSchedule`: such a pod (a DaemonSet's
    /// with `operator: Exists`, say) would come straight back, so a drain leaves it alone, as
    /// Karpenter's does.
    pub fn tolerates_disrupted_taint(&self) -> bool {
        let taint = super::taints::Taint::new(
            super::labels::DISRUPTED_TAINT,
            None,
            super::taints::TaintEffect::NoSchedule,
        );
        self.tolerations.iter().any(|t| t.tolerates(&taint))
    }

    /// Whether a drain of its node evicts it: not a pod that would come straight back
    /// ([`Pod::tolerates_disrupted_taint`]), nor a static pod's mirror, which the kubelet runs
    /// whatever the API says.
    pub fn drain_evicts(&self) -> bool {
        !self.tolerates_disrupted_taint() && !self.is_mirror_pod()
    }

    /// What `karpenter.sh/do-not-disrupt` asks for (a duration counts from the pod's start).
    pub fn do_not_disrupt(&self) -> Protection {
        Protection::of(&self.annotations, self.created_at_ms)
    }

    /// The pod's node requirements, one set per required-affinity alternative (at least one
    /// set; the node selector is part of each).
    pub fn requirement_alternatives(&self) -> Vec<Requirements> {
        let selector = Requirements::from_labels(&self.node_selector);
        if self.required_node_affinity.is_empty() {
            return vec![selector];
        }
        self.required_node_affinity
            .iter()
            .map(|term| selector.intersect(&Requirements::from_specs(term)))
            .collect()
    }

    /// Kubernetes' ordering for Karpenter's queue: largest CPU, then memory, then oldest, then
    /// name.
    pub fn queue_order(a: &Pod, b: &Pod) -> std::cmp::Ordering {
        b.requests
            .cpu_milli
            .cmp(&a.requests.cpu_milli)
            .then_with(|| b.requests.memory_bytes.cmp(&a.requests.memory_bytes))
            .then_with(|| a.created_at_ms.cmp(&b.created_at_ms))
            .then_with(|| a.key.cmp(&b.key))
    }
}
