//! What a start observes of the machines the cluster says are its own: the API server's
//! NodeClaims, each with its instance as the cloud describes it. The cluster and the cloud are
//! the truth; the core adopts from this what it does not know, so that a lost store (or
//! Karpenter's machines, which follow the same contract) costs history, never a machine.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::requirements::RequirementSpec;
use super::resources::Resources;
use super::taints::Taint;
use crate::catalog::CapacityType;

/// One NodeClaim object as the API server has it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObservedNodeClaim {
    /// `metadata.name`.
    pub name: String,
    /// Its `karpenter.sh/nodepool` label.
    pub nodepool: String,
    /// `spec.nodeClassRef.name`.
    pub nodeclass: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations` (the NodePool's and EC2NodeClass's hashes among them).
    pub annotations: BTreeMap<String, String>,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// `spec.startupTaints`.
    pub startup_taints: Vec<Taint>,
    /// `spec.requirements`.
    pub requirements: Vec<RequirementSpec>,
    /// `spec.resources.requests`.
    pub requests: Resources,
    /// `spec.expireAfter` in milliseconds; `None`: never.
    pub expire_after_ms: Option<u64>,
    /// `metadata.creationTimestamp`, in milliseconds on the cluster's clock.
    pub created_at_ms: u64,
    /// Its instance: the one `status.providerID` names, or, before the status says, the one
    /// tagged `karpenter.sh/nodeclaim` with its name; `None` when the cloud has none.
    pub instance: Option<ObservedInstance>,
    /// `status.nodeName`.
    pub node_name: Option<String>,
    /// Its `Initialized` condition is true.
    pub initialized: bool,
    /// `metadata.deletionTimestamp` is set: someone asked for it to go.
    pub deleting: bool,
}

/// A NodeClaim's instance as the cloud describes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObservedInstance {
    /// The instance id.
    pub instance_id: String,
    /// Its type.
    pub instance_type: String,
    /// Its zone.
    pub zone: String,
    /// On-demand, spot or reserved.
    pub capacity_type: CapacityType,
    /// When it was launched, in milliseconds on the cluster's clock.
    pub launched_at_ms: u64,
    /// False once it is shutting down or terminated.
    pub running: bool,
}
