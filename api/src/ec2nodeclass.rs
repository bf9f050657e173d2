//! EC2NodeClass (`karpenter.k8s.aws/v1`): how nodes are launched on EC2 — AMIs, subnets,
//! security groups, IAM, disks, kubelet settings.

use std::collections::BTreeMap;

#[cfg(feature = "crd")]
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::rules::{self, VOLUME_SIZE};
use crate::{Condition, Time};

/// How an EC2NodeClass's nodes are launched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(
    feature = "crd",
    derive(CustomResource),
    kube(
        group = "karpenter.k8s.aws",
        version = "v1",
        kind = "EC2NodeClass",
        status = "EC2NodeClassStatus",
        category = "karpenter",
        shortname = "ec2nc",
        shortname = "ec2ncs",
        crates(kube_core = "::kube_core"),
        printcolumn(
            name = "Ready",
            type_ = "string",
            json_path = ".status.conditions[?(@.type==\"Ready\")].status"
        ),
        printcolumn(
            name = "Age",
            type_ = "date",
            json_path = ".metadata.creationTimestamp"
        ),
        printcolumn(
            name = "Role",
            type_ = "string",
            json_path = ".spec.role",
            priority = "1"
        ),
        derive = "PartialEq"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = EC2NodeClassSpec::spec_rules)]
pub struct EC2NodeClassSpec {
    /// The operating-system family of the AMIs, which decides the user data format:
    /// AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022 or Windows2025. Required
    /// unless an AMI alias names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"]))]
    pub ami_family: Option<String>,
    /// Which AMIs nodes boot from: an alias (al2023@latest), ids, names, tags or an SSM
    /// parameter.
    #[schemars(length(min = 1, max = 30), extend("x-kubernetes-validations" = [
        {"rule": "self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))", "message": "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"},
        {"rule": "!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))", "message": "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
        {"rule": "!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))", "message": "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
        {"rule": "!(self.exists(x, has(x.alias)) && self.size() != 1)", "message": "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"},
    ]))]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    /// Which subnets nodes are launched in: ids or tags.
    #[schemars(length(max = 30), extend("x-kubernetes-validations" = [
        {"rule": "self.size() != 0", "message": "subnetSelectorTerms cannot be empty"},
        {"rule": "self.all(x, has(x.tags) || has(x.id))", "message": "expected at least one, got none, ['tags', 'id']"},
        {"rule": "!self.all(x, has(x.id) && has(x.tags))", "message": "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"},
    ]))]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    /// Which security groups nodes get: ids, names or tags.
    #[schemars(length(max = 30), extend("x-kubernetes-validations" = [
        {"rule": "self.size() != 0", "message": "securityGroupSelectorTerms cannot be empty"},
        {"rule": "self.all(x, has(x.tags) || has(x.id) || has(x.name))", "message": "expected at least one, got none, ['tags', 'id', 'name']"},
        {"rule": "!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))", "message": "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"},
        {"rule": "!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))", "message": "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"},
    ]))]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    /// Which capacity reservations launches may use: ids, tags or match criteria.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 30), extend("x-kubernetes-validations" = [
        {"rule": "self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))", "message": "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"},
        {"rule": "!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))", "message": "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"},
    ]))]
    pub capacity_reservation_selector_terms: Vec<CapacityReservationSelectorTerm>,
    /// Whether instances get a public IPv4 address (the subnet's setting when unset).
    #[serde(
        default,
        rename = "associatePublicIPAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub associate_public_ip_address: Option<bool>,
    /// The IAM role of the nodes; an instance profile is made for it. Exactly one of role and
    /// instanceProfile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self != ''", "message": "role cannot be empty"}]))]
    pub role: Option<String>,
    /// An existing instance profile for the nodes. Exactly one of role and instanceProfile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self != ''", "message": "instanceProfile cannot be empty"}]))]
    pub instance_profile: Option<String>,
    /// User data merged with (or, for Custom, used instead of) the bootstrap of the AMI family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// Tags put on every instance, volume and launch template.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "rules::nodeclass_tags")]
    pub tags: BTreeMap<String, String>,
    /// Kubelet settings of the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    /// The volumes of the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50), extend("x-kubernetes-validations" = [
        {"rule": "self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1", "message": "must have only one blockDeviceMappings with rootVolume"},
    ]))]
    pub block_device_mappings: Option<Vec<BlockDeviceMapping>>,
    /// What to do with instance-store disks: RAID0 makes them one volume for the node's
    /// ephemeral storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["RAID0"]))]
    pub instance_store_policy: Option<String>,
    /// How the instance metadata service answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"}))]
    pub metadata_options: Option<MetadataOptions>,
    /// Whether instances get detailed (one-minute) CloudWatch monitoring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    /// The network interfaces of the instances (EFA setups).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 150), extend("x-kubernetes-validations" = [
        {"rule": "self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && x.interfaceType == 'interface')", "message": "networkInterfaces must include a primary interface with interfaceType='interface'"},
        {"rule": "self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex).size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))", "message": "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card"},
    ]))]
    pub network_interfaces: Vec<NetworkInterface>,
    /// How many IPv4 prefixes are assigned to the primary interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ip_prefix_count: Option<i32>,
    /// Connection-tracking timeouts of the primary interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_tracking: Option<ConnectionTracking>,
    /// CPU options of the instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_options: Option<CpuOptions>,
    /// The placement group instances are launched in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group_selector: Option<PlacementGroupSelector>,
    /// The context passed to EC2 Fleet for a reserved-capacity launch template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

