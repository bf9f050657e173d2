//! The simulated world and its run loop. The world plays EC2 and Kubernetes; the real driver
//! (log → core → dispatch) sits in the middle, exactly as in the controller.

use std::collections::BTreeMap;

use nodewright_adapters::driver::{CommandExecutor, DEFAULT_SNAPSHOT_EVERY, Driver, DriverError};
use nodewright_adapters::eventlog::{DecisionDigest, EventStore, LogHeader, LogRecord};
use nodewright_adapters::manifest::Manifest;
use nodewright_adapters::relist::{Listing, pod_gap, relist_events};
use nodewright_core::catalog::{self, CapacityType, Catalog};
use nodewright_core::interruption::{Interruption, LEAVING_STATES, SPOT_INTERRUPTION_NOTICE_MS};
use nodewright_core::model::labels;
use nodewright_core::model::node::Node;
use nodewright_core::model::nodeclaim::{
    ListedInstance, NodeClaimSpec, OfferingKey, TerminationReason,
};
use nodewright_core::model::nodeclass::NodeClass;
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::pod::PodKey;
use nodewright_core::{Command, Event, EventKind};

use super::cloud::SimCloud;
use super::cluster::{PodChange, SimCluster};
use super::rng::SimRng;
use crate::invariants;
use crate::report::*;
use crate::scenario::{Action, DeleteKind, InterruptKind, InterruptTarget, Scenario, Storm};

mod executor;
mod interruptions;
mod listing;
mod machines;
mod metering;
mod report;
mod run;
mod timeline;

pub(crate) use report::build_report;
pub use run::{
    Crash, PlantedBug, RunError, RunOptions, logged_records, run, run_with, run_with_crash,
};

/// How long CreateFleet takes to answer.
const FLEET_API_LATENCY_MS: u64 = 1_000;
/// From TerminateInstances to the instance being gone (and billing stopping).
const TERMINATION_LATENCY_MS: u64 = 10_000;

#[derive(Debug, Clone)]
enum WorldEvent {
    Timeline(usize),
    FleetCall {
        nodeclaim: String,
    },
    NodeJoin {
        instance_id: String,
    },
    TerminationDone {
        nodeclaim: String,
    },
    /// A terminating pod's grace period is over: it exits.
    PodExit {
        pod: PodKey,
    },
    /// A Job's pod has run its run time: it succeeds.
    PodCompleted {
        pod: PodKey,
    },
    /// A CronJob's schedule fires.
    CronFire {
        cronjob: (String, String),
    },
    /// The cloud takes an instance away (the end of a spot interruption notice, a stop).
    InstanceReclaimed {
        instance_id: String,
    },
    /// One message of an interruption storm.
    Interrupt {
        kind: InterruptKind,
        nodeclaim: String,
    },
    /// The garbage collector lists the cloud's instances (every GC period).
    ListInstances,
}

/// Attempts of a throttled cloud call before the adapter gives up, and the first backoff
/// (doubled on each attempt), as the AWS SDK's standard retry mode does.
const API_ATTEMPTS: u32 = 5;
const API_BACKOFF_MS: u64 = 1_000;

/// How often the controller lists the cloud's instances to collect garbage (Karpenter's 2 min).
const GC_PERIOD_MS: u64 = 120_000;
/// How long EC2 keeps listing a terminated instance.
const TERMINATED_LISTED_MS: u64 = 3_600_000;

/// A machine nodewright asked for, from decision to termination.
#[derive(Debug, Clone)]
struct Machine {
    spec: NodeClaimSpec,
    launch_reason: String,
    instance_id: Option<String>,
    node: Option<String>,
    launched_at_ms: Option<u64>,
    terminated_at_ms: Option<u64>,
    termination: Option<(TerminationReason, String)>,
    cancelled: bool,
    /// CreateFleet calls throttled so far.
    api_attempts: u32,
    /// The pods it was launched for.
    for_pods: Vec<PodKey>,
    /// The price of its cheapest launch option (micro-USD per hour).
    cheapest_price: u64,
    /// Its node's allocatable, once it joined.
    allocatable: Option<nodewright_core::model::resources::Resources>,
    /// The last result told of its launch or termination: told again when the command is asked
    /// again (its first telling may have been lost with the process that asked).
    answer: Option<EventKind>,
}

