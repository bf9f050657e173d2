//! Nodes: the Kubernetes side of a machine.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::labels::DO_NOT_DISRUPT;
use super::resources::Resources;
use super::taints::Taint;

/// A node as registered with the API server.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    /// `aws:///<zone>/<instance-id>`; links the node to its NodeClaim.
    pub provider_id: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub allocatable: Resources,
    pub ready: bool,
    pub unschedulable: bool,
}

impl Node {
    pub fn has_do_not_disrupt(&self) -> bool {
        self.annotations
            .get(DO_NOT_DISRUPT)
            .is_some_and(|v| v == "true")
    }
}
