//! The world carries out the driver's commands: the API calls reach the simulated EC2 and
//! Kubernetes (after the planted bug, if any, had its way with them).

use super::*;

impl CommandExecutor for World {
    fn execute(&mut self, command: &Command) {
        // Kept for this step's invariant checks, as it was carried out (one copy: a launch
        // carries hundreds of options).
        match self.plant(command) {
            Some(planted) => {
                self.perform(&planted);
                self.step_commands.push(planted);
            }
            None => {
                self.perform(command);
                self.step_commands.push(command.clone());
            }
        }
    }
}

impl World {
    /// A command as it leaves the driver (in the madsim harness): changed by the planted bug, if any, and kept for this
    /// step's invariant checks.
    #[cfg(madsim)]
    pub(crate) fn dispatched(&mut self, command: &Command) -> Command {
        let command = self.planted(command);
        self.step_commands.push(command.clone());
        command
    }

    /// The command as the planted bug changes it, if it does.
    pub(super) fn plant(&self, command: &Command) -> Option<Command> {
        match (self.planted?, command) {
            (PlantedBug::LaunchIntoUnavailable, Command::LaunchNodeClaim { nodeclaim, reason }) => {
                // Every offering that failed for lack of capacity, or whose spot instance was
                // reclaimed, in the last three minutes (which the core was told, and marked
                // unavailable) is offered again.
                let ttl = nodewright_core::state::UNAVAILABLE_OFFERING_TTL_MS;
                let mut spec = nodeclaim.as_ref().clone();
                let mut options = spec.options.to_vec();
                for (key, at) in &self.capacity_failures {
                    if self.now_ms >= at + ttl {
                        continue;
                    }
                    let price = self
                        .catalog
                        .get(&key.instance_type)
                        .and_then(|it| {
                            it.offerings.iter().find(|o| {
                                o.zone == key.zone && o.capacity_type == key.capacity_type
                            })
                        })
                        .map(|o| o.price);
                    if let Some(price) = price {
                        options.insert(
                            0,
                            nodewright_core::model::nodeclaim::LaunchOption {
                                instance_type: key.instance_type.as_str().into(),
                                zone: key.zone.as_str().into(),
                                capacity_type: key.capacity_type,
                                price,
                            },
                        );
                    }
                }
                spec.options = options.into();
                Some(Command::LaunchNodeClaim {
                    nodeclaim: Box::new(spec),
                    reason: reason.clone(),
                })
            }
            _ => None,
        }
    }

    /// A command as the planted bug changes it, if there is one.
    #[cfg(madsim)]
    pub(crate) fn planted(&self, command: &Command) -> Command {
        self.plant(command).unwrap_or_else(|| command.clone())
    }
}

