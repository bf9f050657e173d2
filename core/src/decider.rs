//! The decider: `handle(event) -> commands`, and `next_timer_ms()` — the core's one entry point.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::command::Command;
use crate::config::Config;
use crate::disruption::{consolidation, emptiness, expiration};
use crate::event::{Event, EventKind};
use crate::lifecycle;
use crate::model::labels;
use crate::model::listing;
use crate::model::nodeclaim::{
    LaunchOption, LaunchReason, ListedInstance, NodeClaimSpec, TerminationReason,
};
use crate::model::nodeclass::NodeOs;
use crate::model::pod::{Pod, PodKey};
use crate::model::requirements::RequirementSpec;
use crate::model::resources::Resources;
use crate::provisioning::scheduler::{self, PlannedClaim};
use crate::provisioning::sibling_hold;
use crate::provisioning::static_pool;
use crate::state::{
    ClusterState, NodeClaimState, NodeState, PreparedCatalog, UNAVAILABLE_OFFERING_TTL_MS,
};
use crate::wake::Wake;

mod draining;
mod effects;
mod interrupting;
mod rooms;

use draining::{Drain, Eviction, Touched};
use effects::Effects;
use rooms::{Caches, Disruptor, Provisioner, Terminator, Warnings};

/// The deterministic decision core. Feed it every event in order; it answers with commands.
///
/// Its state serializes, the catalog aside: a core deserialized from a snapshot, given back
/// its catalog ([`Core::install_catalog`]), decides exactly as the core that wrote it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Core {
    config: Config,
    state: ClusterState,
    now_ms: u64,
    /// Bumped by every event that changes the cluster (ticks do not).
    epoch: u64,
    /// The cloud's last listing of this cluster's instances, which an
    /// [`EventKind::InstancesRelisted`] changes.
    listing: Vec<ListedInstance>,
    /// Pending pods to machines ([`rooms`] has each room's state).
    provisioner: Provisioner,
    /// Machines to take away.
    disruptor: Disruptor,
    /// Machines on their way out.
    terminator: Terminator,
    /// What users were told once.
    warnings: Warnings,
    /// Derived, rebuilt after a restore: never in a snapshot.
    #[serde(skip)]
    caches: Caches,
}

/// Whether [`ClusterState::pending_pods`] yields the pod.
fn counts_as_pending(pod: &Pod) -> bool {
    pod.node_name.is_none() && !pod.is_daemonset_pod()
}

/// What the last disruption pass saw: passes run at most once per poll interval (Karpenter's
/// 10 s), and only when the cluster changed since or a time the pass named has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct PassMark {
    at_ms: u64,
    epoch: u64,
    wake_ms: Option<u64>,
}

impl PassMark {
    /// When the next pass may run: `None` while nothing calls for one.
    fn next_ms(&self, epoch: u64, poll_ms: u64) -> Option<u64> {
        let earliest = self.at_ms + poll_ms;
        if epoch != self.epoch {
            Some(earliest)
        } else {
            self.wake_ms.map(|t| t.max(earliest))
        }
    }
}

/// The machines one solve holds for each other: new ones by index, launched ones by name.
struct HoldPlan {
    launched: BTreeSet<usize>,
    joining: BTreeSet<String>,
}

/// The replacements of one machine and why it is replaced.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Replacement {
    new: BTreeSet<String>,
    reason: TerminationReason,
    detail: String,
}

impl Core {
    /// The shape of the serialized state. A snapshot restores only into a core of the same
    /// shape: raise it whenever a field of the core, or of anything it holds, is added,
    /// removed, reordered or retyped.
    ///
    /// 2: the disruption pass mark, the drains' look-again hints, the pending pod count.
    /// 3: the zones of each node class's subnets (`NodeClassResolved`).
    /// 4: each node class's storage (`NodeClass::storage`).
    /// 5: the sibling holds.
    /// 6: each node class's operating system and launch settings (Windows, nested
    ///    virtualization).
    /// 7: the configuration's `count_lost_work`, and the last instance listing
    ///    (`EventKind::InstancesRelisted` changes it).
    /// 8: pods in a table of dense ids ([`crate::state::PodTable`]), each node listing its
    ///    pods with their ids; the decider's state in rooms (provisioner, disruptor,
    ///    terminator, warnings).
    pub const STATE_LAYOUT: u32 = 8;

    /// A core that knows nothing yet, deciding under `config`: the first events tell it the
    /// catalog, the NodePools and EC2NodeClasses, then the cluster.
    pub fn new(config: Config) -> Self {
        let state = ClusterState {
            capacity_settings: config.capacity_settings(),
            ..ClusterState::default()
        };
        Core {
            provisioner: Provisioner::new(config.seed),
            config,
            state,
            now_ms: 0,
            epoch: 0,
            listing: Vec::new(),
            disruptor: Disruptor::default(),
            terminator: Terminator::default(),
            warnings: Warnings::default(),
            caches: Caches::default(),
        }
    }

    /// Puts in place the catalog a [`EventKind::CatalogUpdated`] carried, and nothing else:
    /// what a snapshot's restore does with the catalog event the snapshot names.
    pub fn install_catalog(&mut self, catalog: std::sync::Arc<crate::catalog::Catalog>) {
        self.state.catalog = Some(std::sync::Arc::new(PreparedCatalog::new(catalog)));
        self.pool_shapes_changed();
    }

    /// What solves need of a NodePool may have changed: the shapes are computed again before
    /// the next solve that reads them, once however many changes come before it (a cluster's
    /// start applies its NodePools, classes and DaemonSets one event each).
    fn pool_shapes_changed(&mut self) {
        self.caches.pool_shapes_stale = true;
        self.caches.drift_inputs = None;
    }

    /// Computes again the shapes of the NodePools that changed since the last solve. (A shape
    /// is checked against the cluster whenever it is read, so one not yet computed again is
    /// computed where it is needed: this only keeps that from happening at every solve.)
    /// What drift compares machines with (the NodePools' and EC2NodeClasses' hashes and
    /// requirements), computed once between changes of them.
    fn drift_inputs(&mut self) -> std::sync::Arc<crate::disruption::drift::DriftInputs> {
        self.caches
            .drift_inputs
            .get_or_insert_with(|| {
                std::sync::Arc::new(crate::disruption::drift::DriftInputs::of(&self.state))
            })
            .clone()
    }

    fn refresh_pool_shapes(&mut self) {
        if std::mem::take(&mut self.caches.pool_shapes_stale) {
            self.caches.pool_shapes.refresh(&self.state);
        }
    }

    /// The configuration it decides under.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The cluster as the core sees it (read-only, for reports and checks).
    pub fn state(&self) -> &ClusterState {
        &self.state
    }

    /// Whether a core read from bytes holds together (what its serialized form cannot say by
    /// itself): every pod a node lists is in the pod table, under the id the node gives.
    pub fn check_restored(&self) -> Result<(), String> {
        self.state.check_pod_ids()
    }

