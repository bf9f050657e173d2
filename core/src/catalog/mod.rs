//! The instance catalog: instance types, their offerings (zone × capacity type) and prices.

mod allocatable;
pub mod builtin;
mod prepared;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use crate::model::reservation::{CapacityReservation, ReservationKind};
pub use allocatable::{
    CapacitySettings, DEFAULT_VM_MEMORY_OVERHEAD_PER_MILLE, EPHEMERAL_STORAGE, NodeResources,
    capacity, capacity_of_class, capacity_with, ephemeral_storage_bytes, kube_reserved_cpu_milli,
    max_pods,
};
pub use prepared::PreparedCatalog;

use crate::model::derived::Derived;
use crate::model::labels;
use crate::model::nodeclass::NodeOs;
use crate::model::requirements::{Requirement, Requirements};
use crate::model::resources::{AMD_GPU, AWS_NEURON, NVIDIA_GPU, Resources};
use crate::model::shared_name::SharedName;

/// A price in micro-USD per hour (0.096 USD/h = 96 000). Integers keep sums exact and
/// decisions identical on every machine.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Price(pub u64);

impl Price {
    /// In USD per hour, for people.
    pub fn usd_per_hour(self) -> f64 {
        self.0 as f64 / 1_000_000.0
    }
}

impl fmt::Display for Price {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "${:.4}/h", self.usd_per_hour())
    }
}

/// How an offering is paid for (`karpenter.sh/capacity-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum CapacityType {
    /// In a capacity reservation (paid for already).
    #[serde(rename = "reserved")]
    Reserved,
    /// Spot: cheaper, and taken back with two minutes' notice.
    #[serde(rename = "spot")]
    Spot,
    /// On-demand.
    #[serde(rename = "on-demand")]
    OnDemand,
}

impl CapacityType {
    /// The label value (`reserved`, `spot`, `on-demand`).
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityType::Reserved => "reserved",
            CapacityType::Spot => "spot",
            CapacityType::OnDemand => "on-demand",
        }
    }

    /// The capacity type a label value names.
    pub fn parse(raw: &str) -> Option<CapacityType> {
        Some(match raw {
            "reserved" => CapacityType::Reserved,
            "spot" => CapacityType::Spot,
            "on-demand" => CapacityType::OnDemand,
            _ => return None,
        })
    }
}

impl fmt::Display for CapacityType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One way to buy a type: in a zone, with a capacity type, at a price.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Offering {
    /// The zone.
    pub zone: String,
    /// How it is paid for.
    pub capacity_type: CapacityType,
    /// Per hour.
    pub price: Price,
}

/// A type's GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    /// The model (`t4`, `a10g`).
    pub name: String,
    /// `nvidia` or `amd`.
    pub manufacturer: String,
    /// How many.
    pub count: u32,
    /// Per GPU.
    pub memory_mib: u64,
}

/// One EC2 instance type with its offerings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceType {
    /// `m5.large`.
    pub name: String,
    /// `amd64` or `arm64`.
    pub architecture: String,
    /// vCPUs.
    pub vcpu: u32,
    /// Memory in MiB, as EC2 states it (the node sees less: see `catalog::allocatable`).
    pub memory_mib: u64,
    /// Its GPUs, if any.
    pub gpu: Option<Gpu>,
    /// AWS Neuron devices (Inferentia, Trainium).
    pub neuron_count: u32,
    /// Network interfaces: with `ipv4_per_eni`, the pod capacity under the VPC CNI.
    pub max_enis: u32,
    /// IPv4 addresses per network interface.
    pub ipv4_per_eni: u32,
    /// Every well-known label of the type (`kubernetes.io/arch`, `karpenter.k8s.aws/instance-*`).
    pub labels: BTreeMap<String, String>,
    /// Where and how it can be bought, and at what price.
    pub offerings: Vec<Offering>,
}

impl InstanceType {
    /// What the type brings besides CPU, memory and pods.
    pub fn extended_resources(&self) -> Resources {
        let mut r = Resources::default();
        if let Some(gpu) = &self.gpu {
            match gpu.manufacturer.as_str() {
                "nvidia" => r.set_extended(NVIDIA_GPU, gpu.count as i64),
                "amd" => r.set_extended(AMD_GPU, gpu.count as i64),
                _ => {}
            }
        }
        if self.neuron_count > 0 {
            r.set_extended(AWS_NEURON, self.neuron_count as i64);
        }
        r
    }

