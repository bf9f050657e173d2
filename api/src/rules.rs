//! The validation Karpenter's CRDs carry beyond field types: patterns, CEL rules
//! (`x-kubernetes-validations`) and the schema pieces the derive cannot say by itself.
//! Every rule here is Karpenter's own (pkg/apis/crds of karpenter-provider-aws v1), message
//! included, so a manifest the API server rejects fails with the words Karpenter's users know.

use schemars::{Schema, SchemaGenerator, json_schema};
use serde_json::{Value, json};

pub const DURATION_OR_NEVER: &str = r"^(([0-9]+(s|m|h))+|Never)$";
pub const DURATION: &str = r"^([0-9]+(s|m|h))+$";
pub const BUDGET_DURATION: &str = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$";
pub const BUDGET_NODES: &str = r"^((100|[0-9]{1,2})%|[0-9]+)$";
pub const BUDGET_SCHEDULE: &str =
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$";
pub const LABEL_VALUE: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
pub const QUALIFIED_NAME: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";
pub const GROUP: &str = r"^[^/]*$";
pub const EVICTION_SIGNAL: &str = r"^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$";
pub const VOLUME_SIZE: &str = r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$";

/// The `karpenter.k8s.aws/` labels a NodePool may name; the rest of that domain is
/// Karpenter's to set.
pub const AWS_LABELS_ALLOWED: &[&str] = &[
    "karpenter.k8s.aws/instance-tenancy",
    "karpenter.k8s.aws/capacity-reservation-type",
    "karpenter.k8s.aws/capacity-reservation-id",
    "karpenter.k8s.aws/capacity-reservation-interruptible",
    "karpenter.k8s.aws/ec2nodeclass",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
    "karpenter.k8s.aws/instance-capability-flex",
    "karpenter.k8s.aws/placement-group-id",
    "karpenter.k8s.aws/placement-group-partition",
];

/// The `karpenter.sh/` labels a NodePool may name.
pub const KARPENTER_LABELS_ALLOWED: &[&str] =
    &["karpenter.sh/capacity-type", "karpenter.sh/nodepool"];

/// Why a NodePool may not name `key` in its requirements or template labels, in the words of
/// Karpenter's CEL rule; `None` when it may. The same rules the CRDs give the API server.
pub fn label_restriction(key: &str) -> Option<&'static str> {
    let domain = key.split('/').next().unwrap_or_default();
    if !KARPENTER_LABELS_ALLOWED.contains(&key) && domain.ends_with("karpenter.sh") {
        Some("label domain \"karpenter.sh\" is restricted")
    } else if key == "karpenter.sh/nodepool" {
        Some(NODEPOOL_LABEL_RULE_MESSAGE)
    } else if key == "kubernetes.io/hostname" {
        Some("label \"kubernetes.io/hostname\" is restricted")
    } else if !AWS_LABELS_ALLOWED.contains(&key) && domain.ends_with("karpenter.k8s.aws") {
        Some("label domain \"karpenter.k8s.aws\" is restricted")
    } else {
        None
    }
}

/// For a key refused by [`label_restriction`] in the `karpenter.sh` or `karpenter.k8s.aws`
/// domain, the allowed label it is closest to, when it is close enough to be a typo.
pub fn closest_allowed_label(key: &str) -> Option<&'static str> {
    let domain = key.split('/').next().unwrap_or_default();
    if !(domain.ends_with("karpenter.sh") || domain.ends_with("karpenter.k8s.aws")) {
        return None;
    }
    KARPENTER_LABELS_ALLOWED
        .iter()
        .chain(AWS_LABELS_ALLOWED)
        .filter(|allowed| **allowed != "karpenter.sh/nodepool")
        .map(|allowed| (strsim::levenshtein(key, allowed), *allowed))
        .min()
        .filter(|(distance, _)| *distance <= 3.max(key.len() / 8))
        .map(|(_, allowed)| allowed)
}

/// The message of the rule that keeps `karpenter.sh/nodepool` out of NodePools.
pub const NODEPOOL_LABEL_RULE_MESSAGE: &str = "label \"karpenter.sh/nodepool\" is restricted";

/// The eviction signals kubelet knows.
const EVICTION_SIGNALS: &str = "['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']";

