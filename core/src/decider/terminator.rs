//! The terminator's work: a machine given up, cordoned, uncordoned when a disruption is
//! given up, and finished once its instance is gone.

use super::rooms::TerminationRetry;
use super::*;

/// How long a failed termination waits before it is asked again the first time; the wait
/// doubles with each failure in a row.
pub(super) const TERMINATION_RETRY_FIRST_MS: u64 = 30_000;
/// The longest wait between two attempts of a termination.
pub(super) const TERMINATION_RETRY_MAX_MS: u64 = 600_000;

impl Core {
    pub(super) fn terminate(
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
        // A machine waiting for its launch result no longer keeps its instance from the
        // garbage collector.
        self.caches.garbage_quiet_until_ms = None;
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
                        waits_for_jobs: false,
                    },
                );
                let mut evicting_now = self.evicting_now();
                self.drain_step(nodeclaim, &mut evicting_now, commands);
            }
            _ => self.finish_termination(nodeclaim, reason, detail, commands),
        }
    }

    /// Taints the node `karpenter.sh/disrupted:NoSchedule` (once).
    pub(super) fn cordon(
        &mut self,
        node: &str,
        nodeclaim: &str,
        reason: String,
        commands: &mut Vec<Command>,
    ) {
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
    pub(super) fn uncordon(
        &mut self,
        nodeclaim: &str,
        reason: String,
        commands: &mut Vec<Command>,
    ) {
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
    pub(super) fn untaint_if_stale(
        &mut self,
        node: &crate::model::node::Node,
        commands: &mut Vec<Command>,
    ) {
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

    pub(super) fn finish_termination(
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

    /// A termination that could not be finished: asked again after [`TERMINATION_RETRY_FIRST_MS`],
    /// doubling with each failure in a row up to [`TERMINATION_RETRY_MAX_MS`] (at once the
    /// longest when retrying cannot help by itself: a person must act first).
    /// Why it failed is in the event (`explain` tells it); the state keeps only when to ask.
    pub(super) fn termination_failed(&mut self, nodeclaim: &str, retryable: bool) {
        let Some(claim) = self.state.nodeclaims.get(nodeclaim) else {
            return;
        };
        if claim.terminating.is_none() {
            return;
        }
        let failures = self
            .terminator
            .retrying
            .get(nodeclaim)
            .map_or(1, |r| r.failures.saturating_add(1));
        let wait = if retryable {
            TERMINATION_RETRY_FIRST_MS
                .saturating_mul(1 << (failures - 1).min(16))
                .min(TERMINATION_RETRY_MAX_MS)
        } else {
            TERMINATION_RETRY_MAX_MS
        };
        self.terminator.retrying.insert(
            nodeclaim.to_string(),
            TerminationRetry {
                failures,
                at_ms: self.now_ms + wait,
            },
        );
    }

    /// The failed terminations whose time came, asked again.
    pub(super) fn retry_due_terminations(&mut self, commands: &mut Vec<Command>) {
        let now = self.now_ms;
        let due: Vec<String> = self
            .terminator
            .retrying
            .iter()
            .filter(|(_, r)| r.at_ms <= now)
            .map(|(name, _)| name.clone())
            .collect();
        for name in due {
            let Some(retry) = self.terminator.retrying.get_mut(&name) else {
                continue;
            };
            // Asked again once; the next failure sets the next time.
            retry.at_ms = u64::MAX;
            let failures = retry.failures;
            let Some(reason) = self
                .state
                .nodeclaims
                .get(&name)
                .and_then(|c| c.terminating.map(|(reason, _)| reason))
            else {
                self.terminator.retrying.remove(&name);
                continue;
            };
            self.finish_termination(
                &name,
                reason,
                format!(
                    "asked again after {failures} failed attempt(s) (their TerminationFailed events say why)"
                ),
                commands,
            );
        }
    }
}
