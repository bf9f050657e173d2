//! A recorded log as a scenario of the simulated world: what the world did on its own is kept,
//! what followed from nodewright's decisions is left for the simulation to redo.
//!
//! Kept (the world's inputs):
//! - the catalog, the EC2NodeClasses, NodePools, DaemonSets and PodDisruptionBudgets as they were
//!   applied, when they were applied (a NodePool or EC2NodeClass of the policy replaces the
//!   recorded one throughout);
//! - the workload: each owner's pods (a ReplicaSet, a StatefulSet) become one Deployment
//!   whose replica count follows the recording — up when the owner made a pod that was not the
//!   replacement of an evicted one, down when a pod was deleted that nodewright did not evict;
//!   a Job's pods become that Job again, made when its first pod was: as many completions as
//!   its pods ran to their end (one more if one was still running at the end), as many at once
//!   as ran at once, each running as long as the longest that ended (from its binding to its
//!   deletion; with none ended, as long as the last one ran until the end) — so a pod the
//!   what-if evicts is made again and runs it all again, as in the recorded world;
//!   pods without an owner are created and deleted as recorded (unless nodewright evicted them);
//! - the nodes nodewright did not launch, as pre-existing capacity;
//! - how long a machine took from its launch (CreateFleet's answer) to its node registering: the
//!   fastest and slowest observed (as the simulated cloud's launch latency; its registration
//!   latency is 0);
//! - capacity failures: every offering a launch found without capacity is unavailable for three
//!   minutes from then;
//! - interruption messages, once each, at the first running machine of the same capacity type.
//!
//! Redone by the simulation: launches and their results, registrations, bindings, evictions and
//! the pods that replace evicted ones, terminations.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use nodewright_adapters::manifest::{Deployment, Job, Manifest, PodTemplate, ReplicatedKind};
use nodewright_core::catalog::{CapacityType, Catalog};
use nodewright_core::interruption::Interruption;
use nodewright_core::model::labels;
use nodewright_core::model::node::Node;
use nodewright_core::model::pod::{Pod, PodKey};
use nodewright_core::state::UNAVAILABLE_OFFERING_TTL_MS;
use nodewright_core::{Command, EventKind};

use super::WhatIfError;
use super::policy::Policy;
use super::recording::Recording;
use crate::scenario::{
    Action, CloudSpec, DeleteKind, ExistingNodeGroup, IceWindow, InterruptKind, InterruptTarget,
    Latency, Scenario, TimelineAction,
};

/// Used when the recording registered no machine to observe: Karpenter's usual 45 to 90 s.
const DEFAULT_JOIN: Latency = Latency {
    min_ms: 45_000,
    max_ms: 90_000,
};
const NO_LATENCY: Latency = Latency {
    min_ms: 0,
    max_ms: 0,
};
/// A pod's grace period when the recording does not say (Kubernetes' default).
const DEFAULT_GRACE_SECONDS: i64 = 30;

/// The instance id at the end of a node's provider id (`aws:///zone/i-...`).
fn instance_of(node: &Node) -> Option<&str> {
    node.provider_id.as_deref()?.rsplit('/').next()
}