#[cfg(not(feature = "crd"))]
crate::meta::plain_resource!(
    /// A EC2NodeClass as a manifest gives it (the `crd` feature makes this kube's `CustomResource`).
    EC2NodeClass,
    EC2NodeClassSpec,
    EC2NodeClassStatus
);

impl EC2NodeClassSpec {
    fn spec_rules(schema: &mut schemars::Schema) {
        let mut rules = vec![rules::rule(
            "(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))",
            "must specify exactly one of ['role', 'instanceProfile']",
        )];
        for (alias, family) in [
            ("al2", "AL2"),
            ("al2023", "AL2023"),
            ("bottlerocket", "Bottlerocket"),
            ("windows2019", "Windows2019"),
            ("windows2022", "Windows2022"),
            ("windows2025", "Windows2025"),
        ] {
            let article = if alias.starts_with("al") { "an" } else { "a" };
            rules.push(rules::rule(
                format!("!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == '{alias}') ? (self.amiFamily == 'Custom' || self.amiFamily == '{family}') : true)"),
                format!("if set, amiFamily must be '{family}' or 'Custom' when using {article} {family} alias"),
            ));
        }
        rules.push(rules::rule(
            "self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)",
            "must specify amiFamily if amiSelectorTerms does not contain an alias",
        ));
        rules::add_rules(schema, rules);
    }
}

/// One way of selecting AMIs. `alias` and `id` stand alone; the others combine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AmiSelectorTerm {
    /// family@version, e.g. al2023@latest or bottlerocket@v1.20.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 30), extend("x-kubernetes-validations" = [
        {"rule": "self.matches('^[a-zA-Z0-9]+@.+$')", "message": "'alias' is improperly formatted, must match the format 'family@version'"},
        {"rule": "self.split('@')[0] in ['al2','al2023','bottlerocket','windows2019','windows2022','windows2025']", "message": "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"},
        {"rule": "self.split('@')[0] in ['windows2019','windows2022','windows2025'] ? self.split('@')[1] == 'latest' : true", "message": "windows families may only specify version 'latest'"},
    ]))]
    pub alias: Option<String>,
    /// An AMI id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = "ami-[0-9a-z]+"))]
    pub id: Option<String>,
    /// An AMI name (wildcards allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The owner of the AMI: an account id, or self, amazon, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// An SSM parameter that holds an AMI id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
    /// Tags the AMI must carry (a value of * matches any).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "rules::selector_tags")]
    pub tags: BTreeMap<String, String>,
}

/// One way of selecting subnets: by id, or by tags.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubnetSelectorTerm {
    /// A subnet id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = "subnet-[0-9a-z]+"))]
    pub id: Option<String>,
    /// Tags the subnet must carry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "rules::selector_tags")]
    pub tags: BTreeMap<String, String>,
}

/// One way of selecting security groups: by id, by name, or by tags.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecurityGroupSelectorTerm {
    /// A security group id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = "sg-[0-9a-z]+"))]
    pub id: Option<String>,
    /// A security group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Tags the security group must carry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "rules::selector_tags")]
    pub tags: BTreeMap<String, String>,
}