    /// Karpenter's instance-type requirements: each label key it defines at its value, the keys
    /// it lacks as "does not exist", and the zones and capacity types it is offered in.
    pub fn requirements(&self) -> Requirements {
        self.requirements_under(NodeOs::Linux)
    }

    /// Its requirements when a node class of this OS launches it: a Windows class's machines
    /// run `windows` with the family's build, and only on amd64 types (an arm64 type's OS
    /// requirement is empty, so nothing selects it), as Karpenter's `getOS` decides.
    pub fn requirements_under(&self, os: NodeOs) -> Requirements {
        let labels = self.labels_under(os);
        let mut reqs = Requirements::new();
        for key in labels::INSTANCE_TYPE_LABELS {
            match labels.get(*key) {
                Some(value) => reqs.add(Requirement::single(key, value)),
                None if *key == labels::OS && os != NodeOs::Linux => {
                    reqs.add(Requirement::values_in(key, std::iter::empty::<String>()))
                }
                None => reqs.add(Requirement::does_not_exist(key)),
            }
        }
        reqs.add(Requirement::values_in(
            labels::ZONE,
            self.offerings.iter().map(|o| o.zone.clone()),
        ));
        reqs.add(Requirement::values_in(
            labels::CAPACITY_TYPE,
            self.offerings
                .iter()
                .map(|o| o.capacity_type.as_str().to_string()),
        ));
        // Kept for the process's life, once per type: no spare capacity.
        reqs.shrink_to_fit();
        reqs
    }

    /// Its well-known labels on a node of a class with this OS (see
    /// [`InstanceType::requirements_under`]); a Windows class on an arm64 type has no OS label.
    pub fn labels_under(&self, os: NodeOs) -> Cow<'_, BTreeMap<String, String>> {
        match os {
            NodeOs::Linux => Cow::Borrowed(&self.labels),
            NodeOs::Windows { build } => {
                let mut labels = self.labels.clone();
                labels.remove(labels::OS);
                if self.architecture == "amd64" {
                    labels.insert(labels::OS.to_string(), os.as_str().to_string());
                }
                labels.insert(labels::WINDOWS_BUILD.to_string(), build.to_string());
                Cow::Owned(labels)
            }
        }
    }

    /// The cheapest offering price, for ordering.
    pub fn cheapest_price(&self) -> Option<Price> {
        self.offerings.iter().map(|o| o.price).min()
    }
}

/// Every instance type of one region.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Catalog {
    /// The region (`us-east-1`).
    pub region: String,
    /// The types, in name order once [`Catalog::normalized`].
    pub instance_types: Vec<InstanceType>,
    /// The types whose processors support nested virtualization (`nested-virtualization` in
    /// DescribeInstanceTypes' `ProcessorInfo.SupportedFeatures`), by name. Added after log
    /// format 2: see [`crate::model::trailing`].
    #[serde(default, deserialize_with = "crate::model::trailing")]
    pub nested_virtualization: BTreeSet<String>,
    /// The capacity reservations the account holds (On-Demand Capacity Reservations and
    /// Capacity Blocks): each a `reserved` offering of its type in its zone, for the node
    /// classes whose `capacityReservationSelectorTerms` select it. Added after log format 2:
    /// see [`crate::model::trailing`].
    #[serde(default, deserialize_with = "crate::model::trailing")]
    pub reservations: Vec<CapacityReservation>,
    /// Each type's requirements, by index ([`Catalog::type_requirements`]): built once per
    /// catalog, so every core of a process that installs the same shared catalog reads the
    /// same ones. Not part of the catalog's identity; a new catalog starts with
    /// `Derived::default()` (or `..Catalog::default()`).
    #[serde(skip)]
    pub type_requirements: Derived<Vec<Requirements>>,
    /// The catalog's zones, each offering's by position ([`Catalog::offering_zones`]); built
    /// once per catalog, like `type_requirements`.
    #[serde(skip)]
    pub offering_zones: Derived<OfferingZones>,
    /// Every type's node resources under the kubelet settings, storage and cluster settings
    /// asked lately ([`PreparedCatalog::node_resources`]): the NodePools of a cluster, and
    /// every core of a process sharing the catalog, mostly ask the same few.
    #[serde(skip)]
    pub node_resources_memo: Derived<NodeResourcesMemo>,
    /// Each type's offerings, cheapest first ([`Catalog::offerings_by_price`]).
    #[serde(skip)]
    pub offerings_by_price: Derived<Vec<Vec<usize>>>,
    /// Each type's name, shared with the launch options that name it
    /// ([`Catalog::shared_type_names`]).
    #[serde(skip)]
    pub shared_type_names: Derived<Vec<SharedName>>,
}