    /// The solver's view of the cluster at `now_ms`, as the core's next solve would build it
    /// (for `nodewright explain`: which node or machine on its way could take a pod).
    pub fn cluster_view(&self, now_ms: u64) -> scheduler::ClusterView<'_> {
        scheduler::ClusterView::new(&self.state, &self.caches.pool_shapes, &self.config, now_ms)
    }

    /// Where `pods` would go if they were solved alone at `now_ms`, changing nothing (for
    /// explanations and checks).
    pub fn solve_alone(&self, now_ms: u64, pods: &[&Pod]) -> scheduler::SolveResult {
        scheduler::solve(
            &self.state,
            &self.caches.pool_shapes,
            &self.config,
            now_ms,
            pods,
        )
    }

    /// The machines being replaced now: each one, the NodeClaims launched to replace it, and
    /// why (for reports and checks).
    pub fn replacing(
        &self,
    ) -> impl Iterator<Item = (&str, &BTreeSet<String>, TerminationReason, &str)> {
        self.disruptor
            .replacements
            .iter()
            .map(|(old, r)| (old.as_str(), &r.new, r.reason, r.detail.as_str()))
    }

    /// The time of the last event handled.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// The commands whose results the core is still waiting for, as they would be asked again
    /// after a restart: launches without a result, terminations not confirmed, evictions asked,
    /// taints set, and what pending pods were told. Every one is idempotent for the world
    /// (launches carry their client token), so asking again never doubles an effect.
    pub fn outstanding(&self) -> Vec<Command> {
        let mut out = Vec::new();
        for (node, nodeclaim) in &self.terminator.cordoned {
            out.push(Command::CordonNode {
                node: node.clone(),
                nodeclaim: nodeclaim.clone(),
                reason: "asked again after a restart".to_string(),
            });
        }
        for (node, nodeclaim) in &self.terminator.uncordoning {
            out.push(Command::UncordonNode {
                node: node.clone(),
                nodeclaim: nodeclaim.clone(),
                reason: "asked again after a restart".to_string(),
            });
        }
        for nodeclaim in self.provisioner.sibling_holds.releasing() {
            if let Some(node) = self
                .state
                .nodeclaims
                .get(nodeclaim)
                .and_then(|c| c.node_name.clone())
            {
                out.push(Command::ReleaseNode {
                    node,
                    nodeclaim: nodeclaim.clone(),
                    reason: "asked again after a restart".to_string(),
                });
            }
        }
        for claim in self.state.nodeclaims.values() {
            match claim.terminating {
                None if claim.launched_at_ms.is_none() => out.push(Command::LaunchNodeClaim {
                    nodeclaim: Box::new(claim.spec.clone()),
                    reason: LaunchReason {
                        pods: Vec::new(),
                        summary: "asked again after a restart: no launch result was recorded"
                            .to_string(),
                    },
                }),
                Some((reason, _)) if !self.terminator.draining.contains_key(&claim.spec.name) => {
                    out.push(Command::TerminateNodeClaim {
                        nodeclaim: claim.spec.name.clone(),
                        node: claim.node_name.clone(),
                        instance_id: claim.instance.as_ref().map(|i| i.instance_id.clone()),
                        reason,
                        detail: "asked again after a restart: the termination was not confirmed"
                            .to_string(),
                    })
                }
                _ => {}
            }
        }
        for drain in self.terminator.draining.values() {
            for (pod, eviction) in &drain.evicting {
                if let Eviction::Asked { forced } = eviction
                    && self.state.pods.contains_key(pod)
                {
                    out.push(Command::EvictPod {
                        pod: pod.clone(),
                        node: drain.node.clone(),
                        forced: *forced,
                        reason: "asked again after a restart".to_string(),
                    });
                }
            }
        }
        for (pod, target) in &self.provisioner.nominations {
            out.push(Command::NominatePod {
                pod: pod.clone(),
                target: target.clone(),
                reason: "told again after a restart".to_string(),
            });
        }
        for (pod, reason) in &self.provisioner.unschedulable {
            out.push(Command::ReportUnschedulable {
                pod: pod.clone(),
                reason: reason.clone(),
            });
        }
        out
    }

    /// When the core next needs a [`EventKind::Tick`], if ever. Always later than the last
    /// event handled.
    pub fn next_timer_ms(&self) -> Option<u64> {
        let batch = self
            .provisioner
            .batcher
            .closes_at_ms(self.config.batch_idle_ms, self.config.batch_max_ms);
        [batch, self.disruptor.next_rule_ms]
            .into_iter()
            .flatten()
            .map(|t| t.max(self.now_ms + 1))
            .min()
    }

    /// The event as a log keeps it for this core: an instance listing as what changed since
    /// the core's last one, when the changes rebuild it exactly; any other event as it is.
    /// Handling either form decides the same.
    pub fn compact(&self, event: Event) -> Event {
        let Event {
            at_ms,
            kind: EventKind::InstancesListed { instances },
        } = event
        else {
            return event;
        };
        let kind = match listing::changes(&self.listing, &instances) {
            Some(found) => EventKind::InstancesRelisted {
                changed: found.changed,
                gone: found.gone,
            },
            None => EventKind::InstancesListed { instances },
        };
        Event { at_ms, kind }
    }

    /// Handles one event and returns the commands it calls for.
    pub fn handle(&mut self, event: &Event) -> Vec<Command> {
        // Time never goes backwards inside the core, even if an adapter's clock does.
        self.now_ms = self.now_ms.max(event.at_ms);
        let mut commands = Vec::new();
        let effects = effects::effects(&event.kind);
        self.caches.touched = if effects.wakes_every_drain {
            Touched::Everything
        } else {
            Touched::Nothing
        };
        // An event that changed nothing leaves the due work to its timer: a re-list, a result
        // told twice or a listing with nothing to collect never moves when a rule runs.
        if self.apply(&event.kind, effects, &mut commands) {
            self.run_due_work(&mut commands);
        }
        self.caches.touched = Touched::Nothing;
        commands
    }

    /// Applies an event to the state; false when it changed nothing.
    fn apply(&mut self, kind: &EventKind, effects: Effects, commands: &mut Vec<Command>) -> bool {
        let now = self.now_ms;
        if self.already_known(kind) {
            return false;
        }
        if effects.changes_cluster {
            self.epoch += 1;
        }
        if effects.reshapes_pools {
            self.pool_shapes_changed();
        }
        match kind {
            EventKind::CatalogUpdated(catalog) => {
                self.install_catalog(catalog.clone());
                self.trigger_if_pending();
            }
            EventKind::NodePoolApplied(pool) => {
                if let Some(err) = crate::disruption::budget::invalid_schedule(pool) {
                    commands.push(Command::DisruptionBlocked {
                        nodepool: pool.name.clone(),
                        reason: format!(
                            "spec.disruption.budgets: {err}; no node of this NodePool is disrupted until it is fixed"
                        ),
                    });
                }
                self.state
                    .nodepools
                    .insert(pool.name.clone(), pool.as_ref().clone());
                self.trigger_if_pending();
            }
            EventKind::NodePoolDeleted { name } => {
                // Karpenter's NodeClaims are owned by their NodePool, so deleting the pool
                // deletes them, and each is drained as a deleted NodeClaim is (PodDisruptionBudgets
                // apply, up to the pool's terminationGracePeriod; disruption budgets do not:
                // they pace the disruption controller, not deletions).
                let owned: Vec<String> = self
                    .state
                    .nodeclaims
                    .iter()
                    .filter(|(_, c)| c.spec.nodepool == *name && c.terminating.is_none())
                    .map(|(n, _)| n.clone())
                    .collect();
                for nodeclaim in owned {
                    self.disruptor.replacements.remove(&nodeclaim);
                    self.terminate(
                        &nodeclaim,
                        TerminationReason::NodePoolDeleted,
                        format!("its NodePool {name} was deleted"),
                        commands,
                    );
                }
                self.state.nodepools.remove(name);
            }
            EventKind::NodeClassApplied(class) => {
                self.state
                    .nodeclasses
                    .insert(class.name.clone(), class.as_ref().clone());
                self.trigger_if_pending();
            }
            EventKind::NodeClassDeleted { name } => {
                self.state.nodeclasses.remove(name);
                self.state.subnet_zones.remove(name);
            }
            EventKind::PodApplied(pod) => self.apply_pod(pod, commands),
            EventKind::PodBound { pod, node } => {
                if let Some(was_pending) = self.state.pods.get(pod).map(counts_as_pending) {
                    if was_pending {
                        self.provisioner.pending_pods -= 1;
                    }
                    let old = self.state.pods.bind(pod, node).flatten();
                    if let Some(old) = &old {
                        self.touch_node(old);
                        // A pod bound again elsewhere leaves its first node's list (no node
                        // keeps the id of a pod that is not on it).
                        if old != node {
                            self.detach_pod(pod, old);
                        }
                    }
                    self.touch_node(node);
                    self.attach_pod(pod, node);
                }
                self.provisioner.nominations.remove(pod);
                self.provisioner.unschedulable.remove(pod);
                // The scheduler may have used capacity meant for pods still pending: look again.
                self.trigger_if_pending();
            }
            EventKind::PodDeleted { pod } => {
                let removed = self.state.pods.remove(pod);
                if removed.as_ref().is_some_and(counts_as_pending) {
                    self.provisioner.pending_pods -= 1;
                }
                if let Some(node) = removed.and_then(|p| p.node_name) {
                    self.touch_node(&node);
                    self.detach_pod(pod, &node);
                }
                self.provisioner.nominations.remove(pod);
                self.provisioner.unschedulable.remove(pod);
                self.warnings.missing_requests.remove(pod);
                if !self.warnings.annotations.is_empty() {
                    self.warnings.annotations.remove(&format!("pod {pod}"));
                }
            }
            EventKind::NodeApplied(node) => {
                self.warn_invalid_annotation(
                    || format!("node {}", node.name),
                    &node.annotations,
                    commands,
                );
                let claim_name = node
                    .provider_id
                    .as_deref()
                    .and_then(|id| self.state.nodeclaim_for_provider_id(id));
                let first_seen = !self.state.nodes.contains_key(&node.name);
                // A node seen first is inserted as it is (not ready before it: it did not
                // become ready); one known is updated.
                let became_ready = match self.state.nodes.entry(node.name.clone()) {
                    std::collections::btree_map::Entry::Vacant(vacant) => {
                        vacant.insert(NodeState {
                            node: node.as_ref().clone(),
                            nodeclaim: claim_name.clone(),
                            pods: BTreeMap::new(),
                            last_pod_event_ms: now,
                        });
                        false
                    }
                    std::collections::btree_map::Entry::Occupied(mut known) => {
                        let entry = known.get_mut();
                        let became_ready = node.ready && !entry.node.ready;
                        entry.node = node.as_ref().clone();
                        if entry.nodeclaim.is_none() {
                            entry.nodeclaim = claim_name.clone();
                        }
                        if became_ready {
                            entry.last_pod_event_ms = now;
                        }
                        became_ready
                    }
                };
                self.untaint_if_stale(node, commands);
                if let Some(claim) = claim_name.as_deref()
                    && self.state.nodeclaims.contains_key(claim)
                    && self.provisioner.sibling_holds.observe(
                        claim,
                        node.has_taint(labels::SIBLING_HOLD_TAINT),
                    )
                {
                    commands.push(Command::ReleaseNode {
                        node: node.name.clone(),
                        nodeclaim: claim.to_string(),
                        reason: format!(
                            "it carries {} again after its release (set again by its registration, or left by an earlier controller)",
                            labels::SIBLING_HOLD_TAINT
                        ),
                    });
                }
                // Pods bound before the node was seen (once it is known, a pod bound to it is
                // listed on it as it binds).
                if first_seen {
                    let bound: Vec<PodKey> = self
                        .state
                        .pods
                        .values()
                        .filter(|p| p.node_name.as_deref() == Some(node.name.as_str()))
                        .map(|p| p.key.clone())
                        .collect();
                    for key in bound {
                        self.attach_pod(&key, &node.name);
                    }
                }
                if let Some(claim) = claim_name
                    .as_ref()
                    .and_then(|c| self.state.nodeclaims.get_mut(c))
                {
                    claim.node_name = Some(node.name.clone());
                    claim.registered_at_ms.get_or_insert(now);
                    // Initialized: ready, and no longer held for its siblings.
                    if node.ready
                        && !node.has_taint(labels::SIBLING_HOLD_TAINT)
                    {
                        claim.initialized_at_ms.get_or_insert(now);
                    }
                }
                // Replacements are up: the machine they replace goes.
                if node.ready {
                    let done: Vec<String> = self.disruptor.replacements
                        .iter()
                        .filter(|(_, r)| {
                            r.new.iter().all(|n| {
                                self.state
                                    .nodeclaims
                                    .get(n)
                                    .is_some_and(|c| c.is_initialized())
                            })
                        })
                        .map(|(old, _)| old.clone())
                        .collect();
                    for old in done {
                        if let Some(r) = self.disruptor.replacements.remove(&old) {
                            let names: Vec<&str> = r.new.iter().map(String::as_str).collect();
                            self.terminate(
                                &old,
                                r.reason,
                                format!("{}; replaced by {}, now initialized", r.detail, names.join(", ")),
                                commands,
                            );
                        }
                    }
                }
                if became_ready {
                    self.trigger_if_pending();
                }
            }
            EventKind::NodeDeleted { name } => {
                self.warnings.annotations.remove(&format!("node {name}"));
                self.terminator.uncordoning.remove(name);
                if let Some(state) = self.state.nodes.remove(name)
                    && let Some(claim_name) = state.nodeclaim
                    && let Some(claim) = self.state.nodeclaims.get_mut(&claim_name)
                {
                    claim.node_name = None;
                    if claim.terminating.is_none() {
                        // Its node was deleted from outside: the machine is of no use.
                        self.terminate(
                            &claim_name,
                            TerminationReason::NodeDeleted,
                            format!("its node {name} was deleted"),
                            commands,
                        );
                    }
                }
                self.trigger_if_pending();
            }
            EventKind::LaunchSucceeded { nodeclaim, instance } => {
                match self.state.nodeclaims.get_mut(nodeclaim) {
                    Some(claim) if claim.terminating.is_none() => {
                        claim.instance = Some(instance.clone());
                        claim.launched_at_ms = Some(now);
                    }
                    _ => commands.push(Command::TerminateNodeClaim {
                        nodeclaim: nodeclaim.clone(),
                        node: None,
                        instance_id: Some(instance.instance_id.clone()),
                        reason: TerminationReason::LaunchTimeout,
                        detail: "the launch succeeded after the NodeClaim was given up; the instance is not wanted".to_string(),
                    }),
                }
            }
            EventKind::LaunchFailed {
                nodeclaim,
                code,
                message,
                unavailable,
            } => {
                for key in unavailable {
                    self.state
                        .unavailable
                        .insert(key.clone(), now + UNAVAILABLE_OFFERING_TTL_MS);
                }
                if let Some(claim) = self.state.nodeclaims.get_mut(nodeclaim)
                    && claim.terminating.is_none()
                {
                    claim.terminating = Some((TerminationReason::LaunchFailed, now));
                    commands.push(Command::TerminateNodeClaim {
                        nodeclaim: nodeclaim.clone(),
                        node: None,
                        instance_id: None,
                        reason: TerminationReason::LaunchFailed,
                        detail: format!(
                            "launch failed with {code}: {message}; {} offerings marked unavailable for 3m0s",
                            unavailable.len()
                        ),
                    });
                }
                self.trigger_if_pending();
            }
            EventKind::NodeClaimTerminated { nodeclaim } => {
                self.provisioner.sibling_holds.forget(nodeclaim);
                // A replacement that failed: the machine it was for stays (and is looked at
                // again later); a replaced machine that is gone needs nothing more.
                let given_up: Vec<String> = self.disruptor.replacements
                    .iter()
                    .filter(|(old, r)| *old != nodeclaim && r.new.contains(nodeclaim))
                    .map(|(old, _)| old.clone())
                    .collect();
                self.disruptor.replacements
                    .retain(|old, r| old != nodeclaim && !r.new.contains(nodeclaim));
                for old in given_up {
                    // The machine stays: it takes pods again.
                    self.uncordon(
                        &old,
                        format!(
                            "its replacement {nodeclaim} did not come up; the disruption is given up"
                        ),
                        commands,
                    );
                }
                self.terminator.draining.remove(nodeclaim);
                self.terminator.cordoned.retain(|_, c| c != nodeclaim);
                if let Some(claim) = self.state.nodeclaims.remove(nodeclaim)
                    && let Some(node) = claim.node_name
                    && let Some(state) = self.state.nodes.get_mut(&node)
                {
                    state.nodeclaim = None;
                }
                self.trigger_if_pending();
            }
            EventKind::Tick => {}
            EventKind::DaemonSetApplied(ds) => {
                self.state
                    .daemonsets
                    .insert((ds.namespace.clone(), ds.name.clone()), ds.as_ref().clone());
                self.trigger_if_pending();
            }
            EventKind::PodDisruptionBudgetApplied(pdb) => {
                self.state
                    .pdbs
                    .insert((pdb.namespace.clone(), pdb.name.clone()), pdb.as_ref().clone());
            }
            EventKind::PodDisruptionBudgetDeleted { namespace, name } => {
                self.state.pdbs.remove(&(namespace.clone(), name.clone()));
            }
            EventKind::InterruptionReceived {
                message_id,
                instance_id,
                interruption,
            } => self.interrupt(message_id, instance_id, interruption, commands),
            EventKind::InstancesListed { instances } => {
                self.listing.clone_from(instances);
                return self.collect_garbage(commands);
            }
            EventKind::InstancesRelisted { changed, gone } => {
                // No change rebuilds the same listing.
                if !(changed.is_empty() && gone.is_empty()) {
                    self.listing = listing::rebuild(&self.listing, changed, gone);
                }
                return self.collect_garbage(commands);
            }
            EventKind::EvictionRefused { pod, .. } => {
                // Asked again after the retry interval.
                for drain in self.terminator.draining.values_mut() {
                    if let Some(e) = drain.evicting.get_mut(pod) {
                        *e = Eviction::Refused(now);
                    }
                }
            }
            EventKind::DaemonSetDeleted { namespace, name } => {
                self.state
                    .daemonsets
                    .remove(&(namespace.clone(), name.clone()));
            }
            EventKind::NodeClassResolved(resolved) => {
                // Of what a node class resolved to, decisions read the zones of its subnets;
                // the security groups and AMIs are the launch's.
                let zones: std::collections::BTreeSet<String> =
                    resolved.subnets.iter().map(|s| s.zone.clone()).collect();
                self.state.subnet_zones.insert(resolved.name.clone(), zones);
                self.trigger_if_pending();
            }
            EventKind::NodeClaimDeleted { nodeclaim } => {
                // Karpenter's termination finalizer: drained (PodDisruptionBudgets apply, up
                // to the pool's terminationGracePeriod), then terminated.
                self.disruptor.replacements.remove(nodeclaim);
                self.terminate(
                    nodeclaim,
                    TerminationReason::Deleted,
                    "its NodeClaim was deleted".to_string(),
                    commands,
                );
            }
        }
        true
    }

    /// Acts on the instance listing just taken in: terminates instances no NodeClaim owns and
    /// finishes NodeClaims whose instance is gone. False when it found nothing.
    fn collect_garbage(&mut self, commands: &mut Vec<Command>) -> bool {
        let now = self.now_ms;
        let garbage = lifecycle::garbage(&self.state, &self.listing, now);
        if garbage.orphans.is_empty() && garbage.vanished.is_empty() {
            return false;
        }
        self.epoch += 1;
        for (instance_id, nodeclaim, detail) in garbage.orphans {
            commands.push(Command::TerminateOrphanInstance {
                instance_id,
                nodeclaim,
                detail,
            });
        }
        for (name, detail) in garbage.vanished {
            let Some(claim) = self.state.nodeclaims.get_mut(&name) else {
                continue;
            };
            // Its termination was asked for already and is on its way.
            if claim.terminating.is_some() && !self.terminator.draining.contains_key(&name) {
                continue;
            }
            let reason = claim
                .terminating
                .get_or_insert((TerminationReason::InstanceGone, now))
                .0;
            // Nothing is left to drain: the machine and its pods are gone.
            self.terminator.draining.remove(&name);
            self.disruptor.replacements.remove(&name);
            self.finish_termination(&name, reason, detail, commands);
        }
        true
    }

    /// An object applied again exactly as the core has it (a re-list after a restart, an
    /// informer's resync), or a result told twice (a command re-issued after a restart is
    /// answered again), changes nothing and wakes nothing.
    fn already_known(&self, kind: &EventKind) -> bool {
        let state = &self.state;
        match kind {
            EventKind::LaunchSucceeded {
                nodeclaim,
                instance,
            } => state
                .nodeclaims
                .get(nodeclaim)
                .is_some_and(|c| c.terminating.is_none() && c.instance.as_ref() == Some(instance)),
            EventKind::LaunchFailed { nodeclaim, .. } => {
                state.nodeclaims.get(nodeclaim).is_some_and(|c| {
                    matches!(c.terminating, Some((TerminationReason::LaunchFailed, _)))
                })
            }
            EventKind::NodeClaimTerminated { nodeclaim } => {
                !state.nodeclaims.contains_key(nodeclaim)
            }
            EventKind::NodeClaimDeleted { nodeclaim } => state
                .nodeclaims
                .get(nodeclaim)
                .is_none_or(|c| c.terminating.is_some()),
            EventKind::PodDeleted { pod } => !state.pods.contains_key(pod),
            EventKind::NodeDeleted { name } => !state.nodes.contains_key(name),
            EventKind::PodApplied(pod) => state.pods.get(&pod.key) == Some(pod.as_ref()),
            EventKind::NodeApplied(node) => state
                .nodes
                .get(&node.name)
                .is_some_and(|known| known.node == **node),
            EventKind::NodePoolApplied(pool) => {
                state.nodepools.get(&pool.name) == Some(pool.as_ref())
            }
            EventKind::NodeClassApplied(class) => {
                state.nodeclasses.get(&class.name) == Some(class.as_ref())
            }
            EventKind::NodeClassResolved(resolved) => {
                state.subnet_zones.get(&resolved.name).is_some_and(|zones| {
                    zones.len() == resolved.zones().len()
                        && resolved.subnets.iter().all(|s| zones.contains(&s.zone))
                })
            }
            EventKind::DaemonSetApplied(ds) => {
                state
                    .daemonsets
                    .get(&(ds.namespace.clone(), ds.name.clone()))
                    == Some(ds.as_ref())
            }
            EventKind::PodDisruptionBudgetApplied(pdb) => {
                state.pdbs.get(&(pdb.namespace.clone(), pdb.name.clone())) == Some(pdb.as_ref())
            }
            _ => false,
        }
    }

    fn apply_pod(&mut self, pod: &Pod, commands: &mut Vec<Command>) {
        let now = self.now_ms;
        let previous_node = self
            .state
            .pods
            .get(&pod.key)
            .and_then(|p| p.node_name.clone());
        if let Some(old) = &previous_node {
            self.touch_node(old);
        }
        if let Some(new) = &pod.node_name {
            self.touch_node(new);
        }
        if let Some(old) = &previous_node
            && pod.node_name.as_ref() != Some(old)
        {
            self.detach_pod(&pod.key, old);
        }
        if let (_, Some(old)) = self.state.pods.insert(pod.clone())
            && counts_as_pending(&old)
        {
            self.provisioner.pending_pods -= 1;
        }
        if counts_as_pending(pod) {
            self.provisioner.pending_pods += 1;
        }
        if pod.missing_requests && self.warnings.missing_requests.insert(pod.key.clone()) {
            commands.push(Command::WarnMissingRequests {
                pod: pod.key.clone(),
            });
        }
        self.warn_invalid_annotation(|| format!("pod {}", pod.key), &pod.annotations, commands);
        match &pod.node_name {
            Some(node) => {
                self.attach_pod(&pod.key, node);
                self.provisioner.nominations.remove(&pod.key);
                self.provisioner.unschedulable.remove(&pod.key);
            }
            None if !pod.is_daemonset_pod() => self.provisioner.batcher.trigger(now),
            None => {}
        }
    }

    /// Reports a `karpenter.sh/do-not-disrupt` value that protects nothing, once per value.
    fn warn_invalid_annotation(
        &mut self,
        object: impl FnOnce() -> String,
        annotations: &BTreeMap<String, String>,
        commands: &mut Vec<Command>,
    ) {
        let Some(reason) = crate::model::do_not_disrupt::invalid_value(annotations) else {
            if !self.warnings.annotations.is_empty() {
                self.warnings.annotations.remove(&object());
            }
            return;
        };
        let object = object();
        let value = annotations
            .get(crate::model::labels::DO_NOT_DISRUPT)
            .cloned()
            .unwrap_or_default();
        if self.warnings.annotations.get(&object) != Some(&value) {
            self.warnings.annotations.insert(object.clone(), value);
            commands.push(Command::WarnInvalidAnnotation { object, reason });
        }
    }

    /// Lists a pod of the table on its node (if the node is known yet).
    fn attach_pod(&mut self, pod: &PodKey, node: &str) {
        let Some(id) = self.state.pods.id(pod) else {
            debug_assert!(false, "only a pod of the table is attached to a node");
            return;
        };
        if let Some(state) = self.state.nodes.get_mut(node)
            && state.pods.insert(pod.clone(), id).is_none()
        {
            state.last_pod_event_ms = self.now_ms;
        }
    }

    /// Takes a pod off a node's list: a pod that left the node, or left the table (so that
    /// no node keeps the id of a pod gone).
    fn detach_pod(&mut self, pod: &PodKey, node: &str) {
        if let Some(state) = self.state.nodes.get_mut(node) {
            state.pods.remove(pod);
            state.last_pod_event_ms = self.now_ms;
        }
    }

    fn has_pending_pods(&self) -> bool {
        debug_assert_eq!(
            self.provisioner.pending_pods,
            self.state.pending_pods().count(),
            "the pending pod count follows the pod events"
        );
        self.provisioner.pending_pods > 0
    }

    fn trigger_if_pending(&mut self) {
        if self.has_pending_pods() {
            self.provisioner.batcher.trigger(self.now_ms);
        }
    }

    /// Everything whose time has come: the batch, lifecycle deadlines, expiration, disruption.
    fn run_due_work(&mut self, commands: &mut Vec<Command>) {
        let now = self.now_ms;
        // Offerings whose unavailability ran out may be what pending pods wait for.
        let before = self.state.unavailable.len();
        self.state.unavailable.retain(|_, until| *until > now);
        if self.state.unavailable.len() != before {
            self.trigger_if_pending();
        }
        if self.provisioner.batcher.take_if_due(
            now,
            self.config.batch_idle_ms,
            self.config.batch_max_ms,
        ) {
            self.provision(commands);
        }
        let mut next = Wake::default();
        let (releases, hold_wake) = self.provisioner.sibling_holds.due(
            &self.state.nodeclaims,
            now,
            self.config.sibling_hold_ms,
        );
        for r in releases {
            commands.push(Command::ReleaseNode {
                node: r.node,
                nodeclaim: r.nodeclaim,
                reason: r.reason,
            });
        }
        next.offer_some(hold_wake);

        let claims_may_act = matches!(self.caches.touched, Touched::Everything)
            || self
                .caches
                .claim_deadline_ms
                .is_none_or(|at| at.is_some_and(|t| t <= now));
        if claims_may_act {
            let (overdue, next_deadline) = lifecycle::overdue(&self.state, &self.config, now);
            for o in overdue {
                self.terminate(&o.nodeclaim, o.reason, o.detail, commands);
            }
            let (expired, next_expiry) = expiration::expired(&self.state, now);
            for (name, detail) in expired {
                self.terminate(&name, TerminationReason::Expired, detail, commands);
            }
            let static_wake = self.static_pools(commands);
            let mut deadline = Wake::default();
            deadline.offer_some(next_deadline);
            deadline.offer_some(next_expiry);
            deadline.offer_some(static_wake);
            self.caches.claim_deadline_ms = Some(deadline.ms());
        }
        next.offer_some(self.caches.claim_deadline_ms.flatten());

        next.offer_some(self.disruption_pass(commands));
        next.offer_some(self.drain_all(commands));
        // An offering that becomes available again may be what a pending pod waits for.
        if !self.state.unavailable.is_empty() && self.has_pending_pods() {
            next.offer_some(
                self.state
                    .unavailable
                    .values()
                    .copied()
                    .filter(|until| *until > now)
                    .min(),
            );
        }
        self.disruptor.next_rule_ms = next.ms();
        // Terminations free pods to schedule again; make sure a batch follows.
        if commands
            .iter()
            .any(|c| matches!(c, Command::TerminateNodeClaim { .. }))
        {
            self.trigger_if_pending();
        }
    }

    /// One disruption pass, when one is due (see [`PassMark`]); returns when the next is.
    fn disruption_pass(&mut self, commands: &mut Vec<Command>) -> Option<u64> {
        let now = self.now_ms;
        let poll = self.config.disruption_poll_ms.max(1);
        if let Some(mark) = self.disruptor.last_pass {
            match mark.next_ms(self.epoch, poll) {
                Some(at) if at <= now => {}
                next => return next,
            }
        }
        let before = commands.len();
        let wake_ms = self.run_disruption_pass(commands);
        // A pass that acted looks again at the next poll: what it did may allow more. The
        // epoch is the one after the pass: its own doings are not news to the next one.
        let mark = PassMark {
            at_ms: now,
            epoch: self.epoch,
            wake_ms: if commands.len() == before {
                wake_ms
            } else {
                Some(now + poll)
            },
        };
        self.disruptor.last_pass = Some(mark);
        mark.next_ms(self.epoch, poll)
    }

    /// Emptiness, then drift, then consolidation: the first that acts ends the pass. Returns
    /// the earliest time something the pass looked at changes by itself.
    fn run_disruption_pass(&mut self, commands: &mut Vec<Command>) -> Option<u64> {
        let now = self.now_ms;
        let poll = self.config.disruption_poll_ms.max(1);
        // Many pods are nominated to the same few machines: each name is copied once.
        let mut nominated: BTreeSet<String> = BTreeSet::new();
        for target in self.provisioner.nominations.values() {
            if !nominated.contains(target) {
                nominated.insert(target.clone());
            }
        }
        let mut next = Wake::default();
        let mut pools: Vec<String> = self
            .state
            .nodepools
            .values()
            .map(|p| p.name.clone())
            .collect();
        pools.sort();
        let mut acted = false;
        for name in &pools {
            // Terminating a machine changes no NodePool: each is still there.
            let Some(pool) = self.state.nodepools.get(name) else {
                continue;
            };
            let (chosen, pool_next, blocked) =
                emptiness::select(&self.state, pool, &nominated, now);
            for (candidate, detail) in chosen {
                acted = true;
                self.terminate(
                    &candidate.nodeclaim,
                    TerminationReason::Empty,
                    detail,
                    commands,
                );
            }
            if blocked {
                // Budget-blocked nodes are looked at again on the next pass.
                let at = now + poll;
                next.offer(at);
            }
            next.offer_some(pool_next);
        }
        if !acted && self.disruptor.pending_consolidation.is_none() {
            acted = self.drift(commands);
        }
        if let Some(at) = self.disruptor.drift_wake_ms {
            // Already due but not looked at (another method acted): the next pass will, when
            // drift may run then (no replacement in flight; those wake the core themselves).
            let at = if at > now {
                Some(at)
            } else {
                self.disruptor.replacements.is_empty().then_some(now + poll)
            };
            next.offer_some(at);
        }
        if !acted {
            let (at, _) = self.consolidate(commands, &nominated);
            next.offer_some(at);
        }
        next.ms()
    }

    /// Single-node consolidation: finish a decision whose validation period is over, or look
    /// for a new one (at most once per poll interval, and only when the cluster changed or a
    /// node became eligible). Returns when to look again.
    fn consolidate(
        &mut self,
        commands: &mut Vec<Command>,
        nominated: &BTreeSet<String>,
    ) -> (Option<u64>, bool) {
        self.refresh_pool_shapes();
        let now = self.now_ms;
        if let Some((decision, decided_at)) = self.disruptor.pending_consolidation.take() {
            let due = decided_at + consolidation::VALIDATION_MS;
            if now < due {
                self.disruptor.pending_consolidation = Some((decision, decided_at));
                return (Some(due), false);
            }
            // Validation: the same decision must still hold.
            if let Ok(again) = consolidation::simulate_many(
                &self.state,
                &self.caches.pool_shapes,
                &self.config,
                &decision.nodeclaims,
                now,
            ) && again.replacement.is_some() == decision.replacement.is_some()
            {
                self.execute_consolidation(again, commands);
                return (None, true);
            }
            return (None, false);
        }
        if !self.disruptor.replacements.is_empty() {
            // One replacement at a time.
            return (None, false);
        }
        let poll = self.config.disruption_poll_ms.max(1);
        let searched = self.disruptor.last_consolidation_search;
        let changed = searched.is_none_or(|(epoch, _)| epoch != self.epoch);
        let newly_eligible = self
            .disruptor
            .consolidation_next_ms
            .is_some_and(|t| t <= now);
        if !changed && !newly_eligible {
            return (self.disruptor.consolidation_next_ms, false);
        }
        if let Some((_, at)) = searched
            && now < at + poll
        {
            return (Some(at + poll), false);
        }
        let (decision, next) = consolidation::search(
            &self.state,
            &self.caches.pool_shapes,
            &self.config,
            nominated,
            now,
        );
        self.disruptor.last_consolidation_search = Some((self.epoch, now));
        self.disruptor.consolidation_next_ms = next;
        match decision {
            Some(d) => {
                self.disruptor.pending_consolidation = Some((d, now));
                (Some(now + consolidation::VALIDATION_MS), false)
            }
            None => (next, false),
        }
    }

    fn execute_consolidation(
        &mut self,
        decision: consolidation::Decision,
        commands: &mut Vec<Command>,
    ) {
        match &decision.replacement {
            None => {
                for nodeclaim in &decision.nodeclaims {
                    self.terminate(
                        nodeclaim,
                        TerminationReason::Underutilized,
                        decision.detail.clone(),
                        commands,
                    );
                }
            }
            Some(planned) => {
                let Some(first) = decision.nodeclaims.first() else {
                    return;
                };
                // Every machine of the decision is tainted before the replacement launches: none
                // takes a new pod meanwhile.
                for other in decision.nodeclaims.iter().skip(1) {
                    if let Some(node) = self
                        .state
                        .nodeclaims
                        .get(other)
                        .and_then(|c| c.node_name.clone())
                    {
                        self.cordon(
                            &node,
                            other,
                            format!(
                                "{}: {}; replacements launch first",
                                TerminationReason::Underutilized,
                                decision.detail
                            ),
                            commands,
                        );
                    }
                }
                self.replace(
                    first,
                    std::slice::from_ref(planned),
                    TerminationReason::Underutilized,
                    decision.detail.clone(),
                    commands,
                );
                // The other machines go with the first, once the same replacement is up.
                if let Some(r) = self.disruptor.replacements.get(first).cloned() {
                    for other in decision.nodeclaims.iter().skip(1) {
                        self.disruptor.replacements.insert(other.clone(), r.clone());
                    }
                } else {
                    // No replacement could be launched: the others stay, and take pods again.
                    for other in decision.nodeclaims.iter().skip(1) {
                        self.uncordon(other, "no replacement could be launched".into(), commands);
                    }
                }
            }
        }
    }

    /// Launches a NodeClaim for each planned machine, its reason led by `why`; returns their
    /// names (a machine with no offering left to launch with is skipped).
    fn launch_planned(
        &mut self,
        planned: &[PlannedClaim],
        why: &str,
        commands: &mut Vec<Command>,
    ) -> Vec<String> {
        let mut launched = Vec::new();
        for p in planned {
            let Some((spec, mut reason)) = self.claim_spec(p) else {
                continue;
            };
            reason.summary = format!("{why}; {}", reason.summary);
            launched.push(spec.name.clone());
            // A new machine has deadlines of its own.
            self.caches.claim_deadline_ms = None;
            self.state.nodeclaims.insert(
                spec.name.clone(),
                NodeClaimState::new(spec.clone(), self.now_ms),
            );
            commands.push(Command::LaunchNodeClaim {
                nodeclaim: Box::new(spec),
                reason,
            });
        }
        launched
    }

    /// Launches the replacements of a machine; it is terminated once they are all initialized.
    fn replace(
        &mut self,
        old: &str,
        planned: &[PlannedClaim],
        reason: TerminationReason,
        detail: String,
        commands: &mut Vec<Command>,
    ) {
        // Karpenter's order: taint the machine first, so that nothing new lands on it while
        // its replacements come up.
        if let Some(node) = self
            .state
            .nodeclaims
            .get(old)
            .and_then(|c| c.node_name.clone())
            && !planned.is_empty()
        {
            self.cordon(
                &node,
                old,
                format!("{reason}: {detail}; replacements launch first"),
                commands,
            );
        }
        let new: BTreeSet<String> = self
            .launch_planned(planned, &format!("replaces {old}: {detail}"), commands)
            .into_iter()
            .collect();
        if new.is_empty() {
            self.terminate(old, reason, detail, commands);
        } else {
            self.disruptor.replacements.insert(
                old.to_string(),
                Replacement {
                    new,
                    reason,
                    detail,
                },
            );
        }
    }

    /// Drift: the first drifted machine the `Drifted` budget allows is replaced (or removed if
    /// its pods fit elsewhere). Returns whether it acted.
    fn drift(&mut self, commands: &mut Vec<Command>) -> bool {
        if !self.disruptor.replacements.is_empty() {
            return false;
        }
        let now = self.now_ms;
        // Searched already with nothing changed since: nothing new to find, unless a
        // do-not-disrupt duration ran out meanwhile.
        let protection_ran_out = self.disruptor.drift_wake_ms.is_some_and(|t| t <= now);
        if !protection_ran_out
            && self.disruptor.last_drift_search.is_some_and(|(epoch, at)| {
                epoch == self.epoch && now < at + self.config.disruption_poll_ms
            })
        {
            return false;
        }
        self.disruptor.last_drift_search = Some((self.epoch, now));
        let mut wake = Wake::default();
        let acted = self.drift_search(now, &mut wake, commands);
        self.disruptor.drift_wake_ms = wake.ms();
        acted
    }

    fn drift_search(&mut self, now: u64, wake: &mut Wake, commands: &mut Vec<Command>) -> bool {
        self.refresh_pool_shapes();
        let exhausted: Vec<crate::model::pdb::PodDisruptionBudget> =
            self.state.exhausted_pdbs().into_iter().cloned().collect();
        let inputs = self.drift_inputs();
        for (name, why) in crate::disruption::drift::drifted(&self.state, &inputs) {
            let Some(claim) = self.state.nodeclaims.get(&name) else {
                continue;
            };
            let Some(pool) = self.state.nodepools.get(&claim.spec.nodepool) else {
                continue;
            };
            let Ok((allowed, budget_text)) = crate::disruption::budget::allowed_disruptions(
                &self.state,
                pool,
                crate::model::nodepool::DisruptionReason::Drifted,
                now,
            ) else {
                continue;
            };
            if allowed == 0 {
                continue;
            }
            let node = claim.node_name.clone();
            if let Some(n) = &node {
                if let Some((_, ends)) = self.state.do_not_disrupt_on_node(n, now) {
                    wake.offer_some(ends);
                    continue;
                }
                if self
                    .state
                    .workload_pods_on_node(n)
                    .iter()
                    .any(|p| exhausted.iter().any(|pdb| pdb.selects(p)))
                {
                    continue;
                }
            }
            // Where its pods would go: the rest of the cluster, plus new machines.
            let (pods, result) = self.solve_moving_out(&name, node.as_deref());
            // Only its own pods must fit: a pending pod that fits nowhere is the provisioner's
            // to report, and holds no replacement back.
            if result
                .unschedulable
                .iter()
                .any(|(pod, _)| pods.iter().any(|p| &p.key == pod))
            {
                continue;
            }
            let detail = format!("drifted: {why}; {} pods move; {budget_text}", pods.len());
            // Every machine the simulation needs is launched, those it planned for pending pods
            // too: the solver may have given a machine on its way to the drifted node's pods
            // and a new one to the pending pods, and launching only the "own" ones would leave
            // a pod short. The provisioner sees them all as machines on their way.
            self.replace(
                &name,
                &result.new_claims,
                TerminationReason::Drifted,
                detail,
                commands,
            );
            return true;
        }
        false
    }

    fn terminate(
        &mut self,
        nodeclaim: &str,
        reason: TerminationReason,
        detail: String,
        commands: &mut Vec<Command>,
    ) {
        let Some(claim) = self.state.nodeclaims.get_mut(nodeclaim) else {
            return;
        };
        if claim.terminating.is_some() {
            return;
        }
        claim.terminating = Some((reason, self.now_ms));
        let node = claim.node_name.clone();
        let pool_grace = self
            .state
            .nodepools
            .get(&claim.spec.nodepool)
            .and_then(|p| p.termination_grace_period_ms);
        let has_pods = node
            .as_ref()
            .is_some_and(|n| !self.state.drainable_pods_on_node(n).is_empty());
        match node {
            Some(node) if has_pods => {
                // Cordon, then evict (PodDisruptionBudgets apply); the instance goes when the
                // node is empty.
                self.cordon(&node, nodeclaim, format!("{reason}: {detail}"), commands);
                self.terminator.draining.insert(
                    nodeclaim.to_string(),
                    Drain {
                        node,
                        reason,
                        detail,
                        deadline_ms: pool_grace.map(|g| self.now_ms + g),
                        evicting: BTreeMap::new(),
                        forced: false,
                        held_back: false,
                        wake_ms: None,
                    },
                );
                let mut evicting_now = self.evicting_now();
                self.drain_step(nodeclaim, &mut evicting_now, commands);
            }
            _ => self.finish_termination(nodeclaim, reason, detail, commands),
        }
    }

    /// Taints the node `karpenter.sh/disrupted:NoSchedule` (once).
    fn cordon(&mut self, node: &str, nodeclaim: &str, reason: String, commands: &mut Vec<Command>) {
        if self.terminator.cordoned.contains_key(node) {
            return;
        }
        self.terminator
            .cordoned
            .insert(node.to_string(), nodeclaim.to_string());
        commands.push(Command::CordonNode {
            node: node.to_string(),
            nodeclaim: nodeclaim.to_string(),
            reason,
        });
    }

    /// Takes the `karpenter.sh/disrupted` taint off a machine nodewright tainted and is not
    /// draining: the disruption that set it was given up.
    fn uncordon(&mut self, nodeclaim: &str, reason: String, commands: &mut Vec<Command>) {
        if self.terminator.draining.contains_key(nodeclaim) {
            return;
        }
        let Some(node) = self
            .terminator
            .cordoned
            .iter()
            .find(|(_, c)| c.as_str() == nodeclaim)
            .map(|(n, _)| n.clone())
        else {
            return;
        };
        self.terminator.cordoned.remove(&node);
        self.terminator
            .uncordoning
            .insert(node.clone(), nodeclaim.to_string());
        commands.push(Command::UncordonNode {
            node,
            nodeclaim: nodeclaim.to_string(),
            reason,
        });
    }

    /// A `karpenter.sh/disrupted` taint on a machine of this core that no disruption of ours
    /// stands behind (left by a controller that stopped before it took it off) is taken off,
    /// as Karpenter does at startup: otherwise the node takes no pod again.
    fn untaint_if_stale(&mut self, node: &crate::model::node::Node, commands: &mut Vec<Command>) {
        let tainted = node.has_taint(labels::DISRUPTED_TAINT);
        if !tainted {
            self.terminator.uncordoning.remove(&node.name);
            return;
        }
        if self.terminator.cordoned.contains_key(&node.name)
            || self.terminator.uncordoning.contains_key(&node.name)
        {
            return;
        }
        // Only machines of this core: another controller's node may carry the same taint
        // for a disruption of its own.
        let Some(nodeclaim) = self
            .state
            .nodes
            .get(&node.name)
            .and_then(|n| n.nodeclaim.clone())
            .filter(|c| self.state.nodeclaims.contains_key(c))
        else {
            return;
        };
        let leaving = self
            .state
            .nodeclaims
            .get(&nodeclaim)
            .is_some_and(|c| c.terminating.is_some());
        if leaving || self.terminator.draining.contains_key(&nodeclaim) {
            return;
        }
        self.terminator
            .uncordoning
            .insert(node.name.clone(), nodeclaim.clone());
        commands.push(Command::UncordonNode {
            node: node.name.clone(),
            nodeclaim,
            reason: format!(
                "it carries the {} taint, and no disruption of it is under way (a taint left by an earlier controller)",
                labels::DISRUPTED_TAINT
            ),
        });
    }

    fn finish_termination(
        &mut self,
        nodeclaim: &str,
        reason: TerminationReason,
        detail: String,
        commands: &mut Vec<Command>,
    ) {
        let Some(claim) = self.state.nodeclaims.get(nodeclaim) else {
            return;
        };
        commands.push(Command::TerminateNodeClaim {
            nodeclaim: nodeclaim.to_string(),
            node: claim.node_name.clone(),
            instance_id: claim.instance.as_ref().map(|i| i.instance_id.clone()),
            reason,
            detail,
        });
    }

    /// Closes the batch: nominate pods onto existing capacity, launch machines for the rest.
    fn provision(&mut self, commands: &mut Vec<Command>) {
        self.refresh_pool_shapes();
        let now = self.now_ms;
        let pending: Vec<&Pod> = self.state.pending_pods().collect();
        if pending.is_empty() {
            return;
        }
        let result = scheduler::solve(
            &self.state,
            &self.caches.pool_shapes,
            &self.config,
            now,
            &pending,
        );
        let hold = self.sibling_hold_plan(&result);
        let mut launched_held: Vec<String> = Vec::new();
        for (pod, target) in result.nominations {
            self.provisioner.unschedulable.remove(&pod);
            if self.provisioner.nominations.get(&pod) != Some(&target) {
                self.provisioner
                    .nominations
                    .insert(pod.clone(), target.clone());
                commands.push(Command::NominatePod {
                    reason: format!("pod fits the free capacity of {target}"),
                    pod,
                    target,
                });
            }
        }
        for (index, planned) in result.new_claims.into_iter().enumerate() {
            let Some((mut spec, mut reason)) = self.claim_spec(&planned) else {
                // No offering is left to launch with (it can only happen if the catalog
                // changed under the solve): the pods are told, and retried next batch.
                for pod in &planned.pods {
                    self.provisioner.nominations.remove(pod);
                    let reason = format!(
                        "nodepool {}: no instance type offering is available to launch with",
                        planned.nodepool
                    );
                    if self.provisioner.unschedulable.get(pod) != Some(&reason) {
                        self.provisioner
                            .unschedulable
                            .insert(pod.clone(), reason.clone());
                        commands.push(Command::ReportUnschedulable {
                            pod: pod.clone(),
                            reason,
                        });
                    }
                }
                continue;
            };
            {
                if hold.as_ref().is_some_and(|h| h.launched.contains(&index)) {
                    spec.startup_taints.push(sibling_hold::hold_taint());
                    launched_held.push(spec.name.clone());
                    reason.summary.push_str(&format!(
                        "; starts held ({}) until the other machines this decision placed spreading pods on have registered, at most {} after the first",
                        labels::SIBLING_HOLD_TAINT,
                        crate::model::duration::format_duration_ms(self.config.sibling_hold_ms)
                    ));
                }
                for pod in &planned.pods {
                    self.provisioner.unschedulable.remove(pod);
                    self.provisioner
                        .nominations
                        .insert(pod.clone(), spec.name.clone());
                }
                self.launch(spec, reason, commands);
            }
        }
        if let Some(hold) = hold {
            self.provisioner
                .sibling_holds
                .hold(&launched_held, &hold.joining);
        }
        for (pod, why) in result.unschedulable {
            self.provisioner.nominations.remove(&pod);
            // The command and the log carry the reason as text, for people.
            let reason = why.to_string();
            if self.provisioner.unschedulable.get(&pod) != Some(&reason) {
                self.provisioner
                    .unschedulable
                    .insert(pod.clone(), reason.clone());
                commands.push(Command::ReportUnschedulable { pod, reason });
            }
        }
    }

    /// Records a new machine and asks for it.
    fn launch(&mut self, spec: NodeClaimSpec, reason: LaunchReason, commands: &mut Vec<Command>) {
        // A new machine has deadlines of its own.
        self.caches.claim_deadline_ms = None;
        self.state.nodeclaims.insert(
            spec.name.clone(),
            NodeClaimState::new(spec.clone(), self.now_ms),
        );
        commands.push(Command::LaunchNodeClaim {
            nodeclaim: Box::new(spec),
            reason,
        });
    }

    /// Brings every static NodePool to its replicas ([`static_pool`]): launches what is
    /// missing, terminates what is beyond. Returns when to look again when a launch found no
    /// offering to launch with (when an unavailable offering comes back).
    fn static_pools(&mut self, commands: &mut Vec<Command>) -> Option<u64> {
        self.refresh_pool_shapes();
        let now = self.now_ms;
        let plan = static_pool::plan(&self.state);
        for (claim, detail) in plan.remove {
            self.terminate(&claim, TerminationReason::ScaledDown, detail, commands);
        }
        let mut stuck = false;
        for (pool, count, why) in plan.launch {
            let Some(planned) = self.static_claim(&pool) else {
                stuck = true;
                continue;
            };
            for _ in 0..count {
                let Some((spec, mut reason)) = self.claim_spec(&planned) else {
                    stuck = true;
                    break;
                };
                reason.summary = format!("{why}; {}", reason.summary);
                self.launch(spec, reason, commands);
            }
        }
        if !stuck {
            return None;
        }
        self.state
            .unavailable
            .values()
            .copied()
            .filter(|until| *until > now)
            .min()
    }

    /// Where the workload pods of a machine (NodeClaim `nodeclaim` on `node`) would go if it
    /// went: the rest of the cluster, plus new machines. Pods already pending compete for the
    /// same capacity (machines on their way are meant for them), so they are placed in the
    /// same simulation, as Karpenter's is. Returns the pods that would move, unbound.
    fn solve_moving_out(
        &self,
        nodeclaim: &str,
        node: Option<&str>,
    ) -> (Vec<Pod>, scheduler::SolveResult) {
        let pods = self.state.movable_pods(node);
        let mut refs: Vec<&Pod> = pods.iter().collect();
        refs.extend(self.state.pending_pods());
        let removed = BTreeSet::from([nodeclaim.to_string()]);
        let result = scheduler::solve_without(
            &self.state,
            &self.caches.pool_shapes,
            &self.config,
            self.now_ms,
            &refs,
            &removed,
        );
        (pods, result)
    }

    /// A machine of a static pool: its template, every type it allows, no pod.
    fn static_claim(&self, pool: &str) -> Option<PlannedClaim> {
        let pool = self.state.nodepools.get(pool)?;
        let class = self.state.nodeclasses.get(&pool.node_class_ref.name)?;
        let shape = self.caches.pool_shapes.get(&self.state, pool, class)?;
        Some(PlannedClaim {
            nodepool: pool.name.clone(),
            requirements: shape.template.clone(),
            pods: Vec::new(),
            requests: Resources::default(),
            types: shape.types.to_vec(),
            min_values: shape.min_values.clone(),
        })
    }

    /// Which machines of a solve start held ([`sibling_hold`]): when pods that spread or keep
    /// apart are placed over two or more machines on their way, the new ones among them (by
    /// index in `new_claims`) and the held ones already launched (`joining`).
    fn sibling_hold_plan(&self, result: &scheduler::SolveResult) -> Option<HoldPlan> {
        if self.config.sibling_hold_ms == 0 {
            return None;
        }
        let constrained = |pod: &PodKey| {
            self.state
                .pods
                .get(pod)
                .is_some_and(sibling_hold::constrains)
        };
        let launched: BTreeSet<usize> = result
            .new_claims
            .iter()
            .enumerate()
            .filter(|(_, c)| c.pods.iter().any(constrained))
            .map(|(i, _)| i)
            .collect();
        let joining: BTreeSet<String> = result
            .nominations
            .iter()
            .filter(|(pod, _)| constrained(pod))
            .filter_map(|(_, target)| {
                if self.state.nodeclaims.contains_key(target) {
                    Some(target.clone())
                } else {
                    self.state
                        .nodes
                        .get(target)
                        .and_then(|n| n.nodeclaim.clone())
                }
            })
            .filter(|claim| self.provisioner.sibling_holds.is_held(claim))
            .collect();
        (launched.len() + joining.len() >= 2).then_some(HoldPlan { launched, joining })
    }

    fn claim_spec(&mut self, planned: &PlannedClaim) -> Option<(NodeClaimSpec, LaunchReason)> {
        let pool = self.state.nodepools.get(&planned.nodepool)?.clone();
        let offerings = scheduler::launch_offerings(
            &self.state,
            planned,
            self.now_ms,
            self.config.max_instance_types,
        );
        let prepared = self.state.catalog.as_deref()?;
        let options: Arc<[LaunchOption]> = offerings.iter().map(|o| o.option(prepared)).collect();
        let mut types: Vec<usize> = offerings.iter().map(|o| o.t).collect();
        types.sort_unstable();
        types.dedup();
        let type_count = types.len();
        let cheapest = options.first()?.clone();
        let name = loop {
            let candidate = format!("{}-{}", pool.name, self.provisioner.names.suffix());
            if !self.state.nodeclaims.contains_key(&candidate) {
                break candidate;
            }
        };
        let mut node_labels = pool.template_labels.clone();
        node_labels.extend(planned.requirements.node_labels());
        node_labels.insert(labels::NODEPOOL.to_string(), pool.name.clone());
        // A Windows class's machines say so whatever their type's catalog labels are.
        if let Some(NodeOs::Windows { build }) = self
            .state
            .nodeclasses
            .get(&pool.node_class_ref.name)
            .map(|class| class.os())
        {
            node_labels.insert(labels::OS.to_string(), "windows".to_string());
            node_labels.insert(labels::WINDOWS_BUILD.to_string(), build.to_string());
        }
        let requirements: Vec<RequirementSpec> = planned
            .requirements
            .iter()
            .flat_map(|r| requirement_specs(r, &planned.min_values))
            .collect();
        let pods_text: Vec<String> = planned.pods.iter().map(|p| p.to_string()).collect();
        // A static pool's machine is for no pod: its summary starts at the pool.
        let lead = if planned.pods.is_empty() {
            String::new()
        } else {
            format!(
                "{} pending pod(s) [{}] need {}; ",
                planned.pods.len(),
                pods_text.join(", "),
                planned.requests
            )
        };
        let summary = format!(
            "{lead}nodepool {} ({}); {} instance types fit, cheapest {} {} {} at {}",
            pool.name,
            describe_pool_requirements(&pool),
            type_count,
            cheapest.instance_type,
            cheapest.zone,
            cheapest.capacity_type,
            cheapest.price,
        );
        let mut annotations = pool.template_annotations.clone();
        let hashes = self.drift_inputs();
        annotations.insert(
            crate::disruption::drift::NODEPOOL_HASH.to_string(),
            hashes.pool_hash(&pool.name).map_or_else(
                || crate::disruption::drift::nodepool_hash(&pool),
                str::to_string,
            ),
        );
        if let Some(class) = self.state.nodeclasses.get(&pool.node_class_ref.name) {
            annotations.insert(
                crate::disruption::drift::NODECLASS_HASH.to_string(),
                hashes.class_hash(&class.name).map_or_else(
                    || crate::disruption::drift::nodeclass_hash(class),
                    str::to_string,
                ),
            );
        }
        let spec = NodeClaimSpec {
            name,
            nodepool: pool.name.clone(),
            nodeclass: pool.node_class_ref.name.clone(),
            labels: node_labels,
            annotations,
            taints: pool.taints.clone(),
            startup_taints: pool.startup_taints.clone(),
            requirements,
            requests: planned.requests.clone(),
            options,
            expire_after_ms: pool.expire_after.as_ms(),
        };
        Some((
            spec,
            LaunchReason {
                pods: planned.pods.clone(),
                summary,
            },
        ))
    }
}