/// One CEL rule with the message the API server returns when it fails.
pub fn rule(rule: impl Into<String>, message: impl Into<String>) -> Value {
    json!({"rule": rule.into(), "message": message.into()})
}

/// Appends CEL rules to a schema.
pub fn add_rules(schema: &mut Schema, rules: Vec<Value>) {
    let object = schema.ensure_object();
    let list = object
        .entry("x-kubernetes-validations")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = list {
        list.extend(rules);
    }
}

fn quoted_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

/// Karpenter's restricted-label rules, over one key (`self`) or over every key of a map
/// (`self.all(x, ...)`).
fn restricted_label_rules(over_map: bool) -> Vec<Value> {
    let wrap = |body: String| {
        if over_map {
            format!("self.all(x, {})", body.replace("self", "x"))
        } else {
            body
        }
    };
    vec![
        rule(
            wrap(format!(
                "self in {} || !self.find(\"^([^/]+)\").endsWith(\"karpenter.sh\")",
                quoted_list(KARPENTER_LABELS_ALLOWED)
            )),
            "label domain \"karpenter.sh\" is restricted",
        ),
        rule(
            wrap("self != \"karpenter.sh/nodepool\"".into()),
            NODEPOOL_LABEL_RULE_MESSAGE,
        ),
        rule(
            wrap("self != \"kubernetes.io/hostname\"".into()),
            "label \"kubernetes.io/hostname\" is restricted",
        ),
        rule(
            wrap(format!(
                "self in {} || !self.find(\"^([^/]+)\").endsWith(\"karpenter.k8s.aws\")",
                quoted_list(AWS_LABELS_ALLOWED)
            )),
            "label domain \"karpenter.k8s.aws\" is restricted",
        ),
    ]
}

// ------------------------------------------------------------------ schema_with functions

/// A requirement's `key`: a qualified label name outside Karpenter's restricted domains.
pub fn requirement_key(_: &mut SchemaGenerator) -> Schema {
    let mut schema = json_schema!({"type": "string", "maxLength": 316, "pattern": QUALIFIED_NAME});
    add_rules(&mut schema, restricted_label_rules(false));
    schema
}

/// A requirement's `values`: label values.
pub fn requirement_values(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {"type": "string", "maxLength": 63, "pattern": LABEL_VALUE},
        "x-kubernetes-list-type": "atomic",
    })
}

/// The labels of a NodePool's node template.
pub fn template_labels(_: &mut SchemaGenerator) -> Schema {
    let mut schema = json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string", "maxLength": 63, "pattern": LABEL_VALUE},
        "maxProperties": 100,
        "x-kubernetes-map-type": "atomic",
    });
    add_rules(&mut schema, restricted_label_rules(true));
    schema
}

/// Free-form string annotations.
pub fn annotations(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string"},
        "x-kubernetes-map-type": "granular",
    })
}

/// The tags of a selector term: at most 20, no empty key or value.
pub fn selector_tags(_: &mut SchemaGenerator) -> Schema {
    let mut schema = json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string"},
        "maxProperties": 20,
    });
    add_rules(
        &mut schema,
        vec![rule(
            "self.all(k, k != '' && self[k] != '')",
            "empty tag keys or values aren't supported",
        )],
    );
    schema
}

/// The tags put on every launched resource: no empty key, none of the tags Karpenter owns.
pub fn nodeclass_tags(_: &mut SchemaGenerator) -> Schema {
    let mut schema = json_schema!({"type": "object", "additionalProperties": {"type": "string"}});
    add_rules(
        &mut schema,
        vec![
            rule("self.all(k, k != '')", "empty tag keys aren't supported"),
            rule(
                "self.all(k, k !='eks:eks-cluster-name')",
                "tag contains a restricted tag matching eks:eks-cluster-name",
            ),
            rule(
                "self.all(k, !k.startsWith('kubernetes.io/cluster') )",
                "tag contains a restricted tag matching kubernetes.io/cluster/",
            ),
            rule(
                "self.all(k, k != 'karpenter.sh/nodepool')",
                "tag contains a restricted tag matching karpenter.sh/nodepool",
            ),
            rule(
                "self.all(k, k !='karpenter.sh/nodeclaim')",
                "tag contains a restricted tag matching karpenter.sh/nodeclaim",
            ),
            rule(
                "self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')",
                "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass",
            ),
        ],
    );
    schema
}

