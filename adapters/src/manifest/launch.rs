//! What an EC2NodeClass says about *how* a machine is launched — its AMI family, user data,
//! block devices, instance metadata options — as typed values. The decision core does not read
//! these (they change no decision); the EC2 adapter builds its launch templates from them.

use std::collections::BTreeMap;
use std::fmt;

use nodewright_core::model::quantity::parse_units;

use nodewright_api::{
    BlockDeviceMapping as BlockDeviceMappingObject, EC2NodeClassSpec as NodeClassSpec,
    MetadataOptions as MetadataOptionsObject,
};

/// The AMI families Karpenter knows; each has its own user data and default disks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AmiFamily {
    Al2023,
    Al2,
    Bottlerocket,
    Windows2019,
    Windows2022,
    Windows2025,
    /// The user's own AMI: the user data is passed as it is written.
    Custom,
}

impl AmiFamily {
    /// The `spec.amiFamily` spelling.
    pub fn parse(raw: &str) -> Option<AmiFamily> {
        Some(match raw {
            "AL2023" => AmiFamily::Al2023,
            "AL2" => AmiFamily::Al2,
            "Bottlerocket" => AmiFamily::Bottlerocket,
            "Windows2019" => AmiFamily::Windows2019,
            "Windows2022" => AmiFamily::Windows2022,
            "Windows2025" => AmiFamily::Windows2025,
            "Custom" => AmiFamily::Custom,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AmiFamily::Al2023 => "AL2023",
            AmiFamily::Al2 => "AL2",
            AmiFamily::Bottlerocket => "Bottlerocket",
            AmiFamily::Windows2019 => "Windows2019",
            AmiFamily::Windows2022 => "Windows2022",
            AmiFamily::Windows2025 => "Windows2025",
            AmiFamily::Custom => "Custom",
        }
    }

    /// The device of the root volume.
    pub fn root_device(self) -> &'static str {
        match self {
            AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => "/dev/sda1",
            _ => "/dev/xvda",
        }
    }

    /// The device whose volume holds the kubelet's data (ephemeral storage): Bottlerocket's
    /// data volume, else the root volume.
    pub fn ephemeral_device(self) -> &'static str {
        match self {
            AmiFamily::Bottlerocket => "/dev/xvdb",
            other => other.root_device(),
        }
    }

    /// Karpenter's default disks when `blockDeviceMappings` is not set: 20 GiB gp3 encrypted
    /// (Windows 50 GiB); Bottlerocket a 4 GiB OS volume and a 20 GiB data volume.
    pub fn default_block_devices(self) -> Vec<BlockDeviceMapping> {
        let volume = |device: &str, gib: u64, root: bool| BlockDeviceMapping {
            device_name: device.to_string(),
            root_volume: root,
            ebs: Some(Ebs {
                volume_size_gib: Some(gib),
                volume_type: Some("gp3".to_string()),
                encrypted: Some(true),
                delete_on_termination: Some(true),
                ..Ebs::default()
            }),
        };
        match self {
            AmiFamily::Bottlerocket => {
                vec![volume("/dev/xvda", 4, false), volume("/dev/xvdb", 20, true)]
            }
            AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
                vec![volume("/dev/sda1", 50, true)]
            }
            AmiFamily::Custom => Vec::new(),
            AmiFamily::Al2023 | AmiFamily::Al2 => vec![volume("/dev/xvda", 20, true)],
        }
    }
}

impl fmt::Display for AmiFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `amiSelectorTerms[].alias`: `family@version`, where version is `latest` or a release
/// (`v20240807` for the Amazon Linux families, `v1.20.3` for Bottlerocket).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AmiAlias {
    pub family: AmiFamily,
    /// `None`: the latest release.
    pub version: Option<String>,
}

/// The alias families, as written in an alias.
pub const ALIAS_FAMILIES: [&str; 6] = [
    "al2023",
    "al2",
    "bottlerocket",
    "windows2019",
    "windows2022",
    "windows2025",
];

