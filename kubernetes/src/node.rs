//! Nodes as kubelets report them, in the core's terms.

use k8s_openapi::api::core::v1::Node as KubeNode;
use nodewright_core::model::node::Node;
use nodewright_core::model::quantity::{parse_milli_cpu, parse_units};
use nodewright_core::model::resources::Resources;
use nodewright_core::model::taints::{Taint, TaintEffect};

use crate::ObserveError;

/// A Node: its provider id (which links it to a NodeClaim), labels, taints, allocatable
/// resources, readiness (`Ready=True`) and cordon.
pub fn core_node(node: &KubeNode) -> Result<Node, ObserveError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let invalid = |field: String, problem: String| ObserveError::Node {
        node: name.clone(),
        field,
        problem,
    };
    let spec = node.spec.as_ref();
    let mut taints = Vec::new();
    for (i, t) in spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let effect = TaintEffect::parse(&t.effect).ok_or_else(|| {
            invalid(
                format!("spec.taints[{i}].effect"),
                format!("unknown effect {:?}", t.effect),
            )
        })?;
        taints.push(Taint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect,
        });
    }
    let status = node.status.as_ref();
    let mut allocatable = Resources::default();
    for (resource, quantity) in status
        .and_then(|s| s.allocatable.as_ref())
        .into_iter()
        .flatten()
    {
        let amount = if resource == "cpu" {
            parse_milli_cpu(&quantity.0)
        } else {
            parse_units(&quantity.0)
        }
        .map_err(|e| invalid(format!("status.allocatable.{resource}"), e.to_string()))?;
        allocatable.set(resource, amount);
    }
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    Ok(Node {
        name: name.clone(),
        provider_id: spec.and_then(|s| s.provider_id.clone()),
        labels: node.metadata.labels.clone().unwrap_or_default(),
        annotations: node
            .metadata
            .annotations
            .as_ref()
            .map(nodewright_core::model::labels::read_annotations)
            .unwrap_or_default(),
        taints,
        allocatable,
        ready,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
    })
}