/// `systemReserved` / `kubeReserved`: cpu, memory, ephemeral-storage or pid, never negative.
pub fn reserved(field: &'static str) -> impl Fn(&mut SchemaGenerator) -> Schema {
    move |_| {
        let mut schema = json_schema!({
            "type": "object",
            "additionalProperties": {"type": "string", "pattern": crate::quantity::QUANTITY_PATTERN},
        });
        add_rules(
            &mut schema,
            vec![
                rule(
                    "self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')",
                    format!(
                        "valid keys for {field} are ['cpu','memory','ephemeral-storage','pid']"
                    ),
                ),
                rule(
                    "self.all(x, !self[x].startsWith('-'))",
                    format!("{field} value cannot be a negative resource quantity"),
                ),
            ],
        );
        schema
    }
}

pub fn system_reserved(generator: &mut SchemaGenerator) -> Schema {
    reserved("systemReserved")(generator)
}

pub fn kube_reserved(generator: &mut SchemaGenerator) -> Schema {
    reserved("kubeReserved")(generator)
}

/// An eviction-threshold map (`evictionHard`, `evictionSoft`, `evictionSoftGracePeriod`):
/// keys are kubelet's eviction signals.
fn eviction(field: &str, value_pattern: Option<&str>) -> Schema {
    let mut value = json!({"type": "string"});
    if let Some(p) = value_pattern {
        value["pattern"] = json!(p);
    }
    let mut schema = json_schema!({"type": "object", "additionalProperties": value});
    add_rules(
        &mut schema,
        vec![rule(
            format!("self.all(x, x in {EVICTION_SIGNALS})"),
            format!("valid keys for {field} are {EVICTION_SIGNALS}"),
        )],
    );
    schema
}

pub fn eviction_hard(_: &mut SchemaGenerator) -> Schema {
    eviction("evictionHard", Some(EVICTION_SIGNAL))
}

pub fn eviction_soft(_: &mut SchemaGenerator) -> Schema {
    eviction("evictionSoft", Some(EVICTION_SIGNAL))
}

pub fn eviction_soft_grace_period(_: &mut SchemaGenerator) -> Schema {
    eviction("evictionSoftGracePeriod", None)
}

/// The conditions list of a status: a map keyed by `type`.
pub fn conditions(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<crate::Condition>();
    json_schema!({
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    })
}

#[cfg(test)]
mod tests {
    use super::{closest_allowed_label, label_restriction};

    #[test]
    fn a_mistyped_restricted_key_is_matched_to_the_label_it_meant() {
        for (typo, meant) in [
            (
                "karpenter.k8s.aws/instance-categry",
                "karpenter.k8s.aws/instance-category",
            ),
            (
                "karpenter.k8s.aws/instance_family",
                "karpenter.k8s.aws/instance-family",
            ),
            ("karpenter.sh/capacitytype", "karpenter.sh/capacity-type"),
            (
                "karpenter.k8s.aws/instance-gpus-count",
                "karpenter.k8s.aws/instance-gpu-count",
            ),
        ] {
            assert!(label_restriction(typo).is_some(), "{typo}");
            assert_eq!(closest_allowed_label(typo), Some(meant), "{typo}");
        }
        assert_eq!(
            closest_allowed_label("karpenter.sh/something-else-entirely"),
            None
        );
        assert_eq!(closest_allowed_label("example.com/instance-category"), None);
    }

    #[test]
    fn restricted_labels_follow_karpenters_rules() {
        for allowed in [
            "karpenter.sh/capacity-type",
            "karpenter.k8s.aws/instance-family",
            "kubernetes.io/arch",
            "team",
            "example.com/tier",
        ] {
            assert_eq!(label_restriction(allowed), None, "{allowed}");
        }
        for refused in [
            "karpenter.sh/nodepool",
            "karpenter.sh/custom",
            "sub.karpenter.sh/x",
            "kubernetes.io/hostname",
            "karpenter.k8s.aws/custom",
        ] {
            assert!(label_restriction(refused).is_some(), "{refused}");
        }
    }
}