/// The node resources computed lately, by what they depend on besides the type.
pub type NodeResourcesMemo = std::sync::Mutex<Vec<(ResourcesKey, Arc<ClassResources>)>>;

/// What node resources depend on besides the type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcesKey {
    /// The class's kubelet settings.
    pub kubelet: crate::model::nodeclass::KubeletConfig,
    /// The class's storage.
    pub storage: crate::model::nodeclass::NodeStorage,
    /// The cluster's settings.
    pub settings: CapacitySettings,
}

/// Every type's node resources under one [`ResourcesKey`], by catalog index, with their
/// capacities as rows of integers.
#[derive(Debug)]
pub struct ClassResources {
    /// By catalog index.
    pub resources: Vec<NodeResources>,
    /// The capacities as rows of integers, by catalog index.
    pub capacity_rows: crate::model::resource_rows::ResourceRows,
}

/// The zones of a catalog's offerings, and each offering's zone as a position among them:
/// what lets a filter over every offering check each zone once, not once per offering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferingZones {
    /// In name order.
    pub names: Vec<String>,
    /// `names`, shared with the launch options that name them.
    pub shared: Vec<SharedName>,
    /// `of_offering[t][o]`: the position in `names` of the zone of offering `o` of type `t`.
    pub of_offering: Vec<Vec<usize>>,
}

impl OfferingZones {
    fn of(catalog: &Catalog) -> Self {
        let names: Vec<String> = catalog
            .instance_types
            .iter()
            .flat_map(|it| it.offerings.iter().map(|o| &o.zone))
            .collect::<BTreeSet<&String>>()
            .into_iter()
            .cloned()
            .collect();
        let of_offering = catalog
            .instance_types
            .iter()
            .map(|it| {
                it.offerings
                    .iter()
                    .map(|o| {
                        names
                            .binary_search(&o.zone)
                            .expect("every offering's zone is among the names, built from them")
                    })
                    .collect()
            })
            .collect();
        let shared = names.iter().map(SharedName::from).collect();
        OfferingZones {
            names,
            shared,
            of_offering,
        }
    }
}

impl ReservationKind {
    /// The label value (`default`, `capacity-block`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReservationKind::Default => "default",
            ReservationKind::CapacityBlock => "capacity-block",
        }
    }
}

/// What a reserved offering costs to choose: next to nothing (the reservation is paid for
/// already, as Karpenter prices it), yet in the order of the types' on-demand prices, so that
/// among reservations the cheaper type still comes first.
pub fn reserved_price(on_demand: Price) -> Price {
    Price((on_demand.0 / 1000).max(1))
}

impl Catalog {
    /// The type named `name` (the catalog normalized: a binary search).
    pub fn get(&self, name: &str) -> Option<&InstanceType> {
        self.position(name).map(|i| &self.instance_types[i])
    }