#[derive(Debug, Clone, Default)]
struct PodRecord {
    created_at_ms: u64,
    bound_at_ms: Option<u64>,
    node: Option<String>,
    deleted_at_ms: Option<u64>,
    evictions: u64,
    /// A workload pod's shape in `World::pod_shapes` (none for a DaemonSet pod).
    shape: Option<usize>,
    /// Owned by a Job: evicted before its end, it is made again and its work done again.
    job: bool,
}

/// The world: simulated EC2, simulated cluster, and what the report needs.
pub struct World {
    now_ms: u64,
    capacity_settings: nodewright_core::catalog::CapacitySettings,
    rng: SimRng,
    catalog: std::sync::Arc<Catalog>,
    cloud: SimCloud,
    cluster: SimCluster,
    nodeclasses: BTreeMap<String, NodeClass>,
    nodepools: BTreeMap<String, NodePool>,
    /// Every NodePool and EC2NodeClass version applied, and the shape of every workload pod as
    /// created, for the lower bound.
    seen_nodepools: Vec<NodePool>,
    seen_nodeclasses: Vec<NodeClass>,
    pod_shapes: crate::lower_bound::PodShapes,
    /// Allocatable of the nodes that existed before nodewright.
    existing: nodewright_core::model::resources::Resources,
    queue: BTreeMap<(u64, u64), WorldEvent>,
    seq: u64,
    outbox: Vec<Event>,
    changes: Vec<PodChange>,
    machines: BTreeMap<String, Machine>,
    pods: BTreeMap<PodKey, PodRecord>,
    unschedulable: BTreeMap<PodKey, String>,
    /// Pods deleted while the core called them unschedulable (never scheduled), with why.
    deleted_unschedulable: BTreeMap<PodKey, String>,
    missing_requests: u64,
    refused_evictions: u64,
    /// Interruption messages sent so far (their ids count them).
    interruptions: u64,
    disruptions: DisruptionsReport,
    /// Commands of the current step, for the invariant checks.
    step_commands: Vec<Command>,
    /// What the world itself saw break.
    violations: Vec<Violation>,
    /// Replacements, to catch a machine replaced again for the reason it replaced another.
    replace_loops: invariants::ReplaceLoops,
    /// A bug planted in what the core asks, for testing the invariant checks.
    planted: Option<PlantedBug>,
    /// Offerings that failed for lack of capacity or were reclaimed, and when (for
    /// [`PlantedBug`]).
    capacity_failures: Vec<(OfferingKey, u64)>,
    peak_nodes: u64,
    peak_price: u64,
    cost_micro_usd_ms: u128,
    /// The same cost, split by what each machine was doing.
    cost_meter: super::meter::CostMeter,
    cpu_used_ms: i128,
    cpu_alloc_ms: i128,
    mem_used_ms: i128,
    mem_alloc_ms: i128,
    /// CPU used, CPU allocatable, memory used, memory allocatable, each × ms, per step of the
    /// report's series.
    usage_series: Vec<[i128; 4]>,
    series_step_ms: u64,
    /// What the clock's moving is metered by, while nothing it reads changes.
    meter_rates: Option<metering::MeterRates>,
    /// The running machines by instance id, as the meter reads them.
    meter_links: BTreeMap<String, metering::MeterLink>,
    /// The last periodic listing of the cloud's instances.
    instance_listing: Option<listing::KeptListing>,
}

