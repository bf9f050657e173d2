//! nodewright's Kubernetes adapters: what the in-cluster controller reads from the API server,
//! in the core's terms.
//!
//! Every object goes through the one translation the scenario loader uses
//! (`nodewright_adapters::manifest`), so a pod, a NodePool or an EC2NodeClass means the same
//! to the controller as to `nodewright simulate`. What is particular to a live cluster lives
//! here: which pods are pending the way Karpenter decides it ([`pod`]), and Nodes as kubelets
//! report them ([`node`]).

pub mod announce;
pub mod eviction;
pub mod kinds;
pub mod node;
pub mod nodeclaims;
pub mod nodes;
pub mod observed;
pub mod pod;
pub mod translate;
pub mod volumes;
pub mod watch;

mod error;

pub use error::ObserveError;
