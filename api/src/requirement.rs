//! Pieces NodePool and NodeClaim share: requirements, taints and the node class reference.

use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};

use crate::Time;
use crate::rules::{self, GROUP, QUALIFIED_NAME, add_rules, rule};

/// A node selector requirement with `minValues`: a key, an operator relating the key to the
/// values, and optionally how many distinct values the chosen instance types must span.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSelectorRequirement {
    /// The label key the requirement applies to.
    #[schemars(schema_with = "rules::requirement_key")]
    pub key: String,
    /// How the key relates to the values: In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte.
    #[schemars(extend("enum" = ["Gte", "Lte", "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))]
    pub operator: String,
    /// The values: non-empty for In and NotIn, empty for Exists and DoesNotExist, one integer
    /// for Gt, Lt, Gte and Lte.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "rules::requirement_values")]
    pub values: Vec<String>,
    /// The least number of distinct values of this key the instance types considered for a
    /// launch must span (1 to 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 50))]
    pub min_values: Option<i64>,
}

impl NodeSelectorRequirement {
    /// Karpenter's rules over a list of requirements.
    pub(crate) fn list_rules(schema: &mut Schema) {
        add_rules(
            schema,
            vec![
                rule(
                    "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
                    "requirements with operator 'In' must have a value defined",
                ),
                rule(
                    "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
                    "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
                ),
                rule(
                    "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
                    "requirements with 'minValues' must have at least that many values specified in the 'values' field",
                ),
            ],
        );
        let object = schema.ensure_object();
        object.insert("maxItems".into(), 100.into());
        object.insert("x-kubernetes-list-type".into(), "atomic".into());
    }
}

/// A taint put on the node: pods that do not tolerate it are affected by its effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Taint {
    /// The taint key.
    #[schemars(length(min = 1), extend("pattern" = QUALIFIED_NAME))]
    pub key: String,
    /// The taint value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = QUALIFIED_NAME))]
    pub value: Option<String>,
    /// NoSchedule, PreferNoSchedule or NoExecute.
    #[schemars(extend("enum" = ["NoSchedule", "PreferNoSchedule", "NoExecute"]))]
    pub effect: String,
    /// When the taint was added (NoExecute taints only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<Time>,
}

/// Which node class (for nodewright: which EC2NodeClass) the nodes are launched with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClassReference {
    /// The kind of the node class: EC2NodeClass.
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self != ''", "message": "kind may not be empty"}]))]
    pub kind: String,
    /// The name of the node class.
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self != ''", "message": "name may not be empty"}]))]
    pub name: String,
    /// The API group of the node class: karpenter.k8s.aws.
    #[schemars(extend("pattern" = GROUP, "x-kubernetes-validations" = [{"rule": "self != ''", "message": "group may not be empty"}]))]
    pub group: String,
}

impl NodeClassReference {
    /// A NodePool's reference: the group and kind of its node class never change.
    pub(crate) fn immutable(generator: &mut schemars::SchemaGenerator) -> Schema {
        let mut schema = Self::json_schema(generator);
        add_rules(
            &mut schema,
            vec![
                rule(
                    "self.group == oldSelf.group",
                    "nodeClassRef.group is immutable",
                ),
                rule(
                    "self.kind == oldSelf.kind",
                    "nodeClassRef.kind is immutable",
                ),
            ],
        );
        schema
    }
}

/// The schema of a NodePool's requirements, with Karpenter's list rules.
pub(crate) fn requirements_schema(generator: &mut schemars::SchemaGenerator) -> Schema {
    let mut schema = <Vec<NodeSelectorRequirement>>::json_schema(generator);
    NodeSelectorRequirement::list_rules(&mut schema);
    schema
}

/// The schema of a NodeClaim's requirements: as a NodePool's, except that the
/// `karpenter.sh/nodepool` key is allowed (the controller pins every claim to its pool).
pub(crate) fn nodeclaim_requirements_schema(generator: &mut schemars::SchemaGenerator) -> Schema {
    let mut schema = requirements_schema(generator);
    let pool_rule = rules::NODEPOOL_LABEL_RULE_MESSAGE;
    if let Some(serde_json::Value::Array(key_rules)) =
        schema.pointer_mut("/items/properties/key/x-kubernetes-validations")
    {
        key_rules.retain(|r| r["message"] != pool_rule);
    }
    schema
}

/// The schema of a taints list.
pub(crate) fn taints_schema(generator: &mut schemars::SchemaGenerator) -> Schema {
    let mut schema = <Vec<Taint>>::json_schema(generator);
    schema
        .ensure_object()
        .insert("x-kubernetes-list-type".into(), "atomic".into());
    schema
}
