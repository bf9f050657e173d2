//! The object metadata and status vocabulary the kinds share: `ObjectMeta`, `Condition`, `Time`.
//!
//! With the `crd` feature these are Kubernetes' own types (from k8s-openapi), as the controller
//! and the CRD generator need them. Without it — the scenario loader, `nodewright simulate`,
//! replay — they are small local structs with the same field names and wire format, so that
//! reading a NodePool from YAML does not compile the Kubernetes API crates.

#[cfg(feature = "crd")]
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};

#[cfg(not(feature = "crd"))]
pub use plain::{Condition, ObjectMeta, Time};

#[cfg(not(feature = "crd"))]
mod plain {
    use std::collections::BTreeMap;

    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// The part of an object's metadata a manifest gives: its name, namespace, labels and
    /// annotations. Other fields (uid, resourceVersion, ...) are read past.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ObjectMeta {
        /// The object's name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub name: Option<String>,
        /// The object's namespace (none for cluster-scoped kinds).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub namespace: Option<String>,
        /// The object's labels.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub labels: Option<BTreeMap<String, String>>,
        /// The object's annotations.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub annotations: Option<BTreeMap<String, String>>,
        /// The spec's generation, as the API server counts it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub generation: Option<i64>,
    }

    /// A timestamp as the API writes it (RFC 3339), kept as the text it was read as.
    #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
    #[serde(transparent)]
    pub struct Time(pub String);

    /// One status condition, as `metav1.Condition` carries it.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct Condition {
        /// When the status last changed.
        pub last_transition_time: Time,
        /// A sentence for people.
        #[serde(default)]
        pub message: String,
        /// The generation the condition was computed from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub observed_generation: Option<i64>,
        /// A CamelCase reason.
        #[serde(default)]
        pub reason: String,
        /// True, False or Unknown.
        pub status: String,
        /// The condition's type (Ready, Launched, ...).
        #[serde(rename = "type")]
        pub type_: String,
    }
}

/// The root struct of a kind when the `crd` feature (and with it kube's `CustomResource`
/// derive) is off: the same `metadata` / `spec` / `status` fields the derive makes, and its
/// `new(name, spec)`.
#[cfg(not(feature = "crd"))]
macro_rules! plain_resource {
    ($(#[$doc:meta])* $kind:ident, $spec:ty, $status:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        pub struct $kind {
            /// The object's name, labels and annotations.
            #[serde(default)]
            pub metadata: $crate::ObjectMeta,
            /// What the user asked for.
            pub spec: $spec,
            /// What the controller observed.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub status: Option<$status>,
        }

        impl $kind {
            /// An object with this name and spec, and no status.
            pub fn new(name: &str, spec: $spec) -> Self {
                Self {
                    metadata: $crate::ObjectMeta {
                        name: Some(name.to_string()),
                        ..Default::default()
                    },
                    spec,
                    status: None,
                }
            }
        }
    };
}

#[cfg(not(feature = "crd"))]
pub(crate) use plain_resource;
