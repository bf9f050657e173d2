//! What a scenario is once read: the simulated world, its timeline and its expectations, and
//! the one error type of reading it.

use std::collections::BTreeMap;

use nodewright_adapters::manifest::{Manifest, ManifestError, UnmodelledField};
use nodewright_core::Config;
use nodewright_core::catalog::{CapacityType, Catalog};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ScenarioError {
    #[error("{file}: cannot read it: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: not a valid scenario: {message}")]
    Yaml { file: String, message: String },
    #[error("{file}: field `{field}`: {problem}; fix: {fix}")]
    Invalid {
        file: String,
        field: String,
        problem: String,
        fix: String,
    },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("{file}: line {line}: {message}")]
    Trace {
        file: String,
        line: usize,
        message: String,
    },
}

/// A latency drawn uniformly from `min..=max` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Latency {
    pub min_ms: u64,
    pub max_ms: u64,
}

/// A window during which some offerings have no capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IceWindow {
    /// Empty = every type.
    pub instance_types: Vec<String>,
    /// Empty = every zone.
    pub zones: Vec<String>,
    pub capacity_type: Option<CapacityType>,
    pub from_ms: u64,
    pub until_ms: u64,
}

impl IceWindow {
    pub fn covers(
        &self,
        instance_type: &str,
        zone: &str,
        capacity_type: CapacityType,
        at_ms: u64,
    ) -> bool {
        (self.instance_types.is_empty() || self.instance_types.iter().any(|t| t == instance_type))
            && (self.zones.is_empty() || self.zones.iter().any(|z| z == zone))
            && self.capacity_type.is_none_or(|c| c == capacity_type)
            && (self.from_ms..self.until_ms).contains(&at_ms)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct CloudSpec {
    pub launch_latency: Latency,
    pub registration_latency: Latency,
    pub insufficient_capacity: Vec<IceWindow>,
    /// The share of cloud calls (CreateFleet, TerminateInstances) that fail with a throttling
    /// error; the adapter retries them with backoff.
    pub api_error_rate: f64,
    pub launch_latency_spikes: Vec<LatencySpike>,
    /// The account's capacity reservations (also in the scenario's catalog, as EC2 would
    /// describe them): CreateFleet launches `reserved` instances only while one has room.
    pub capacity_reservations: Vec<nodewright_core::catalog::CapacityReservation>,
}

/// A window during which a launch takes `latency` instead of the usual.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencySpike {
    pub from_ms: u64,
    pub until_ms: u64,
    pub latency: Latency,
}

impl CloudSpec {
    /// The launch latency at `now_ms`.
    pub fn launch_latency_at(&self, now_ms: u64) -> Latency {
        self.launch_latency_spikes
            .iter()
            .find(|s| s.from_ms <= now_ms && now_ms < s.until_ms)
            .map_or(self.launch_latency, |s| s.latency)
    }
}

/// Capacity that exists before nodewright (a managed node group); never disrupted by it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExistingNodeGroup {
    pub name: String,
    pub instance_type: String,
    pub zone: String,
    pub count: u32,
    pub labels: BTreeMap<String, String>,
}

/// What a timeline `delete` may remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeleteKind {
    Deployment,
    ReplicaSet,
    StatefulSet,
    Job,
    CronJob,
    Pod,
    NodePool,
    EC2NodeClass,
    DaemonSet,
    PodDisruptionBudget,
}

impl DeleteKind {
    pub const ALL: [DeleteKind; 10] = [
        DeleteKind::Deployment,
        DeleteKind::ReplicaSet,
        DeleteKind::StatefulSet,
        DeleteKind::Job,
        DeleteKind::CronJob,
        DeleteKind::Pod,
        DeleteKind::NodePool,
        DeleteKind::EC2NodeClass,
        DeleteKind::DaemonSet,
        DeleteKind::PodDisruptionBudget,
    ];

