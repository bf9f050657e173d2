//! The domain model the decisions need, in Karpenter's vocabulary.

pub mod affinity;
pub mod daemonset;
pub mod derived;
pub mod do_not_disrupt;
pub mod duration;
pub mod interruption;
pub mod labels;
pub mod listing;
pub mod node;
pub mod nodeclaim;
pub mod nodeclass;
pub mod nodepool;
pub mod observed;
pub mod pdb;
pub mod pod;
pub mod quantity;
pub mod requirements;
pub mod reservation;
pub mod resource_rows;
pub mod resources;
pub mod shared_name;
pub mod taints;
pub mod value_set;

/// Reads a field added to the end of a record after the first log format: a record written
/// before it ends where the field would start, and the field reads as its default. (postcard
/// is not self-describing; a struct of the log grows only at its end — the struct an event
/// carries last, such as a NodeClass, a NodePool or a catalog — each new field read this way.)
pub fn trailing<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de> + Default,
{
    Ok(T::deserialize(deserializer).unwrap_or_default())
}