/// One way of selecting capacity reservations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapacityReservationSelectorTerm {
    /// A capacity reservation id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = "^cr-[0-9a-z]+$"))]
    pub id: Option<String>,
    /// The account that owns the reservation.
    #[serde(default, rename = "ownerID", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = "^[0-9]{12}$"))]
    pub owner_id: Option<String>,
    /// open or targeted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["open", "targeted"]))]
    pub instance_match_criteria: Option<String>,
    /// Tags the reservation must carry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "rules::selector_tags")]
    pub tags: BTreeMap<String, String>,
}

/// Kubelet settings; the ones that shape allocatable capacity change what fits on a node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true", "message": "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"},
    {"rule": "has(self.evictionSoft) ? self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)):true", "message": "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"},
    {"rule": "has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft)):true", "message": "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft"},
]))]
pub struct KubeletConfiguration {
    /// The cluster DNS addresses the kubelet gives pods.
    #[serde(
        default,
        rename = "clusterDNS",
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_dns: Option<Vec<String>>,
    /// The most pods a node runs (else derived from the instance type's network limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_pods: Option<i32>,
    /// The most pods per vCPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub pods_per_core: Option<i32>,
    /// Resources kept for system daemons.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "rules::system_reserved")]
    pub system_reserved: BTreeMap<String, String>,
    /// Resources kept for Kubernetes daemons.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "rules::kube_reserved")]
    pub kube_reserved: BTreeMap<String, String>,
    /// Hard eviction thresholds.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "rules::eviction_hard")]
    pub eviction_hard: BTreeMap<String, String>,
    /// Soft eviction thresholds.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "rules::eviction_soft")]
    pub eviction_soft: BTreeMap<String, String>,
    /// How long a soft threshold must hold before eviction.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "rules::eviction_soft_grace_period")]
    pub eviction_soft_grace_period: BTreeMap<String, String>,
    /// The longest grace period given to pods evicted by a soft threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i32>,
    /// Disk use above which image garbage collection always runs (0 to 100).
    #[serde(
        default,
        rename = "imageGCHighThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_high_threshold_percent: Option<i32>,
    /// Disk use below which image garbage collection never runs (0 to 100).
    #[serde(
        default,
        rename = "imageGCLowThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_low_threshold_percent: Option<i32>,
    /// Whether CPU limits are enforced with CFS quota.
    #[serde(
        default,
        rename = "cpuCFSQuota",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_cfs_quota: Option<bool>,
}

/// One volume of a node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockDeviceMapping {
    /// The device name, e.g. /dev/xvda.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// The EBS volume behind the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
    /// Whether this is the root volume (whose size counts as the node's ephemeral storage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_volume: Option<bool>,
}

/// An EBS volume.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.snapshotID) || has(self.volumeSize)", "message": "snapshotID or volumeSize must be defined"},
    {"rule": "!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')", "message": "snapshotID must be set when volumeInitializationRate is set"},
]))]
pub struct BlockDevice {
    /// Whether the volume is deleted with the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    /// Whether the volume is encrypted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    /// Provisioned IOPS (io1, io2, gp3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    /// The KMS key that encrypts the volume.
    #[serde(default, rename = "kmsKeyID", skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    /// The snapshot the volume is made from.
    #[serde(
        default,
        rename = "snapshotID",
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
    /// Throughput in MiB/s (gp3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    /// How fast a volume made from a snapshot is initialised, in MiB/s (100 to 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 300))]
    pub volume_initialization_rate: Option<i32>,
    /// The size of the volume, e.g. 20Gi or 1Ti.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = VOLUME_SIZE))]
    pub volume_size: Option<String>,
    /// standard, io1, io2, gp2, sc1, st1 or gp3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"]))]
    pub volume_type: Option<String>,
}

