//! Nodes: the Kubernetes side of a machine.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::do_not_disrupt::Protection;
use super::resources::Resources;
use super::taints::Taint;

/// A node as registered with the API server.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Node {
    /// The node's name.
    pub name: String,
    /// `aws:///<zone>/<instance-id>`; links the node to its NodeClaim.
    pub provider_id: Option<String>,
    /// Its labels (zone, instance type, NodePool...).
    pub labels: BTreeMap<String, String>,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// Its taints.
    pub taints: Vec<Taint>,
    /// What pods' requests may add up to on it.
    pub allocatable: Resources,
    /// Its `Ready` condition.
    pub ready: bool,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
}

impl Node {
    /// Whether it carries a taint with this key (any value, any effect).
    pub fn has_taint(&self, key: &str) -> bool {
        self.taints.iter().any(|t| t.key == key)
    }

    /// What `karpenter.sh/do-not-disrupt` asks for; a duration counts from `started_at_ms`
    /// (when its NodeClaim was created).
    pub fn do_not_disrupt(&self, started_at_ms: u64) -> Protection {
        Protection::of(&self.annotations, started_at_ms)
    }
}
