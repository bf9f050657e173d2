//! The CustomResourceDefinitions generated from the types, as objects and as YAML.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube_core::CustomResourceExt;

use crate::{EC2NodeClass, NodeClaim, NodePool};

/// One CRD as the YAML document [`crds_yaml`] and the files under `crds/` hold.
pub fn crd_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::ser::Error> {
    serde_saphyr::to_string(crd)
}

/// NodePool, NodeClaim and EC2NodeClass, ready to apply.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![NodePool::crd(), NodeClaim::crd(), EC2NodeClass::crd()];
    for crd in &mut crds {
        complete(crd);
    }
    crds
}

/// What the derive leaves to the API server's defaulting, written out so that the printed
/// CRD reads as the applied one does: the list kind, and the object fields every kind has
/// (which `kubectl explain` shows).
fn complete(crd: &mut CustomResourceDefinition) {
    let names = &mut crd.spec.names;
    names.list_kind = Some(format!("{}List", names.kind));
    for version in &mut crd.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        schema.description = Some(format!(
            "{}: see https://karpenter.sh/docs/concepts/ for its fields.",
            crd.spec.names.kind
        ));
        let properties = schema.properties.get_or_insert_with(Default::default);
        let field = |type_: &str, description: &str| JSONSchemaProps {
            type_: Some(type_.to_string()),
            description: Some(description.to_string()),
            ..Default::default()
        };
        properties.insert(
            "apiVersion".into(),
            field(
                "string",
                "The versioned schema of this representation of an object.",
            ),
        );
        properties.insert(
            "kind".into(),
            field("string", "The REST resource this object represents."),
        );
        properties.insert(
            "metadata".into(),
            JSONSchemaProps {
                type_: Some("object".into()),
                ..Default::default()
            },
        );
    }
}

/// The CRDs as one multi-document YAML text, as `nodewright crds` prints it.
pub fn crds_yaml() -> Result<String, serde_saphyr::ser::Error> {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(&crd_yaml(&crd)?);
    }
    Ok(out)
}