impl AmiAlias {
    /// Parses an alias; the error says what is wrong and how to write it.
    pub fn parse(raw: &str) -> Result<AmiAlias, String> {
        let Some((family, version)) = raw.split_once('@') else {
            return Err(format!(
                "{raw:?} is not family@version; write e.g. al2023@latest or al2023@v20240807"
            ));
        };
        let family = match family {
            "al2023" => AmiFamily::Al2023,
            "al2" => AmiFamily::Al2,
            "bottlerocket" => AmiFamily::Bottlerocket,
            "windows2019" => AmiFamily::Windows2019,
            "windows2022" => AmiFamily::Windows2022,
            "windows2025" => AmiFamily::Windows2025,
            other => {
                return Err(format!(
                    "{other:?} is not an AMI family an alias can name; use one of {}",
                    ALIAS_FAMILIES.join(", ")
                ));
            }
        };
        let version = match version {
            "latest" => None,
            v if v.starts_with('v') && v.len() > 1 => Some(v.to_string()),
            v => {
                return Err(format!(
                    "version {v:?} is neither latest nor a release such as v20240807; write {}@latest or a pinned release",
                    raw.split('@').next().unwrap_or_default()
                ));
            }
        };
        if version.is_some()
            && matches!(
                family,
                AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025
            )
        {
            return Err(format!("{raw:?}: Windows aliases only take @latest"));
        }
        Ok(AmiAlias { family, version })
    }
}

impl fmt::Display for AmiAlias {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let family = match self.family {
            AmiFamily::Al2023 => "al2023",
            AmiFamily::Al2 => "al2",
            AmiFamily::Bottlerocket => "bottlerocket",
            AmiFamily::Windows2019 => "windows2019",
            AmiFamily::Windows2022 => "windows2022",
            AmiFamily::Windows2025 => "windows2025",
            AmiFamily::Custom => "custom",
        };
        write!(
            f,
            "{family}@{}",
            self.version.as_deref().unwrap_or("latest")
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BlockDeviceMapping {
    pub device_name: String,
    pub root_volume: bool,
    pub ebs: Option<Ebs>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Ebs {
    pub volume_size_gib: Option<u64>,
    pub volume_type: Option<String>,
    pub iops: Option<i64>,
    pub throughput: Option<i64>,
    pub encrypted: Option<bool>,
    pub kms_key_id: Option<String>,
    pub delete_on_termination: Option<bool>,
    pub snapshot_id: Option<String>,
}

/// The instance metadata service's options; Karpenter's defaults are IMDSv2 only, one hop.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MetadataOptions {
    pub http_endpoint: String,
    pub http_protocol_ipv6: String,
    pub http_put_response_hop_limit: i64,
    pub http_tokens: String,
}

impl Default for MetadataOptions {
    fn default() -> Self {
        MetadataOptions {
            http_endpoint: "enabled".to_string(),
            http_protocol_ipv6: "disabled".to_string(),
            http_put_response_hop_limit: 1,
            http_tokens: "required".to_string(),
        }
    }
}

/// The kubelet settings that change no amount nodewright computes but go into the node's
/// kubelet configuration as written (the others are the core's `KubeletConfig`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct KubeletExtra {
    pub cluster_dns: Vec<String>,
    /// Hard eviction signals other than `memory.available` (which the core keeps), such as
    /// `nodefs.available` or `pid.available`, as written.
    pub eviction_hard: BTreeMap<String, String>,
    pub eviction_soft: BTreeMap<String, String>,
    pub eviction_soft_grace_period: BTreeMap<String, String>,
    pub eviction_max_pod_grace_period: Option<i32>,
    pub image_gc_high_threshold_percent: Option<i32>,
    pub image_gc_low_threshold_percent: Option<i32>,
    pub cpu_cfs_quota: Option<bool>,
}

impl KubeletExtra {
    fn of(spec: &NodeClassSpec) -> KubeletExtra {
        let Some(k) = &spec.kubelet else {
            return KubeletExtra::default();
        };
        KubeletExtra {
            cluster_dns: k.cluster_dns.clone().unwrap_or_default(),
            eviction_hard: k
                .eviction_hard
                .iter()
                .filter(|(signal, _)| signal.as_str() != "memory.available")
                .map(|(s, v)| (s.clone(), v.clone()))
                .collect(),
            eviction_soft: k.eviction_soft.clone(),
            eviction_soft_grace_period: k.eviction_soft_grace_period.clone(),
            eviction_max_pod_grace_period: k.eviction_max_pod_grace_period,
            image_gc_high_threshold_percent: k.image_gc_high_threshold_percent,
            image_gc_low_threshold_percent: k.image_gc_low_threshold_percent,
            cpu_cfs_quota: k.cpu_cfs_quota,
        }
    }
}

/// One network interface of `networkInterfaces`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NetworkInterfaceSpec {
    pub network_card_index: i32,
    pub device_index: i32,
    /// `efa-only`: an EFA device without an IP address; else a standard interface.
    pub efa_only: bool,
}

