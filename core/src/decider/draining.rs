//! Draining a machine before its instance goes: evictions in Karpenter's tiers, within
//! PodDisruptionBudgets and do-not-disrupt until terminationGracePeriod runs out (and, past
//! `expireAfter`, leaving Jobs' pods to finish: `Config::expiration_waits_for_jobs`); and which
//! drains need to look again after an event.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Core;
use crate::command::Command;
use crate::model::nodeclaim::TerminationReason;
use crate::model::pod::{Pod, PodKey};

/// How often a drain asks again for pods a PodDisruptionBudget held back.
const EVICTION_RETRY_MS: u64 = 5_000;
/// Pods at or above this priority (system-cluster-critical) leave last.
const CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// A machine being drained before its instance is terminated.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Drain {
    pub(super) node: String,
    pub(super) reason: TerminationReason,
    pub(super) detail: String,
    /// After this, PodDisruptionBudgets and do-not-disrupt no longer hold the drain
    /// (the NodePool's terminationGracePeriod).
    pub(super) deadline_ms: Option<u64>,
    /// Pods asked to leave.
    pub(super) evicting: BTreeMap<PodKey, Eviction>,
    /// terminationGracePeriod ran out: what is left is deleted, whatever blocks it.
    pub(super) forced: bool,
    /// After its last step: a pod was held back by a PodDisruptionBudget or do-not-disrupt,
    /// which any change in the cluster may lift, so the drain looks again after every event.
    pub(super) held_back: bool,
    /// After its last step: when a refused eviction may be asked again, or
    /// terminationGracePeriod runs out. Until then, and while its node's pods do not change,
    /// a step would do nothing.
    pub(super) wake_ms: Option<u64>,
    /// After its last step: pods are left to finish (`Config::expiration_waits_for_jobs`) and
    /// nothing else holds the drain back. Only their ends (a change of the node's pods) and
    /// terminationGracePeriod move it, so it needs no periodic look.
    pub(super) waits_for_jobs: bool,
}

/// Where the eviction of one pod stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum Eviction {
    /// Asked (forced or not); the pod is on its way out.
    Asked { forced: bool },
    /// Refused at this time (a PodDisruptionBudget); asked again after the retry interval.
    Refused(u64),
}

/// What one event changed, as far as drains care: the pods of some nodes (or a drain of
/// theirs), or anything.
#[derive(Debug, Clone, Default)]
pub(super) struct Touched {
    /// Anything but a pod changed (nodes, budgets, refusals, policy): every drain looks again
    /// but those that only wait for pods left to finish ([`Drain::waits_for_jobs`]), which
    /// nothing but their node's pods and their own deadline moves.
    pub(super) everything: bool,
    /// Nodes whose pods changed, or whose drain itself changed (its deadline, a refusal, its
    /// node gone): their drains look again, whatever they wait for.
    nodes: BTreeSet<String>,
}

impl Touched {
    /// Only time passed, or anything changed.
    pub(super) fn new(everything: bool) -> Self {
        Touched {
            everything,
            nodes: BTreeSet::new(),
        }
    }

    fn node(&mut self, node: &str) {
        if !self.nodes.contains(node) {
            self.nodes.insert(node.to_string());
        }
    }

    /// Whether `drain` looks again for what changed.
    fn wakes(&self, drain: &Drain) -> bool {
        (self.everything && !drain.waits_for_jobs) || self.nodes.contains(&drain.node)
    }
}

/// What one step of a drain does, worked out before any of it is done.
#[derive(Debug, PartialEq)]
struct Step {
    /// terminationGracePeriod ran out: PodDisruptionBudgets and do-not-disrupt no longer hold.
    forced: bool,
    /// The pods asked to leave now, in the order asked.
    asks: Vec<PodKey>,
    /// A pod was held back by a PodDisruptionBudget or do-not-disrupt.
    held_back: bool,
    /// A pod is left to finish (`Config::expiration_waits_for_jobs`).
    left_to_finish: bool,
    /// When a refused eviction may be asked again, or terminationGracePeriod runs out.
    wake_ms: Option<u64>,
}

impl Step {
    /// Whether doing it would leave `drain` as it is and ask nothing.
    fn changes_nothing_of(&self, drain: &Drain) -> bool {
        self.asks.is_empty()
            && self.forced == drain.forced
            && self.held_back == drain.held_back
            && self.wake_ms == drain.wake_ms
            && (self.left_to_finish && !self.held_back) == drain.waits_for_jobs
    }
}

