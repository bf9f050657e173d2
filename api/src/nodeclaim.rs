//! NodeClaim (`karpenter.sh/v1`): one node being launched, its requirements and what became
//! of it.

use std::collections::BTreeMap;

#[cfg(feature = "crd")]
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::requirement::{self, NodeClassReference, NodeSelectorRequirement, Taint};
use crate::rules::{self, DURATION, DURATION_OR_NEVER};
use crate::{Condition, Quantity, Time};

/// What one node must be: the requirements its instance type must meet, the resources it must
/// hold, its taints and the node class it is launched with. Immutable once created.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(
    feature = "crd",
    derive(CustomResource),
    kube(
        group = "karpenter.sh",
        version = "v1",
        kind = "NodeClaim",
        status = "NodeClaimStatus",
        category = "karpenter",
        crates(kube_core = "::kube_core"),
        printcolumn(
            name = "Type",
            type_ = "string",
            json_path = ".metadata.labels.node\\.kubernetes\\.io/instance-type"
        ),
        printcolumn(
            name = "Capacity",
            type_ = "string",
            json_path = ".metadata.labels.karpenter\\.sh/capacity-type"
        ),
        printcolumn(
            name = "Zone",
            type_ = "string",
            json_path = ".metadata.labels.topology\\.kubernetes\\.io/zone"
        ),
        printcolumn(name = "Node", type_ = "string", json_path = ".status.nodeName"),
        printcolumn(
            name = "Ready",
            type_ = "string",
            json_path = ".status.conditions[?(@.type==\"Ready\")].status"
        ),
        printcolumn(
            name = "Age",
            type_ = "date",
            json_path = ".metadata.creationTimestamp"
        ),
        printcolumn(
            name = "ImageID",
            type_ = "string",
            json_path = ".status.imageID",
            priority = "1"
        ),
        printcolumn(
            name = "ID",
            type_ = "string",
            json_path = ".status.providerID",
            priority = "1"
        ),
        printcolumn(
            name = "NodePool",
            type_ = "string",
            json_path = ".metadata.labels.karpenter\\.sh/nodepool",
            priority = "1"
        ),
        printcolumn(
            name = "NodeClass",
            type_ = "string",
            json_path = ".spec.nodeClassRef.name",
            priority = "1"
        ),
        printcolumn(
            name = "Drifted",
            type_ = "string",
            json_path = ".status.conditions[?(@.type==\"Drifted\")].status",
            priority = "1"
        ),
        derive = "PartialEq"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "spec is immutable"}]))]
pub struct NodeClaimSpec {
    /// Constraints on the node's labels.
    #[schemars(schema_with = "requirement::nodeclaim_requirements_schema")]
    pub requirements: Vec<NodeSelectorRequirement>,
    /// The node class the node is launched with.
    pub node_class_ref: NodeClassReference,
    /// The resources the node must have room for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Taints put on the node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "requirement::taints_schema")]
    pub taints: Vec<Taint>,
    /// Taints the node starts with and that something else removes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "requirement::taints_schema")]
    pub startup_taints: Vec<Taint>,
    /// How long the node may live before it is replaced (a duration, or Never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = DURATION_OR_NEVER, "default" = "720h"))]
    pub expire_after: Option<String>,
    /// How long draining the node may take before its pods are deleted regardless.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = DURATION))]
    pub termination_grace_period: Option<String>,
}

#[cfg(not(feature = "crd"))]
crate::meta::plain_resource!(
    /// A NodeClaim as a manifest gives it (the `crd` feature makes this kube's `CustomResource`).
    NodeClaim,
    NodeClaimSpec,
    NodeClaimStatus
);

/// The resources a NodeClaim's node must have room for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceRequirements {
    /// The resources the pods that caused the launch request, plus daemon overhead.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
}

/// What became of a NodeClaim: the instance, its node and their readiness.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    /// What the node can give to pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, Quantity>,
    /// What the node has.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,
    /// Launched, Registered, Initialized, Ready, Drifted, Consolidatable, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "rules::conditions")]
    pub conditions: Vec<Condition>,
    /// The image the instance was launched from.
    #[serde(default, rename = "imageID", skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// When a pod was last scheduled to or removed from the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pod_event_time: Option<Time>,
    /// The name of the node that registered for this claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The cloud provider's id of the instance (aws:///zone/i-...).
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
}