/// The recording as a scenario, under `policy` (none: as recorded).
pub fn scenario_of(recording: &Recording, policy: &Policy) -> Result<Scenario, WhatIfError> {
    if recording.pieces > 1 {
        return Err(WhatIfError::AssembledLog(recording.pieces));
    }
    if let Some(event) = recording.cut_at_event {
        return Err(WhatIfError::CutLog(event));
    }
    let catalog: Arc<Catalog> = recording
        .events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::CatalogUpdated(c) => Some(c.clone()),
            _ => None,
        })
        .ok_or(WhatIfError::NoCatalog)?;
    let mut config = recording.header.config.clone();
    policy.apply_settings(&mut config)?;
    let launched = recording.launched();

    let mut manifests: Vec<Manifest> = Vec::new();
    let mut timeline: Vec<TimelineAction> = Vec::new();

    // The NodePools and EC2NodeClasses, the policy's in place of the recorded ones.
    let mut pinned: BTreeSet<String> = BTreeSet::new();
    let mut existing_nodes: Vec<ExistingNodeGroup> = Vec::new();
    let mut seen_nodes: BTreeSet<String> = BTreeSet::new();
    let mut workload = Workload::default();
    let evicted: BTreeSet<&PodKey> = recording
        .commands
        .iter()
        .filter_map(|(_, c)| match c {
            Command::EvictPod { pod, .. } => Some(pod),
            _ => None,
        })
        .collect();
    // Evictions in the order they happened, by the event that gave them.
    let mut evictions_at: BTreeMap<usize, Vec<&PodKey>> = BTreeMap::new();
    for (at, c) in &recording.commands {
        if let Command::EvictPod { pod, .. } = c {
            evictions_at.entry(*at).or_default().push(pod);
        }
    }
    let mut join_samples: Vec<u64> = Vec::new();
    let mut ice: Vec<IceWindow> = Vec::new();
    let mut messages: BTreeSet<&str> = BTreeSet::new();

    for (index, event) in recording.events.iter().enumerate() {
        let at = event.at_ms;
        match &event.kind {
            EventKind::NodePoolApplied(pool) => {
                let ours = policy.nodepool(&pool.name).cloned().map(Manifest::NodePool);
                let recorded = || Manifest::NodePool((**pool).clone());
                let key = format!("NodePool/{}", pool.name);
                if let Some(m) = policy_or_recorded(&mut pinned, key, ours, recorded) {
                    place(&mut manifests, &mut timeline, at, m);
                }
            }
            EventKind::NodeClassApplied(class) => {
                let ours = policy
                    .nodeclass(&class.name)
                    .cloned()
                    .map(Manifest::NodeClass);
                let recorded = || Manifest::NodeClass((**class).clone());
                let key = format!("EC2NodeClass/{}", class.name);
                if let Some(m) = policy_or_recorded(&mut pinned, key, ours, recorded) {
                    place(&mut manifests, &mut timeline, at, m);
                }
            }
            EventKind::NodePoolDeleted { name } => timeline.push(TimelineAction {
                at_ms: at,
                action: Action::Delete {
                    kind: DeleteKind::NodePool,
                    namespace: String::new(),
                    name: name.clone(),
                },
            }),
            EventKind::DaemonSetApplied(ds) => place(
                &mut manifests,
                &mut timeline,
                at,
                Manifest::DaemonSet(nodewright_adapters::manifest::DaemonSet {
                    namespace: ds.namespace.clone(),
                    name: ds.name.clone(),
                    template: PodTemplate {
                        pod: ds.template.clone(),
                        termination_grace_period_seconds: DEFAULT_GRACE_SECONDS,
                        volume_claims: Vec::new(),
                    },
                }),
            ),
            EventKind::PodDisruptionBudgetApplied(pdb) => place(
                &mut manifests,
                &mut timeline,
                at,
                Manifest::PodDisruptionBudget((**pdb).clone()),
            ),
            EventKind::NodeApplied(node) => {
                let ours = instance_of(node).is_some_and(|id| launched.contains_key(id))
                    || node.labels.contains_key(labels::NODEPOOL);
                if !seen_nodes.insert(node.name.clone()) {
                    // Only a node's first appearance says when it registered, or that it was
                    // there before.
                } else if let Some((_, _, launched_at)) =
                    instance_of(node).and_then(|id| launched.get(id))
                {
                    join_samples.push(at.saturating_sub(*launched_at));
                } else if !ours {
                    let label = |key: &str| node.labels.get(key).cloned();
                    if let (Some(instance_type), Some(zone)) =
                        (label(labels::INSTANCE_TYPE), label(labels::ZONE))
                        && catalog.get(&instance_type).is_some()
                    {
                        existing_nodes.push(ExistingNodeGroup {
                            name: node.name.clone(),
                            instance_type,
                            zone,
                            count: 1,
                            labels: node.labels.clone(),
                        });
                    }
                }
            }
            EventKind::LaunchFailed { unavailable, .. } => {
                for offering in unavailable {
                    ice.push(IceWindow {
                        instance_types: vec![offering.instance_type.clone()],
                        zones: vec![offering.zone.clone()],
                        capacity_type: Some(offering.capacity_type),
                        from_ms: at,
                        until_ms: at + UNAVAILABLE_OFFERING_TTL_MS,
                    });
                }
            }
            EventKind::InterruptionReceived {
                message_id,
                instance_id,
                interruption,
            } if messages.insert(message_id) => {
                let spot = launched
                    .get(instance_id)
                    .is_some_and(|(_, ct, _)| *ct == CapacityType::Spot);
                timeline.push(TimelineAction {
                    at_ms: at,
                    action: Action::Interrupt {
                        kind: interrupt_kind(interruption),
                        target: if spot {
                            InterruptTarget::AnySpot
                        } else {
                            InterruptTarget::Any
                        },
                        storm: None,
                    },
                });
            }
            EventKind::PodApplied(pod) => workload.applied(pod, at, &mut timeline),
            EventKind::PodDeleted { pod } => {
                workload.deleted(pod, at, evicted.contains(pod), &mut timeline)
            }
            EventKind::PodBound { pod, .. } => workload.bound(pod, at),
            _ => {}
        }
        if let Some(pods) = evictions_at.get(&index) {
            for pod in pods {
                workload.evicted(pod, at);
            }
        }
    }
    manifests.extend(workload.initial_deployments());
    timeline.extend(workload.late_deployments());
    let (initial_jobs, late_jobs) = workload.jobs(recording.end_ms());
    manifests.extend(initial_jobs);
    timeline.extend(late_jobs);
    timeline.sort_by_key(|t| t.at_ms);

    let reservations = catalog.reservations.clone();
    Ok(Scenario {
        name: recording.header.source.clone(),
        description: format!(
            "the recorded world of {} ({})",
            recording.header.source, recording.header.producer
        ),
        region: catalog.region.clone(),
        seed: config.seed,
        duration_ms: recording.end_ms().max(1),
        config,
        catalog,
        cloud: CloudSpec {
            launch_latency: observed(&join_samples).unwrap_or(DEFAULT_JOIN),
            registration_latency: NO_LATENCY,
            insufficient_capacity: ice,
            api_error_rate: 0.0,
            launch_latency_spikes: Vec::new(),
            // The reservations the recorded catalog listed.
            capacity_reservations: reservations,
        },
        existing_nodes,
        manifests,
        timeline,
        expectations: Vec::new(),
        warnings: Vec::new(),
        unmodelled: Vec::new(),
    })
}

