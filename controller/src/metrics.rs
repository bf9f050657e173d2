//! Prometheus metrics: Karpenter's families (the names dashboards are built on) and
//! nodewright's own (how long a decision and a log append take, how large the log is).
//!
//! Counters and histograms are recorded as the driver steps ([`Measured`] wraps the command
//! dispatch and hears every step); the gauges that describe the cluster (nodes, pods, pools)
//! are rebuilt from the core's state at most every [`GAUGE_REFRESH`], so a step stays cheap
//! in a cluster of thousands of pods.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use nodewright_adapters::driver::CommandExecutor;
use nodewright_adapters::eventlog::{EventStore, LogError};
use nodewright_core::model::nodeclaim::TerminationReason;
use nodewright_core::model::resources::Resources;
use nodewright_core::{Command, Core, Event, EventKind};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::nodepools::PoolUsage;

/// The cluster's gauges are rebuilt at most this often.
pub const GAUGE_REFRESH: Duration = Duration::from_secs(5);

const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";

type FloatGauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolReason {
    nodepool: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Pool {
    nodepool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeResource {
    node_name: String,
    nodepool: String,
    resource_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolResource {
    nodepool: String,
    resource_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PodState {
    name: String,
    namespace: String,
    node: String,
    nodepool: String,
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Decision {
    decision: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WatchTrouble {
    kind: String,
    why: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CommandFailure {
    command: String,
    retryable: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MessageType {
    message_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    kind: String,
}

fn seconds_histogram() -> Histogram {
    // 100 µs to ~100 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 21))
}

/// Every metric the controller exports, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    nodeclaims_created: Family<PoolReason, Counter>,
    nodeclaims_terminated: Family<PoolReason, Counter>,
    nodeclaims_disrupted: Family<PoolReason, Counter>,
    nodes_created: Family<Pool, Counter>,
    nodes_terminated: Family<Pool, Counter>,
    nodes_allocatable: Family<NodeResource, FloatGauge>,
    nodes_total_pod_requests: Family<NodeResource, FloatGauge>,
    pods_state: Family<PodState, Gauge>,
    pods_startup: Histogram,
    nodepools_usage: Family<PoolResource, FloatGauge>,
    nodepools_limit: Family<PoolResource, FloatGauge>,
    node_count: Gauge,
    queue_depth: Gauge,
    scheduling_duration: Histogram,
    disruption_decisions: Family<Decision, Counter>,
    interruptions: Family<MessageType, Counter>,
    decision_duration: Histogram,
    log_append_duration: Histogram,
    log_bytes: Gauge,
    log_records: Gauge,
    events: Family<Kind, Counter>,
    commands: Family<Kind, Counter>,
    leader: Gauge,
    /// Instances a command named that were left alone as not this cluster's NodePools'.
    pub instances_not_owned: Counter,
    /// Parts of the event store set aside (a record that does not decode, a replay that
    /// diverges, an event that panics the core), by why.
    log_set_aside: Family<Kind, Counter>,
    /// Sealed segments of the store shipped to the bucket, their bytes, and shipments that
    /// failed.
    log_segments_shipped: Counter,
    log_segment_bytes: Counter,
    log_segments_failed: Counter,
    /// Interruption queue messages deleted without an event, by why (malformed, ignored).
    interruption_messages_dropped: Family<Kind, Counter>,
    /// Troubles of the watches, by kind and why (unreadable object, failed watch call).
    watch_troubles: Family<WatchTrouble, Counter>,
    /// Commands that could not be carried out past their retries, by command and whether
    /// trying again may succeed.
    command_failures: Family<CommandFailure, Counter>,
    /// How stale each watch is, set when `/metrics` is read.
    watch_staleness: Family<Kind, FloatGauge>,
    /// Renewals of the lease that failed or timed out.
    lease_renewals_failed: Counter,
    /// Commands handed to the executor and not done.
    executor_backlog: Gauge,
    /// Side effects refused because the term they were decided in is over.
    fenced_side_effects: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut r = Registry::default();
        let m = Metrics {
            nodeclaims_created: Family::default(),
            nodeclaims_terminated: Family::default(),
            nodeclaims_disrupted: Family::default(),
            nodes_created: Family::default(),
            nodes_terminated: Family::default(),
            nodes_allocatable: Family::default(),
            nodes_total_pod_requests: Family::default(),
            pods_state: Family::default(),
            pods_startup: Histogram::new(exponential_buckets(0.25, 2.0, 12)),
            nodepools_usage: Family::default(),
            nodepools_limit: Family::default(),
            node_count: Gauge::default(),
            queue_depth: Gauge::default(),
            scheduling_duration: seconds_histogram(),
            disruption_decisions: Family::default(),
            interruptions: Family::default(),
            decision_duration: seconds_histogram(),
            log_append_duration: seconds_histogram(),
            log_bytes: Gauge::default(),
            log_records: Gauge::default(),
            events: Family::default(),
            commands: Family::default(),
            leader: Gauge::default(),
            instances_not_owned: Counter::default(),
            log_set_aside: Family::default(),
            log_segments_shipped: Counter::default(),
            log_segment_bytes: Counter::default(),
            log_segments_failed: Counter::default(),
            interruption_messages_dropped: Family::default(),
            watch_troubles: Family::default(),
            command_failures: Family::default(),
            lease_renewals_failed: Counter::default(),
            executor_backlog: Gauge::default(),
            watch_staleness: Family::default(),
            fenced_side_effects: Counter::default(),
            registry: Registry::default(),
        };
        // Counters are encoded with `_total` appended.
        r.register(
            "karpenter_nodeclaims_created",
            "NodeClaims created, by NodePool and reason (provisioning, or disruption for a replacement)",
            m.nodeclaims_created.clone(),
        );
        r.register(
            "karpenter_nodeclaims_terminated",
            "NodeClaims whose termination was decided, by NodePool and reason",
            m.nodeclaims_terminated.clone(),
        );
        r.register(
            "karpenter_nodeclaims_disrupted",
            "NodeClaims disrupted (empty, underutilized, drifted, expired, interrupted, deleted), by NodePool and reason",
            m.nodeclaims_disrupted.clone(),
        );
        r.register(
            "karpenter_nodes_created",
            "Nodes of NodeClaims that appeared, by NodePool",
            m.nodes_created.clone(),
        );
        r.register(
            "karpenter_nodes_terminated",
            "Nodes of NodeClaims that were deleted, by NodePool",
            m.nodes_terminated.clone(),
        );
        r.register(
            "karpenter_nodes_allocatable",
            "Allocatable of each node (cpu in cores, memory in bytes, pods, extended resources)",
            m.nodes_allocatable.clone(),
        );
        r.register(
            "karpenter_nodes_total_pod_requests",
            "The summed requests of the pods bound to each node",
            m.nodes_total_pod_requests.clone(),
        );
        r.register(
            "karpenter_pods_state",
            "One series per pod: its node and NodePool, phase Pending (unbound) or Bound",
            m.pods_state.clone(),
        );
        r.register(
            "karpenter_pods_startup_duration_seconds",
            "From a pod's creation to its binding to a node",
            m.pods_startup.clone(),
        );
        r.register(
            "karpenter_nodepools_usage",
            "The allocatable of each NodePool's nodes, summed",
            m.nodepools_usage.clone(),
        );
        r.register(
            "karpenter_nodepools_limit",
            "Each NodePool's limits (cpu in cores, memory in bytes, nodes)",
            m.nodepools_limit.clone(),
        );
        r.register(
            "karpenter_cluster_state_node_count",
            "Nodes the core knows",
            m.node_count.clone(),
        );
        r.register(
            "karpenter_scheduler_queue_depth",
            "Pods waiting for a machine",
            m.queue_depth.clone(),
        );
        r.register(
            "karpenter_scheduler_scheduling_duration_seconds",
            "Steps that scheduled pods (launched, nominated or reported them): the core's time",
            m.scheduling_duration.clone(),
        );
        r.register(
            "karpenter_voluntary_disruption_decisions",
            "Voluntary disruptions carried out, by decision (delete, replace) and reason",
            m.disruption_decisions.clone(),
        );
        r.register(
            "karpenter_interruption_received_messages",
            "Interruption messages received, by type",
            m.interruptions.clone(),
        );
        r.register(
            "nodewright_decision_duration_seconds",
            "From an event being durable to its commands being durable and dispatched",
            m.decision_duration.clone(),
        );
        r.register(
            "nodewright_log_append_duration_seconds",
            "One durable append to the event store",
            m.log_append_duration.clone(),
        );
        r.register(
            "nodewright_log_bytes",
            "The event store's size on disk",
            m.log_bytes.clone(),
        );
        r.register(
            "nodewright_log_records",
            "Records in the event store (events, commands, snapshots)",
            m.log_records.clone(),
        );
        r.register(
            "nodewright_events",
            "Events handled, by kind",
            m.events.clone(),
        );
        r.register(
            "nodewright_commands",
            "Commands issued, by kind",
            m.commands.clone(),
        );
        r.register(
            "nodewright_leader",
            "1 while this replica holds the lease and runs the core",
            m.leader.clone(),
        );
        r.register(
            "nodewright_instances_not_owned",
            "Instances a command named that were left running as not this cluster's NodePools' machines (no kubernetes.io/cluster/<name>=owned or karpenter.sh/nodepool tag)",
            m.instances_not_owned.clone(),
        );
        r.register(
            "nodewright_log_set_aside",
            "Event stores set aside at a start and begun again from observation, by why (unreadable, diverged, panicked)",
            m.log_set_aside.clone(),
        );
        r.register(
            "nodewright_log_segments_shipped",
            "Sealed segments of the event store shipped to the bucket (LOG_SEGMENTS_BUCKET)",
            m.log_segments_shipped.clone(),
        );
        r.register(
            "nodewright_log_segment_bytes",
            "Bytes of the sealed segments shipped to the bucket",
            m.log_segment_bytes.clone(),
        );
        r.register(
            "nodewright_log_segments_failed",
            "Shipments of a sealed segment that failed (the next seal ships what they left)",
            m.log_segments_failed.clone(),
        );
        r.register(
            "nodewright_interruption_messages_dropped",
            "Interruption queue messages deleted without an event, by why: malformed (not an EventBridge interruption event; the log line names the field) or ignored (a kind nodewright does not act on)",
            m.interruption_messages_dropped.clone(),
        );
        r.register(
            "nodewright_watch_troubles",
            "Troubles of the watches, by kind and why: unreadable (an object left out, the log line names its field) or failed (a watch call retried with backoff)",
            m.watch_troubles.clone(),
        );
        r.register(
            "nodewright_command_failures",
            "Commands that could not be carried out past their bounded retries, by command (Launch, Terminate, Cordon, Uncordon, Release, TerminateOrphan) and retryable (false: the answer stands until a person acts, such as a 403 or a webhook's denial)",
            m.command_failures.clone(),
        );
        r.register(
            "nodewright_watch_staleness_seconds",
            "How stale each watch of the leader is, by kind: the time since the API server last answered it, once one of its calls failed (0 while it answers); past 90 s /readyz fails",
            m.watch_staleness.clone(),
        );
        r.register(
            "nodewright_executor_backlog",
            "Commands handed to the executor and not done; at 4096 the control loop takes no observation (the watchers wait) until the executor's results free it",
            m.executor_backlog.clone(),
        );
        r.register(
            "nodewright_lease_renewals_failed",
            "Renewals of the leader's Lease that failed or timed out; past the renew deadline (two thirds of the lease) the leader stops acting",
            m.lease_renewals_failed.clone(),
        );
        r.register(
            "nodewright_fenced_side_effects",
            "Side effects (launches, terminations, taints, evictions) not made because the leader's term they were decided in is over",
            m.fenced_side_effects.clone(),
        );
        Metrics { registry: r, ..m }
    }

    /// Counts an event store set aside, by why.
    pub fn log_set_aside(&self, why: &str) {
        self.log_set_aside
            .get_or_create(&Kind {
                kind: why.to_string(),
            })
            .inc();
    }

    /// Counts a segment shipped, of `bytes` bytes.
    pub fn log_segment_shipped(&self, bytes: usize) {
        self.log_segments_shipped.inc();
        self.log_segment_bytes.inc_by(bytes as u64);
    }

    /// Counts an interruption queue message deleted without an event, by why.
    pub fn interruption_message_dropped(&self, why: &str) {
        self.interruption_messages_dropped
            .get_or_create(&Kind {
                kind: why.to_string(),
            })
            .inc();
    }

    /// Counts a watch's trouble, by the kind watched and why.
    pub fn watch_trouble(&self, kind: &str, why: &str) {
        self.watch_troubles
            .get_or_create(&WatchTrouble {
                kind: kind.to_string(),
                why: why.to_string(),
            })
            .inc();
    }

    /// Counts a command that could not be carried out.
    pub fn command_failed(&self, command: &str, retryable: bool) {
        self.command_failures
            .get_or_create(&CommandFailure {
                command: command.to_string(),
                retryable: retryable.to_string(),
            })
            .inc();
    }

    /// Sets how stale each watch is.
    pub fn set_watch_staleness(&self, staleness: &[(String, Duration)]) {
        for (kind, stale) in staleness {
            self.watch_staleness
                .get_or_create(&Kind { kind: kind.clone() })
                .set(stale.as_secs_f64());
        }
    }

    /// Sets how many commands the executor has not done.
    pub fn set_executor_backlog(&self, commands: usize) {
        self.executor_backlog.set(commands as i64);
    }

    /// Counts a renewal of the lease that failed.
    pub fn lease_renewal_failed(&self) {
        self.lease_renewals_failed.inc();
    }

    /// Counts a side effect refused by the term's fence.
    pub fn fenced(&self) {
        self.fenced_side_effects.inc();
    }

    /// Counts a shipment that failed.
    pub fn log_segment_failed(&self) {
        self.log_segments_failed.inc();
    }

    /// The text exposition format (`/metrics`).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Invariant: writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    pub fn observe_append(&self, took: Duration) {
        self.log_append_duration.observe(took.as_secs_f64());
    }
}

/// Karpenter's lowercase name of a termination reason.
fn reason_label(reason: TerminationReason) -> &'static str {
    match reason {
        TerminationReason::Empty => "empty",
        TerminationReason::Expired => "expired",
        TerminationReason::LaunchTimeout => "launch_timeout",
        TerminationReason::RegistrationTimeout => "registration_timeout",
        TerminationReason::LaunchFailed => "launch_failed",
        TerminationReason::Underutilized => "underutilized",
        TerminationReason::NodeDeleted => "node_deleted",
        TerminationReason::Drifted => "drifted",
        TerminationReason::Interrupted => "interrupted",
        TerminationReason::InstanceGone => "instance_gone",
        TerminationReason::Deleted => "deleted",
        TerminationReason::NodePoolDeleted => "nodepool_deleted",
        TerminationReason::ScaledDown => "scaled_down",
    }
}

fn is_disruption(reason: TerminationReason) -> bool {
    matches!(
        reason,
        TerminationReason::Empty
            | TerminationReason::Underutilized
            | TerminationReason::Drifted
            | TerminationReason::Expired
            | TerminationReason::Interrupted
            | TerminationReason::Deleted
            | TerminationReason::NodePoolDeleted
            | TerminationReason::ScaledDown
    )
}

fn is_voluntary(reason: TerminationReason) -> bool {
    matches!(
        reason,
        TerminationReason::Empty | TerminationReason::Underutilized | TerminationReason::Drifted
    )
}

/// Karpenter's `message_type` of an interruption.
fn message_type(kind: &nodewright_core::interruption::Interruption) -> &'static str {
    use nodewright_core::interruption::Interruption;
    match kind {
        Interruption::SpotInterruption { .. } => "spot_interrupted",
        Interruption::RebalanceRecommendation => "rebalance_recommendation",
        Interruption::ScheduledChange { .. } => "scheduled_change",
        Interruption::StateChange { .. } => "instance_state_change",
    }
}

/// Resources as Prometheus reads them: cpu in cores, memory in bytes.
fn resource_values(r: &Resources) -> Vec<(String, f64)> {
    let mut out = vec![
        ("cpu".to_string(), r.cpu_milli as f64 / 1000.0),
        ("memory".to_string(), r.memory_bytes as f64),
        ("pods".to_string(), r.pods as f64),
    ];
    out.extend(r.extended.iter().map(|(k, v)| (k.to_string(), *v as f64)));
    out
}

/// What the core knew of an event's pod or node before the step.
#[derive(Debug, Clone, Default)]
enum Before {
    #[default]
    Nothing,
    /// Whether the pod was bound.
    Pod { bound: bool },
    /// The node's NodePool, if the node belonged to a NodeClaim.
    Node { of_nodeclaim: Option<String> },
}

/// The command dispatch with the metrics listening: every step is counted and timed.
pub struct Measured<E> {
    inner: E,
    metrics: std::sync::Arc<Metrics>,
    store: PathBuf,
    started: Option<Instant>,
    refreshed: Option<Instant>,
    /// NodeClaims cordoned for a replacement (their termination is a `replace` decision).
    replacing: BTreeSet<String>,
    /// What the core knew, before the step, of the pod or node its event is about.
    before: Before,
    /// Where each refresh publishes the pools' nodes (for the NodePool status).
    pools: Option<tokio::sync::watch::Sender<PoolUsage>>,
}

impl<E> Measured<E> {
    pub fn new(inner: E, metrics: std::sync::Arc<Metrics>, store: PathBuf) -> Self {
        Measured {
            inner,
            metrics,
            store,
            started: None,
            refreshed: None,
            replacing: BTreeSet::new(),
            before: Before::Nothing,
            pools: None,
        }
    }

    /// Publishes the pools' nodes at every refresh of the gauges.
    pub fn publishing_pools(mut self, pools: tokio::sync::watch::Sender<PoolUsage>) -> Self {
        self.pools = Some(pools);
        self
    }

    fn record_commands(&mut self, core: &Core, commands: &[Command]) {
        let m = &*self.metrics;
        let launches = commands
            .iter()
            .any(|c| matches!(c, Command::LaunchNodeClaim { .. }));
        let cordons = commands
            .iter()
            .any(|c| matches!(c, Command::CordonNode { .. }));
        for command in commands {
            m.commands
                .get_or_create(&Kind {
                    kind: command.name().to_string(),
                })
                .inc();
            match command {
                Command::LaunchNodeClaim { nodeclaim, .. } => {
                    let reason = if cordons {
                        "disruption"
                    } else {
                        "provisioning"
                    };
                    m.nodeclaims_created
                        .get_or_create(&PoolReason {
                            nodepool: nodeclaim.nodepool.clone(),
                            reason: reason.into(),
                        })
                        .inc();
                }
                Command::CordonNode { nodeclaim, .. } if launches => {
                    self.replacing.insert(nodeclaim.clone());
                }
                Command::UncordonNode { nodeclaim, .. } => {
                    self.replacing.remove(nodeclaim);
                }
                Command::TerminateNodeClaim {
                    nodeclaim, reason, ..
                } => {
                    let nodepool = core
                        .state()
                        .nodeclaims
                        .get(nodeclaim)
                        .map(|c| c.spec.nodepool.clone())
                        .unwrap_or_default();
                    let labels = PoolReason {
                        nodepool,
                        reason: reason_label(*reason).into(),
                    };
                    m.nodeclaims_terminated.get_or_create(&labels).inc();
                    if is_disruption(*reason) {
                        m.nodeclaims_disrupted.get_or_create(&labels).inc();
                    }
                    let replaced = self.replacing.remove(nodeclaim);
                    if is_voluntary(*reason) {
                        let decision = if replaced { "replace" } else { "delete" };
                        m.disruption_decisions
                            .get_or_create(&Decision {
                                decision: decision.into(),
                                reason: labels.reason.clone(),
                            })
                            .inc();
                    }
                }
                _ => {}
            }
        }
    }

    fn record_event(&mut self, core: &Core, event: &Event) {
        let m = &*self.metrics;
        m.events
            .get_or_create(&Kind {
                kind: event.kind.name().to_string(),
            })
            .inc();
        match &event.kind {
            EventKind::InterruptionReceived { interruption, .. } => {
                m.interruptions
                    .get_or_create(&MessageType {
                        message_type: message_type(interruption).into(),
                    })
                    .inc();
            }
            // A node that now belongs to a NodeClaim and did not before: created.
            EventKind::NodeApplied(node) => {
                let linked = core
                    .state()
                    .nodes
                    .get(&node.name)
                    .is_some_and(|n| n.nodeclaim.is_some());
                if linked && matches!(self.before, Before::Node { of_nodeclaim: None }) {
                    let nodepool = node.labels.get(NODEPOOL_LABEL).cloned().unwrap_or_default();
                    m.nodes_created.get_or_create(&Pool { nodepool }).inc();
                }
            }
            EventKind::NodeDeleted { .. } => {
                if let Before::Node {
                    of_nodeclaim: Some(nodepool),
                } = &self.before
                {
                    m.nodes_terminated
                        .get_or_create(&Pool {
                            nodepool: nodepool.clone(),
                        })
                        .inc();
                }
            }
            EventKind::PodApplied(pod)
                if matches!(self.before, Before::Pod { bound: false })
                    && pod.node_name.is_some() =>
            {
                let waited = event.at_ms.saturating_sub(pod.created_at_ms);
                m.pods_startup.observe(waited as f64 / 1000.0);
            }
            EventKind::PodBound { pod, .. }
                if matches!(self.before, Before::Pod { bound: false }) =>
            {
                if let Some(pod) = core.state().pods.get(pod) {
                    let waited = event.at_ms.saturating_sub(pod.created_at_ms);
                    m.pods_startup.observe(waited as f64 / 1000.0);
                }
            }
            _ => {}
        }
    }

    /// The gauges that describe the cluster, rebuilt from the core's state.
    fn refresh_gauges(&mut self, core: &Core) {
        let m = &*self.metrics;
        let state = core.state();
        m.node_count.set(state.nodes.len() as i64);
        m.queue_depth.set(state.pending_pods().count() as i64);

        m.nodes_allocatable.clear();
        m.nodes_total_pod_requests.clear();
        let mut usage: PoolUsage = BTreeMap::new();
        for (name, node) in &state.nodes {
            let nodepool = node
                .node
                .labels
                .get(NODEPOOL_LABEL)
                .cloned()
                .unwrap_or_default();
            let requests = state.requests_on_node(name);
            for (resource_type, value) in resource_values(&node.node.allocatable) {
                let labels = NodeResource {
                    node_name: name.clone(),
                    nodepool: nodepool.clone(),
                    resource_type,
                };
                m.nodes_allocatable.get_or_create(&labels).set(value);
            }
            for (resource_type, value) in resource_values(&requests) {
                let labels = NodeResource {
                    node_name: name.clone(),
                    nodepool: nodepool.clone(),
                    resource_type,
                };
                m.nodes_total_pod_requests.get_or_create(&labels).set(value);
            }
            if node.nodeclaim.is_some() {
                let pool = usage.entry(nodepool).or_default();
                pool.nodes += 1;
                pool.resources.add(&node.node.allocatable);
            }
        }

        m.nodepools_usage.clear();
        m.nodepools_limit.clear();
        for (name, pool) in &state.nodepools {
            let used = usage.get(name).cloned().unwrap_or_default();
            for (resource_type, value) in resource_values(&used.resources) {
                m.nodepools_usage
                    .get_or_create(&PoolResource {
                        nodepool: name.clone(),
                        resource_type,
                    })
                    .set(value);
            }
            for (resource_type, limit) in &pool.limits {
                let value = if resource_type == "cpu" {
                    *limit as f64 / 1000.0
                } else {
                    *limit as f64
                };
                m.nodepools_limit
                    .get_or_create(&PoolResource {
                        nodepool: name.clone(),
                        resource_type: resource_type.clone(),
                    })
                    .set(value);
            }
        }

        m.pods_state.clear();
        for (key, pod) in &state.pods {
            let node = pod.node_name.clone().unwrap_or_default();
            let nodepool = state
                .nodes
                .get(&node)
                .and_then(|n| n.node.labels.get(NODEPOOL_LABEL).cloned())
                .unwrap_or_default();
            let phase = if pod.node_name.is_some() {
                "Bound"
            } else {
                "Pending"
            };
            m.pods_state
                .get_or_create(&PodState {
                    name: key.name.clone(),
                    namespace: key.namespace.clone(),
                    node,
                    nodepool,
                    phase: phase.into(),
                })
                .set(1);
        }

        if let Some(pools) = &self.pools {
            pools.send_if_modified(|published| {
                let changed = *published != usage;
                if changed {
                    *published = usage;
                }
                changed
            });
        }

        if let Ok(meta) = std::fs::metadata(&self.store) {
            m.log_bytes.set(meta.len() as i64);
        }
    }
}

impl<E: CommandExecutor> CommandExecutor for Measured<E> {
    fn execute(&mut self, command: &Command) {
        self.inner.execute(command);
    }

    fn stepping(&mut self, core: &Core, event: &Event) {
        let state = core.state();
        let pod_bound = |key| Before::Pod {
            bound: state.pods.get(key).is_some_and(|p| p.node_name.is_some()),
        };
        let node_pool = |name: &str| Before::Node {
            of_nodeclaim: state
                .nodes
                .get(name)
                .filter(|n| n.nodeclaim.is_some())
                .map(|n| {
                    n.node
                        .labels
                        .get(NODEPOOL_LABEL)
                        .cloned()
                        .unwrap_or_default()
                }),
        };
        self.before = match &event.kind {
            EventKind::PodApplied(pod) => pod_bound(&pod.key),
            EventKind::PodBound { pod, .. } => pod_bound(pod),
            EventKind::NodeApplied(node) => node_pool(&node.name),
            EventKind::NodeDeleted { name } => node_pool(name),
            _ => Before::Nothing,
        };
        self.started = Some(Instant::now());
        self.inner.stepping(core, event);
    }

    fn stepped(&mut self, core: &Core, event: &Event, commands: &[Command]) {
        self.inner.stepped(core, event, commands);
        if let Some(started) = self.started.take() {
            let took = started.elapsed().as_secs_f64();
            self.metrics.decision_duration.observe(took);
            let scheduled = commands.iter().any(|c| {
                matches!(
                    c,
                    Command::LaunchNodeClaim { .. }
                        | Command::NominatePod { .. }
                        | Command::ReportUnschedulable { .. }
                )
            });
            if scheduled {
                self.metrics.scheduling_duration.observe(took);
            }
        }
        self.record_event(core, event);
        self.record_commands(core, commands);
        if self
            .refreshed
            .is_none_or(|at| at.elapsed() >= GAUGE_REFRESH)
        {
            self.refreshed = Some(Instant::now());
            self.refresh_gauges(core);
        }
    }
}

/// The event store with its appends timed and counted.
pub struct Timed<S> {
    inner: S,
    metrics: std::sync::Arc<Metrics>,
    /// Told whether each append succeeded (`/readyz`).
    probes: Option<crate::serve::Probes>,
}

impl<S> Timed<S> {
    pub fn new(inner: S, metrics: std::sync::Arc<Metrics>) -> Self {
        Timed {
            inner,
            metrics,
            probes: None,
        }
    }

    /// Tells `probes` whether each append succeeded.
    pub fn telling(mut self, probes: crate::serve::Probes) -> Self {
        self.probes = Some(probes);
        self
    }
}

impl<H, R, S: EventStore<H, R>> EventStore<H, R> for Timed<S> {
    fn header(&self) -> &H {
        self.inner.header()
    }

    fn append(&mut self, records: &[R]) -> Result<(), LogError> {
        let started = Instant::now();
        let result = self.inner.append(records);
        if let Some(probes) = &self.probes {
            probes.store_appends(result.is_ok());
        }
        self.metrics.observe_append(started.elapsed());
        self.metrics.log_records.set(self.inner.len() as i64);
        result
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_range(&self, from: u64, to: u64) -> Result<Vec<R>, LogError> {
        self.inner.read_range(from, to)
    }
}
