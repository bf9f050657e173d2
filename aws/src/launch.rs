//! A NodeClaim → one EC2 instance: a launch template per (node class, AMI, bootstrap), then
//! `CreateFleet` type `instant`, target capacity 1, over the NodeClaim's offerings × their
//! zones' subnets, with a client token derived from the NodeClaim. The outcome comes back as
//! the event the core reads (`LaunchSucceeded`, `LaunchFailed` naming the offerings without
//! capacity), or as an error the caller retries or reports on the node class.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{
    ConnectionTrackingSpecificationRequest, DefaultTargetCapacityType,
    FleetLaunchTemplateConfigRequest, FleetLaunchTemplateOverridesRequest,
    FleetLaunchTemplateSpecificationRequest, FleetOnDemandAllocationStrategy, FleetType,
    InstanceType as Ec2InstanceType, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateCpuOptionsRequest, LaunchTemplateEbsBlockDeviceRequest,
    LaunchTemplateHttpTokensState, LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMetadataEndpointState, LaunchTemplateInstanceMetadataOptionsRequest,
    LaunchTemplateInstanceMetadataProtocolIpv6,
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, LaunchTemplatePlacementRequest,
    LaunchTemplatesMonitoringRequest, NestedVirtualizationSpecification, OnDemandOptionsRequest,
    RequestLaunchTemplateData, ResourceType, SpotAllocationStrategy, SpotOptionsRequest, Tag,
    TagSpecification, TargetCapacitySpecificationRequest, VolumeType,
};
use nodewright_adapters::manifest::launch::{LaunchSettings, NetworkInterfaceSpec, PlacementGroup};
use nodewright_core::EventKind;
use nodewright_core::catalog::{CapacityType, Price};
use nodewright_core::model::nodeclaim::{Instance, NodeClaimSpec, OfferingKey};
use nodewright_core::model::nodeclass::{NodeClass, ResolvedNodeClass};
use nodewright_core::model::taints::{Taint, TaintEffect};
use sha2::{Digest, Sha256};

use crate::error::{AwsError, ErrorClass};
use crate::instances::Instances;
use crate::tags::{NODECLAIM_TAG, NODECLASS_TAG, NODEPOOL_TAG, cluster_tag};
use crate::user_data::{self, ClusterInfo, NodeBootstrap};

/// Everything a launch needs of its EC2NodeClass.
#[derive(Debug, Clone)]
pub struct LaunchClass {
    pub class: NodeClass,
    pub settings: LaunchSettings,
    pub resolved: ResolvedNodeClass,
}

/// What became of a launch.
#[derive(Debug, Clone)]
pub enum LaunchOutcome {
    /// An instance runs for the NodeClaim (newly launched, or found from an earlier attempt):
    /// log `event` (`LaunchSucceeded`).
    Launched { event: EventKind, reused: bool },
    /// EC2 had no capacity for any offering asked for: log `event` (`LaunchFailed`); the core
    /// marks the offerings unavailable and plans again.
    NoCapacity { event: EventKind },
    /// Nothing was launched and nothing is logged: throttled, unreachable, or the node class
    /// is unusable (`error.class` says which; auth and configuration errors belong on the node
    /// class's status). The NodeClaim's launch timeout cleans up if it never succeeds.
    Failed { error: AwsError },
}

/// Launches on EC2.
#[derive(Debug, Clone)]
pub struct Launcher {
    ec2: aws_sdk_ec2::Client,
    cluster: ClusterInfo,
    /// What makes client tokens this cluster's and this log's (the log's creation nonce).
    token_scope: String,
}

fn tag(key: &str, value: &str) -> Tag {
    Tag::builder().key(key).value(value).build()
}