impl World {
    fn new(scenario: &Scenario) -> Self {
        World {
            now_ms: 0,
            capacity_settings: scenario.config.capacity_settings(),
            rng: SimRng::new(scenario.seed),
            catalog: scenario.catalog.clone(),
            cloud: SimCloud::new(
                scenario.cloud.clone(),
                format!("{}/{}", scenario.name, scenario.seed),
            ),
            cluster: SimCluster::default(),
            nodeclasses: BTreeMap::new(),
            nodepools: BTreeMap::new(),
            seen_nodepools: Vec::new(),
            seen_nodeclasses: Vec::new(),
            pod_shapes: crate::lower_bound::PodShapes::default(),
            existing: Default::default(),
            queue: BTreeMap::new(),
            seq: 0,
            outbox: Vec::new(),
            changes: Vec::new(),
            machines: BTreeMap::new(),
            pods: BTreeMap::new(),
            unschedulable: BTreeMap::new(),
            deleted_unschedulable: BTreeMap::new(),
            missing_requests: 0,
            refused_evictions: 0,
            interruptions: 0,
            disruptions: DisruptionsReport::default(),
            step_commands: Vec::new(),
            violations: Vec::new(),
            replace_loops: invariants::ReplaceLoops::default(),
            planted: None,
            capacity_failures: Vec::new(),
            peak_nodes: 0,
            peak_price: 0,
            cost_micro_usd_ms: 0,
            cost_meter: Default::default(),
            meter_rates: None,
            meter_links: BTreeMap::new(),
            instance_listing: None,
            cpu_used_ms: 0,
            cpu_alloc_ms: 0,
            mem_used_ms: 0,
            mem_alloc_ms: 0,
            usage_series: vec![
                [0; 4];
                scenario
                    .duration_ms
                    .div_ceil(Series::step_ms(scenario.duration_ms))
                    as usize
            ],
            series_step_ms: Series::step_ms(scenario.duration_ms),
        }
    }

    /// The world at t = 0: the catalog, the capacity that already exists, then the manifests;
    /// the timeline and the garbage collector's listings scheduled. What it emitted waits in
    /// the outbox.
    pub(crate) fn start(scenario: &Scenario, planted: Option<PlantedBug>) -> Self {
        let mut world = World::new(scenario);
        world.planted = planted;
        world.begin(scenario);
        world
    }

    fn begin(&mut self, scenario: &Scenario) {
        // t = 0: the catalog, the capacity that already exists, then the manifests.
        self.emit(EventKind::CatalogUpdated(scenario.catalog.clone()));
        for group in &scenario.existing_nodes {
            for _ in 0..group.count {
                if let Some(mut node) = self.node_for(
                    &group.instance_type,
                    &group.zone,
                    CapacityType::OnDemand,
                    None,
                ) {
                    node.labels
                        .insert("eks.amazonaws.com/nodegroup".into(), group.name.clone());
                    node.labels.extend(group.labels.clone());
                    self.existing.add(&node.allocatable);
                    node.provider_id = Some(format!(
                        "aws:///{}/i-{:017x}",
                        group.zone,
                        self.rng.next_u64() >> 4
                    ));
                    self.cluster.add_node(node, None, 0, &mut self.outbox);
                }
            }
        }
        self.apply(&scenario.manifests);
        for (i, t) in scenario.timeline.iter().enumerate() {
            self.schedule(t.at_ms, WorldEvent::Timeline(i));
        }
        self.schedule(GC_PERIOD_MS, WorldEvent::ListInstances);
    }

    fn schedule(&mut self, at_ms: u64, event: WorldEvent) {
        self.seq += 1;
        self.queue.insert((at_ms, self.seq), event);
    }

    fn emit(&mut self, kind: EventKind) {
        self.outbox.push(Event::new(self.now_ms, kind));
    }

    /// Applies manifests as `kubectl apply` would.
    fn apply(&mut self, manifests: &[Manifest]) {
        for m in manifests {
            let now = self.now_ms;
            match m {
                Manifest::NodeClass(nc) => {
                    self.seen_nodeclasses.push(nc.clone());
                    self.nodeclasses.insert(nc.name.clone(), nc.clone());
                    self.emit(EventKind::NodeClassApplied(Box::new(nc.clone())));
                }
                Manifest::NodePool(np) => {
                    self.seen_nodepools.push(np.clone());
                    self.nodepools.insert(np.name.clone(), np.clone());
                    self.emit(EventKind::NodePoolApplied(Box::new(np.clone())))
                }
                Manifest::Deployment(d) => self.cluster.apply_deployment(
                    d.clone(),
                    now,
                    &mut self.rng,
                    &mut self.outbox,
                    &mut self.changes,
                ),
                Manifest::Job(job) => self.cluster.apply_job(
                    job.clone(),
                    now,
                    &mut self.rng,
                    &mut self.outbox,
                    &mut self.changes,
                ),
                Manifest::CronJob(cronjob) => {
                    let key = (cronjob.namespace.clone(), cronjob.name.clone());
                    if let Some(at) = self.cluster.apply_cronjob(cronjob.clone(), now) {
                        self.schedule(at, WorldEvent::CronFire { cronjob: key });
                    }
                }
                Manifest::DaemonSet(ds) => self.cluster.apply_daemonset(
                    ds.clone(),
                    now,
                    &mut self.outbox,
                    &mut self.changes,
                ),
                Manifest::Pod(p) => self.cluster.create_pod_with_claims(
                    p.pod.clone(),
                    p.volume_claims.clone(),
                    now,
                    &mut self.outbox,
                    &mut self.changes,
                ),
                Manifest::PersistentVolumeClaim(c) => self.cluster.apply_claim(c.clone()),
                Manifest::PersistentVolume(v) => {
                    self.cluster
                        .storage
                        .volumes
                        .insert(v.name.clone(), v.clone());
                }
                Manifest::StorageClass(c) => {
                    self.cluster
                        .storage
                        .classes
                        .insert(c.name.clone(), c.clone());
                }
                Manifest::PodDisruptionBudget(pdb) => {
                    self.emit(EventKind::PodDisruptionBudgetApplied(Box::new(pdb.clone())));
                    self.cluster
                        .pdbs
                        .insert((pdb.namespace.clone(), pdb.name.clone()), pdb.clone());
                }
            }
        }
    }

