//! The core's configuration: Karpenter's settings with their defaults. It travels in the event
//! log's header so that a replay runs with exactly the settings of the recording.

use serde::{Deserialize, Serialize};

use crate::model::pod::Pod;

/// Every setting a decision reads. The defaults are Karpenter's where it has the setting.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Config {
    /// The cluster's name (`CLUSTER_NAME`): the controller tags instances and scopes launch
    /// tokens with it, and a store records the cluster it was decided for.
    pub cluster_name: String,
    /// Seeds the generator of NodeClaim names; nothing else in the core is random.
    pub seed: u64,
    /// A batch closes this long after the last pending pod arrived (`batchIdleDuration`).
    pub batch_idle_ms: u64,
    /// ... and at most this long after it opened (`batchMaxDuration`).
    pub batch_max_ms: u64,
    /// A launch without a result after this long is given up.
    pub launch_timeout_ms: u64,
    /// A launched instance that has not registered as a node after this long is given up.
    pub registration_timeout_ms: u64,
    /// Disruption passes run at most this often.
    pub disruption_poll_ms: u64,
    /// The launch offers EC2 at most this many instance types.
    pub max_instance_types: usize,
    /// ENIs kept for other uses (custom networking): they carry no pod IPs (`reservedENIs`).
    pub reserved_enis: u32,
    /// Memory the hypervisor keeps, parts per thousand (`vmMemoryOverheadPercent`, 7.5 %).
    pub vm_memory_overhead_per_mille: u32,
    /// Whether preferred affinities and ScheduleAnyway spreads are honoured (`preferencePolicy`).
    pub preference_policy: PreferencePolicy,
    /// Whether `minValues` may be relaxed when it cannot be met (`minValuesPolicy`).
    pub min_values_policy: MinValuesPolicy,
    /// The payback rule: a consolidation is taken only when its saving over this horizon ...
    pub consolidation_payback_horizon_ms: u64,
    /// ... exceeds this cost per evicted pod (micro-USD). Both zero: Karpenter's rule.
    pub eviction_cost_micro_usd: u64,
    /// The machines of one provisioning decision that hold pods with topology spread
    /// (`DoNotSchedule`) or required anti-affinity start tainted [`SIBLING_HOLD_TAINT`] and are
    /// released together once every one has registered, or this long after the first did
    /// (`siblingHoldDuration`): so the pods land where the plan put them, not on whichever
    /// machine comes up first. Zero: never held (Karpenter's behaviour).
    ///
    /// [`SIBLING_HOLD_TAINT`]: crate::model::labels::SIBLING_HOLD_TAINT
    pub sibling_hold_ms: u64,
    /// Which evicted pods the payback rule counts the work of ([`LostWork`]; `countLostWork`
    /// and `countLostWorkOfUnreplicatedPods`): such a pod starts over, or is gone, so evicting it
    /// loses what it has run so far — its share of its machine (its fullest resource) at the
    /// machine's price, for its age — and the saving of moving only such pods is counted no
    /// longer than the oldest has run (it may end as soon).
    pub count_lost_work: LostWork,
    /// Beyond Karpenter (`separateMachinesWhenCheaper`): a machine planned for pods that ask
    /// for accelerators (GPUs, AWS Neuron) is launched as one machine per pod where those
    /// cost less than it, at the catalog's prices. Karpenter puts two one-GPU pods on a
    /// four-GPU machine at $3.91/h where two one-GPU machines cost $2.41/h, and consolidation
    /// later moves them apart, evicting them.
    pub separate_when_cheaper: bool,
    /// Beyond Karpenter (`expirationWaitsForJobs`): a machine past its `expireAfter` is
    /// cordoned and drained as in Karpenter, but the pods whose eviction loses their work (a
    /// Job's, an unowned one, a workflow step's: [`LostWork::AllButReplicated`]) are left to
    /// finish, as if annotated `karpenter.sh/do-not-disrupt`, until they end or the NodePool's
    /// `terminationGracePeriod` runs out. While only they keep it, the machine disrupts nothing
    /// and does not count against disruption budgets. Karpenter evicts them: a job longer than
    /// `expireAfter` then never finishes, and every restart pays its work again.
    pub expiration_waits_for_jobs: bool,
}