fn observed(samples: &[u64]) -> Option<Latency> {
    Some(Latency {
        min_ms: *samples.iter().min()?,
        max_ms: *samples.iter().max()?,
    })
}

fn interrupt_kind(interruption: &Interruption) -> InterruptKind {
    match interruption {
        Interruption::SpotInterruption { .. } => InterruptKind::SpotInterruption,
        Interruption::RebalanceRecommendation => InterruptKind::Rebalance,
        Interruption::ScheduledChange { event_type } => {
            InterruptKind::ScheduledChange(event_type.clone())
        }
        Interruption::StateChange { state } => InterruptKind::StateChange(state.clone()),
    }
}

/// The recorded workload, owner by owner.
#[derive(Default)]
struct Workload {
    /// Pods seen, and their owner's key (none for a bare pod).
    pods: BTreeMap<PodKey, Option<(String, String)>>,
    owners: BTreeMap<(String, String), Owner>,
    /// When each evicted pod was asked to go.
    evicted_at: BTreeMap<PodKey, u64>,
    /// When each Job's pod that has not gone yet was bound.
    bound_at: BTreeMap<PodKey, u64>,
}

struct Owner {
    template: Pod,
    first_ms: u64,
    /// Replicas wanted now, and when it changed.
    replicas: u32,
    initial: u32,
    /// (when, replicas, a scale-down): a scale-down is recorded when its pod was gone.
    scales: Vec<(u64, u32, bool)>,
    /// Evicted pods whose replacement has not appeared yet.
    awaiting_replacement: u32,
    /// The longest an evicted pod took to go: its grace period, as observed.
    grace_ms: u64,
    /// A Job: made again as a Job, not as a Deployment.
    job: bool,
    /// A Job's pods that ran to their end: how long each ran.
    runs_ms: Vec<u64>,
    /// The most pods it had at once.
    peak: u32,
    /// When its last pod was bound.
    last_bound_ms: Option<u64>,
}