impl Core {
    /// One step of a drain: evict what PodDisruptionBudgets allow, in Karpenter's tiers
    /// (non-critical pods, non-critical DaemonSet pods, critical pods, critical DaemonSet
    /// pods: a tier starts once the one before has left); terminate the instance once no pod
    /// is left.
    pub(super) fn drain_step(
        &mut self,
        nodeclaim: &str,
        evicting_now: &mut BTreeSet<PodKey>,
        commands: &mut Vec<Command>,
    ) {
        let Some(drain) = self.terminator.draining.get(nodeclaim) else {
            return;
        };
        let Some(step) = self.next_step(drain, evicting_now) else {
            if let Some(drain) = self.terminator.draining.remove(nodeclaim) {
                for (key, e) in &drain.evicting {
                    if matches!(e, Eviction::Asked { .. }) {
                        evicting_now.remove(key);
                    }
                }
                self.finish_termination(nodeclaim, drain.reason, drain.detail, commands);
            }
            return;
        };
        let forced = step.forced;
        for key in &step.asks {
            commands.push(Command::EvictPod {
                pod: key.clone(),
                node: drain.node.clone(),
                forced,
                reason: if forced {
                    format!(
                        "{}: terminationGracePeriod ran out; PodDisruptionBudgets and do-not-disrupt no longer hold",
                        drain.reason
                    )
                } else {
                    format!("{}: {}", drain.reason, drain.detail)
                },
            });
        }
        if let Some(d) = self.terminator.draining.get_mut(nodeclaim) {
            for key in step.asks {
                d.evicting.insert(key, Eviction::Asked { forced });
            }
            d.forced = forced;
            d.held_back = step.held_back;
            d.wake_ms = step.wake_ms;
            d.waits_for_jobs = step.left_to_finish && !step.held_back;
        }
    }

    /// What the next step of `drain` does, the pods it asks added to `evicting_now`; `None`
    /// when no pod is left (the drain is done).
    fn next_step(&self, drain: &Drain, evicting_now: &mut BTreeSet<PodKey>) -> Option<Step> {
        let now = self.now_ms;
        let pods = self.state.drainable_pods_on_node(&drain.node);
        if pods.is_empty() {
            return None;
        }
        let forced = drain.forced || drain.deadline_ms.is_some_and(|d| now >= d);
        let expired = drain.reason == TerminationReason::Expired;
        let tier =
            |p: &Pod| (p.priority >= CRITICAL_PRIORITY) as u8 * 2 + p.is_daemonset_pod() as u8;
        let current_tier = pods.iter().map(|p| tier(p)).min().unwrap_or(0);
        let mut asks = Vec::new();
        let mut held_back = false;
        let mut left_to_finish = false;
        for pod in &pods {
            if tier(pod) != current_tier {
                continue;
            }
            let pending = match drain.evicting.get(&pod.key) {
                None => false,
                // Asked: the pod is on its way out; a graceful eviction is made a forced one
                // once terminationGracePeriod runs out.
                Some(Eviction::Asked { forced: was_forced }) => *was_forced || !forced,
                Some(Eviction::Refused(at)) => now < at + EVICTION_RETRY_MS,
            };
            if pending {
                continue;
            }
            if !forced && expired && self.config.expiration_waits_for(pod) {
                // Left to finish (`expirationWaitsForJobs`): its end changes the node's pods,
                // which steps the drain again; nothing else in the cluster can.
                left_to_finish = true;
                continue;
            }
            if !forced
                && (pod.do_not_disrupt().active_at(now)
                    || self.state.pdb_blocking(pod, evicting_now).is_some())
            {
                held_back = true;
                continue;
            }
            evicting_now.insert(pod.key.clone());
            asks.push(pod.key.clone());
        }
        let wake_ms = drain
            .evicting
            .values()
            .filter_map(|e| match e {
                Eviction::Refused(at) => Some(at + EVICTION_RETRY_MS),
                Eviction::Asked { .. } => None,
            })
            .chain(drain.deadline_ms.filter(|_| !forced))
            .filter(|t| *t > now)
            .min();
        Some(Step {
            forced,
            asks,
            held_back,
            left_to_finish,
            wake_ms,
        })
    }

