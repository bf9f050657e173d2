//! Draining a machine before its instance goes: evictions in Karpenter's tiers, within
//! PodDisruptionBudgets and do-not-disrupt until terminationGracePeriod runs out (and, past
//! `expireAfter`, leaving Jobs' pods to finish: `Config::expiration_waits_for_jobs`); and which
//! drains need to look again after an event.

use std::collections::{BTreeMap, BTreeSet};

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

/// What one event changed, as far as drains care: the pods of some nodes, or anything.
#[derive(Debug, Clone, Default)]
pub(super) enum Touched {
    /// Only time passed.
    #[default]
    Nothing,
    /// Pods bound to, changed on or removed from these nodes.
    Nodes(BTreeSet<String>),
    /// Anything else (nodes, budgets, refusals, policy): every drain looks again.
    Everything,
}

impl Touched {
    fn node(&mut self, node: &str) {
        match self {
            Touched::Nothing => *self = Touched::Nodes(BTreeSet::from([node.to_string()])),
            Touched::Nodes(nodes) => {
                if !nodes.contains(node) {
                    nodes.insert(node.to_string());
                }
            }
            Touched::Everything => {}
        }
    }

    fn includes(&self, node: &str) -> bool {
        match self {
            Touched::Nothing => false,
            Touched::Nodes(nodes) => nodes.contains(node),
            Touched::Everything => true,
        }
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
        let now = self.now_ms;
        let Some(drain) = self.terminator.draining.get(nodeclaim) else {
            return;
        };
        let pods = self.state.drainable_pods_on_node(&drain.node);
        if pods.is_empty() {
            if let Some(drain) = self.terminator.draining.remove(nodeclaim) {
                for (key, e) in &drain.evicting {
                    if matches!(e, Eviction::Asked { .. }) {
                        evicting_now.remove(key);
                    }
                }
                self.finish_termination(nodeclaim, drain.reason, drain.detail, commands);
            }
            return;
        }
        let forced = drain.forced || drain.deadline_ms.is_some_and(|d| now >= d);
        let expired = drain.reason == TerminationReason::Expired;
        let tier =
            |p: &Pod| (p.priority >= CRITICAL_PRIORITY) as u8 * 2 + p.is_daemonset_pod() as u8;
        let current_tier = pods.iter().map(|p| tier(p)).min().unwrap_or(0);
        let mut asked = Vec::new();
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
            asked.push(pod.key.clone());
            commands.push(Command::EvictPod {
                pod: pod.key.clone(),
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
        if let Some(d) = self.terminator.draining.get_mut(nodeclaim) {
            for key in asked {
                d.evicting.insert(key, Eviction::Asked { forced });
            }
            d.forced = forced;
            d.held_back = held_back;
            d.wake_ms = wake_ms;
            d.waits_for_jobs = left_to_finish && !held_back;
        }
    }

    /// The NodeClaims whose drains may leave pods to finish now: past `expireAfter`
    /// (`Config::expiration_waits_for_jobs`), not forced, before their own terminationGracePeriod
    /// deadline (which a spot interruption may have brought forward). Budgets do not count
    /// those of them kept only by such pods
    /// ([`crate::disruption::expiration::waits_only_for_jobs`]).
    pub(super) fn drains_leaving_pods_to_finish(&self) -> BTreeSet<String> {
        if !self.config.expiration_waits_for_jobs {
            return BTreeSet::new();
        }
        let now = self.now_ms;
        self.terminator
            .draining
            .iter()
            .filter(|(_, d)| {
                d.reason == TerminationReason::Expired
                    && !d.forced
                    && d.deadline_ms.is_none_or(|t| now < t)
            })
            .map(|(name, _)| name.clone())
            .collect()
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

    /// Advances the drains that may move: those whose node's pods changed, those waiting on
    /// the rest of the cluster, those whose time has come (a step of any other would ask
    /// nothing and change nothing). Returns when one may need to ask again.
    pub(super) fn drain_all(&mut self, commands: &mut Vec<Command>) -> Option<u64> {
        let now = self.now_ms;
        let names: Vec<String> = self
            .terminator
            .draining
            .iter()
            .filter(|(_, d)| {
                d.held_back
                    || d.wake_ms.is_some_and(|t| t <= now)
                    || self.caches.touched.includes(&d.node)
            })
            .map(|(name, _)| name.clone())
            .collect();
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

    /// Notes that the pods of `node` changed (only drains ask, so only while one runs).
    pub(super) fn touch_node(&mut self, node: &str) {
        if !self.terminator.draining.is_empty() {
            self.caches.touched.node(node);
        }
    }
}