/// The labels a kubelet may set on itself: those outside the `kubernetes.io` and `k8s.io`
/// domains, and the well-known ones the kubelet is allowed to set.
fn kubelet_labels(claim: &NodeClaimSpec) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = claim
        .labels
        .iter()
        .filter(|(k, _)| {
            let domain = k.split_once('/').map_or("", |(d, _)| d);
            !(domain.ends_with("kubernetes.io") || domain.ends_with("k8s.io"))
                || k.starts_with("node.kubernetes.io/")
                    && !k.starts_with("node.kubernetes.io/instance-type")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    labels.insert(NODEPOOL_TAG.to_string(), claim.nodepool.clone());
    labels
}

impl Launcher {
    pub fn new(ec2: aws_sdk_ec2::Client, cluster: ClusterInfo, token_scope: &str) -> Self {
        Launcher {
            ec2,
            cluster,
            token_scope: token_scope.to_string(),
        }
    }

    /// The tags of the instance (and its volumes): Karpenter's, then the node class's.
    pub fn instance_tags(&self, claim: &NodeClaimSpec, class: &NodeClass) -> Vec<Tag> {
        let mut tags: BTreeMap<String, String> = class.tags.clone();
        tags.insert(NODEPOOL_TAG.into(), claim.nodepool.clone());
        tags.insert(NODECLAIM_TAG.into(), claim.name.clone());
        tags.insert(NODECLASS_TAG.into(), class.name.clone());
        tags.insert(cluster_tag(&self.cluster.name), "owned".into());
        tags.insert("eks:eks-cluster-name".into(), self.cluster.name.clone());
        tags.entry("Name".into())
            .or_insert_with(|| format!("{}/{}", claim.nodepool, claim.name));
        tags.iter().map(|(k, v)| tag(k, v)).collect()
    }

    /// The bootstrap of a NodeClaim's machine: its labels, its taints with startup taints and
    /// `karpenter.sh/unregistered` (removed at registration), the kubelet settings.
    fn bootstrap(claim: &NodeClaimSpec, launch: &LaunchClass) -> NodeBootstrap {
        let mut taints = claim.taints.clone();
        taints.extend(claim.startup_taints.iter().cloned());
        taints.push(Taint::new(
            "karpenter.sh/unregistered",
            None,
            TaintEffect::NoExecute,
        ));
        NodeBootstrap {
            labels: kubelet_labels(claim),
            taints,
            kubelet: launch.class.kubelet.clone(),
            kubelet_extra: launch.settings.kubelet.clone(),
        }
    }

    /// The launch template's data for one architecture's AMI.
    fn template_data(
        &self,
        launch: &LaunchClass,
        ami: &str,
        user_data: &str,
    ) -> RequestLaunchTemplateData {
        let settings = &launch.settings;
        let profile = launch
            .class
            .instance_profile
            .clone()
            .or_else(|| launch.class.role.clone())
            .unwrap_or_default();
        let mut data = RequestLaunchTemplateData::builder()
            .image_id(ami)
            .user_data(aws_smithy_types::base64::encode(user_data.as_bytes()))
            .iam_instance_profile(
                LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                    .name(profile)
                    .build(),
            )
            .monitoring(
                LaunchTemplatesMonitoringRequest::builder()
                    .enabled(settings.detailed_monitoring)
                    .build(),
            )
            .metadata_options(
                LaunchTemplateInstanceMetadataOptionsRequest::builder()
                    .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::from(
                        settings.metadata_options.http_endpoint.as_str(),
                    ))
                    .http_protocol_ipv6(LaunchTemplateInstanceMetadataProtocolIpv6::from(
                        settings.metadata_options.http_protocol_ipv6.as_str(),
                    ))
                    .http_put_response_hop_limit(
                        settings.metadata_options.http_put_response_hop_limit as i32,
                    )
                    .http_tokens(LaunchTemplateHttpTokensState::from(
                        settings.metadata_options.http_tokens.as_str(),
                    ))
                    .build(),
            );
        for mapping in &settings.block_device_mappings {
            let mut m = LaunchTemplateBlockDeviceMappingRequest::builder()
                .device_name(&mapping.device_name);
            if let Some(ebs) = &mapping.ebs {
                let mut e = LaunchTemplateEbsBlockDeviceRequest::builder()
                    .set_volume_size(ebs.volume_size_gib.map(|g| g as i32))
                    .set_volume_type(ebs.volume_type.as_deref().map(VolumeType::from))
                    .set_iops(ebs.iops.map(|i| i as i32))
                    .set_throughput(ebs.throughput.map(|t| t as i32))
                    .set_encrypted(ebs.encrypted)
                    .set_kms_key_id(ebs.kms_key_id.clone())
                    .set_delete_on_termination(ebs.delete_on_termination)
                    .set_snapshot_id(ebs.snapshot_id.clone());
                if ebs.delete_on_termination.is_none() {
                    e = e.delete_on_termination(true);
                }
                m = m.ebs(e.build());
            }
            data = data.block_device_mappings(m.build());
        }
        if settings.nested_virtualization {
            data = data.cpu_options(
                LaunchTemplateCpuOptionsRequest::builder()
                    .nested_virtualization(NestedVirtualizationSpecification::Enabled)
                    .build(),
            );
        }
        if let Some(group) = &settings.placement_group {
            let placement = LaunchTemplatePlacementRequest::builder();
            data = data.placement(match group {
                PlacementGroup::Id(id) => placement.group_id(id).build(),
                PlacementGroup::Name(name) => placement.group_name(name).build(),
            });
        }
        let groups: Vec<String> = launch
            .resolved
            .security_groups
            .iter()
            .map(|g| g.id.clone())
            .collect();
        let network = &settings.network;
        if settings.associate_public_ip_address.is_none() && network.is_default() {
            return data.set_security_group_ids(Some(groups)).build();
        }
        // The interfaces are shaped: each carries the groups, the primary one the public
        // address, the prefixes and the connection tracking.
        let primary = NetworkInterfaceSpec {
            network_card_index: 0,
            device_index: 0,
            efa_only: false,
        };
        let interfaces = if network.interfaces.is_empty() {
            std::slice::from_ref(&primary)
        } else {
            network.interfaces.as_slice()
        };
        for nic in interfaces {
            let mut spec = LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .device_index(nic.device_index)
                .set_groups(Some(groups.clone()));
            if !network.interfaces.is_empty() {
                spec = spec.network_card_index(nic.network_card_index);
            }
            if nic.efa_only {
                spec = spec.interface_type("efa-only");
            }
            if *nic == primary {
                spec = spec
                    .set_associate_public_ip_address(settings.associate_public_ip_address)
                    .set_ipv4_prefix_count(network.ip_prefix_count);
                if let Some(c) = &network.connection_tracking {
                    spec = spec.connection_tracking_specification(
                        ConnectionTrackingSpecificationRequest::builder()
                            .set_tcp_established_timeout(c.tcp_established_timeout)
                            .set_udp_stream_timeout(c.udp_stream_timeout)
                            .set_udp_timeout(c.udp_timeout)
                            .build(),
                    );
                }
            }
            data = data.network_interfaces(spec.build());
        }
        data.build()
    }

    /// The launch template for this (node class, AMI, bootstrap), created if it does not
    /// exist; its name is a digest of everything in it, so a change makes a new one.
    pub async fn ensure_template(
        &self,
        launch: &LaunchClass,
        ami: &str,
        bootstrap: &NodeBootstrap,
    ) -> Result<String, AwsError> {
        let text = user_data::render(
            launch.settings.ami_family,
            launch.settings.user_data.as_deref(),
            &self.cluster,
            bootstrap,
        );
        let data = self.template_data(launch, ami, &text);
        let mut digest = Sha256::new();
        digest.update(format!(
            "{:?}|{}|{}",
            data, launch.class.name, self.cluster.name
        ));
        let hash: String = digest
            .finalize()
            .iter()
            .take(10)
            .map(|b| format!("{b:02x}"))
            .collect();
        let name = format!("nodewright/{}/{hash}", self.cluster.name);
        let existing = self
            .ec2
            .describe_launch_templates()
            .launch_template_names(&name)
            .send()
            .await;
        match existing {
            Ok(out) if !out.launch_templates().is_empty() => return Ok(name),
            Ok(_) => {}
            Err(e) => {
                let e = AwsError::from_sdk("ec2:DescribeLaunchTemplates", e);
                if !e.is_not_found()
                    && e.code.as_deref() != Some("InvalidLaunchTemplateName.NotFoundException")
                {
                    return Err(e);
                }
            }
        }
        let created = self
            .ec2
            .create_launch_template()
            .launch_template_name(&name)
            .launch_template_data(data)
            .tag_specifications(
                TagSpecification::builder()
                    .resource_type(ResourceType::LaunchTemplate)
                    .tags(tag(&cluster_tag(&self.cluster.name), "owned"))
                    .tags(tag(NODECLASS_TAG, &launch.class.name))
                    .build(),
            )
            .send()
            .await;
        match created {
            Ok(_) => Ok(name),
            Err(e) => {
                let e = AwsError::from_sdk("ec2:CreateLaunchTemplate", e);
                // Another attempt made it first.
                if e.code.as_deref() == Some("InvalidLaunchTemplateName.AlreadyExistsException") {
                    Ok(name)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Launches the NodeClaim's machine (or finds the one an earlier attempt launched).
    pub async fn launch(&self, claim: &NodeClaimSpec, launch: &LaunchClass) -> LaunchOutcome {
        let failed = |error| LaunchOutcome::Failed { error };
        // EC2 remembers client tokens, but not every endpoint does: look for an instance
        // already tagged with this NodeClaim first.
        let instances = Instances::new(self.ec2.clone(), &self.cluster.name);
        match instances.of_nodeclaim(&claim.name).await {
            Ok(Some(found)) => {
                return launched(
                    claim,
                    Instance {
                        instance_id: found.instance_id,
                        instance_type: found.instance_type,
                        zone: found.zone,
                        capacity_type: found.capacity_type.unwrap_or(CapacityType::OnDemand),
                        price: Price(0),
                    },
                    true,
                );
            }
            Ok(None) => {}
            Err(e) => return failed(e),
        }
        let Some((capacity_type, options)) = claim.fleet_request() else {
            return failed(AwsError {
                operation: "ec2:CreateFleet",
                class: ErrorClass::Config,
                code: None,
                message: format!("NodeClaim {} has no launch option", claim.name),
            });
        };
        // Offerings in a zone without a subnet of the node class cannot be asked for.
        let mut subnets_by_zone: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for s in &launch.resolved.subnets {
            subnets_by_zone.entry(&s.zone).or_default().push(&s.id);
        }
        let bootstrap = Self::bootstrap(claim, launch);
        // One launch template per architecture the options need.
        let mut templates: BTreeMap<String, String> = BTreeMap::new();
        let mut overrides: Vec<(String, FleetLaunchTemplateOverridesRequest)> = Vec::new();
        let mut no_subnet = Vec::new();
        for (priority, option) in options.iter().enumerate() {
            let Some(subnets) = subnets_by_zone.get(option.zone.as_str()) else {
                no_subnet.push(option.zone.clone());
                continue;
            };
            let arch = claim
                .labels
                .get("kubernetes.io/arch")
                .cloned()
                .unwrap_or_else(|| {
                    if is_arm(&option.instance_type) {
                        "arm64".into()
                    } else {
                        "amd64".into()
                    }
                });
            let Some(ami) = launch.resolved.ami_for(&arch) else {
                continue;
            };
            if !templates.contains_key(&arch) {
                match self.ensure_template(launch, &ami.id, &bootstrap).await {
                    Ok(name) => {
                        templates.insert(arch.clone(), name);
                    }
                    Err(e) => return failed(e),
                }
            }
            for subnet in subnets {
                overrides.push((
                    arch.clone(),
                    FleetLaunchTemplateOverridesRequest::builder()
                        .instance_type(Ec2InstanceType::from(option.instance_type.as_str()))
                        .subnet_id(*subnet)
                        .availability_zone(option.zone.as_str())
                        .priority(priority as f64)
                        .build(),
                ));
            }
        }
        if overrides.is_empty() {
            let unavailable: Vec<OfferingKey> = options.iter().map(|o| o.key()).collect();
            no_subnet.sort();
            no_subnet.dedup();
            return LaunchOutcome::NoCapacity {
                event: EventKind::LaunchFailed {
                    nodeclaim: claim.name.clone(),
                    code: "NoSubnetOrImage".into(),
                    message: format!(
                        "EC2NodeClass {} has no subnet in zones {} or no AMI for the options' architecture",
                        launch.class.name,
                        no_subnet.join(", ")
                    ),
                    unavailable,
                },
            };
        }
        let mut request = self
            .ec2
            .create_fleet()
            .r#type(FleetType::Instant)
            .client_token(claim.client_token(&self.token_scope))
            .set_context(launch.settings.context.clone())
            .target_capacity_specification(
                TargetCapacitySpecificationRequest::builder()
                    .total_target_capacity(1)
                    .default_target_capacity_type(match capacity_type {
                        CapacityType::Spot => DefaultTargetCapacityType::Spot,
                        CapacityType::OnDemand => DefaultTargetCapacityType::OnDemand,
                        CapacityType::Reserved => DefaultTargetCapacityType::CapacityBlock,
                    })
                    .build(),
            )
            .on_demand_options(
                OnDemandOptionsRequest::builder()
                    .allocation_strategy(FleetOnDemandAllocationStrategy::LowestPrice)
                    .build(),
            )
            .spot_options(
                SpotOptionsRequest::builder()
                    .allocation_strategy(SpotAllocationStrategy::PriceCapacityOptimized)
                    .build(),
            );
        for (arch, template) in &templates {
            let mut config = FleetLaunchTemplateConfigRequest::builder()
                .launch_template_specification(
                    FleetLaunchTemplateSpecificationRequest::builder()
                        .launch_template_name(template)
                        .version("$Latest")
                        .build(),
                );
            for (a, o) in &overrides {
                if a == arch {
                    config = config.overrides(o.clone());
                }
            }
            request = request.launch_template_configs(config.build());
        }
        let tags = self.instance_tags(claim, &launch.class);
        for resource in [ResourceType::Instance, ResourceType::Volume] {
            request = request.tag_specifications(
                TagSpecification::builder()
                    .resource_type(resource)
                    .set_tags(Some(tags.clone()))
                    .build(),
            );
        }
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => return failed(AwsError::from_sdk("ec2:CreateFleet", e)),
        };
        let first = response
            .instances()
            .iter()
            .find_map(|i| i.instance_ids().first().map(|id| (id.clone(), i)));
        if let Some((instance_id, fleet_instance)) = first {
            // The zone (and type) from EC2's own description: the fleet's answer may leave
            // the override's zone out.
            let described = instances.describe(&instance_id).await;
            let (instance_type, zone) = match described {
                Ok(Some(d)) => (d.instance_type, d.zone),
                _ => (
                    fleet_instance
                        .instance_type()
                        .map(|t| t.as_str().to_string())
                        .unwrap_or_default(),
                    fleet_instance
                        .launch_template_and_overrides()
                        .and_then(|l| l.overrides())
                        .and_then(|o| o.availability_zone())
                        .unwrap_or_default()
                        .to_string(),
                ),
            };
            return launched(
                claim,
                Instance {
                    instance_id,
                    instance_type,
                    zone,
                    capacity_type,
                    price: Price(0),
                },
                false,
            );
        }
        fleet_errors(claim, &options, response.errors())
    }
}

/// The event of a launched instance, priced as the NodeClaim's option for its offering (or
/// for its type, when EC2 placed it in a zone the option did not name).
fn launched(claim: &NodeClaimSpec, mut instance: Instance, reused: bool) -> LaunchOutcome {
    let same_type = |o: &&nodewright_core::model::nodeclaim::LaunchOption| {
        o.instance_type == instance.instance_type && o.capacity_type == instance.capacity_type
    };
    instance.price = claim
        .options
        .iter()
        .filter(same_type)
        .find(|o| o.zone == instance.zone)
        .or_else(|| claim.options.iter().find(same_type))
        .map(|o| o.price)
        .unwrap_or_default();
    LaunchOutcome::Launched {
        event: EventKind::LaunchSucceeded {
            nodeclaim: claim.name.clone(),
            instance,
        },
        reused,
    }
}

/// Arm families: Graviton (`m6g`, `c7gn`, `r8gd`, ...: a `g` right after the generation
/// digit) and `a1`.
fn is_arm(instance_type: &str) -> bool {
    let family = instance_type.split('.').next().unwrap_or_default();
    if family == "a1" {
        return true;
    }
    let letters = family.bytes().take_while(u8::is_ascii_lowercase).count();
    let rest = &family[letters..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && rest[digits..].starts_with('g')
}

/// A fleet that launched nothing: the offerings named by capacity errors are unavailable
/// (every offering asked for, when an error names none).
pub fn fleet_errors(
    claim: &NodeClaimSpec,
    options: &[&nodewright_core::model::nodeclaim::LaunchOption],
    errors: &[aws_sdk_ec2::types::CreateFleetError],
) -> LaunchOutcome {
    let Some(first) = errors.first() else {
        return LaunchOutcome::Failed {
            error: AwsError {
                operation: "ec2:CreateFleet",
                class: ErrorClass::Transient,
                code: None,
                message: "the fleet launched no instance and gave no error".into(),
            },
        };
    };
    let code = first.error_code().unwrap_or("Unknown").to_string();
    let message = first.error_message().unwrap_or_default().to_string();
    let capacity: Vec<_> = errors
        .iter()
        .filter(|e| {
            crate::error::classify_code(e.error_code().unwrap_or_default()) == ErrorClass::Capacity
        })
        .collect();
    if capacity.is_empty() {
        let class = crate::error::classify_code(&code);
        return LaunchOutcome::Failed {
            error: AwsError {
                operation: "ec2:CreateFleet",
                class,
                code: Some(code),
                message,
            },
        };
    }
    let mut unavailable: Vec<OfferingKey> = Vec::new();
    for e in &capacity {
        let named = e
            .launch_template_and_overrides()
            .and_then(|l| l.overrides())
            .and_then(|o| {
                o.instance_type()
                    .map(|t| (t.as_str(), o.availability_zone()))
            });
        for option in options {
            let hit = match named {
                Some((t, zone)) => {
                    option.instance_type == t
                        && zone.is_none_or(|z| z.is_empty() || z == option.zone)
                }
                None => true,
            };
            let key = option.key();
            if hit && !unavailable.contains(&key) {
                unavailable.push(key);
            }
        }
    }
    unavailable.sort();
    LaunchOutcome::NoCapacity {
        event: EventKind::LaunchFailed {
            nodeclaim: claim.name.clone(),
            code,
            message,
            unavailable,
        },
    }
}