impl Workload {
    fn applied(&mut self, pod: &Pod, at: u64, timeline: &mut Vec<TimelineAction>) {
        // A DaemonSet's pods come with its manifest; a static pod's mirror follows a node of
        // the recording that the what-if does not have.
        if pod.follows_its_node() {
            return;
        }
        if self.pods.contains_key(&pod.key) {
            // An update; one that carries the node is a binding.
            if pod.node_name.is_some() && !self.bound_at.contains_key(&pod.key) {
                self.bound(&pod.key, at);
            }
            return;
        }
        let owner = pod
            .owner
            .as_ref()
            .map(|o| (pod.key.namespace.clone(), o.name.clone()));
        self.pods.insert(pod.key.clone(), owner.clone());
        let Some(key) = owner else {
            let mut bare = pod.clone();
            bare.node_name = None;
            timeline.push(TimelineAction {
                at_ms: at,
                action: Action::Apply(vec![Manifest::Pod(PodTemplate::bare(bare))]),
            });
            return;
        };
        // Created bound (the scheduler found room at once).
        if pod.node_name.is_some() {
            self.bound_at.insert(pod.key.clone(), at);
        }
        let job = pod.owner.as_ref().is_some_and(|o| o.kind == "Job");
        let entry = self.owners.entry(key).or_insert_with(|| {
            // The template keeps the recorded owner: the pods made from it are its pods (a
            // ReplicaSet's or a StatefulSet's, which serve on when evicted; a Job's, which
            // start over), as the recorded ones were.
            let mut template = pod.clone();
            template.node_name = None;
            Owner {
                template,
                first_ms: at,
                replicas: 0,
                initial: 0,
                scales: Vec::new(),
                awaiting_replacement: 0,
                grace_ms: 0,
                job,
                runs_ms: Vec::new(),
                peak: 0,
                last_bound_ms: None,
            }
        });
        if pod.node_name.is_some() {
            entry.last_bound_ms = Some(at);
        }
        if entry.awaiting_replacement > 0 {
            entry.awaiting_replacement -= 1;
            return;
        }
        entry.replicas += 1;
        entry.peak = entry.peak.max(entry.replicas);
        if at == entry.first_ms {
            entry.initial = entry.replicas;
        } else {
            entry.scales.push((at, entry.replicas, false));
        }
    }

    fn deleted(
        &mut self,
        pod: &PodKey,
        at: u64,
        evicted: bool,
        timeline: &mut Vec<TimelineAction>,
    ) {
        // Gone: a pod of the same name later (a StatefulSet's ordinal made again) is a new pod.
        let Some(owner) = self.pods.remove(pod) else {
            return;
        };
        match owner {
            None if !evicted => timeline.push(TimelineAction {
                at_ms: at,
                action: Action::Delete {
                    kind: DeleteKind::Pod,
                    namespace: pod.namespace.clone(),
                    name: pod.name.clone(),
                },
            }),
            None => {}
            Some(key) if !evicted => {
                let bound = self.bound_at.remove(pod);
                if let Some(o) = self.owners.get_mut(&key) {
                    o.replicas = o.replicas.saturating_sub(1);
                    o.scales.push((at, o.replicas, true));
                    if let Some(bound) = bound.filter(|_| o.job) {
                        o.runs_ms.push(at.saturating_sub(bound));
                    }
                }
            }
            Some(key) => {
                self.bound_at.remove(pod);
                if let (Some(since), Some(o)) =
                    (self.evicted_at.remove(pod), self.owners.get_mut(&key))
                {
                    o.grace_ms = o.grace_ms.max(at.saturating_sub(since));
                }
            }
        }
    }

    fn bound(&mut self, pod: &PodKey, at: u64) {
        if let Some(Some(key)) = self.pods.get(pod)
            && let Some(o) = self.owners.get_mut(key)
            && o.job
        {
            o.last_bound_ms = Some(at);
            self.bound_at.insert(pod.clone(), at);
        }
    }

