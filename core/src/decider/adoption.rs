//! What the decider does with what a start observed: the API server's NodeClaims adopted as
//! the core's own (their instance, node and conditions with them), the launched ones it knew
//! whose object is gone let go.
//!
//! The cluster and the cloud are the truth: a NodeClaim in the API server is the core's (or
//! Karpenter's, the same contract) whatever the core's log says, and its instance is never an
//! orphan.

use std::sync::Arc;

use super::*;
use crate::catalog::Price;
use crate::disruption::drift::{
    NODECLASS_HASH, NODECLASS_HASH_VERSION, NODEPOOL_HASH, NODEPOOL_HASH_VERSION,
};
use crate::model::nodeclaim::{Instance, LaunchOption};
use crate::model::observed::ObservedNodeClaim;

impl Core {
    /// Every NodeClaim of the API server, observed at a start: each one the core does not know
    /// is adopted; each launched one it knows that is not among them was deleted while no
    /// controller ran, and its machine goes.
    pub(super) fn nodeclaims_observed(
        &mut self,
        observed: &[ObservedNodeClaim],
        commands: &mut Vec<Command>,
    ) {
        let listed: BTreeSet<&str> = observed.iter().map(|c| c.name.as_str()).collect();
        let vanished: Vec<String> = self
            .state
            .nodeclaims
            .iter()
            .filter(|(name, c)| {
                c.launched_at_ms.is_some()
                    && c.terminating.is_none()
                    && !listed.contains(name.as_str())
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in vanished {
            self.disruptor.replacements.remove(&name);
            self.terminate(
                &name,
                TerminationReason::Deleted,
                "its NodeClaim object is gone from the API server (deleted while no controller ran)"
                    .to_string(),
                commands,
            );
        }
        for claim in observed {
            self.observe_nodeclaim(claim, commands);
        }
    }

    /// One NodeClaim of the API server: adopted if unknown; a launch result the core missed
    /// taken in; a deletion asked for carried out.
    fn observe_nodeclaim(&mut self, observed: &ObservedNodeClaim, commands: &mut Vec<Command>) {
        let name = observed.name.as_str();
        match self.state.nodeclaims.get(name) {
            Some(known) => {
                // Launched while the core did not hear the result (a crash between the launch
                // and its record).
                if known.instance.is_none()
                    && known.terminating.is_none()
                    && let Some(instance) = observed.instance.as_ref().filter(|i| i.running)
                {
                    let instance = self.priced(instance);
                    self.launch_succeeded(name, &instance, commands);
                }
            }
            None => {
                if !self.adopt(observed) {
                    // Nothing was launched for it (or the launch never finished): given up, as
                    // the launch timeout would; its pods, if still pending, get a machine.
                    let claim = NodeClaimState::new(
                        self.adopted_spec(observed, None),
                        observed.created_at_ms.min(self.now_ms),
                    );
                    self.state.nodeclaims.insert(name.to_string(), claim);
                    self.terminate(
                        name,
                        TerminationReason::LaunchTimeout,
                        "adopted without an instance: its launch never finished".to_string(),
                        commands,
                    );
                    return;
                }
            }
        }
        if observed.deleting {
            self.disruptor.replacements.remove(name);
            self.terminate(
                name,
                TerminationReason::Deleted,
                "its NodeClaim was deleted".to_string(),
                commands,
            );
        }
    }

    /// Takes a launched NodeClaim of the API server as the core's own, with its instance, its
    /// node and their conditions. False when it has no instance to adopt.
    fn adopt(&mut self, observed: &ObservedNodeClaim) -> bool {
        let Some(instance) = observed.instance.as_ref() else {
            return false;
        };
        let now = self.now_ms;
        let instance = self.priced(instance);
        let spec = self.adopted_spec(observed, Some(&instance));
        let mut claim = NodeClaimState::new(spec, observed.created_at_ms.min(now));
        claim.launched_at_ms = observed
            .instance
            .as_ref()
            .map(|i| i.launched_at_ms.min(now));
        // Its node: the one its status names, or the one whose provider id is its instance's.
        let node = observed
            .node_name
            .clone()
            .filter(|n| self.state.nodes.contains_key(n))
            .or_else(|| {
                self.state
                    .nodes
                    .iter()
                    .find(|(_, n)| {
                        n.node
                            .provider_id
                            .as_deref()
                            .is_some_and(|p| instance.has_provider_id(p))
                    })
                    .map(|(name, _)| name.clone())
            });
        claim.instance = Some(instance);
        if let Some(node) = &node
            && let Some(state) = self.state.nodes.get_mut(node)
        {
            state.nodeclaim = Some(observed.name.clone());
            claim.node_name = Some(node.clone());
            claim.registered_at_ms = Some(now);
            if observed.initialized
                || (state.node.ready && !state.node.has_taint(labels::SIBLING_HOLD_TAINT))
            {
                claim.initialized_at_ms = Some(now);
            }
        } else if observed.initialized {
            // Its node is not seen yet: it is linked as it comes (`node_applied`).
            claim.registered_at_ms = Some(now);
        }
        self.state.nodeclaims.insert(observed.name.clone(), claim);
        self.caches.new_to_drift(&observed.name);
        true
    }

    /// The spec of an adopted NodeClaim. A NodeClaim hashed by Karpenter (it carries the
    /// version of Karpenter's hashing) gets the core's hashes of its NodePool and EC2NodeClass
    /// as they are now, as Karpenter itself does when its hashing changes: adoption is not
    /// drift. Its one launch option is its instance.
    fn adopted_spec(
        &self,
        observed: &ObservedNodeClaim,
        instance: Option<&Instance>,
    ) -> NodeClaimSpec {
        let mut annotations = observed.annotations.clone();
        if annotations.contains_key(NODEPOOL_HASH_VERSION) {
            match self.state.nodepools.get(&observed.nodepool) {
                Some(pool) => annotations.insert(
                    NODEPOOL_HASH.to_string(),
                    crate::disruption::drift::nodepool_hash(pool),
                ),
                None => annotations.remove(NODEPOOL_HASH),
            };
        }
        if annotations.contains_key(NODECLASS_HASH_VERSION) {
            match self.state.nodeclasses.get(&observed.nodeclass) {
                Some(class) => annotations.insert(
                    NODECLASS_HASH.to_string(),
                    crate::disruption::drift::nodeclass_hash(class),
                ),
                None => annotations.remove(NODECLASS_HASH),
            };
        }
        let options: Arc<[LaunchOption]> = match instance {
            Some(i) => Arc::from(vec![LaunchOption {
                instance_type: i.instance_type.as_str().into(),
                zone: i.zone.as_str().into(),
                capacity_type: i.capacity_type,
                price: i.price,
            }]),
            None => Arc::from(Vec::new()),
        };
        NodeClaimSpec {
            name: observed.name.clone(),
            nodepool: observed.nodepool.clone(),
            nodeclass: observed.nodeclass.clone(),
            labels: observed.labels.clone(),
            annotations,
            taints: observed.taints.clone(),
            startup_taints: observed.startup_taints.clone(),
            requirements: observed.requirements.clone(),
            requests: observed.requests.clone(),
            options,
            expire_after_ms: observed.expire_after_ms,
        }
    }

    /// An observed instance at its offering's price in the catalog (zero when the catalog
    /// does not offer it: consolidation then finds nothing cheaper to replace it with).
    fn priced(&self, i: &crate::model::observed::ObservedInstance) -> Instance {
        let price = self
            .state
            .catalog
            .as_ref()
            .and_then(|c| {
                c.catalog
                    .price_of(&i.instance_type, &i.zone, i.capacity_type)
            })
            .unwrap_or(Price(0));
        Instance {
            instance_id: i.instance_id.clone(),
            instance_type: i.instance_type.clone(),
            zone: i.zone.clone(),
            capacity_type: i.capacity_type,
            price,
        }
    }
}
