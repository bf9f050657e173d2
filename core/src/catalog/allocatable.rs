//! What a node of an instance type offers to pods: capacity, and allocatable after the AWS
//! overheads (Karpenter's formulas for AL2023 / AL2).

use serde::{Deserialize, Serialize};

use super::InstanceType;
use crate::model::labels;
use crate::model::nodeclass::{KubeletConfig, NodeClass, NodeStorage, Threshold};
use crate::model::resources::Resources;

const MIB: i64 = 1 << 20;
/// Karpenter's `vmMemoryOverheadPercent` default: 7.5 %, as parts per thousand.
pub const DEFAULT_VM_MEMORY_OVERHEAD_PER_MILLE: u32 = 75;

/// Cluster-wide settings that change what a node offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CapacitySettings {
    /// ENIs kept for other uses (`reservedENIs`).
    pub reserved_enis: u32,
    /// Memory the hypervisor keeps, in parts per thousand (`vmMemoryOverheadPercent`).
    pub vm_memory_overhead_per_mille: u32,
}

impl Default for CapacitySettings {
    fn default() -> Self {
        CapacitySettings {
            reserved_enis: 0,
            vm_memory_overhead_per_mille: DEFAULT_VM_MEMORY_OVERHEAD_PER_MILLE,
        }
    }
}
/// Default hard eviction threshold `memory.available<100Mi`.
const EVICTION_HARD_MEMORY_BYTES: i64 = 100 * MIB;

/// What a node of a type offers: its capacity, and what pods may ask of it (the capacity less
/// what the kubelet, the system and the eviction threshold keep).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeResources {
    /// The node's capacity.
    pub capacity: Resources,
    /// Its allocatable: what pods' requests may add up to.
    pub allocatable: Resources,
}

/// Max pods: `(ENIs − reservedENIs) × (IPv4 per ENI − 1) + 2`, unless the kubelet config sets
/// `maxPods`; `podsPerCore` caps either.
pub fn max_pods(it: &InstanceType, kubelet: &KubeletConfig, reserved_enis: u32) -> i64 {
    let enis = it.max_enis.saturating_sub(reserved_enis) as i64;
    let eni_limited = enis * (it.ipv4_per_eni as i64 - 1).max(0) + 2;
    let pods = kubelet.max_pods.unwrap_or(eni_limited);
    match kubelet.pods_per_core {
        Some(per_core) if per_core > 0 => pods.min(per_core * it.vcpu as i64),
        _ => pods,
    }
}

/// Kube-reserved CPU: 6 % of the first core, 1 % of the second, 0.5 % of cores 3–4, 0.25 % of
/// the rest (each range truncated to whole milli-cores, as Karpenter does).
pub fn kube_reserved_cpu_milli(cpu_milli: i64) -> i64 {
    let ranges: [(i64, i64, i64); 4] = [
        (0, 1000, 600),
        (1000, 2000, 100),
        (2000, 4000, 50),
        (4000, i64::MAX, 25),
    ];
    // percentages in units of 1/10 000
    ranges
        .iter()
        .filter(|(start, _, _)| cpu_milli > *start)
        .map(|(start, end, per_10k)| (cpu_milli.min(*end) - start) * per_10k / 10_000)
        .sum()
}

/// Karpenter's default kube-reserved ephemeral storage.
const KUBE_RESERVED_EPHEMERAL_BYTES: i64 = 1 << 30;
/// The default hard eviction threshold `nodefs.available<10%`.
const EVICTION_HARD_NODEFS_PERCENT: u32 = 10;
/// The resource name.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";

/// The ephemeral storage of a node of this type: its local NVMe disks under
/// `instanceStorePolicy: RAID0` (in decimal GB, as EC2 gives them), else the volume's size.
pub fn ephemeral_storage_bytes(it: &InstanceType, storage: &NodeStorage) -> i64 {
    let nvme_gb = it
        .labels
        .get(labels::INSTANCE_LOCAL_NVME)
        .and_then(|v| v.parse::<i64>().ok())
        .filter(|gb| *gb > 0);
    match nvme_gb {
        Some(gb) if storage.instance_store_raid0 => gb.saturating_mul(1_000_000_000),
        _ => storage.volume_bytes,
    }
}