/// Connection-tracking timeouts of the primary interface, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ConnectionTracking {
    pub tcp_established_timeout: Option<i32>,
    pub udp_stream_timeout: Option<i32>,
    pub udp_timeout: Option<i32>,
}

/// The instance's network interfaces, when the EC2NodeClass shapes them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct NetworkShape {
    /// `networkInterfaces`; empty: the one primary interface.
    pub interfaces: Vec<NetworkInterfaceSpec>,
    /// `ipPrefixCount`: IPv4 prefixes on the primary interface.
    pub ip_prefix_count: Option<i32>,
    pub connection_tracking: Option<ConnectionTracking>,
}

impl NetworkShape {
    /// Whether it asks anything of the interfaces beyond the default.
    pub fn is_default(&self) -> bool {
        *self == NetworkShape::default()
    }
}

/// `placementGroupSelector`: the placement group instances launch into.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PlacementGroup {
    Id(String),
    Name(String),
}

/// How machines of one EC2NodeClass are launched.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LaunchSettings {
    pub ami_family: AmiFamily,
    /// `spec.userData`: merged into the family's user data (passed as it is for Custom).
    pub user_data: Option<String>,
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    pub metadata_options: MetadataOptions,
    pub detailed_monitoring: bool,
    pub associate_public_ip_address: Option<bool>,
    /// `RAID0`: the instance's local NVMe disks as one volume for the kubelet and pods.
    pub instance_store_policy: Option<String>,
    pub kubelet: KubeletExtra,
    pub network: NetworkShape,
    pub placement_group: Option<PlacementGroup>,
    /// `cpuOptions.nestedVirtualization: enabled`: the launch template turns it on.
    pub nested_virtualization: bool,
    /// `spec.context`: the CreateFleet `Context` (reserved capacity for some accounts).
    pub context: Option<String>,
}

/// The size of a volume no mapping gives, as Karpenter's default EBS volume.
const DEFAULT_VOLUME_GIB: u64 = 20;

impl LaunchSettings {
    /// The size of the volume that holds the node's ephemeral storage, as Karpenter reads it:
    /// the mapping marked `rootVolume` when it gives a size; for a Custom AMI the last
    /// mapping's; else the family's data device, as mapped or by default; else 20 GiB.
    pub fn ephemeral_volume_gib(&self) -> u64 {
        let sized = |m: &BlockDeviceMapping| m.ebs.as_ref().and_then(|e| e.volume_size_gib);
        if let Some(size) = self
            .block_device_mappings
            .iter()
            .find(|m| m.root_volume)
            .and_then(sized)
        {
            return size;
        }
        let family = self.ami_family;
        if family == AmiFamily::Custom {
            return self
                .block_device_mappings
                .last()
                .and_then(sized)
                .unwrap_or(DEFAULT_VOLUME_GIB);
        }
        let device = family.ephemeral_device();
        let on_device = |list: &[BlockDeviceMapping]| {
            list.iter()
                .find(|m| m.device_name == device)
                .and_then(sized)
        };
        on_device(&self.block_device_mappings)
            .or_else(|| on_device(&family.default_block_devices()))
            .unwrap_or(DEFAULT_VOLUME_GIB)
    }

    /// `instanceStorePolicy: RAID0`.
    pub fn instance_store_raid0(&self) -> bool {
        self.instance_store_policy.as_deref() == Some("RAID0")
    }
}

/// `(field, problem, fix)`, turned into a [`super::ManifestError`] by the caller.
pub(super) type LaunchFieldError = (String, String, String);

fn invalid(field: String, problem: String, fix: &str) -> LaunchFieldError {
    (field, problem, fix.to_string())
}

