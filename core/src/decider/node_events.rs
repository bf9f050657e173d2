//! What the decider does with node events: a node seen, changed, being deleted or deleted.

use super::*;
use std::sync::Arc;

use crate::model::node::Node;

impl Core {
    /// A node seen or changed: tied to its NodeClaim, its pods listed, its hold and stale
    /// taints looked at, and the machines it replaces let go once their replacements are up.
    pub(super) fn node_applied(&mut self, node: &Arc<Node>, commands: &mut Vec<Command>) {
        let now = self.now_ms;
        self.warn_invalid_annotation(
            || format!("node {}", node.name),
            &node.annotations,
            commands,
        );
        let claim_name = node
            .provider_id
            .as_deref()
            .and_then(|id| self.state.nodeclaim_for_provider_id(id));
        // A node seen first is inserted as it is (not ready before it: it did not
        // become ready); one known is updated.
        let (first_seen, became_ready) = match self.state.nodes.get_mut(&node.name) {
            None => {
                self.state.nodes.insert(
                    node.name.clone(),
                    NodeState::new(Arc::clone(node), claim_name.clone(), now),
                );
                (true, false)
            }
            Some(entry) => {
                let became_ready = node.ready && !entry.node.ready;
                entry.replace_node(Arc::clone(node));
                if entry.nodeclaim.is_none() {
                    entry.nodeclaim = claim_name.clone();
                }
                if became_ready {
                    entry.last_pod_event_ms = now;
                }
                (false, became_ready)
            }
        };
        self.untaint_if_stale(node, commands);
        if let Some(claim) = claim_name.as_deref()
            && self.state.nodeclaims.contains_key(claim)
            && self
                .provisioner
                .sibling_holds
                .observe(claim, node.has_taint(labels::SIBLING_HOLD_TAINT))
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
        if let Some((name, claim)) = claim_name
            .as_ref()
            .and_then(|c| Some((c, self.state.nodeclaims.get_mut(c)?)))
        {
            claim.node_name = Some(node.name.clone());
            claim.registered_at_ms.get_or_insert(now);
            // Initialized: ready, and no longer held for its siblings.
            if node.ready
                && !node.has_taint(labels::SIBLING_HOLD_TAINT)
                && claim.initialized_at_ms.is_none()
            {
                claim.initialized_at_ms = Some(now);
                // Drift looks at initialized machines only: this one is new to it.
                self.caches.new_to_drift(name);
            }
        }
        // Replacements are up: the machine they replace goes.
        if node.ready {
            let done: Vec<String> = self
                .disruptor
                .replacements
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
                        format!(
                            "{}; replaced by {}, now initialized",
                            r.detail,
                            names.join(", ")
                        ),
                        commands,
                    );
                }
            }
        }
        if became_ready {
            self.trigger_if_pending();
        }
    }

    /// A node deleted: its machine, deleted from outside, is of no use.
    pub(super) fn node_deleted(&mut self, name: &str, commands: &mut Vec<Command>) {
        self.warnings.annotations.remove(&format!("node {name}"));
        self.terminator.uncordoning.remove(name);
        // A drain of it finds no pod left.
        self.touch_node(name);
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

    /// A Node is being deleted: a machine of the core's is drained, then terminated.
    pub(super) fn node_deleting(&mut self, name: &str, commands: &mut Vec<Command>) {
        let Some(nodeclaim) = self
            .state
            .nodes
            .get(name)
            .and_then(|n| n.nodeclaim.clone())
            .filter(|c| self.state.nodeclaims.contains_key(c))
        else {
            return;
        };
        self.disruptor.replacements.remove(&nodeclaim);
        self.terminate(
            &nodeclaim,
            TerminationReason::NodeDeleted,
            format!("its node {name} is being deleted; drained first, as Karpenter's termination finalizer does"),
            commands,
        );
    }
}
