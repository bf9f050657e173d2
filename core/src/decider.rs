//! The decider: `handle(event) -> commands`, and `next_timer_ms()` — the core's one entry point.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::command::Command;
use crate::config::Config;
use crate::disruption::{consolidation, emptiness, expiration};
use crate::event::{Event, EventKind};
use crate::lifecycle;
use crate::model::labels;
use crate::model::listing;
use crate::model::nodeclaim::{LaunchReason, ListedInstance, NodeClaimSpec, TerminationReason};
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

mod adoption;
mod disruptor;
mod draining;
mod effects;
mod interrupting;
mod node_events;
mod nodeclaim_events;
mod pod_events;
mod provisioner;
mod rooms;
mod terminator;

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

/// A machine being replaced, as [`Core::replacing`] tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replacing<'a> {
    /// Its NodeClaim.
    pub old: &'a str,
    /// The NodeClaims launched to replace it.
    pub new: &'a BTreeSet<String>,
    /// Why it is replaced.
    pub reason: TerminationReason,
    /// What drifted, when it is replaced for drift.
    pub drift: Option<&'a crate::disruption::drift::DriftCause>,
}

/// The replacements of one machine and why it is replaced.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Replacement {
    new: BTreeSet<String>,
    reason: TerminationReason,
    detail: String,
    /// What drifted, when it is replaced for drift.
    drift: Option<crate::disruption::drift::DriftCause>,
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
    /// 9: the configuration's `separate_when_cheaper`.
    /// 10: what drifted on a machine replaced for drift (`DriftCause`).
    /// 11: the configuration's `expiration_waits_for_jobs`, and whether a drain waits only for
    ///     pods left to finish.
    /// 12: the terminations that failed and are asked again (`TerminationFailed`).
    pub const STATE_LAYOUT: u32 = 12;

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
    /// start applies its NodePools, classes and DaemonSets one event each). What drift compares
    /// every machine with may have changed too.
    fn pool_shapes_changed(&mut self) {
        self.caches.pool_shapes_stale = true;
        self.caches.launch_memo.clear();
        self.caches.drift_inputs = None;
        self.caches.drift_found_none = false;
        self.caches.drift_clean.clear();
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
    pub fn replacing(&self) -> impl Iterator<Item = Replacing<'_>> {
        self.disruptor
            .replacements
            .iter()
            .map(|(old, r)| Replacing {
                old,
                new: &r.new,
                reason: r.reason,
                drift: r.drift.as_ref(),
            })
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
        // A retry asked for waits for its result (u64::MAX), not for a timer.
        let retry = self
            .terminator
            .retrying
            .values()
            .map(|r| r.at_ms)
            .filter(|&at| at != u64::MAX)
            .min();
        [batch, self.disruptor.next_rule_ms, retry]
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
        self.caches.touched = Touched::new(effects.wakes_every_drain);
        // An event that changed nothing leaves the due work to its timer: a re-list, a result
        // told twice or a listing with nothing to collect never moves when a rule runs.
        if self.apply(&event.kind, effects, &mut commands) {
            self.run_due_work(&mut commands);
        }
        self.caches.touched = Touched::default();
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
        if effects.changes_nodeclaims {
            self.caches.garbage_quiet_until_ms = None;
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
            EventKind::NodePoolDeleted { name } => self.nodepool_deleted(name, commands),
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
            EventKind::PodBound { pod, node } => self.pod_bound(pod, node),
            EventKind::PodDeleted { pod } => self.pod_deleted(pod),
            EventKind::NodeApplied(node) => self.node_applied(node, commands),
            EventKind::NodeDeleted { name } => self.node_deleted(name, commands),
            EventKind::LaunchSucceeded {
                nodeclaim,
                instance,
            } => self.launch_succeeded(nodeclaim, instance, commands),
            EventKind::LaunchFailed {
                nodeclaim,
                code,
                message,
                unavailable,
            } => self.launch_failed(nodeclaim, code, message, unavailable, commands),
            EventKind::NodeClaimTerminated { nodeclaim } => {
                self.nodeclaim_terminated(nodeclaim, commands)
            }
            EventKind::TerminationFailed {
                nodeclaim,
                retryable,
                ..
            } => self.termination_failed(nodeclaim, *retryable),
            EventKind::Tick => {}
            EventKind::DaemonSetApplied(ds) => {
                self.state
                    .daemonsets
                    .insert((ds.namespace.clone(), ds.name.clone()), ds.as_ref().clone());
                self.trigger_if_pending();
            }
            EventKind::PodDisruptionBudgetApplied(pdb) => {
                self.state.pdbs.insert(
                    (pdb.namespace.clone(), pdb.name.clone()),
                    pdb.as_ref().clone(),
                );
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
                self.listing.clear();
                self.listing.extend_from_slice(instances);
                self.caches.garbage_quiet_until_ms = None;
                return self.collect_garbage(commands);
            }
            EventKind::InstancesRelisted { changed, gone } => {
                // No change rebuilds the same listing.
                if !(changed.is_empty() && gone.is_empty()) {
                    listing::rebuild_in_place(&mut self.listing, changed, gone);
                    self.caches.garbage_quiet_until_ms = None;
                }
                return self.collect_garbage(commands);
            }
            EventKind::EvictionRefused { pod, .. } => {
                // Asked again after the retry interval.
                let mut refused = Vec::new();
                for (name, drain) in self.terminator.draining.iter_mut() {
                    if let Some(e) = drain.evicting.get_mut(pod) {
                        *e = Eviction::Refused(now);
                        refused.push(name.clone());
                    }
                }
                for name in refused {
                    self.touch_drain(&name);
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
            EventKind::NodeClaimsObserved { nodeclaims } => {
                self.nodeclaims_observed(nodeclaims, commands)
            }
            EventKind::NodeDeleting { name } => self.node_deleting(name, commands),
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
            // Only a machine of the core's that is not leaving yet is drained.
            EventKind::NodeDeleting { name } => state
                .nodes
                .get(name)
                .and_then(|n| n.nodeclaim.as_ref())
                .and_then(|c| state.nodeclaims.get(c))
                .is_none_or(|c| c.terminating.is_some()),
            EventKind::PodApplied(pod) => state.pods.get(&pod.key) == Some(pod.as_ref()),
            EventKind::NodeApplied(node) => state
                .nodes
                .get(&node.name)
                .is_some_and(|known| *known.node == **node),
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

    /// Everything whose time has come: the batch, lifecycle deadlines, expiration, disruption.
    fn run_due_work(&mut self, commands: &mut Vec<Command>) {
        let now = self.now_ms;
        self.retry_due_terminations(commands);
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

        let claims_may_act = self.caches.touched.everything
            || self
                .caches
                .claim_deadline_ms
                .is_none_or(|at| at.is_some_and(|t| t <= now));
        if claims_may_act {
            let (overdue, next_deadline) = lifecycle::overdue(&self.state, &self.config, now);
            for o in overdue {
                self.terminate(&o.nodeclaim, o.reason, o.detail, commands);
            }
            let (expired, next_expiry) = expiration::expired(&self.state, &self.config, now);
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
}