/// Capacity and allocatable of a node of this type under this kubelet config, the default
/// storage and the default settings.
pub fn capacity(it: &InstanceType, kubelet: &KubeletConfig) -> NodeResources {
    capacity_with(
        it,
        kubelet,
        &NodeStorage::default(),
        &CapacitySettings::default(),
    )
}

/// [`capacity_with`] under a node class's kubelet config and storage (the defaults without
/// one).
pub fn capacity_of_class(
    it: &InstanceType,
    class: Option<&NodeClass>,
    settings: &CapacitySettings,
) -> NodeResources {
    match class {
        Some(c) => capacity_with(it, &c.kubelet, &c.storage, settings),
        None => capacity_with(
            it,
            &KubeletConfig::default(),
            &NodeStorage::default(),
            settings,
        ),
    }
}

/// [`capacity`] with the node class's storage, under explicit cluster settings.
pub fn capacity_with(
    it: &InstanceType,
    kubelet: &KubeletConfig,
    storage: &NodeStorage,
    settings: &CapacitySettings,
) -> NodeResources {
    let pods = max_pods(it, kubelet, settings.reserved_enis);
    let memory_mib = it.memory_mib as i64;
    let vm_overhead_mib = (memory_mib * settings.vm_memory_overhead_per_mille as i64 + 999) / 1000;
    let mut capacity = Resources::new(
        it.vcpu as i64 * 1000,
        (memory_mib - vm_overhead_mib) * MIB,
        pods,
    );
    capacity.add(&it.extended_resources());
    let ephemeral = ephemeral_storage_bytes(it, storage);
    capacity.set_extended(EPHEMERAL_STORAGE, ephemeral);

    let kube_reserved_cpu = kubelet
        .kube_reserved
        .get("cpu")
        .copied()
        .unwrap_or_else(|| kube_reserved_cpu_milli(capacity.cpu_milli));
    let kube_reserved_memory = kubelet
        .kube_reserved
        .get("memory")
        .copied()
        .unwrap_or((11 * pods + 255) * MIB);
    let system_reserved_cpu = kubelet.system_reserved.get("cpu").copied().unwrap_or(0);
    let system_reserved_memory = kubelet.system_reserved.get("memory").copied().unwrap_or(0);
    let eviction_memory = match (
        kubelet.eviction_hard_memory_bytes,
        kubelet.eviction_hard_memory_percent,
    ) {
        (Some(bytes), _) => bytes,
        (None, Some(percent)) => capacity.memory_bytes * percent as i64 / 100,
        (None, None) => EVICTION_HARD_MEMORY_BYTES,
    };

    let mut allocatable = capacity.clone();
    allocatable.cpu_milli = (capacity.cpu_milli - kube_reserved_cpu - system_reserved_cpu).max(0);
    allocatable.memory_bytes =
        (capacity.memory_bytes - kube_reserved_memory - system_reserved_memory - eviction_memory)
            .max(0);
    let eviction_nodefs = match storage.eviction_hard_nodefs {
        Some(Threshold::Bytes(bytes)) => bytes,
        Some(Threshold::Percent(p)) => ceil_percent(ephemeral, p),
        None => ceil_percent(ephemeral, EVICTION_HARD_NODEFS_PERCENT),
    };
    let reserved_ephemeral = kubelet
        .kube_reserved
        .get(EPHEMERAL_STORAGE)
        .copied()
        .unwrap_or(KUBE_RESERVED_EPHEMERAL_BYTES)
        .saturating_add(
            kubelet
                .system_reserved
                .get(EPHEMERAL_STORAGE)
                .copied()
                .unwrap_or(0),
        );
    allocatable.set_extended(
        EPHEMERAL_STORAGE,
        ephemeral
            .saturating_sub(reserved_ephemeral)
            .saturating_sub(eviction_nodefs)
            .max(0),
    );
    NodeResources {
        capacity,
        allocatable,
    }
}