    fn node_for(
        &mut self,
        instance_type: &str,
        zone: &str,
        capacity_type: CapacityType,
        nodeclass: Option<&str>,
    ) -> Option<Node> {
        let it = self.catalog.get(instance_type)?;
        let class = nodeclass.and_then(|n| self.nodeclasses.get(n));
        let resources = catalog::capacity_of_class(it, class, &self.capacity_settings);
        let name = format!(
            "ip-192-168-{}-{}.ec2.internal",
            self.rng.between(0, 255),
            self.rng.between(1, 254)
        );
        let mut node_labels = it.labels.clone();
        node_labels.insert(labels::ZONE.into(), zone.into());
        node_labels.insert(labels::REGION.into(), self.catalog.region.clone());
        node_labels.insert(labels::CAPACITY_TYPE.into(), capacity_type.as_str().into());
        node_labels.insert(labels::HOSTNAME.into(), name.clone());
        Some(Node {
            name,
            provider_id: None,
            labels: node_labels,
            annotations: BTreeMap::new(),
            taints: Vec::new(),
            allocatable: resources.allocatable,
            ready: true,
            unschedulable: false,
        })
    }

    fn run_world_event(&mut self, event: WorldEvent, scenario: &Scenario) {
        let now = self.now_ms;
        // A listing changes nothing; anything else may change a machine, a node or a pod.
        if !matches!(event, WorldEvent::ListInstances) {
            self.forget_meter_rates();
        }
        match event {
            WorldEvent::Timeline(i) => self.run_action(&scenario.timeline[i].action),
            WorldEvent::ListInstances => {
                let instances = self.periodic_listing();
                self.emit(EventKind::InstancesListed { instances });
                self.schedule(now + GC_PERIOD_MS, WorldEvent::ListInstances);
            }
            WorldEvent::Interrupt { kind, nodeclaim } => {
                self.interrupt(&kind, &InterruptTarget::NodeClaim(nodeclaim));
            }
            WorldEvent::InstanceReclaimed { instance_id } => self.end_instance(&instance_id),
            WorldEvent::FleetCall { nodeclaim } => self.fleet_call(nodeclaim, scenario),
            WorldEvent::NodeJoin { instance_id } => self.node_join(&instance_id),
            WorldEvent::TerminationDone { nodeclaim } if self.api_call_fails(scenario) => {
                // TerminateInstances throttled: retried after the backoff.
                self.schedule(
                    now + API_BACKOFF_MS,
                    WorldEvent::TerminationDone { nodeclaim },
                );
            }
            WorldEvent::TerminationDone { nodeclaim } => self.termination_done(nodeclaim),
            WorldEvent::PodExit { pod } => {
                self.cluster.pod_exited(
                    &pod,
                    now,
                    &mut self.rng,
                    &mut self.outbox,
                    &mut self.changes,
                );
            }
            WorldEvent::PodCompleted { pod } => {
                self.cluster.pod_completed(
                    &pod,
                    now,
                    &mut self.rng,
                    &mut self.outbox,
                    &mut self.changes,
                );
            }
            WorldEvent::CronFire { cronjob } => {
                if let Some(at) = self.cluster.fire_cronjob(
                    &cronjob,
                    now,
                    &mut self.rng,
                    &mut self.outbox,
                    &mut self.changes,
                ) {
                    self.schedule(at, WorldEvent::CronFire { cronjob });
                }
            }
        }
        let changes = self.changes.len();
        self.cluster
            .bind_pending(now, &mut self.outbox, &mut self.changes);
        if self.changes.len() != changes {
            // Pods were bound: their nodes' use changed.
            self.forget_meter_rates();
        }
        self.schedule_pod_exits();
    }