/// How the instance metadata service answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetadataOptions {
    /// enabled or disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["enabled", "disabled"], "default" = "enabled"))]
    pub http_endpoint: Option<String>,
    /// Whether the service answers on IPv6: enabled or disabled.
    #[serde(
        default,
        rename = "httpProtocolIPv6",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(extend("enum" = ["enabled", "disabled"], "default" = "disabled"))]
    pub http_protocol_ipv6: Option<String>,
    /// How many network hops a metadata response may take (1 to 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64), extend("default" = 1))]
    pub http_put_response_hop_limit: Option<i64>,
    /// required (IMDSv2 only) or optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["required", "optional"], "default" = "required"))]
    pub http_tokens: Option<String>,
}

/// One network interface of an instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkInterface {
    /// The network card the interface is on.
    #[schemars(range(min = 0))]
    pub network_card_index: i32,
    /// The device index on that card.
    #[schemars(range(min = 0))]
    pub device_index: i32,
    /// interface or efa-only.
    #[schemars(extend("enum" = ["interface", "efa-only"]))]
    pub interface_type: String,
}

/// Connection-tracking timeouts, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)", "message": "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"},
]))]
pub struct ConnectionTracking {
    /// Idle established TCP connections (60 to 432000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 432000))]
    pub tcp_established_timeout: Option<i32>,
    /// Idle UDP streams (60 to 180).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 180))]
    pub udp_stream_timeout: Option<i32>,
    /// Idle UDP flows seen in one direction (30 to 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30, max = 60))]
    pub udp_timeout: Option<i32>,
}

/// CPU options of an instance.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CpuOptions {
    /// enabled or disabled; enabled keeps only instance types that support it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["enabled", "disabled"]))]
    pub nested_virtualization: Option<String>,
}

/// A placement group, by name or by id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.name) || has(self.id)", "message": "expected at least one, got none, ['name', 'id']"},
    {"rule": "!(has(self.name) && has(self.id))", "message": "'name' and 'id' are mutually exclusive"},
]))]
pub struct PlacementGroupSelector {
    /// The placement group's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = "^pg-[0-9a-z]+$"))]
    pub id: Option<String>,
    /// The placement group's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub name: Option<String>,
}

/// What the controller resolved of an EC2NodeClass.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    /// The AMIs the selector terms resolved to, each with the requirements it serves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amis: Vec<AmiStatus>,
    /// The capacity reservations the selector terms resolved to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservations: Vec<CapacityReservation>,
    /// Ready, AMIsReady, SubnetsReady, SecurityGroupsReady, InstanceProfileReady, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "rules::conditions")]
    pub conditions: Vec<Condition>,
    /// The instance profile in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// The security groups the selector terms resolved to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<SecurityGroupStatus>,
    /// The subnets the selector terms resolved to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<SubnetStatus>,
}

/// A resolved AMI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AmiStatus {
    /// The AMI id.
    pub id: String,
    /// The AMI name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whether the AMI is deprecated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<bool>,
    /// The instance types the AMI serves (architecture, accelerators).
    pub requirements: Vec<AmiRequirement>,
}

/// A resolved capacity reservation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservation {
    /// The zone of the reservation.
    pub availability_zone: String,
    /// When the reservation ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
    /// The reservation id.
    #[schemars(extend("pattern" = "^cr-[0-9a-z]+$"))]
    pub id: String,
    /// open or targeted.
    #[schemars(extend("enum" = ["open", "targeted"]))]
    pub instance_match_criteria: String,
    /// The reserved instance type.
    pub instance_type: String,
    /// Whether the reservation may be interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruptible: Option<bool>,
    /// The account that owns the reservation.
    #[serde(rename = "ownerID")]
    #[schemars(extend("pattern" = "^[0-9]{12}$"))]
    pub owner_id: String,
    /// default or capacity-block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["default", "capacity-block"], "default" = "default"))]
    pub reservation_type: Option<String>,
    /// active or expiring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["active", "expiring"], "default" = "active"))]
    pub state: Option<String>,
}

/// A resolved security group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupStatus {
    /// The security group id.
    pub id: String,
    /// The security group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A resolved subnet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubnetStatus {
    /// The subnet id.
    pub id: String,
    /// The subnet's zone.
    pub zone: String,
    /// The subnet's zone id.
    #[serde(default, rename = "zoneID", skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
}

/// A requirement an AMI's instance types meet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AmiRequirement {
    /// The label key.
    pub key: String,
    /// In, NotIn, Exists, DoesNotExist, Gt or Lt.
    pub operator: String,
    /// The values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub values: Vec<String>,
}
