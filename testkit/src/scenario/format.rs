//! The scenario file format (see `docs/scenarios.md`). Unknown keys are errors, so a typo never
//! silently changes a test.

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    pub name: String,
    pub description: Option<String>,
    pub region: Option<String>,
    pub seed: Option<u64>,
    pub duration: Option<String>,
    pub settings: Option<SettingsFile>,
    pub cloud: Option<CloudFile>,
    pub cluster: Option<ClusterFile>,
    #[serde(default)]
    pub manifests: Vec<ManifestSource>,
    #[serde(default)]
    pub timeline: Vec<TimelineFile>,
    #[serde(default)]
    pub expect: Vec<ExpectationFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsFile {
    #[serde(rename = "batchIdleDuration")]
    pub batch_idle_duration: Option<String>,
    #[serde(rename = "batchMaxDuration")]
    pub batch_max_duration: Option<String>,
    #[serde(rename = "clusterName")]
    pub cluster_name: Option<String>,
    #[serde(rename = "reservedENIs")]
    pub reserved_enis: Option<u32>,
    #[serde(rename = "vmMemoryOverheadPercent")]
    pub vm_memory_overhead_percent: Option<f64>,
    #[serde(rename = "preferencePolicy")]
    pub preference_policy: Option<String>,
    #[serde(rename = "minValuesPolicy")]
    pub min_values_policy: Option<String>,
    /// nodewright's: how long the machines of one decision are held for their siblings
    /// (`0s`: not at all, as Karpenter).
    #[serde(rename = "siblingHoldDuration")]
    pub sibling_hold_duration: Option<String>,
    /// nodewright's: whether consolidation counts the work an eviction throws away (a Job's
    /// pod starts over; `false`: only the restart, as Karpenter).
    #[serde(rename = "countLostWork")]
    pub count_lost_work: Option<bool>,
    /// nodewright's: whether that counts every pod no ReplicaSet, StatefulSet or
    /// ReplicationController makes again too (one no controller owns, a workflow's; default
    /// `true`; `false`: only its restart, as Karpenter).
    #[serde(rename = "countLostWorkOfUnreplicatedPods")]
    pub count_lost_work_of_unreplicated_pods: Option<bool>,
    /// nodewright's: whether a machine planned for GPU pods is launched as one machine per pod
    /// where those cost less (default `true`; `false`: Karpenter's packing).
    #[serde(rename = "separateMachinesWhenCheaper")]
    pub separate_machines_when_cheaper: Option<bool>,
    /// nodewright's: whether a machine past its `expireAfter` leaves the pods that would lose
    /// their work (a Job's, an unowned one) to finish before it goes (default `true`; `false`:
    /// they are evicted, as Karpenter).
    #[serde(rename = "expirationWaitsForJobs")]
    pub expiration_waits_for_jobs: Option<bool>,
}

/// `40s`, or `{min: 30s, max: 60s}` (uniform, from the scenario's seed).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum LatencyFile {
    Fixed(String),
    Range { min: String, max: String },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloudFile {
    #[serde(rename = "launchLatency")]
    pub launch_latency: Option<LatencyFile>,
    #[serde(rename = "registrationLatency")]
    pub registration_latency: Option<LatencyFile>,
    #[serde(default, rename = "insufficientCapacity")]
    pub insufficient_capacity: Vec<IceWindowFile>,
    #[serde(rename = "apiErrorRate")]
    pub api_error_rate: Option<f64>,
    /// Windows during which launches take longer: `{from: 5m, until: 10m, latency: 3m}`.
    #[serde(default, rename = "launchLatencySpikes")]
    pub launch_latency_spikes: Vec<LatencySpikeFile>,
    /// The account's capacity reservations:
    /// `{id: cr-0123, instanceType: m5.large, zone: us-east-1a, count: 2}`.
    #[serde(default, rename = "capacityReservations")]
    pub capacity_reservations: Vec<CapacityReservationFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacityReservationFile {
    pub id: String,
    #[serde(rename = "instanceType")]
    pub instance_type: String,
    pub zone: String,
    pub count: u32,
    /// `default` (an On-Demand Capacity Reservation, the default) or `capacity-block`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    #[serde(rename = "ownerID")]
    pub owner_id: Option<String>,
    #[serde(default)]
    pub tags: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencySpikeFile {
    pub from: String,
    pub until: String,
    pub latency: LatencyFile,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IceWindowFile {
    #[serde(default, rename = "instanceTypes")]
    pub instance_types: Vec<String>,
    #[serde(default)]
    pub zones: Vec<String>,
    #[serde(rename = "capacityType")]
    pub capacity_type: Option<String>,
    pub from: Option<String>,
    pub until: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    #[serde(default)]
    pub nodes: Vec<NodeGroupFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeGroupFile {
    pub name: String,
    #[serde(rename = "instanceType")]
    pub instance_type: String,
    pub zone: String,
    pub count: Option<u32>,
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
}

/// `- file: path.yaml` or an inline YAML string.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ManifestSource {
    File { file: String },
    Inline(String),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimelineFile {
    pub at: String,
    pub scale: Option<ScaleFile>,
    pub delete: Option<DeleteFile>,
    pub apply: Option<String>,
    pub interrupt: Option<InterruptFile>,
}

/// `interrupt: {kind: spot-interruption, node: any}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterruptFile {
    pub kind: String,
    pub node: String,
    /// For `state-change`: the state (default `terminated`); for `scheduled-change`: the
    /// AWS Health event type code (default `AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED`).
    pub detail: Option<String>,
    /// A storm: this fraction (0 < f ≤ 1, rounded up) of the matching running machines, drawn
    /// with the scenario's seed, each sent one message, spread evenly over `over`.
    pub fraction: Option<f64>,
    pub over: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleFile {
    pub deployment: String,
    pub namespace: Option<String>,
    pub replicas: i64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteFile {
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectationFile {
    #[serde(rename = "podsScheduledWithin")]
    pub pods_scheduled_within: Option<String>,
    #[serde(rename = "maxNodes")]
    pub max_nodes: Option<u32>,
    #[serde(rename = "finalNodes")]
    pub final_nodes: Option<u32>,
    #[serde(rename = "maxCostPerHour")]
    pub max_cost_per_hour: Option<f64>,
    #[serde(rename = "maxDisruptions")]
    pub max_disruptions: Option<u32>,
    pub unschedulable: Option<Vec<String>>,
    #[serde(rename = "placementHonoursConstraints")]
    pub placement_honours_constraints: Option<bool>,
}