/// Whose work an eviction is counted to lose, for consolidation's payback rule.
///
/// Encoded as the variant's index: `Off` and `Jobs` are the bytes of the `false` and `true`
/// this setting was before other pods than Jobs' were counted, so logs and snapshots recorded
/// then read as they were decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LostWork {
    /// Every evicted pod costs only its restart (`eviction_cost_micro_usd`), over the whole
    /// horizon: Karpenter's rule, with the payback rule on top.
    Off,
    /// A Job's pod, which starts over when evicted.
    Jobs,
    /// Every pod that no replicating controller makes again to serve on: a Job's, one no
    /// controller owns (evicted, it is gone, and whoever made it runs it again), one a
    /// workflow or CI controller owns (an Argo Workflow's step, a Tekton TaskRun's, a GitHub
    /// Actions runner: the task fails or starts over). A ReplicaSet's, StatefulSet's or
    /// ReplicationController's pod is made again and serves on. The default.
    AllButReplicated,
}

/// The controllers that make an evicted pod again, to serve on as it did: its work is not lost.
/// (A DaemonSet's pod and a node's mirror pod are never moved by consolidation.)
pub const REPLICATING_CONTROLLERS: [&str; 5] = [
    "ReplicaSet",
    "StatefulSet",
    "ReplicationController",
    "DaemonSet",
    "Node",
];

impl LostWork {
    /// The setting from its two switches: `countLostWork` and
    /// `countLostWorkOfUnreplicatedPods`.
    pub fn from_switches(count_lost_work: bool, of_unreplicated_pods: bool) -> Self {
        match (count_lost_work, of_unreplicated_pods) {
            (false, _) => LostWork::Off,
            (true, false) => LostWork::Jobs,
            (true, true) => LostWork::AllButReplicated,
        }
    }

    /// Whether any pod's lost work is counted.
    pub fn is_on(self) -> bool {
        self != LostWork::Off
    }

    /// Whether the work `pod` has done is counted lost when it is evicted.
    pub fn counts(self, pod: &Pod) -> bool {
        let owner = pod.owner.as_ref().map(|o| o.kind.as_str());
        match self {
            LostWork::Off => false,
            LostWork::Jobs => owner == Some("Job"),
            LostWork::AllButReplicated => {
                owner.is_none_or(|kind| !REPLICATING_CONTROLLERS.contains(&kind))
            }
        }
    }
}

/// `Respect`: preferences are tried as requirements first, then relaxed one by one.
/// `Ignore`: preferences play no part in provisioning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PreferencePolicy {
    /// Preferences are tried as requirements first, then relaxed (Karpenter's default).
    Respect,
    /// Preferences are not read.
    Ignore,
}

/// `Strict`: a machine whose options cannot meet `minValues` is not launched.
/// `BestEffort`: it is launched with as many distinct values as there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MinValuesPolicy {
    /// Not launched short of `minValues` (Karpenter's default).
    Strict,
    /// Launched with the distinct values there are.
    BestEffort,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cluster_name: "nodewright-demo".to_string(),
            seed: 1,
            batch_idle_ms: 1_000,
            batch_max_ms: 10_000,
            launch_timeout_ms: 5 * 60_000,
            registration_timeout_ms: 15 * 60_000,
            disruption_poll_ms: 10_000,
            max_instance_types: 60,
            reserved_enis: 0,
            vm_memory_overhead_per_mille: 75,
            preference_policy: PreferencePolicy::Respect,
            min_values_policy: MinValuesPolicy::Strict,
            consolidation_payback_horizon_ms: 24 * 3_600_000,
            eviction_cost_micro_usd: 50_000,
            sibling_hold_ms: 2 * 60_000,
            count_lost_work: LostWork::AllButReplicated,
            separate_when_cheaper: true,
            expiration_waits_for_jobs: true,
        }
    }
}

impl Config {
    /// Whether expiration leaves `pod` to finish on its machine
    /// (`expiration_waits_for_jobs`): a pod no replicating controller makes again.
    pub fn expiration_waits_for(&self, pod: &Pod) -> bool {
        self.expiration_waits_for_jobs && LostWork::AllButReplicated.counts(pod)
    }

    /// The capacity settings these options give.
    pub fn capacity_settings(&self) -> crate::catalog::CapacitySettings {
        crate::catalog::CapacitySettings {
            reserved_enis: self.reserved_enis,
            vm_memory_overhead_per_mille: self.vm_memory_overhead_per_mille,
        }
    }
}