    /// The NodeClaims whose drains may leave pods to finish now: past `expireAfter`
    /// (`Config::expiration_waits_for_jobs`), not forced, before their own terminationGracePeriod
    /// deadline (which a spot interruption may have brought forward). Budgets do not count
    /// those of them kept only by such pods
    /// ([`crate::disruption::expiration::waits_only_for_jobs`]).
    pub(super) fn drains_leaving_pods_to_finish(&mut self) -> Arc<BTreeSet<String>> {
        if !self.config.expiration_waits_for_jobs {
            return Arc::default();
        }
        let now = self.now_ms;
        let leaving = self
            .terminator
            .draining
            .iter()
            .filter(|(_, d)| {
                d.reason == TerminationReason::Expired
                    && !d.forced
                    && d.deadline_ms.is_none_or(|t| now < t)
            })
            .map(|(name, _)| name);
        // Mostly the same as the pass before: the set made then is shared again.
        let kept = &self.caches.leaving_to_finish;
        if !leaving.clone().eq(kept.iter()) {
            self.caches.leaving_to_finish = Arc::new(leaving.cloned().collect());
        }
        Arc::clone(&self.caches.leaving_to_finish)
    }

    /// Pods asked to leave by any drain and still there: they count as unavailable for
    /// PodDisruptionBudgets (a refused one does not: it is still running, and is what may be
    /// asked again).
    pub(super) fn evicting_now(&self) -> BTreeSet<PodKey> {
        self.terminator
            .draining
            .values()
            .flat_map(|d| {
                d.evicting
                    .iter()
                    .filter(|(_, e)| matches!(e, Eviction::Asked { .. }))
                    .map(|(k, _)| k)
            })
            .filter(|k| self.state.pods.contains_key(k))
            .cloned()
            .collect()
    }

    /// Advances the drains that may move: those whose node's pods (or the drain itself)
    /// changed, those waiting on the rest of the cluster, those whose time has come, and after
    /// any other change every drain but those only waiting for pods left to finish (a step of
    /// any other would ask nothing and change nothing). Returns when one may need to ask again.
    pub(super) fn drain_all(&mut self, commands: &mut Vec<Command>) -> Option<u64> {
        let now = self.now_ms;
        let touched = &self.caches.touched;
        let names: Vec<String> = self
            .terminator
            .draining
            .iter()
            .filter(|(_, d)| d.held_back || d.wake_ms.is_some_and(|t| t <= now) || touched.wakes(d))
            .map(|(name, _)| name.clone())
            .collect();
        if cfg!(debug_assertions) {
            self.check_quiet_drains_would_change_nothing(&names);
        }
        if !names.is_empty() {
            let mut evicting_now = self.evicting_now();
            for name in names {
                self.drain_step(&name, &mut evicting_now, commands);
            }
        }
        self.terminator
            .draining
            .values()
            .flat_map(|d| {
                d.evicting
                    .values()
                    .filter_map(|e| match e {
                        Eviction::Refused(at) => Some(at + EVICTION_RETRY_MS),
                        Eviction::Asked { .. } => None,
                    })
                    .chain((!d.waits_for_jobs).then_some(now + EVICTION_RETRY_MS))
                    .chain(d.deadline_ms.filter(|t| *t > now))
            })
            .filter(|t| *t > now)
            .min()
    }

    /// Debug builds: every drain an event that changed anything leaves alone (`stepping`,
    /// sorted, are the others), because it only waits for pods left to finish, would ask
    /// nothing and change nothing if it stepped. (Such a step asks no PodDisruptionBudget, so
    /// the evictions other drains ask first do not matter to it.)
    fn check_quiet_drains_would_change_nothing(&self, stepping: &[String]) {
        if !self.caches.touched.everything {
            return;
        }
        let evicting_now = self.evicting_now();
        for (name, drain) in &self.terminator.draining {
            if stepping.binary_search(name).is_ok() {
                continue;
            }
            let step = self.next_step(drain, &mut evicting_now.clone());
            assert!(
                step.as_ref().is_some_and(|s| s.changes_nothing_of(drain)),
                "the drain of {name} waits only for pods left to finish, yet a step would act: {step:?}"
            );
        }
    }

    /// Notes that the pods of `node` changed (only drains ask, so only while one runs).
    pub(super) fn touch_node(&mut self, node: &str) {
        if !self.terminator.draining.is_empty() {
            self.caches.touched.node(node);
        }
    }

    /// Notes that the drain of `nodeclaim` itself changed (its deadline, a refusal): it looks
    /// again after this event, even if it only waited for pods left to finish.
    pub(super) fn touch_drain(&mut self, nodeclaim: &str) {
        if let Some(drain) = self.terminator.draining.get(nodeclaim) {
            self.caches.touched.node(&drain.node);
        }
    }
}
