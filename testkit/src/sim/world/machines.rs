//! A machine's life in the simulated cloud as the EC2 adapter sees it: CreateFleet answered
//! (or throttled, or out of capacity), the node joining the cluster, the instance terminated.

use super::*;

impl World {
    /// CreateFleet for a NodeClaim: retried with backoff while throttled; its instance joins as
    /// a node after the launch and registration latency.
    pub(super) fn fleet_call(&mut self, nodeclaim: String, scenario: &Scenario) {
        let now = self.now_ms;
        let Some(machine) = self.machines.get(&nodeclaim) else {
            return;
        };
        if machine.cancelled {
            self.answer(EventKind::NodeClaimTerminated { nodeclaim });
            return;
        }
        if self.api_call_fails(scenario) {
            // Throttled: the adapter retries with backoff, then gives up.
            let attempt = self.machines.get(&nodeclaim).map_or(0, |m| m.api_attempts) + 1;
            if let Some(m) = self.machines.get_mut(&nodeclaim) {
                m.api_attempts = attempt;
            }
            if attempt < API_ATTEMPTS {
                self.schedule(
                    now + (API_BACKOFF_MS << (attempt - 1)),
                    WorldEvent::FleetCall { nodeclaim },
                );
            } else {
                self.answer(EventKind::LaunchFailed {
                    nodeclaim,
                    code: "RequestLimitExceeded".to_string(),
                    message: format!("CreateFleet was throttled {API_ATTEMPTS} times in a row"),
                    unavailable: Vec::new(),
                });
            }
            return;
        }
        let Some(machine) = self.machines.get(&nodeclaim) else {
            return;
        };
        let cheapest = machine.cheapest_price;
        match self.cloud.create_fleet(&machine.spec, now, &mut self.rng) {
            Ok(instance) => {
                let latency = &scenario.cloud;
                let launch = latency.launch_latency_at(now);
                let join_after = self.rng.between(launch.min_ms, launch.max_ms)
                    + self.rng.between(
                        latency.registration_latency.min_ms,
                        latency.registration_latency.max_ms,
                    );
                if let Some(m) = self.machines.get_mut(&nodeclaim) {
                    m.instance_id = Some(instance.instance_id.clone());
                    m.launched_at_ms = Some(now);
                    // The options were CreateFleet's, and it has answered (a launch
                    // asked again is answered from the instance). A long run keeps
                    // every machine it launched: thousands of option lists.
                    m.spec.options = Vec::new().into();
                }
                self.meter_launched(&instance, cheapest);
                self.schedule(
                    now + join_after,
                    WorldEvent::NodeJoin {
                        instance_id: instance.instance_id.clone(),
                    },
                );
                self.answer(EventKind::LaunchSucceeded {
                    nodeclaim,
                    instance,
                });
            }
            Err(e) => {
                for key in &e.unavailable {
                    self.capacity_failures.push((key.clone(), now));
                }
                self.answer(EventKind::LaunchFailed {
                    nodeclaim,
                    code: e.code,
                    message: e.message,
                    unavailable: e.unavailable,
                })
            }
        }
    }

    /// An instance's kubelet registers its node, labelled and tainted as its NodeClaim says.
    pub(super) fn node_join(&mut self, instance_id: &str) {
        let now = self.now_ms;
        let Some(instance) = self.cloud.instance(instance_id).cloned() else {
            return;
        };
        if instance.terminated_at_ms.is_some() {
            return;
        }
        let nodeclass = self
            .machines
            .get(&instance.nodeclaim)
            .map(|m| m.spec.nodeclass.clone());
        let Some(mut node) = self.node_for(
            &instance.instance.instance_type,
            &instance.instance.zone,
            instance.instance.capacity_type,
            nodeclass.as_deref(),
        ) else {
            return;
        };
        node.provider_id = Some(instance.instance.provider_id());
        // Karpenter's labels of a node in a capacity reservation.
        if let Some(id) = &instance.reservation {
            node.labels
                .insert(labels::CAPACITY_RESERVATION_ID.into(), id.clone());
            if let Some(r) = self
                .cloud
                .spec
                .capacity_reservations
                .iter()
                .find(|r| r.id == *id)
            {
                node.labels.insert(
                    labels::CAPACITY_RESERVATION_TYPE.into(),
                    r.kind.as_str().into(),
                );
            }
        }
        if let Some(m) = self.machines.get_mut(&instance.nodeclaim) {
            node.labels.extend(m.spec.labels.clone());
            node.annotations.extend(m.spec.annotations.clone());
            node.taints = m.spec.taints.clone();
            m.allocatable = Some(node.allocatable.clone());
            // The kubelet registers with the startup taints too; the simulation has no
            // agent to take a user's off, so only the sibling hold, which the core
            // releases, is modelled.
            node.taints.extend(
                m.spec
                    .startup_taints
                    .iter()
                    .filter(|t| t.key == labels::SIBLING_HOLD_TAINT)
                    .cloned(),
            );
            m.node = Some(node.name.clone());
            self.meter_joined(&instance.instance.instance_id, &node.name);
        }
        let name = node.name.clone();
        self.cluster.add_node(
            node,
            Some(instance.nodeclaim.clone()),
            now,
            &mut self.outbox,
        );
        self.cluster
            .start_daemons(&name, now, &mut self.outbox, &mut self.changes);
    }

    /// TerminateInstances answered: the instance ends, its node leaves.
    pub(super) fn termination_done(&mut self, nodeclaim: String) {
        let now = self.now_ms;
        let Some(machine) = self.machines.get(&nodeclaim) else {
            return;
        };
        let node = machine.node.clone();
        if let Some(id) = machine.instance_id.clone() {
            self.end_in_cloud(&id);
        }
        if let Some(node) = &node {
            self.cluster.remove_node(
                node,
                now,
                &mut self.rng,
                &mut self.outbox,
                &mut self.changes,
            );
        }
        if let Some(m) = self.machines.get_mut(&nodeclaim) {
            m.terminated_at_ms.get_or_insert(now);
        }
        self.answer(EventKind::NodeClaimTerminated { nodeclaim });
    }
}