fn describe_pool_requirements(pool: &crate::model::nodepool::NodePool) -> String {
    if pool.requirements.is_empty() {
        return "no requirements".to_string();
    }
    pool.requirements
        .iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// A requirement set as NodeClaim requirements: the value set with its operator, and integer
/// bounds as separate Gt / Lt terms, with the `minValues` in force.
fn requirement_specs(
    r: &crate::model::requirements::Requirement,
    min_values: &[(String, u32)],
) -> Vec<RequirementSpec> {
    use crate::model::requirements::Operator;
    let min_values = min_values
        .iter()
        .find(|(k, _)| *k == r.key)
        .map(|(_, m)| *m)
        .or(r.min_values);
    let mut out = Vec::new();
    let values: Vec<String> = r.values.iter().cloned().collect();
    let set_op = match (r.complement, values.is_empty()) {
        (true, true) => Operator::Exists,
        (true, false) => Operator::NotIn,
        (false, true) => Operator::DoesNotExist,
        (false, false) => Operator::In,
    };
    let has_bounds = r.greater_than.is_some() || r.less_than.is_some();
    // `Exists` adds nothing next to a bound (a bound already requires the label).
    if !(set_op == Operator::Exists && has_bounds) {
        out.push(RequirementSpec {
            key: r.key.clone(),
            operator: set_op,
            values,
            min_values,
        });
    }
    if let Some(gt) = r.greater_than {
        out.push(RequirementSpec {
            key: r.key.clone(),
            operator: Operator::Gt,
            values: vec![gt.to_string()],
            min_values: None,
        });
    }
    if let Some(lt) = r.less_than {
        out.push(RequirementSpec {
            key: r.key.clone(),
            operator: Operator::Lt,
            values: vec![lt.to_string()],
            min_values: None,
        });
    }
    if let Some(first) = out.first_mut() {
        first.min_values = min_values;
    }
    out
}