/// The launch settings of an EC2NodeClass spec, validated.
pub(super) fn launch_settings(spec: &NodeClassSpec) -> Result<LaunchSettings, LaunchFieldError> {
    let mut alias_family = None;
    for (i, term) in spec.ami_selector_terms.iter().enumerate() {
        if let Some(alias) = &term.alias {
            let parsed = AmiAlias::parse(alias).map_err(|problem| {
                invalid(
                    format!("spec.amiSelectorTerms[{i}].alias"),
                    problem,
                    "use an alias such as al2023@latest, or select AMIs by id, name or tags",
                )
            })?;
            if spec.ami_selector_terms.len() > 1 {
                return Err(invalid(
                    format!("spec.amiSelectorTerms[{i}].alias"),
                    "an alias term must be the only AMI selector term".to_string(),
                    "remove the other amiSelectorTerms, or select by id, name or tags only",
                ));
            }
            alias_family = Some(parsed.family);
        }
    }
    let ami_family = match (&spec.ami_family, alias_family) {
        (Some(raw), from_alias) => {
            let family = AmiFamily::parse(raw).ok_or_else(|| {
                invalid(
                    "spec.amiFamily".to_string(),
                    format!("{raw:?} is not an AMI family"),
                    "use AL2023, AL2, Bottlerocket, Windows2019, Windows2022, Windows2025 or Custom",
                )
            })?;
            // With an alias, Karpenter takes its own family or Custom (the alias's AMI, the
            // user data passed as written).
            if let Some(alias) = from_alias
                && alias != family
                && family != AmiFamily::Custom
            {
                return Err(invalid(
                    "spec.amiFamily".to_string(),
                    format!("is {family} but the AMI alias names {alias}"),
                    "leave spec.amiFamily out when an alias is used (the alias names the family), or set Custom to pass your own user data",
                ));
            }
            family
        }
        (None, Some(family)) => family,
        (None, None) => {
            return Err(invalid(
                "spec.amiFamily".to_string(),
                "is not set and no AMI alias names one".to_string(),
                "set spec.amiFamily (AL2023, Bottlerocket, Custom, ...) when AMIs are selected by id, name or tags",
            ));
        }
    };
    let nested_virtualization = match spec
        .cpu_options
        .as_ref()
        .and_then(|c| c.nested_virtualization.as_deref())
    {
        None | Some("disabled") => false,
        Some("enabled") => true,
        Some(other) => {
            return Err(invalid(
                "spec.cpuOptions.nestedVirtualization".to_string(),
                format!("{other:?} is neither enabled nor disabled"),
                "write enabled (only instance types that support nested virtualization) or disabled",
            ));
        }
    };
    let block_device_mappings = match &spec.block_device_mappings {
        None => ami_family.default_block_devices(),
        Some(list) => list
            .iter()
            .enumerate()
            .map(|(i, m)| block_device(m, i))
            .collect::<Result<_, _>>()?,
    };
    if block_device_mappings
        .iter()
        .filter(|m| m.root_volume)
        .count()
        > 1
    {
        return Err(invalid(
            "spec.blockDeviceMappings".to_string(),
            "more than one mapping is the root volume".to_string(),
            "set rootVolume: true on one mapping at most",
        ));
    }
    Ok(LaunchSettings {
        ami_family,
        user_data: spec.user_data.clone(),
        block_device_mappings,
        metadata_options: metadata_options(spec.metadata_options.as_ref())?,
        detailed_monitoring: spec.detailed_monitoring.unwrap_or(false),
        associate_public_ip_address: spec.associate_public_ip_address,
        instance_store_policy: spec.instance_store_policy.clone(),
        kubelet: KubeletExtra::of(spec),
        network: network_shape(spec)?,
        nested_virtualization,
        context: spec.context.clone(),
        placement_group: match &spec.placement_group_selector {
            None => None,
            Some(selector) => Some(match (&selector.id, &selector.name) {
                (Some(id), None) => PlacementGroup::Id(id.clone()),
                (None, Some(name)) => PlacementGroup::Name(name.clone()),
                _ => {
                    return Err(invalid(
                        "spec.placementGroupSelector".to_string(),
                        "gives both or neither of id and name".to_string(),
                        "select the placement group by id or by name",
                    ));
                }
            }),
        },
    })
}

fn network_shape(spec: &NodeClassSpec) -> Result<NetworkShape, LaunchFieldError> {
    let mut interfaces = Vec::new();
    for (i, nic) in spec.network_interfaces.iter().enumerate() {
        let efa_only = match nic.interface_type.as_str() {
            "interface" => false,
            "efa-only" => true,
            other => {
                return Err(invalid(
                    format!("spec.networkInterfaces[{i}].interfaceType"),
                    format!("{other:?} is not an interface type"),
                    "use interface or efa-only",
                ));
            }
        };
        interfaces.push(NetworkInterfaceSpec {
            network_card_index: nic.network_card_index,
            device_index: nic.device_index,
            efa_only,
        });
    }
    if !interfaces.is_empty()
        && !interfaces
            .iter()
            .any(|n| n.network_card_index == 0 && n.device_index == 0 && !n.efa_only)
    {
        return Err(invalid(
            "spec.networkInterfaces".to_string(),
            "has no primary interface".to_string(),
            "include {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}",
        ));
    }
    Ok(NetworkShape {
        interfaces,
        ip_prefix_count: spec.ip_prefix_count,
        connection_tracking: spec
            .connection_tracking
            .as_ref()
            .map(|c| ConnectionTracking {
                tcp_established_timeout: c.tcp_established_timeout,
                udp_stream_timeout: c.udp_stream_timeout,
                udp_timeout: c.udp_timeout,
            }),
    })
}

