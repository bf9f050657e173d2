//! EC2NodeClasses (`karpenter.k8s.aws/v1`): how a machine is launched on AWS.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One selector term (subnets, security groups, AMIs): by id, by name, by alias or by tags.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SelectorTerm {
    /// `id`: exactly this one.
    pub id: Option<String>,
    /// `name` (security groups, AMIs).
    pub name: Option<String>,
    /// `alias` (AMIs: `al2023@latest`, `bottlerocket@v1.20.0`).
    pub alias: Option<String>,
    /// `owner` (AMIs, capacity reservations: an account id, `self` or `amazon`).
    pub owner: Option<String>,
    /// `tags`: every one must match (`*` matches any value).
    pub tags: BTreeMap<String, String>,
}

/// The kubelet settings that change what fits on a node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KubeletConfig {
    /// `kubelet.maxPods`: the node's pod capacity instead of the type's ENI-based one.
    pub max_pods: Option<i64>,
    /// `kubelet.podsPerCore`: at most this many pods per vCPU (it caps the pod capacity).
    pub pods_per_core: Option<i64>,
    /// `kubelet.systemReserved`: `cpu` in milli-cores, `memory` and `ephemeral-storage` in bytes.
    pub system_reserved: BTreeMap<String, i64>,
    /// `kubelet.kubeReserved`, as `system_reserved`; none: Karpenter's defaults by type.
    pub kube_reserved: BTreeMap<String, i64>,
    /// `memory.available` as bytes; a percentage is kept in `eviction_hard_memory_percent`.
    pub eviction_hard_memory_bytes: Option<i64>,
    /// `evictionHard["memory.available"]` as a percentage of the memory.
    pub eviction_hard_memory_percent: Option<u32>,
}

/// A threshold of a kubelet eviction signal: an amount, or a share of the capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Threshold {
    /// This many bytes.
    Bytes(i64),
    /// This share of the capacity.
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

/// An EC2NodeClass, as the decisions and the launches read it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeClass {
    /// `metadata.name`.
    pub name: String,
    /// `amiFamily` (`AL2023`, `Bottlerocket`, `Windows2022`...), when given.
    pub ami_family: Option<String>,
    /// `role`: the nodes' IAM role; without `instanceProfile`, the launch names an instance
    /// profile after it.
    pub role: Option<String>,
    /// `instanceProfile`: an existing instance profile instead of `role`.
    pub instance_profile: Option<String>,
    /// `subnetSelectorTerms`: the subnets (and so the zones) its machines launch in.
    pub subnet_selector_terms: Vec<SelectorTerm>,
    /// `securityGroupSelectorTerms`.
    pub security_group_selector_terms: Vec<SelectorTerm>,
    /// `amiSelectorTerms`.
    pub ami_selector_terms: Vec<SelectorTerm>,
    /// `kubelet`: the settings that change what fits on a node.
    pub kubelet: KubeletConfig,
    /// `tags`: on every instance it launches.
    pub tags: BTreeMap<String, String>,
    /// The storage the kubelet keeps pods' ephemeral data on.
    ///
    /// Added after log format 1, so the last field: see [`crate::model::trailing`].
    #[serde(default, deserialize_with = "crate::model::trailing")]
    pub storage: NodeStorage,
    /// `cpuOptions.nestedVirtualization: enabled`: only types whose processors support nested
    /// virtualization launch, with it turned on. Added after log format 2: see [`crate::model::trailing`].
    #[serde(default, deserialize_with = "crate::model::trailing")]
    pub nested_virtualization: bool,
    /// `capacityReservationSelectorTerms`: the reservations its machines may launch into (by
    /// id, or by tags and owner). Added after log format 2: see [`crate::model::trailing`].
    #[serde(default, deserialize_with = "crate::model::trailing")]
    pub capacity_reservation_selector_terms: Vec<SelectorTerm>,
}

/// The operating system a node class's machines run, as its AMI family sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeOs {
    /// Every AMI family but the Windows ones.
    Linux,
    /// A Windows Server AMI family.
    Windows {
        /// The `node.kubernetes.io/windows-build` label Karpenter gives its nodes.
        build: &'static str,
    },
}

