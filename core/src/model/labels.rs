//! Well-known label and annotation keys, with Karpenter's spelling.

/// The CPU architecture (`amd64`, `arm64`).
pub const ARCH: &str = "kubernetes.io/arch";
/// The operating system (`linux`, `windows`).
pub const OS: &str = "kubernetes.io/os";
/// The Windows build a Windows node runs (`10.0.20348` for Windows Server 2022); Linux types
/// lack it.
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
/// The node's name, one value per node: hostname topology.
pub const HOSTNAME: &str = "kubernetes.io/hostname";
/// The EC2 instance type (`m5.large`).
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// The availability zone (`us-east-1a`).
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// The region (`us-east-1`).
pub const REGION: &str = "topology.kubernetes.io/region";
/// The zone's id, the same across accounts (`use1-az1`).
pub const ZONE_ID: &str = "topology.k8s.aws/zone-id";
/// `on-demand`, `spot` or `reserved`.
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
/// The NodePool a node belongs to.
pub const NODEPOOL: &str = "karpenter.sh/nodepool";
/// The EC2NodeClass a node was launched with.
pub const NODECLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
/// The capacity reservation a `reserved` node runs in.
pub const CAPACITY_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
/// The type of the capacity reservation (`default`, `capacity-block`).
pub const CAPACITY_RESERVATION_TYPE: &str = "karpenter.k8s.aws/capacity-reservation-type";

/// The type's category: the letters before its generation (`m`, `c`, `g`...).
pub const INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
/// The type's family (`m5`).
pub const INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
/// The type's generation (`5` for `m5`).
pub const INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
/// The type's size (`large`, `2xlarge`, `metal`).
pub const INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
/// The number of vCPUs.
pub const INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
/// `intel`, `amd` or `aws`.
pub const INSTANCE_CPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
/// The CPU's sustained clock speed in MHz.
pub const INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: &str =
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz";
/// The memory in MiB.
pub const INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
/// The baseline network bandwidth in Mbit/s.
pub const INSTANCE_NETWORK_BANDWIDTH: &str = "karpenter.k8s.aws/instance-network-bandwidth";
/// The EBS bandwidth in Mbit/s.
pub const INSTANCE_EBS_BANDWIDTH: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
/// The local NVMe storage in GiB.
pub const INSTANCE_LOCAL_NVME: &str = "karpenter.k8s.aws/instance-local-nvme";
/// `nitro`, `xen`, or none for bare metal.
pub const INSTANCE_HYPERVISOR: &str = "karpenter.k8s.aws/instance-hypervisor";
/// Whether the type encrypts traffic in transit (`true`, `false`).
pub const INSTANCE_ENCRYPTION_IN_TRANSIT: &str =
    "karpenter.k8s.aws/instance-encryption-in-transit-supported";
/// The GPU model (`t4`, `a10g`).
pub const INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
/// The GPU maker (`nvidia`, `amd`).
pub const INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
/// The number of GPUs.
pub const INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
/// The memory of each GPU in MiB.
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

/// On a pod or a node: emptiness, consolidation and drift leave the node alone while it is
/// there (a forced disruption still drains it, up to the NodePool's terminationGracePeriod).
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
/// The `NoSchedule` taint on a node being disrupted: no new pod lands on it.
pub const DISRUPTED_TAINT: &str = "karpenter.sh/disrupted";
/// The taint a node registers with until nodewright has taken it in.
pub const UNREGISTERED_TAINT: &str = "karpenter.sh/unregistered";
/// A startup taint (`NoSchedule`) on the machines of one provisioning decision whose pods
/// spread or keep apart: taken off all of them together once they have all registered
/// (`Config::sibling_hold_ms`).
pub const SIBLING_HOLD_TAINT: &str = "nodewright.dev/awaiting-siblings";
/// The finalizer on a NodeClaim and its node: removed once its instance is gone.
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";

/// Annotation domains whose annotations the core reads: Karpenter's (`do-not-disrupt`, the
/// drift hashes).
pub const READ_ANNOTATION_DOMAINS: [&str; 2] = ["karpenter.sh", "karpenter.k8s.aws"];

/// Annotations of other domains the core reads.
pub const READ_ANNOTATIONS: [&str; 1] = ["controller.kubernetes.io/pod-deletion-cost"];

/// Whether the core reads annotation `key`.
pub fn is_read_annotation(key: &str) -> bool {
    READ_ANNOTATIONS.contains(&key)
        || key.split_once('/').is_some_and(|(domain, _)| {
            READ_ANNOTATION_DOMAINS
                .iter()
                .any(|kept| domain == *kept || domain.ends_with(&format!(".{kept}")))
        })
}

/// The annotations of a pod, node or NodeClaim the core reads; the rest are not kept in the
/// state, the events or the snapshots (`kubectl.kubernetes.io/last-applied-configuration`
/// alone holds the whole object, env values included, and may be a megabyte).
pub fn read_annotations(
    annotations: &std::collections::BTreeMap<String, String>,
) -> std::collections::BTreeMap<String, String> {
    annotations
        .iter()
        .filter(|(key, _)| is_read_annotation(key))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}