/// `percent` of `amount`, rounded up (Karpenter's `ceil(storage / 100 * 10)`).
fn ceil_percent(amount: i64, percent: u32) -> i64 {
    let p = percent as i128;
    ((amount as i128 * p + 99) / 100) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::builtin;

    #[test]
    fn m5_large_matches_the_published_formulas() {
        let catalog = builtin::us_east_1();
        let m5 = catalog
            .get("m5.large")
            .expect("m5.large in the built-in catalog");
        let kubelet = KubeletConfig::default();
        assert_eq!(max_pods(m5, &kubelet, 0), 29);
        assert_eq!(max_pods(m5, &kubelet, 1), 20);
        let r = capacity(m5, &kubelet);
        assert_eq!(r.capacity.cpu_milli, 2000);
        // 8192 MiB − ceil(8192 × 7.5 %) = 8192 − 615 = 7577 MiB
        assert_eq!(r.capacity.memory_bytes, 7577 * MIB);
        // 60m + 10m
        assert_eq!(r.allocatable.cpu_milli, 1930);
        // 7577 − (11 × 29 + 255) − 100 = 6903 MiB
        assert_eq!(r.allocatable.memory_bytes, 6903 * MIB);
        assert_eq!(r.allocatable.pods, 29);
    }

    #[test]
    fn ephemeral_storage_is_the_volume_or_the_raid0_instance_store_less_what_the_kubelet_keeps() {
        let catalog = builtin::us_east_1();
        let kubelet = KubeletConfig::default();
        let gib = 1i64 << 30;
        let m5 = catalog.get("m5.large").expect("m5.large");
        let m5d = catalog.get("m5d.large").expect("m5d.large (75 GB of NVMe)");
        let of = |it, storage: &NodeStorage| {
            let r = capacity_with(it, &kubelet, storage, &CapacitySettings::default());
            (
                r.capacity.extended(EPHEMERAL_STORAGE),
                r.allocatable.extended(EPHEMERAL_STORAGE),
            )
        };
        // 20 GiB − 1 GiB kube-reserved − 10 % nodefs.available.
        let default = NodeStorage::default();
        assert_eq!(of(m5, &default), (20 * gib, 20 * gib - gib - 2 * gib));
        // Without RAID0 the instance store is not used; with it, the NVMe disks replace the
        // volume where there are any.
        assert_eq!(of(m5d, &default).0, 20 * gib);
        let raid0 = NodeStorage {
            instance_store_raid0: true,
            ..NodeStorage::default()
        };
        assert_eq!(of(m5d, &raid0).0, 75_000_000_000);
        assert_eq!(of(m5, &raid0).0, 20 * gib);
        let kept = NodeStorage {
            volume_bytes: 100 * gib,
            eviction_hard_nodefs: Some(Threshold::Bytes(5 * gib)),
            ..NodeStorage::default()
        };
        assert_eq!(of(m5, &kept), (100 * gib, 100 * gib - gib - 5 * gib));
        let mut reserved = KubeletConfig::default();
        reserved
            .kube_reserved
            .insert(EPHEMERAL_STORAGE.into(), 3 * gib);
        reserved
            .system_reserved
            .insert(EPHEMERAL_STORAGE.into(), gib);
        let r = capacity_with(m5, &reserved, &default, &CapacitySettings::default());
        assert_eq!(
            r.allocatable.extended(EPHEMERAL_STORAGE),
            20 * gib - 4 * gib - 2 * gib
        );
    }

    #[test]
    fn kube_reserved_cpu_ranges() {
        assert_eq!(kube_reserved_cpu_milli(1000), 60);
        assert_eq!(kube_reserved_cpu_milli(2000), 70);
        assert_eq!(kube_reserved_cpu_milli(4000), 80);
        assert_eq!(kube_reserved_cpu_milli(8000), 90);
        assert_eq!(kube_reserved_cpu_milli(96_000), 310);
    }

    #[test]
    fn kubelet_overrides() {
        let catalog = builtin::us_east_1();
        let m5 = catalog
            .get("m5.large")
            .expect("m5.large in the built-in catalog");
        let kubelet = KubeletConfig {
            max_pods: Some(110),
            pods_per_core: Some(10),
            ..KubeletConfig::default()
        };
        assert_eq!(max_pods(m5, &kubelet, 0), 20);
    }
}
