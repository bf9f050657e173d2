//! Kubernetes manifests → the core's model. This is the one place where Kubernetes objects are
//! translated: the scenario loader uses it, and the live watcher feeds the objects it receives
//! through the same functions (they are serde-compatible with k8s-openapi's types).

mod error;
pub mod launch;
pub mod objects;
mod translate;
pub mod unmodelled;
pub mod volumes;

pub use error::{InvalidField, ManifestError, describe_yaml_error};
pub use translate::{
    Concurrency, CronJob, DEFAULT_RUN_TIME, DaemonSet, Deployment, Job, MAX_OBJECT_BYTES,
    MAX_REPLICAS, Manifest, NodeClaimSpecParts, PodTemplate, RUN_TIME_ANNOTATION, ReplicatedKind,
    nodeclaim_spec_from_api, nodeclass_from_api, nodepool_from_api, parse_manifests,
    parse_manifests_noting, parse_node_classes, pod_from_spec,
};
pub use unmodelled::{InController, UnmodelledField};