    /// The index of the type named `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.instance_types
            .binary_search_by(|it| it.name.as_str().cmp(name))
            .ok()
    }

    /// Sorts types by name (lookups rely on it).
    /// Whether the types are in name order already (as [`Catalog::normalized`] leaves them).
    /// Each type's requirements, by index, built the first time they are read. (A catalog
    /// whose types change after this was read would keep the old ones: catalogs are shared
    /// behind an `Arc` and never changed once read.)
    pub fn type_requirements(&self) -> &[Requirements] {
        self.type_requirements.get_or_init(|| {
            self.instance_types
                .iter()
                .map(|it| it.requirements())
                .collect()
        })
    }

    /// The zones of the offerings, and each offering's by position, built the first time
    /// they are read (as [`Catalog::type_requirements`]).
    pub fn offering_zones(&self) -> &OfferingZones {
        self.offering_zones.get_or_init(|| OfferingZones::of(self))
    }

    /// Each type's offerings by position, cheapest first (then in their order), built the
    /// first time it is read (as [`Catalog::type_requirements`]).
    pub fn offerings_by_price(&self) -> &[Vec<usize>] {
        self.offerings_by_price.get_or_init(|| {
            self.instance_types
                .iter()
                .map(|it| {
                    let mut order: Vec<usize> = (0..it.offerings.len()).collect();
                    order.sort_by_key(|&o| (it.offerings[o].price, o));
                    order
                })
                .collect()
        })
    }

    /// Each type's name by position, shared (built the first time it is read).
    pub fn shared_type_names(&self) -> &[SharedName] {
        self.shared_type_names.get_or_init(|| {
            self.instance_types
                .iter()
                .map(|it| SharedName::from(&it.name))
                .collect()
        })
    }

    /// Whether the types are in name order.
    pub fn is_normalized(&self) -> bool {
        self.instance_types.is_sorted_by(|a, b| a.name <= b.name)
    }

    /// The catalog with a `reserved` offering for each type and zone a reservation holds (at
    /// [`reserved_price`] of the type's on-demand price there), after the type's own offerings.
    pub fn with_reserved_offerings(mut self) -> Catalog {
        self.forget_derived();
        let reservations = std::mem::take(&mut self.reservations);
        for r in &reservations {
            let Some(at) = self.position(&r.instance_type) else {
                continue;
            };
            let it = &mut self.instance_types[at];
            if it
                .offerings
                .iter()
                .any(|o| o.zone == r.zone && o.capacity_type == CapacityType::Reserved)
            {
                continue;
            }
            let on_demand = it
                .offerings
                .iter()
                .filter(|o| o.capacity_type == CapacityType::OnDemand)
                .min_by_key(|o| (o.zone != r.zone, o.price))
                .map(|o| o.price);
            if let Some(on_demand) = on_demand {
                it.offerings.push(Offering {
                    zone: r.zone.clone(),
                    capacity_type: CapacityType::Reserved,
                    price: reserved_price(on_demand),
                });
            }
        }
        self.reservations = reservations;
        self
    }

    /// The instances the reservations hold of one type in one zone.
    pub fn reserved_count(&self, instance_type: &str, zone: &str) -> u32 {
        self.reservations
            .iter()
            .filter(|r| r.instance_type == instance_type && r.zone == zone)
            .map(|r| r.count)
            .sum()
    }

    /// The catalog with its types in name order (what every lookup by name relies on).
    pub fn normalized(mut self) -> Catalog {
        self.forget_derived();
        self.instance_types.sort_by(|a, b| a.name.cmp(&b.name));
        self
    }

    /// Drops what was derived from the types (before they change).
    fn forget_derived(&mut self) {
        self.offerings_by_price = Derived::default();
        self.type_requirements = Derived::default();
        self.offering_zones = Derived::default();
        self.node_resources_memo = Derived::default();
        self.shared_type_names = Derived::default();
    }

    /// The price of one offering, if the catalog has it.
    pub fn price_of(
        &self,
        instance_type: &str,
        zone: &str,
        capacity_type: CapacityType,
    ) -> Option<Price> {
        self.get(instance_type)?
            .offerings
            .iter()
            .find(|o| o.zone == zone && o.capacity_type == capacity_type)
            .map(|o| o.price)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catalog_recorded_before_nested_virtualization_reads_with_none() {
        #[derive(Serialize)]
        struct RecordedBefore<'a> {
            region: &'a str,
            instance_types: &'a [InstanceType],
        }
        let full = builtin::us_east_1();
        let bytes = postcard::to_stdvec(&RecordedBefore {
            region: &full.region,
            instance_types: &full.instance_types[..3],
        })
        .expect("encodes");
        let read: Catalog = postcard::from_bytes(&bytes).expect("decodes");
        assert_eq!(read.instance_types.len(), 3);
        assert!(read.nested_virtualization.is_empty());
        // A catalog with the set keeps it through the log.
        let bytes = postcard::to_stdvec(&full).expect("encodes");
        let back: Catalog = postcard::from_bytes(&bytes).expect("decodes");
        assert_eq!(back, full);
        assert!(back.nested_virtualization.contains("c7i.large"));
    }

    #[test]
    fn a_windows_class_runs_amd64_types_only() {
        let catalog = builtin::us_east_1();
        let windows = NodeOs::Windows {
            build: "10.0.20348",
        };
        let amd = catalog.get("m5.large").expect("m5.large");
        let arm = catalog.get("m6g.large").expect("m6g.large");
        assert_eq!(amd.labels_under(windows)[labels::OS], "windows");
        assert!(!arm.labels_under(windows).contains_key(labels::OS));
        let wanted = Requirements::from_labels(&BTreeMap::from([(
            labels::OS.to_string(),
            "windows".to_string(),
        )]));
        assert!(amd.requirements_under(windows).intersects(&wanted).is_ok());
        assert!(arm.requirements_under(windows).intersects(&wanted).is_err());
        assert!(amd.requirements().intersects(&wanted).is_err());
    }
}
