//! NodePool (`karpenter.sh/v1`): what nodes may be launched for pending pods, and when they
//! may be disrupted.

use std::collections::BTreeMap;

#[cfg(feature = "crd")]
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::requirement::{self, NodeClassReference, NodeSelectorRequirement, Taint};
use crate::rules::{
    self, BUDGET_DURATION, BUDGET_NODES, BUDGET_SCHEDULE, DURATION, DURATION_OR_NEVER,
};
use crate::{Condition, Quantity};

/// The top-level NodePool specification: a template of the nodes the pool may launch, their
/// disruption rules and the pool's limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(
    feature = "crd",
    derive(CustomResource),
    kube(
        group = "karpenter.sh",
        version = "v1",
        kind = "NodePool",
        status = "NodePoolStatus",
        category = "karpenter",
        crates(kube_core = "::kube_core"),
        scale(
            spec_replicas_path = ".spec.replicas",
            status_replicas_path = ".status.nodes"
        ),
        printcolumn(
            name = "NodeClass",
            type_ = "string",
            json_path = ".spec.template.spec.nodeClassRef.name"
        ),
        printcolumn(name = "Nodes", type_ = "string", json_path = ".status.nodes"),
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
            name = "Weight",
            type_ = "integer",
            json_path = ".spec.weight",
            priority = "1"
        ),
        printcolumn(
            name = "CPU",
            type_ = "string",
            json_path = ".status.resources.cpu",
            priority = "1"
        ),
        printcolumn(
            name = "Memory",
            type_ = "string",
            json_path = ".status.resources.memory",
            priority = "1"
        ),
        derive = "PartialEq"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.replicas) == has(oldSelf.replicas)", "message": "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"},
    {"rule": "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))", "message": "only 'limits.nodes' is supported on static NodePools"},
    {"rule": "!has(self.replicas) || !has(self.weight)", "message": "'weight' is not supported on static NodePools"},
]))]
pub struct NodePoolSpec {
    /// The template of the NodeClaims this pool launches; each launch narrows it further.
    pub template: NodeClaimTemplate,
    /// When and how fast the pool's nodes may be disrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"consolidateAfter": "0s"}))]
    pub disruption: Option<Disruption>,
    /// Upper bounds on the resources of all the pool's nodes together (cpu, memory, nodes, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// The priority of the pool: pools with a higher weight are tried first (1 to 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub weight: Option<i32>,
    /// A fixed number of nodes, for a static pool (alpha in Karpenter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i64>,
}

#[cfg(not(feature = "crd"))]
crate::meta::plain_resource!(
    /// A NodePool as a manifest gives it (the `crd` feature makes this kube's `CustomResource`).
    NodePool,
    NodePoolSpec,
    NodePoolStatus
);

/// The template of a NodePool's NodeClaims.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClaimTemplate {
    /// Labels and annotations put on every node of the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<NodeClaimTemplateMetadata>,
    /// What the nodes must satisfy.
    pub spec: NodeClaimTemplateSpec,
}

/// Labels and annotations of a NodePool's nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClaimTemplateMetadata {
    /// Labels of every node; keys in Karpenter's own domains are restricted.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "rules::template_labels")]
    pub labels: BTreeMap<String, String>,
    /// Annotations of every node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "rules::annotations")]
    pub annotations: BTreeMap<String, String>,
}

/// A NodeClaim template's spec: a NodeClaim spec without resource requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClaimTemplateSpec {
    /// Constraints on the nodes' labels: instance types, zones, capacity types, ...
    #[schemars(schema_with = "requirement::requirements_schema")]
    pub requirements: Vec<NodeSelectorRequirement>,
    /// The node class the nodes are launched with.
    #[schemars(schema_with = "NodeClassReference::immutable")]
    pub node_class_ref: NodeClassReference,
    /// Taints put on every node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "requirement::taints_schema")]
    pub taints: Vec<Taint>,
    /// Taints a node starts with and that something else removes (pods need not tolerate them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "requirement::taints_schema")]
    pub startup_taints: Vec<Taint>,
    /// How long a node may live before it is replaced (a duration, or Never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = DURATION_OR_NEVER, "default" = "720h"))]
    pub expire_after: Option<String>,
    /// How long draining a node may take before its pods are deleted regardless.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = DURATION))]
    pub termination_grace_period: Option<String>,
}

/// A NodePool's disruption settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Disruption {
    /// How long a node must be empty or underutilized before it is consolidated (or Never).
    #[schemars(extend("pattern" = DURATION_OR_NEVER))]
    pub consolidate_after: String,
    /// Which nodes consolidation may remove: WhenEmpty, WhenEmptyOrUnderutilized or Balanced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"], "default" = "WhenEmptyOrUnderutilized"))]
    pub consolidation_policy: Option<String>,
    /// How many of the pool's nodes may be disrupted at once; the most restrictive active
    /// budget wins. Defaults to one budget of 10%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50), extend(
        "default" = [{"nodes": "10%"}],
        "x-kubernetes-list-type" = "atomic",
        "x-kubernetes-validations" = [{"rule": "self.all(x, has(x.schedule) == has(x.duration))", "message": "'schedule' must be set with 'duration'"}]
    ))]
    pub budgets: Option<Vec<Budget>>,
}

/// A disruption budget: at most `nodes` of the pool's nodes disrupted at once, while the
/// budget is active (always, or `duration` after each `schedule` hit).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    /// A node count ("5") or a percentage of the pool's nodes ("10%").
    #[schemars(extend("pattern" = BUDGET_NODES, "default" = "10%"))]
    pub nodes: String,
    /// When the budget starts being active, in cron syntax (UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = BUDGET_SCHEDULE))]
    pub schedule: Option<String>,
    /// How long the budget stays active after each schedule hit (minutes and hours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = BUDGET_DURATION))]
    pub duration: Option<String>,
    /// The disruption reasons the budget applies to (all when empty): Underutilized, Empty,
    /// Drifted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50), extend(
        "items" = {"type": "string", "enum": ["Underutilized", "Empty", "Drifted"]},
        "x-kubernetes-list-type" = "set"
    ))]
    pub reasons: Vec<String>,
}

/// What the controller observed of a NodePool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// Ready, NodeClassReady, ValidationSucceeded, NodeRegistrationHealthy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "rules::conditions")]
    pub conditions: Vec<Condition>,
    /// The generation of the node class last seen by the NodeRegistrationHealthy condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
    /// How many nodes the pool has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    pub nodes: Option<i64>,
    /// The resources of the pool's nodes together.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Quantity>,
}
