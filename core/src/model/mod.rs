//! The domain model the decisions need, in Karpenter's vocabulary.

pub mod affinity;
pub mod daemonset;
pub mod do_not_disrupt;
pub mod duration;
pub mod interruption;
pub mod labels;
pub mod node;
pub mod nodeclaim;
pub mod nodeclass;
pub mod nodepool;
pub mod pdb;
pub mod pod;
pub mod quantity;
pub mod requirements;
pub mod resources;
pub mod taints;
pub mod value_set;
