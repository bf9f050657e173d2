//! Karpenter's v1 API as Rust types: `NodePool` and `NodeClaim` (`karpenter.sh/v1`) and
//! `EC2NodeClass` (`karpenter.k8s.aws/v1`).
//!
//! One set of types serves everything that reads these objects: the scenario loader and
//! `nodewright simulate` deserialize users' YAML into them, the controller reads them from the
//! API server, and [`crds`] generates the CustomResourceDefinitions the API server validates
//! them with — field types, defaults, ranges, patterns and Karpenter's CEL rules — so what the
//! simulator accepts and what a cluster accepts cannot drift apart.
//!
//! The types follow Karpenter's Go API field for field (`camelCase` on the wire). Enumerated
//! strings (operators, effects, policies) stay strings here, as in Go: the schema lists the
//! allowed values for the API server, and the manifest translation turns them into the core's
//! enums with an error that names the field.

// Each `#[kube(printcolumn(...))]` repeats keys such as `type_ = "string"`, which this lint
// mistakes for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

mod crd;
mod ec2nodeclass;
mod nodeclaim;
mod nodepool;
mod quantity;
mod requirement;
mod rules;

pub use crd::{CRD_NAMES, crds, crds_yaml};
pub use ec2nodeclass::{
    AmiRequirement, AmiSelectorTerm, AmiStatus, BlockDevice, BlockDeviceMapping,
    CapacityReservation, CapacityReservationSelectorTerm, ConnectionTracking, CpuOptions,
    EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus, KubeletConfiguration, MetadataOptions,
    NetworkInterface, PlacementGroupSelector, SecurityGroupSelectorTerm, SecurityGroupStatus,
    SubnetSelectorTerm, SubnetStatus,
};
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
pub use nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus, ResourceRequirements};
pub use nodepool::{
    Budget, Disruption, NodeClaimTemplate, NodeClaimTemplateMetadata, NodeClaimTemplateSpec,
    NodePool, NodePoolSpec, NodePoolStatus,
};
pub use quantity::Quantity;
pub use requirement::{NodeClassReference, NodeSelectorRequirement, Taint};
pub use rules::label_restriction;

/// The API group of NodePool and NodeClaim.
pub const KARPENTER_GROUP: &str = "karpenter.sh";
/// The API group of EC2NodeClass.
pub const AWS_GROUP: &str = "karpenter.k8s.aws";
/// The one served (and stored) version of all three kinds.
pub const VERSION: &str = "v1";