fn block_device(
    obj: &BlockDeviceMappingObject,
    i: usize,
) -> Result<BlockDeviceMapping, LaunchFieldError> {
    let field = format!("spec.blockDeviceMappings[{i}]");
    let device_name = obj.device_name.clone().ok_or_else(|| {
        invalid(
            format!("{field}.deviceName"),
            "is missing".to_string(),
            "name the device, e.g. /dev/xvda",
        )
    })?;
    let ebs = match &obj.ebs {
        None => None,
        Some(e) => {
            let volume_size_gib = match &e.volume_size {
                None => None,
                Some(raw) => {
                    let bytes = parse_units(raw).ok().filter(|b| *b > 0).ok_or_else(|| {
                        invalid(
                            format!("{field}.ebs.volumeSize"),
                            format!("{raw:?} is not a size"),
                            "write a quantity such as 100Gi",
                        )
                    })?;
                    // EC2 takes whole GiB: round up.
                    Some((bytes as u64).div_ceil(1 << 30))
                }
            };
            if let Some(t) = &e.volume_type
                && !["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"].contains(&t.as_str())
            {
                return Err(invalid(
                    format!("{field}.ebs.volumeType"),
                    format!("{t:?} is not an EBS volume type"),
                    "use gp3, gp2, io1, io2, st1, sc1 or standard",
                ));
            }
            Some(Ebs {
                volume_size_gib,
                volume_type: e.volume_type.clone(),
                iops: e.iops,
                throughput: e.throughput,
                encrypted: e.encrypted,
                kms_key_id: e.kms_key_id.clone(),
                delete_on_termination: e.delete_on_termination,
                snapshot_id: e.snapshot_id.clone(),
            })
        }
    };
    Ok(BlockDeviceMapping {
        device_name,
        root_volume: obj.root_volume.unwrap_or(false),
        ebs,
    })
}

fn metadata_options(
    obj: Option<&MetadataOptionsObject>,
) -> Result<MetadataOptions, LaunchFieldError> {
    let mut out = MetadataOptions::default();
    let Some(obj) = obj else {
        return Ok(out);
    };
    let one_of = |value: &Option<String>, field: &str, allowed: &[&str]| match value {
        Some(v) if !allowed.contains(&v.as_str()) => Err(invalid(
            format!("spec.metadataOptions.{field}"),
            format!("{v:?} is not allowed"),
            &format!("use one of {}", allowed.join(", ")),
        )),
        _ => Ok(value.clone()),
    };
    if let Some(v) = one_of(&obj.http_endpoint, "httpEndpoint", &["enabled", "disabled"])? {
        out.http_endpoint = v;
    }
    if let Some(v) = one_of(
        &obj.http_protocol_ipv6,
        "httpProtocolIPv6",
        &["enabled", "disabled"],
    )? {
        out.http_protocol_ipv6 = v;
    }
    if let Some(v) = one_of(&obj.http_tokens, "httpTokens", &["required", "optional"])? {
        out.http_tokens = v;
    }
    if let Some(hops) = obj.http_put_response_hop_limit {
        if !(1..=64).contains(&hops) {
            return Err(invalid(
                "spec.metadataOptions.httpPutResponseHopLimit".to_string(),
                format!("{hops} is outside 1..64"),
                "use a hop limit from 1 to 64 (2 lets containers without host networking reach IMDS)",
            ));
        }
        out.http_put_response_hop_limit = hops;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_parse_and_refuse_with_the_fix() {
        let a = AmiAlias::parse("al2023@latest").unwrap();
        assert_eq!((a.family, a.version), (AmiFamily::Al2023, None));
        let b = AmiAlias::parse("bottlerocket@v1.20.3").unwrap();
        assert_eq!(b.version.as_deref(), Some("v1.20.3"));
        assert_eq!(b.to_string(), "bottlerocket@v1.20.3");
        let e = AmiAlias::parse("ubuntu@latest").unwrap_err();
        assert!(e.contains("al2023, al2, bottlerocket"), "{e}");
        assert!(
            AmiAlias::parse("al2023")
                .unwrap_err()
                .contains("family@version")
        );
        assert!(
            AmiAlias::parse("al2023@2024")
                .unwrap_err()
                .contains("latest")
        );
        assert!(AmiAlias::parse("windows2022@v1").is_err());
    }
}