impl World {
    /// The world carries out a command (the API call reaches EC2 or Kubernetes).
    pub(crate) fn perform(&mut self, command: &Command) {
        self.forget_meter_rates();
        let now = self.now_ms;
        match command {
            Command::LaunchNodeClaim { nodeclaim, reason } => {
                if self.machines.contains_key(&nodeclaim.name) {
                    // Asked again (after a restart): the client token makes it the same launch,
                    // and EC2 answers as it did.
                    self.answer_again(&nodeclaim.name, true);
                    return;
                }
                self.machines.insert(
                    nodeclaim.name.clone(),
                    Machine {
                        spec: nodeclaim.as_ref().clone(),
                        launch_reason: reason.summary.clone(),
                        instance_id: None,
                        node: None,
                        launched_at_ms: None,
                        terminated_at_ms: None,
                        termination: None,
                        cancelled: false,
                        api_attempts: 0,
                        for_pods: reason.pods.clone(),
                        cheapest_price: nodeclaim
                            .options
                            .iter()
                            .map(|o| o.price.0)
                            .min()
                            .unwrap_or(0),
                        allocatable: None,
                        answer: None,
                    },
                );
                self.schedule(
                    now + FLEET_API_LATENCY_MS,
                    WorldEvent::FleetCall {
                        nodeclaim: nodeclaim.name.clone(),
                    },
                );
            }
            Command::NominatePod { .. } | Command::DisruptionBlocked { .. } => {}
            Command::CordonNode { node, .. } => self.cluster.cordon(node, now, &mut self.outbox),
            Command::UncordonNode { node, .. } => {
                self.cluster
                    .untaint(node, labels::DISRUPTED_TAINT, now, &mut self.outbox);
                self.cluster
                    .bind_pending(now, &mut self.outbox, &mut self.changes);
            }
            Command::ReleaseNode { node, .. } => {
                self.cluster
                    .untaint(node, labels::SIBLING_HOLD_TAINT, now, &mut self.outbox);
                self.cluster
                    .bind_pending(now, &mut self.outbox, &mut self.changes);
            }
            Command::WarnInvalidAnnotation { .. } | Command::ReportInterruption { .. } => {}
            Command::TerminateOrphanInstance { instance_id, .. } => self.end_instance(instance_id),
            Command::EvictPod { pod, forced, .. } => {
                if !self.cluster.pods.contains_key(pod) {
                    // Gone already (asked again after a restart): the API answers 404.
                    return;
                }
                if !*forced && self.cluster.terminating.contains_key(pod) {
                    // Already on its way out.
                    return;
                }
                if !*forced && let Some(reason) = self.cluster.eviction_refused_by(pod) {
                    self.refused_evictions += 1;
                    self.emit(EventKind::EvictionRefused {
                        pod: pod.clone(),
                        reason,
                    });
                    return;
                }
                if *forced {
                    // terminationGracePeriod ran out: deleted now, without its own grace period.
                    self.cluster
                        .delete_pod(pod, true, now, &mut self.outbox, &mut self.changes);
                } else {
                    self.cluster
                        .terminate_pod(pod, true, now, &mut self.outbox, &mut self.changes);
                }
                self.cluster
                    .reconcile_all(now, &mut self.rng, &mut self.outbox, &mut self.changes);
                self.cluster
                    .bind_pending(now, &mut self.outbox, &mut self.changes);
                self.schedule_pod_exits();
            }
            Command::ReportUnschedulable { pod, reason } => {
                self.unschedulable.insert(pod.clone(), reason.clone());
            }
            Command::WarnMissingRequests { .. } => self.missing_requests += 1,
            Command::TerminateNodeClaim {
                nodeclaim,
                reason,
                detail,
                instance_id,
                ..
            } => {
                if self
                    .machines
                    .get(nodeclaim)
                    .is_some_and(|m| m.termination.is_some())
                {
                    // Asked again (after a restart): it is under way already, or done.
                    self.answer_again(nodeclaim, false);
                    return;
                }
                if let Some(m) = self.machines.get(nodeclaim)
                    && m.node.is_some()
                {
                    let pending: Vec<&PodKey> = m
                        .for_pods
                        .iter()
                        .filter(|p| {
                            self.cluster
                                .pods
                                .get(*p)
                                .is_some_and(|pod| pod.node_name.is_none())
                        })
                        .collect();
                    let found =
                        invariants::check_launched_in_vain(nodeclaim, *reason, &pending, now);
                    self.violations.extend(found);
                }
                match reason {
                    TerminationReason::Empty => self.disruptions.empty += 1,
                    TerminationReason::Underutilized => self.disruptions.underutilized += 1,
                    TerminationReason::Drifted => self.disruptions.drifted += 1,
                    TerminationReason::Expired => self.disruptions.expired += 1,
                    TerminationReason::Interrupted => self.disruptions.interrupted += 1,
                    _ => {}
                }
                let Some(machine) = self.machines.get_mut(nodeclaim) else {
                    // A machine the world never launched for this run (a late launch result):
                    // terminate the instance the command names.
                    if let Some(id) = instance_id {
                        self.end_in_cloud(id);
                    }
                    return;
                };
                machine.termination = Some((*reason, detail.clone()));
                if machine.instance_id.is_none() {
                    // No instance yet: the pending CreateFleet is cancelled, or there is none.
                    machine.cancelled = true;
                    if machine.launched_at_ms.is_none()
                        && !self.queue.values().any(|e| matches!(e, WorldEvent::FleetCall { nodeclaim: n } if n == nodeclaim))
                    {
                        let name = nodeclaim.clone();
                        self.schedule(now, WorldEvent::TerminationDone { nodeclaim: name });
                    }
                    return;
                }
                if let Some(node) = machine.node.clone() {
                    self.cluster.drain_node(
                        &node,
                        now,
                        &mut self.rng,
                        &mut self.outbox,
                        &mut self.changes,
                    );
                }
                let name = nodeclaim.clone();
                self.schedule(
                    now + TERMINATION_LATENCY_MS,
                    WorldEvent::TerminationDone { nodeclaim: name },
                );
            }
        }
    }
}
