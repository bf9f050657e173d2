//! Well-known label and annotation keys, with Karpenter's spelling.

pub const ARCH: &str = "kubernetes.io/arch";
pub const OS: &str = "kubernetes.io/os";
/// The Windows build a Windows node runs (`10.0.20348` for Windows Server 2022); Linux types
/// lack it.
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
pub const HOSTNAME: &str = "kubernetes.io/hostname";
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
pub const ZONE: &str = "topology.kubernetes.io/zone";
pub const REGION: &str = "topology.kubernetes.io/region";
pub const ZONE_ID: &str = "topology.k8s.aws/zone-id";
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
pub const NODEPOOL: &str = "karpenter.sh/nodepool";
pub const NODECLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
/// The capacity reservation a `reserved` node runs in, and its type (`default`,
/// `capacity-block`).
pub const CAPACITY_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
pub const CAPACITY_RESERVATION_TYPE: &str = "karpenter.k8s.aws/capacity-reservation-type";

pub const INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
pub const INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
pub const INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
pub const INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
pub const INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
pub const INSTANCE_CPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
pub const INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: &str =
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz";
pub const INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
pub const INSTANCE_NETWORK_BANDWIDTH: &str = "karpenter.k8s.aws/instance-network-bandwidth";
pub const INSTANCE_EBS_BANDWIDTH: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
pub const INSTANCE_LOCAL_NVME: &str = "karpenter.k8s.aws/instance-local-nvme";
pub const INSTANCE_HYPERVISOR: &str = "karpenter.k8s.aws/instance-hypervisor";
pub const INSTANCE_ENCRYPTION_IN_TRANSIT: &str =
    "karpenter.k8s.aws/instance-encryption-in-transit-supported";
pub const INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
pub const INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
pub const INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
pub const INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.aws/instance-gpu-memory";

/// Labels that an instance type defines for itself (every type has a requirement on each: its
/// value, or "does not exist"). A pod may select on them without a NodePool mentioning them.
pub const INSTANCE_TYPE_LABELS: &[&str] = &[
    ARCH,
    OS,
    WINDOWS_BUILD,
    INSTANCE_TYPE,
    INSTANCE_CATEGORY,
    INSTANCE_FAMILY,
    INSTANCE_GENERATION,
    INSTANCE_SIZE,
    INSTANCE_CPU,
    INSTANCE_CPU_MANUFACTURER,
    INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
    INSTANCE_MEMORY,
    INSTANCE_NETWORK_BANDWIDTH,
    INSTANCE_EBS_BANDWIDTH,
    INSTANCE_LOCAL_NVME,
    INSTANCE_HYPERVISOR,
    INSTANCE_ENCRYPTION_IN_TRANSIT,
    INSTANCE_GPU_NAME,
    INSTANCE_GPU_MANUFACTURER,
    INSTANCE_GPU_COUNT,
    INSTANCE_GPU_MEMORY,
];

/// Labels whose values the cloud provider or nodewright knows without a NodePool declaring them.
pub fn is_well_known(key: &str) -> bool {
    INSTANCE_TYPE_LABELS.contains(&key)
        || matches!(
            key,
            ZONE | REGION | ZONE_ID | CAPACITY_TYPE | NODEPOOL | NODECLASS
        )
}

/// Label domains Karpenter reserves: a node gets no label in them from a requirement's value.
const RESTRICTED_DOMAINS: &[&str] = &[
    "kubernetes.io",
    "k8s.io",
    "karpenter.sh",
    "karpenter.k8s.aws",
];

/// Domains inside the restricted ones that stay open to users.
const OPEN_DOMAINS: &[&str] = &[
    "kops.k8s.io",
    "node.kubernetes.io",
    "node-restriction.kubernetes.io",
];

/// Karpenter's `IsRestrictedNodeLabel`: a well-known label (its value comes from the instance or
/// the cluster, not from a requirement), the hostname, or a key in a restricted domain that is
/// not one of the open ones.
pub fn is_restricted(key: &str) -> bool {
    if is_well_known(key) || key == HOSTNAME {
        return true;
    }
    let Some((domain, _)) = key.split_once('/') else {
        return false;
    };
    let within = |parent: &str| domain == parent || domain.ends_with(&format!(".{parent}"));
    if OPEN_DOMAINS.iter().any(|d| within(d)) {
        return false;
    }
    RESTRICTED_DOMAINS.iter().any(|d| within(d))
}

pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
pub const DISRUPTED_TAINT: &str = "karpenter.sh/disrupted";
pub const UNREGISTERED_TAINT: &str = "karpenter.sh/unregistered";
/// A startup taint (`NoSchedule`) on the machines of one provisioning decision whose pods
/// spread or keep apart: taken off all of them together once they have all registered
/// (`Config::sibling_hold_ms`).
pub const SIBLING_HOLD_TAINT: &str = "nodewright.dev/awaiting-siblings";
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";
