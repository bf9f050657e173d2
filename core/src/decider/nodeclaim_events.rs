//! What the decider does with the news of its machines: launches that succeeded or failed,
//! instances gone, NodePools deleted with their NodeClaims, and the instance listing's garbage.

use super::*;
use crate::model::nodeclaim::{Instance, OfferingKey};

impl Core {
    /// Karpenter's NodeClaims are owned by their NodePool: deleting the pool deletes them.
    pub(super) fn nodepool_deleted(&mut self, name: &str, commands: &mut Vec<Command>) {
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

    /// The cloud started a NodeClaim's instance: kept, or terminated if the NodeClaim was
    /// given up meanwhile.
    pub(super) fn launch_succeeded(
        &mut self,
        nodeclaim: &str,
        instance: &Instance,
        commands: &mut Vec<Command>,
    ) {
        let now = self.now_ms;
        match self.state.nodeclaims.get_mut(nodeclaim) {
            Some(claim) if claim.terminating.is_none() => {
                claim.instance = Some(instance.clone());
                claim.launched_at_ms = Some(now);
                // Drift reads a machine's instance.
                self.caches.new_to_drift(nodeclaim);
            }
            _ => commands.push(Command::TerminateNodeClaim {
                nodeclaim: nodeclaim.to_string(),
                node: None,
                instance_id: Some(instance.instance_id.clone()),
                reason: TerminationReason::LaunchTimeout,
                detail: "the launch succeeded after the NodeClaim was given up; the instance is not wanted".to_string(),
            }),
        }
    }

    /// A launch failed: its offerings out of capacity are marked unavailable for a while, and
    /// the NodeClaim is given up.
    pub(super) fn launch_failed(
        &mut self,
        nodeclaim: &str,
        code: &str,
        message: &str,
        unavailable: &[OfferingKey],
        commands: &mut Vec<Command>,
    ) {
        let now = self.now_ms;
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
                nodeclaim: nodeclaim.to_string(),
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

    /// A NodeClaim's instance is gone: a replacement it was is given up, and every room
    /// forgets it.
    pub(super) fn nodeclaim_terminated(&mut self, nodeclaim: &str, commands: &mut Vec<Command>) {
        self.provisioner.sibling_holds.forget(nodeclaim);
        self.terminator.retrying.remove(nodeclaim);
        // A replacement that failed: the machine it was for stays (and is looked at
        // again later); a replaced machine that is gone needs nothing more.
        let given_up: Vec<String> = self
            .disruptor
            .replacements
            .iter()
            .filter(|(old, r)| *old != nodeclaim && r.new.contains(nodeclaim))
            .map(|(old, _)| old.clone())
            .collect();
        self.disruptor
            .replacements
            .retain(|old, r| old != nodeclaim && !r.new.contains(nodeclaim));
        for old in given_up {
            // The machine stays: it takes pods again.
            self.uncordon(
                &old,
                format!("its replacement {nodeclaim} did not come up; the disruption is given up"),
                commands,
            );
        }
        self.terminator.draining.remove(nodeclaim);
        self.terminator.cordoned.retain(|_, c| c != nodeclaim);
        self.caches.drift_clean.remove(nodeclaim);
        if let Some(claim) = self.state.nodeclaims.remove(nodeclaim)
            && let Some(node) = claim.node_name
            && let Some(state) = self.state.nodes.get_mut(&node)
        {
            state.nodeclaim = None;
        }
        self.trigger_if_pending();
    }

    /// Acts on the instance listing just taken in: terminates instances no NodeClaim owns and
    /// finishes NodeClaims whose instance is gone. False when it found nothing.
    pub(super) fn collect_garbage(&mut self, commands: &mut Vec<Command>) -> bool {
        let now = self.now_ms;
        if self
            .caches
            .garbage_quiet_until_ms
            .is_some_and(|until| now < until)
        {
            debug_assert!(
                lifecycle::garbage(&self.state, &self.listing, now).is_empty(),
                "garbage collection skipped, yet the listing calls for some"
            );
            return false;
        }
        let garbage = lifecycle::garbage(&self.state, &self.listing, now);
        if garbage.is_empty() {
            self.caches.garbage_quiet_until_ms = Some(garbage.grace_ends_ms.unwrap_or(u64::MAX));
            return false;
        }
        self.caches.garbage_quiet_until_ms = None;
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
}