    /// The Jobs, as applied from the start and as applied later.
    fn jobs(&self, end_ms: u64) -> (Vec<Manifest>, Vec<TimelineAction>) {
        let mut initial = Vec::new();
        let mut late = Vec::new();
        for (key, o) in self.owners.iter().filter(|(_, o)| o.job) {
            let running_at_end = o.replicas > 0;
            let run_ms = match o.runs_ms.iter().max() {
                Some(longest) => *longest,
                None => end_ms.saturating_sub(o.last_bound_ms.unwrap_or(o.first_ms)),
            };
            let job = Manifest::Job(Job {
                namespace: key.0.clone(),
                name: key.1.clone(),
                completions: (o.runs_ms.len() as u32 + u32::from(running_at_end)).max(1),
                parallelism: o.peak.max(1),
                run_ms,
                template: PodTemplate {
                    pod: o.template.clone(),
                    termination_grace_period_seconds: (o.grace_ms / 1000) as i64,
                    volume_claims: Vec::new(),
                },
            });
            if o.first_ms == 0 {
                initial.push(job);
            } else {
                late.push(TimelineAction {
                    at_ms: o.first_ms,
                    action: Action::Apply(vec![job]),
                });
            }
        }
        (initial, late)
    }

    fn evicted(&mut self, pod: &PodKey, at: u64) {
        if let Some(Some(key)) = self.pods.get(pod)
            && let Some(o) = self.owners.get_mut(key)
        {
            o.awaiting_replacement += 1;
            self.evicted_at.insert(pod.clone(), at);
        }
    }

    fn deployment(key: &(String, String), owner: &Owner, replicas: u32) -> Manifest {
        let kind = match owner.template.owner.as_ref().map(|o| o.kind.as_str()) {
            Some("StatefulSet") => ReplicatedKind::StatefulSet,
            _ => ReplicatedKind::Deployment,
        };
        Manifest::Deployment(Deployment {
            kind,
            namespace: key.0.clone(),
            name: key.1.clone(),
            replicas,
            template: PodTemplate {
                pod: owner.template.clone(),
                termination_grace_period_seconds: (owner.grace_ms / 1000) as i64,
                // The recorded pods carry their volumes' requirements already.
                volume_claims: Vec::new(),
            },
            claim_templates: Vec::new(),
        })
    }

    /// The owners present from the start, as Deployments.
    fn initial_deployments(&self) -> Vec<Manifest> {
        self.owners
            .iter()
            .filter(|(_, o)| o.first_ms == 0 && !o.job)
            .map(|(key, o)| Self::deployment(key, o, o.initial))
            .collect()
    }

    /// The owners that came later, and every change of replicas.
    fn late_deployments(&self) -> Vec<TimelineAction> {
        let mut out = Vec::new();
        for (key, o) in self.owners.iter().filter(|(_, o)| !o.job) {
            if o.first_ms > 0 {
                out.push(TimelineAction {
                    at_ms: o.first_ms,
                    action: Action::Apply(vec![Self::deployment(key, o, o.initial)]),
                });
            }
            // A pod deleted by its owner went its grace period after it was asked to: the
            // scale-down is made then (never before the change before it). Several changes at
            // one moment: the last one holds.
            let mut last: BTreeMap<u64, u32> = BTreeMap::new();
            let mut previous = o.first_ms;
            for (at, replicas, down) in &o.scales {
                let at = if *down {
                    at.saturating_sub(o.grace_ms).max(previous)
                } else {
                    *at
                };
                previous = at;
                last.insert(at, *replicas);
            }
            out.extend(last.into_iter().map(|(at_ms, replicas)| TimelineAction {
                at_ms,
                action: Action::Scale {
                    namespace: key.0.clone(),
                    deployment: key.1.clone(),
                    replicas,
                },
            }));
        }
        out
    }
}

/// A manifest applied at `at_ms`: from the start when at 0, on the timeline after.
/// What a recorded NodePool or EC2NodeClass application becomes under the policy: the
/// policy's own object the first time the policy names it (`pinned` keeps it there, whatever
/// the recording applies later), or the recorded one when the policy does not name it.
fn policy_or_recorded(
    pinned: &mut BTreeSet<String>,
    key: String,
    ours: Option<Manifest>,
    recorded: impl FnOnce() -> Manifest,
) -> Option<Manifest> {
    match ours {
        Some(m) => pinned.insert(key).then_some(m),
        None => Some(recorded()),
    }
}

fn place(
    manifests: &mut Vec<Manifest>,
    timeline: &mut Vec<TimelineAction>,
    at_ms: u64,
    manifest: Manifest,
) {
    if at_ms == 0 {
        manifests.push(manifest);
    } else {
        timeline.push(TimelineAction {
            at_ms,
            action: Action::Apply(vec![manifest]),
        });
    }
}