    /// The kind as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            DeleteKind::Deployment => "Deployment",
            DeleteKind::ReplicaSet => "ReplicaSet",
            DeleteKind::StatefulSet => "StatefulSet",
            DeleteKind::Job => "Job",
            DeleteKind::CronJob => "CronJob",
            DeleteKind::Pod => "Pod",
            DeleteKind::NodePool => "NodePool",
            DeleteKind::EC2NodeClass => "EC2NodeClass",
            DeleteKind::DaemonSet => "DaemonSet",
            DeleteKind::PodDisruptionBudget => "PodDisruptionBudget",
        }
    }

    pub fn parse(text: &str) -> Option<DeleteKind> {
        DeleteKind::ALL.into_iter().find(|k| k.as_str() == text)
    }

    /// Whether its objects have no namespace.
    pub fn is_cluster_scoped(self) -> bool {
        matches!(self, DeleteKind::NodePool | DeleteKind::EC2NodeClass)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Scale {
        namespace: String,
        deployment: String,
        replicas: u32,
    },
    Delete {
        kind: DeleteKind,
        namespace: String,
        name: String,
    },
    Apply(Vec<Manifest>),
    /// An interruption message about one machine nodewright launched, or a storm of them.
    Interrupt {
        kind: InterruptKind,
        target: InterruptTarget,
        storm: Option<Storm>,
    },
}

/// The four message kinds of the interruption queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterruptKind {
    /// The instance is reclaimed two minutes later (the simulated cloud takes it then).
    SpotInterruption,
    Rebalance,
    /// An AWS Health scheduled change with this event type code.
    ScheduledChange(String),
    /// An instance state change to this state; `stopping`, `stopped`, `shutting-down` and
    /// `terminated` also stop the simulated instance at once.
    StateChange(String),
}

/// Many machines interrupted at once: `fraction` of those the target matches, one message each,
/// spread evenly over `over_ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct Storm {
    pub fraction: f64,
    pub over_ms: u64,
}

/// Which machine the message is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterruptTarget {
    /// The running machine nodewright launched first (by NodeClaim name); none: nothing happens.
    Any,
    /// The first running spot machine.
    AnySpot,
    /// This NodeClaim.
    NodeClaim(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct TimelineAction {
    pub at_ms: u64,
    pub action: Action,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expectation {
    PodsScheduledWithin(u64),
    MaxNodes(u32),
    FinalNodes(u32),
    MaxCostPerHour(f64),
    MaxDisruptions(u32),
    Unschedulable(Vec<String>),
    /// At the end, every pod with a `DoNotSchedule` topology spread or a required
    /// (anti-)affinity sits where kube-scheduler's filters allow, among the pods then bound.
    PlacementHonoured,
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub region: String,
    pub seed: u64,
    pub duration_ms: u64,
    pub config: Config,
    pub catalog: std::sync::Arc<Catalog>,
    pub cloud: CloudSpec,
    pub existing_nodes: Vec<ExistingNodeGroup>,
    pub manifests: Vec<Manifest>,
    pub timeline: Vec<TimelineAction>,
    pub expectations: Vec<Expectation>,
    /// What the scenario asks that the simulation cannot give (a Windows NodePool in a
    /// Linux-only catalog, say): said once when it loads.
    pub warnings: Vec<String>,
    /// Fields of its NodePools and EC2NodeClasses the simulation accepts but does not model:
    /// said once when it loads, and listed in the report.
    pub unmodelled: Vec<UnmodelledField>,
}

impl Scenario {
    /// The same scenario under another seed (the core's name generator and the world's draws).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self.config.seed = seed;
        self
    }
}

/// A field of `file_name` that cannot be used, with the fix.
pub(crate) fn invalid_field(
    file_name: &str,
    field: &str,
    problem: String,
    fix: &str,
) -> ScenarioError {
    ScenarioError::Invalid {
        file: file_name.to_string(),
        field: field.to_string(),
        problem,
        fix: fix.to_string(),
    }
}
