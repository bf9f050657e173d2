//! Karpenter's v1 API as Rust types: `NodePool` and `NodeClaim` (`karpenter.sh/v1`) and
//! `EC2NodeClass` (`karpenter.k8s.aws/v1`).
//!
//! One set of types serves everything that reads these objects: the scenario loader and
//! `nodewright simulate` deserialize users' YAML into them, the controller reads them from the
//! API server, and [`crds`] generates the CustomResourceDefinitions the API server validates
//! them with — field types, defaults, ranges, patterns and Karpenter's CEL rules — so what the
//! simulator accepts and what a cluster accepts cannot drift apart.
//!
//! The Kubernetes API crates (kube's `CustomResource` derive, k8s-openapi) come with the `crd`
//! feature, which the controller and the CRD generator turn on. Without it the kinds are plain
//! structs of the same shape, and the CRDs are the YAML files generated from the types and
//! committed under `crds/` ([`CRD_FILES`]); a test keeps those files equal to [`crds_yaml`].
//!
//! The types follow Karpenter's Go API field for field (`camelCase` on the wire). Enumerated
//! strings (operators, effects, policies) stay strings here, as in Go: the schema lists the
//! allowed values for the API server, and the manifest translation turns them into the core's
//! enums with an error that names the field.

// Each `#[kube(printcolumn(...))]` repeats keys such as `type_ = "string"`, which this lint
// mistakes for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

#[cfg(feature = "crd")]
mod crd;
mod crd_files;
mod ec2nodeclass;
mod meta;
mod nodeclaim;
mod nodepool;
mod quantity;
mod requirement;
mod rules;

#[cfg(feature = "crd")]
pub use crd::{crd_yaml, crds, crds_yaml};
pub use crd_files::{CRD_FILES, CRD_NAMES, crds_text};
pub use ec2nodeclass::{
    AmiRequirement, AmiSelectorTerm, AmiStatus, BlockDevice, BlockDeviceMapping,
    CapacityReservation, CapacityReservationSelectorTerm, ConnectionTracking, CpuOptions,
    EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus, KubeletConfiguration, MetadataOptions,
    NetworkInterface, PlacementGroupSelector, SecurityGroupSelectorTerm, SecurityGroupStatus,
    SubnetSelectorTerm, SubnetStatus,
};
pub use meta::{Condition, ObjectMeta, Time};
pub use nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus, ResourceRequirements};
pub use nodepool::{
    Budget, Disruption, NodeClaimTemplate, NodeClaimTemplateMetadata, NodeClaimTemplateSpec,
    NodePool, NodePoolSpec, NodePoolStatus,
};
pub use quantity::Quantity;
pub use requirement::{NodeClassReference, NodeSelectorRequirement, Taint};
pub use rules::{closest_allowed_label, label_restriction};

/// The API group of NodePool and NodeClaim.
pub const KARPENTER_GROUP: &str = "karpenter.sh";
/// The API group of EC2NodeClass.
pub const AWS_GROUP: &str = "karpenter.k8s.aws";
/// The one served (and stored) version of all three kinds.
pub const VERSION: &str = "v1";