    /// Tells the core the result of a machine's launch or termination, and keeps it.
    fn answer(&mut self, kind: EventKind) {
        let name = match &kind {
            EventKind::LaunchSucceeded { nodeclaim, .. }
            | EventKind::LaunchFailed { nodeclaim, .. }
            | EventKind::NodeClaimTerminated { nodeclaim } => nodeclaim.clone(),
            _ => String::new(),
        };
        if let Some(m) = self.machines.get_mut(&name) {
            m.answer = Some(kind.clone());
        }
        self.emit(kind);
    }

    /// A command asked again after a restart: a result already given is given again.
    fn answer_again(&mut self, nodeclaim: &str, launch: bool) {
        let Some(answer) = self.machines.get(nodeclaim).and_then(|m| m.answer.clone()) else {
            // Still under way: its result comes.
            return;
        };
        let launch_answer = matches!(
            answer,
            EventKind::LaunchSucceeded { .. } | EventKind::LaunchFailed { .. }
        );
        if launch_answer == launch {
            self.emit(answer);
        }
    }

    /// The instance stops at once: whatever ran on its node dies with it.
    fn end_instance(&mut self, instance_id: &str) {
        let now = self.now_ms;
        self.end_in_cloud(instance_id);
        let node = self
            .machines
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance_id))
            .and_then(|m| m.node.clone());
        if let Some(node) = node {
            self.cluster.remove_node(
                &node,
                now,
                &mut self.rng,
                &mut self.outbox,
                &mut self.changes,
            );
        }
    }

    /// Whether this cloud call fails (throttling, a timeout), at the scenario's rate. No draw
    /// is made when the rate is zero, so such scenarios are unchanged by the fault model.
    fn api_call_fails(&mut self, scenario: &Scenario) -> bool {
        let rate = scenario.cloud.api_error_rate;
        if rate <= 0.0 {
            return false;
        }
        let draw = (self.rng.next_u64() >> 11) as f64 / ((1u64 << 53) as f64);
        draw < rate
    }

    /// Pods that began shutting down exit at the end of their grace period; Jobs' pods that
    /// started running succeed at the end of their run time.
    fn schedule_pod_exits(&mut self) {
        for (at, pod) in std::mem::take(&mut self.cluster.exits_to_schedule) {
            self.schedule(at, WorldEvent::PodExit { pod });
        }
        for (at, pod) in std::mem::take(&mut self.cluster.jobs.completions_to_schedule) {
            self.schedule(at, WorldEvent::PodCompleted { pod });
        }
    }
}

/// What the madsim harness drives the world with.
#[cfg(madsim)]
impl World {
    /// When the world's next own event is due (a timeline entry, an API answer, a node joining).
    pub(crate) fn next_event_at(&self) -> Option<u64> {
        self.queue.keys().next().map(|(t, _)| *t)
    }

    /// Runs the world's next own event, the clock moved to it first.
    pub(crate) fn run_next(&mut self, scenario: &Scenario) {
        if let Some(((at, _), event)) = self.queue.pop_first() {
            self.advance_to(at);
            self.run_world_event(event, scenario);
        }
    }

    /// What the world emitted since the last call, in order.
    pub(crate) fn take_outbox(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.outbox)
    }

    /// The checks after one step of the driver: on its commands (as dispatched), what the world
    /// saw break while carrying out commands, and the world against the core.
    pub(crate) fn step_checks(&mut self, core: &nodewright_core::Core) -> Vec<Violation> {
        let mut found = invariants::check_step(core, &self.step_commands, self.now_ms);
        found.extend(self.replace_loops.check(core, self.now_ms));
        self.step_commands.clear();
        found.append(&mut self.violations);
        found.extend(invariants::check_world(
            core,
            self.cloud.running(),
            self.now_ms,
        ));
        found
    }
}
