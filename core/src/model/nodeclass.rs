//! EC2NodeClasses (`karpenter.k8s.aws/v1`): how a machine is launched on AWS.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One selector term (subnets, security groups, AMIs): by id, by name, by alias or by tags.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SelectorTerm {
    pub id: Option<String>,
    pub name: Option<String>,
    pub alias: Option<String>,
    pub owner: Option<String>,
    pub tags: BTreeMap<String, String>,
}

/// The kubelet settings that change what fits on a node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KubeletConfig {
    pub max_pods: Option<i64>,
    pub pods_per_core: Option<i64>,
    /// `cpu` in milli-cores, `memory` and `ephemeral-storage` in bytes.
    pub system_reserved: BTreeMap<String, i64>,
    pub kube_reserved: BTreeMap<String, i64>,
    /// `memory.available` as bytes; a percentage is kept in `eviction_hard_memory_percent`.
    pub eviction_hard_memory_bytes: Option<i64>,
    pub eviction_hard_memory_percent: Option<u32>,
}

/// A threshold of a kubelet eviction signal: an amount, or a share of the capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Threshold {
    Bytes(i64),
    Percent(u32),
}

const GIB: i64 = 1 << 30;

/// Where a node's ephemeral storage (the kubelet's directory: images, writable layers,
/// `emptyDir`, logs) lives, and what the kubelet keeps of it, as Karpenter computes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeStorage {
    /// The size of the volume that holds it, in bytes: the `blockDeviceMappings` entry marked
    /// `rootVolume`, else the AMI family's data volume (its device in `blockDeviceMappings`, or
    /// its default), else 20 GiB.
    pub volume_bytes: i64,
    /// `instanceStorePolicy: RAID0`: on a type with local NVMe disks, their total holds it
    /// instead.
    pub instance_store_raid0: bool,
    /// `kubelet.evictionHard["nodefs.available"]`; none: 10 %.
    pub eviction_hard_nodefs: Option<Threshold>,
}

impl Default for NodeStorage {
    fn default() -> Self {
        NodeStorage {
            volume_bytes: 20 * GIB,
            instance_store_raid0: false,
            eviction_hard_nodefs: None,
        }
    }
}

/// Reads a field added to the end of a record after the first log format: a record written
/// before it ends where the field would start, and the field reads as its default. (postcard
/// is not self-describing; a struct of the log grows only at its end, each new field read
/// this way.)
fn trailing<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(T::deserialize(deserializer).unwrap_or_default())
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeClass {
    pub name: String,
    pub ami_family: Option<String>,
    pub role: Option<String>,
    pub instance_profile: Option<String>,
    pub subnet_selector_terms: Vec<SelectorTerm>,
    pub security_group_selector_terms: Vec<SelectorTerm>,
    pub ami_selector_terms: Vec<SelectorTerm>,
    pub kubelet: KubeletConfig,
    pub tags: BTreeMap<String, String>,
    /// Added after log format 1, so the last field: see [`trailing`].
    #[serde(default, deserialize_with = "trailing")]
    pub storage: NodeStorage,
}

impl NodeClass {
    pub fn new(name: &str) -> Self {
        NodeClass {
            name: name.to_string(),
            ami_family: Some("AL2023".to_string()),
            role: Some(format!("KarpenterNodeRole-{name}")),
            instance_profile: None,
            subnet_selector_terms: Vec::new(),
            security_group_selector_terms: Vec::new(),
            ami_selector_terms: Vec::new(),
            kubelet: KubeletConfig::default(),
            tags: BTreeMap::new(),
            storage: NodeStorage::default(),
        }
    }
}

/// What an EC2NodeClass's selector terms resolved to in the cloud, at one moment. The
/// controller logs it as an event, so that a replay sees the subnets, security groups and AMIs
/// the controller saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResolvedNodeClass {
    pub name: String,
    /// By id.
    pub subnets: Vec<ResolvedSubnet>,
    /// By id.
    pub security_groups: Vec<ResolvedSecurityGroup>,
    /// Newest first (by creation date, then id): the launch uses the newest for each
    /// architecture.
    pub amis: Vec<ResolvedAmi>,
}

impl ResolvedNodeClass {
    /// The zones that have a subnet: a machine of this class launches only there.
    pub fn zones(&self) -> std::collections::BTreeSet<&str> {
        self.subnets.iter().map(|s| s.zone.as_str()).collect()
    }

    /// The newest AMI for an architecture (`amd64`, `arm64`).
    pub fn ami_for(&self, architecture: &str) -> Option<&ResolvedAmi> {
        self.amis.iter().find(|a| a.architecture == architecture)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResolvedSubnet {
    pub id: String,
    pub zone: String,
    pub zone_id: Option<String>,
    pub available_ip_addresses: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResolvedSecurityGroup {
    pub id: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResolvedAmi {
    pub id: String,
    pub name: String,
    /// `amd64` or `arm64` (Kubernetes' names).
    pub architecture: String,
    /// RFC 3339, as EC2 gives it.
    pub creation_date: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A NodeClass as log format 1 wrote it: every field but the storage.
    #[derive(Serialize)]
    struct RecordedBeforeStorage<'a> {
        name: &'a str,
        ami_family: Option<&'a str>,
        role: Option<&'a str>,
        instance_profile: Option<&'a str>,
        subnet_selector_terms: Vec<SelectorTerm>,
        security_group_selector_terms: Vec<SelectorTerm>,
        ami_selector_terms: Vec<SelectorTerm>,
        kubelet: KubeletConfig,
        tags: BTreeMap<String, String>,
    }

    #[test]
    fn a_class_recorded_before_storage_reads_with_the_default_storage() {
        let old = RecordedBeforeStorage {
            name: "default",
            ami_family: Some("AL2023"),
            role: Some("R"),
            instance_profile: None,
            subnet_selector_terms: Vec::new(),
            security_group_selector_terms: Vec::new(),
            ami_selector_terms: Vec::new(),
            kubelet: KubeletConfig::default(),
            tags: BTreeMap::from([("team".to_string(), "a".to_string())]),
        };
        let bytes = postcard::to_stdvec(&old).expect("encodes");
        let read: NodeClass = postcard::from_bytes(&bytes).expect("decodes");
        assert_eq!(read.storage, NodeStorage::default());
        assert_eq!(read.tags["team"], "a");
        // A class with storage keeps it through the log.
        let mut class = read.clone();
        class.storage = NodeStorage {
            volume_bytes: 100 << 30,
            instance_store_raid0: true,
            eviction_hard_nodefs: Some(Threshold::Percent(15)),
        };
        let bytes = postcard::to_stdvec(&class).expect("encodes");
        assert_eq!(
            postcard::from_bytes::<NodeClass>(&bytes).expect("decodes"),
            class
        );
    }
}
