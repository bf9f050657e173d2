//! The built-in Kubernetes objects users already write (Pod, Deployment, ...), as serde
//! structs that keep Kubernetes' leniency for the many fields an autoscaler does not read.
//! Karpenter's own kinds (NodePool, EC2NodeClass) are `nodewright_api`'s types, the ones the
//! CRDs are generated from; they refuse unknown fields so a typo is caught.

use std::collections::BTreeMap;

use serde::Deserialize;

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

// ------------------------------------------------------------------ Built-in Kubernetes kinds

/// A node selector requirement (node affinity) or label selector expression of a pod.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequirementObject {
    pub key: String,
    pub operator: String,
    #[serde(default)]
    pub values: Vec<Scalar>,
}

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
    #[serde(default)]
    pub volumes: Vec<VolumeObject>,
}

/// A pod's volume; only a PersistentVolumeClaim's can restrict where the pod runs.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct VolumeObject {
    pub name: Option<String>,
    #[serde(rename = "persistentVolumeClaim")]
    pub persistent_volume_claim: Option<ClaimSource>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ClaimSource {
    #[serde(rename = "claimName")]
    pub claim_name: String,
}

/// A PersistentVolumeClaim (v1), or a StatefulSet's claim template.
#[derive(Debug, Clone, Deserialize)]
pub struct ClaimObject {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ClaimSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ClaimSpec {
    #[serde(rename = "storageClassName")]
    pub storage_class_name: Option<String>,
    #[serde(rename = "volumeName")]
    pub volume_name: Option<String>,
}

/// A PersistentVolume (v1): where it can be attached.
#[derive(Debug, Clone, Deserialize)]
pub struct VolumeManifestObject {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PersistentVolumeSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PersistentVolumeSpec {
    #[serde(rename = "nodeAffinity")]
    pub node_affinity: Option<VolumeNodeAffinity>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct VolumeNodeAffinity {
    pub required: Option<NodeSelector>,
}

/// A StorageClass (storage.k8s.io/v1): when its volumes are bound, and in which topology.
#[derive(Debug, Clone, Deserialize)]
pub struct StorageClassObject {
    pub metadata: ObjectMeta,
    #[serde(rename = "volumeBindingMode")]
    pub volume_binding_mode: Option<String>,
    #[serde(default, rename = "allowedTopologies")]
    pub allowed_topologies: Vec<TopologySelectorTerm>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct TopologySelectorTerm {
    #[serde(default, rename = "matchLabelExpressions")]
    pub match_label_expressions: Vec<TopologyRequirement>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TopologyRequirement {
    pub key: String,
    #[serde(default)]
    pub values: Vec<String>,
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
    /// A StatefulSet's: one claim per template for each pod.
    #[serde(default, rename = "volumeClaimTemplates")]
    pub volume_claim_templates: Vec<ClaimObject>,
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
pub struct JobObject {
    pub metadata: ObjectMeta,
    pub spec: JobSpec,
}

#[derive(Debug, Clone, Deserialize)]
pub struct JobSpec {
    pub completions: Option<i64>,
    pub parallelism: Option<i64>,
    pub template: PodTemplateObject,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CronJobObject {
    pub metadata: ObjectMeta,
    pub spec: CronJobSpec,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CronJobSpec {
    pub schedule: String,
    #[serde(rename = "jobTemplate")]
    pub job_template: JobTemplateObject,
    pub suspend: Option<bool>,
    #[serde(rename = "concurrencyPolicy")]
    pub concurrency_policy: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct JobTemplateObject {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: JobSpec,
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
