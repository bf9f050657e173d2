//! The Kubernetes objects users already write, as serde structs. Karpenter's own kinds
//! (NodePool, EC2NodeClass) refuse unknown fields so a typo is caught; built-in kinds (Pod,
//! Deployment, ...) keep Kubernetes' leniency for the many fields an autoscaler does not read.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;

/// `apiVersion` and `kind`, read first to pick the type.
#[derive(Debug, Deserialize)]
pub struct TypeProbe {
    #[serde(rename = "apiVersion")]
    pub api_version: Option<String>,
    pub kind: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ObjectMeta {
    pub name: Option<String>,
    pub namespace: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// A YAML scalar that may be a number or a string (`cpu: 1` or `cpu: "500m"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Scalar {
    Int(i64),
    Float(f64),
    Str(String),
}

impl Scalar {
    pub fn as_text(&self) -> String {
        match self {
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
            Scalar::Str(s) => s.clone(),
        }
    }
}

// ---------------------------------------------------------------- NodePool (karpenter.sh/v1)

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodePoolObject {
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: NodePoolSpec,
    pub status: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodePoolSpec {
    pub template: NodeClaimTemplate,
    pub disruption: Option<Disruption>,
    pub limits: Option<BTreeMap<String, Scalar>>,
    pub weight: Option<i64>,
    pub replicas: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeClaimTemplate {
    pub metadata: Option<TemplateMeta>,
    pub spec: NodeClaimTemplateSpec,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateMeta {
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeClaimTemplateSpec {
    #[serde(default)]
    pub requirements: Vec<RequirementObject>,
    #[serde(default)]
    pub taints: Vec<TaintObject>,
    #[serde(default, rename = "startupTaints")]
    pub startup_taints: Vec<TaintObject>,
    #[serde(rename = "nodeClassRef")]
    pub node_class_ref: Option<NodeClassRefObject>,
    #[serde(rename = "expireAfter")]
    pub expire_after: Option<String>,
    #[serde(rename = "terminationGracePeriod")]
    pub termination_grace_period: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequirementObject {
    pub key: String,
    pub operator: String,
    #[serde(default)]
    pub values: Vec<Scalar>,
    #[serde(rename = "minValues")]
    pub min_values: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaintObject {
    pub key: String,
    pub value: Option<String>,
    pub effect: String,
    #[serde(rename = "timeAdded")]
    pub time_added: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeClassRefObject {
    pub group: Option<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Disruption {
    #[serde(rename = "consolidationPolicy")]
    pub consolidation_policy: Option<String>,
    #[serde(rename = "consolidateAfter")]
    pub consolidate_after: Option<String>,
    pub budgets: Option<Vec<BudgetObject>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetObject {
    pub nodes: Option<Scalar>,
    pub schedule: Option<String>,
    pub duration: Option<String>,
    #[serde(default)]
    pub reasons: Vec<String>,
}

// ---------------------------------------------------------- EC2NodeClass (karpenter.k8s.aws/v1)

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeClassObject {
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: NodeClassSpec,
    pub status: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeClassSpec {
    #[serde(rename = "amiFamily")]
    pub ami_family: Option<String>,
    #[serde(default, rename = "amiSelectorTerms")]
    pub ami_selector_terms: Vec<SelectorTermObject>,
    #[serde(default, rename = "subnetSelectorTerms")]
    pub subnet_selector_terms: Vec<SelectorTermObject>,
    #[serde(default, rename = "securityGroupSelectorTerms")]
    pub security_group_selector_terms: Vec<SelectorTermObject>,
    #[serde(default, rename = "capacityReservationSelectorTerms")]
    pub capacity_reservation_selector_terms: Vec<SelectorTermObject>,
    pub role: Option<String>,
    #[serde(rename = "instanceProfile")]
    pub instance_profile: Option<String>,
    #[serde(rename = "userData")]
    pub user_data: Option<String>,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    pub kubelet: Option<KubeletObject>,
    #[serde(rename = "blockDeviceMappings")]
    pub block_device_mappings: Option<Vec<BlockDeviceMappingObject>>,
    #[serde(rename = "instanceStorePolicy")]
    pub instance_store_policy: Option<String>,
    #[serde(rename = "metadataOptions")]
    pub metadata_options: Option<MetadataOptionsObject>,
    #[serde(rename = "detailedMonitoring")]
    pub detailed_monitoring: Option<bool>,
    #[serde(rename = "associatePublicIPAddress")]
    pub associate_public_ip_address: Option<bool>,
    pub context: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockDeviceMappingObject {
    #[serde(rename = "deviceName")]
    pub device_name: Option<String>,
    #[serde(rename = "rootVolume", default)]
    pub root_volume: bool,
    pub ebs: Option<EbsObject>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EbsObject {
    #[serde(rename = "volumeSize")]
    pub volume_size: Option<String>,
    #[serde(rename = "volumeType")]
    pub volume_type: Option<String>,
    pub iops: Option<i64>,
    pub throughput: Option<i64>,
    pub encrypted: Option<bool>,
    #[serde(rename = "kmsKeyID")]
    pub kms_key_id: Option<String>,
    #[serde(rename = "deleteOnTermination")]
    pub delete_on_termination: Option<bool>,
    #[serde(rename = "snapshotID")]
    pub snapshot_id: Option<String>,
    #[serde(rename = "volumeInitializationRate")]
    pub volume_initialization_rate: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetadataOptionsObject {
    #[serde(rename = "httpEndpoint")]
    pub http_endpoint: Option<String>,
    #[serde(rename = "httpProtocolIPv6")]
    pub http_protocol_ipv6: Option<String>,
    #[serde(rename = "httpPutResponseHopLimit")]
    pub http_put_response_hop_limit: Option<i64>,
    #[serde(rename = "httpTokens")]
    pub http_tokens: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectorTermObject {
    pub id: Option<String>,
    pub name: Option<String>,
    pub alias: Option<String>,
    pub owner: Option<String>,
    #[serde(rename = "ssmParameter")]
    pub ssm_parameter: Option<String>,
    #[serde(rename = "instanceMatchCriteria")]
    pub instance_match_criteria: Option<String>,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeletObject {
    #[serde(rename = "maxPods")]
    pub max_pods: Option<i64>,
    #[serde(rename = "podsPerCore")]
    pub pods_per_core: Option<i64>,
    #[serde(default, rename = "systemReserved")]
    pub system_reserved: BTreeMap<String, Scalar>,
    #[serde(default, rename = "kubeReserved")]
    pub kube_reserved: BTreeMap<String, Scalar>,
    #[serde(default, rename = "evictionHard")]
    pub eviction_hard: BTreeMap<String, String>,
    #[serde(rename = "evictionSoft")]
    pub eviction_soft: Option<IgnoredAny>,
    #[serde(rename = "evictionSoftGracePeriod")]
    pub eviction_soft_grace_period: Option<IgnoredAny>,
    #[serde(rename = "evictionMaxPodGracePeriod")]
    pub eviction_max_pod_grace_period: Option<i64>,
    #[serde(rename = "imageGCHighThresholdPercent")]
    pub image_gc_high_threshold_percent: Option<i64>,
    #[serde(rename = "imageGCLowThresholdPercent")]
    pub image_gc_low_threshold_percent: Option<i64>,
    #[serde(rename = "cpuCFSQuota")]
    pub cpu_cfs_quota: Option<bool>,
    #[serde(rename = "clusterDNS")]
    pub cluster_dns: Option<Vec<String>>,
}

// ------------------------------------------------------------------ Built-in Kubernetes kinds

#[derive(Debug, Clone, Deserialize)]
pub struct PodObject {
    pub metadata: ObjectMeta,
    pub spec: PodSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodTemplateObject {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: PodSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodSpec {
    #[serde(default)]
    pub containers: Vec<Container>,
    #[serde(default, rename = "initContainers")]
    pub init_containers: Vec<Container>,
    #[serde(default, rename = "nodeSelector")]
    pub node_selector: BTreeMap<String, String>,
    pub affinity: Option<Affinity>,
    #[serde(default)]
    pub tolerations: Vec<TolerationObject>,
    #[serde(default, rename = "topologySpreadConstraints")]
    pub topology_spread_constraints: Vec<TopologySpreadObject>,
    pub priority: Option<i32>,
    #[serde(rename = "nodeName")]
    pub node_name: Option<String>,
    #[serde(default)]
    pub overhead: BTreeMap<String, Scalar>,
    #[serde(rename = "terminationGracePeriodSeconds")]
    pub termination_grace_period_seconds: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Container {
    pub name: Option<String>,
    #[serde(default)]
    pub resources: ContainerResources,
    #[serde(default)]
    pub ports: Vec<ContainerPort>,
    #[serde(rename = "restartPolicy")]
    pub restart_policy: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ContainerPort {
    #[serde(rename = "containerPort")]
    pub container_port: Option<i64>,
    #[serde(rename = "hostPort")]
    pub host_port: Option<i64>,
    pub protocol: Option<String>,
    #[serde(rename = "hostIP")]
    pub host_ip: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ContainerResources {
    #[serde(default)]
    pub requests: BTreeMap<String, Scalar>,
    #[serde(default)]
    pub limits: BTreeMap<String, Scalar>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Affinity {
    #[serde(rename = "nodeAffinity")]
    pub node_affinity: Option<NodeAffinity>,
    #[serde(rename = "podAffinity")]
    pub pod_affinity: Option<PodAffinityObject>,
    #[serde(rename = "podAntiAffinity")]
    pub pod_anti_affinity: Option<PodAffinityObject>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct NodeAffinity {
    #[serde(rename = "requiredDuringSchedulingIgnoredDuringExecution")]
    pub required: Option<NodeSelector>,
    #[serde(default, rename = "preferredDuringSchedulingIgnoredDuringExecution")]
    pub preferred: Vec<PreferredSchedulingTerm>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PreferredSchedulingTerm {
    pub weight: i64,
    #[serde(default)]
    pub preference: NodeSelectorTerm,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodAffinityObject {
    #[serde(default, rename = "requiredDuringSchedulingIgnoredDuringExecution")]
    pub required: Vec<PodAffinityTermObject>,
    #[serde(default, rename = "preferredDuringSchedulingIgnoredDuringExecution")]
    pub preferred: Vec<WeightedPodAffinityTerm>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodAffinityTermObject {
    #[serde(rename = "labelSelector")]
    pub label_selector: Option<LabelSelector>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(rename = "topologyKey")]
    pub topology_key: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct WeightedPodAffinityTerm {
    pub weight: i64,
    #[serde(rename = "podAffinityTerm")]
    pub pod_affinity_term: PodAffinityTermObject,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct TopologySpreadObject {
    #[serde(rename = "maxSkew")]
    pub max_skew: i64,
    #[serde(rename = "topologyKey")]
    pub topology_key: String,
    #[serde(rename = "whenUnsatisfiable")]
    pub when_unsatisfiable: String,
    #[serde(rename = "labelSelector")]
    pub label_selector: Option<LabelSelector>,
    #[serde(rename = "minDomains")]
    pub min_domains: Option<i64>,
    #[serde(rename = "nodeAffinityPolicy")]
    pub node_affinity_policy: Option<String>,
    #[serde(rename = "nodeTaintsPolicy")]
    pub node_taints_policy: Option<String>,
    #[serde(default, rename = "matchLabelKeys")]
    pub match_label_keys: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct NodeSelector {
    #[serde(default, rename = "nodeSelectorTerms")]
    pub node_selector_terms: Vec<NodeSelectorTerm>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct NodeSelectorTerm {
    #[serde(default, rename = "matchExpressions")]
    pub match_expressions: Vec<RequirementObject>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TolerationObject {
    pub key: Option<String>,
    pub operator: Option<String>,
    pub value: Option<String>,
    pub effect: Option<String>,
    #[serde(rename = "tolerationSeconds")]
    pub toleration_seconds: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DeploymentObject {
    pub metadata: ObjectMeta,
    pub spec: DeploymentSpec,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DeploymentSpec {
    pub replicas: Option<i64>,
    pub template: PodTemplateObject,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DaemonSetObject {
    pub metadata: ObjectMeta,
    pub spec: DaemonSetSpec,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DaemonSetSpec {
    pub template: PodTemplateObject,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PdbObject {
    pub metadata: ObjectMeta,
    pub spec: PdbSpec,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PdbSpec {
    #[serde(rename = "minAvailable")]
    pub min_available: Option<Scalar>,
    #[serde(rename = "maxUnavailable")]
    pub max_unavailable: Option<Scalar>,
    pub selector: Option<LabelSelector>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct LabelSelector {
    #[serde(default, rename = "matchLabels")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, rename = "matchExpressions")]
    pub match_expressions: Vec<RequirementObject>,
}