impl NodeOs {
    /// The `kubernetes.io/os` value.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeOs::Linux => "linux",
            NodeOs::Windows { .. } => "windows",
        }
    }

    /// The OS of an AMI family (`Windows2022`) or alias family (`windows2022`); Linux for
    /// every other family.
    pub fn of_family(family: &str) -> NodeOs {
        match family.to_ascii_lowercase().as_str() {
            "windows2019" => NodeOs::Windows {
                build: "10.0.17763",
            },
            "windows2022" => NodeOs::Windows {
                build: "10.0.20348",
            },
            "windows2025" => NodeOs::Windows {
                build: "10.0.26100",
            },
            _ => NodeOs::Linux,
        }
    }
}

impl NodeClass {
    /// A class with Karpenter's defaults for `amiFamily` (AL2023) and a role named after it,
    /// selecting nothing yet.
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
            nested_virtualization: false,
            capacity_reservation_selector_terms: Vec::new(),
        }
    }

    /// Whether its `capacityReservationSelectorTerms` select this reservation: a term by id
    /// names it; a term by tags (and owner) matches every tag it gives.
    pub fn selects_reservation(&self, r: &super::reservation::CapacityReservation) -> bool {
        self.capacity_reservation_selector_terms.iter().any(|term| {
            if let Some(id) = &term.id {
                return *id == r.id;
            }
            let owner = term.owner.as_ref().is_none_or(|o| *o == r.owner_id);
            owner
                && !term.tags.is_empty()
                && term
                    .tags
                    .iter()
                    .all(|(k, v)| r.tags.get(k).is_some_and(|t| v == "*" || t == v))
        })
    }

    /// What its machines run: the `amiFamily`'s OS, else the OS of the first AMI alias
    /// (`windows2022@latest`), else Linux.
    pub fn os(&self) -> NodeOs {
        let family = self.ami_family.as_deref().or_else(|| {
            self.ami_selector_terms
                .iter()
                .find_map(|t| t.alias.as_deref())
                .map(|alias| alias.split('@').next().unwrap_or(alias))
        });
        family.map_or(NodeOs::Linux, NodeOs::of_family)
    }
}

/// What an EC2NodeClass's selector terms resolved to in the cloud, at one moment. The
/// controller logs it as an event, so that a replay sees the subnets, security groups and AMIs
/// the controller saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResolvedNodeClass {
    /// The EC2NodeClass's name.
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

/// A subnet a class's selectors found.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResolvedSubnet {
    /// `subnet-…`.
    pub id: String,
    /// Its availability zone.
    pub zone: String,
    /// Its zone's id, when EC2 gave it.
    pub zone_id: Option<String>,
    /// Free IP addresses when it was looked at.
    pub available_ip_addresses: u32,
}

/// A security group a class's selectors found.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResolvedSecurityGroup {
    /// `sg-…`.
    pub id: String,
    /// Its name.
    pub name: String,
}

/// An AMI a class's selectors found.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResolvedAmi {
    /// `ami-…`.
    pub id: String,
    /// Its name.
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
        assert!(!read.nested_virtualization);
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

    #[test]
    fn the_os_is_the_ami_familys_or_the_aliass() {
        let mut class = NodeClass::new("c");
        assert_eq!(class.os(), NodeOs::Linux);
        class.ami_family = Some("Windows2019".into());
        assert_eq!(
            class.os(),
            NodeOs::Windows {
                build: "10.0.17763"
            }
        );
        class.ami_family = None;
        class.ami_selector_terms = vec![SelectorTerm {
            alias: Some("windows2025@latest".into()),
            ..SelectorTerm::default()
        }];
        assert_eq!(
            class.os(),
            NodeOs::Windows {
                build: "10.0.26100"
            }
        );
        class.ami_selector_terms[0].alias = Some("bottlerocket@v1.20.0".into());
        assert_eq!(class.os(), NodeOs::Linux);
    }
}
