//! Interruptions as the queue delivers them: one message about a running machine, or a storm
//! of them over a seeded draw of the matching machines.

use super::*;

impl World {
    /// The running machines nodewright launched that a target matches, by NodeClaim name.
    pub(super) fn matching_machines(&self, target: &InterruptTarget) -> Vec<(String, String)> {
        self.machines
            .iter()
            .filter_map(|(name, m)| {
                let id = m.instance_id.as_ref()?;
                let instance = self
                    .cloud
                    .instance(id)
                    .filter(|i| i.terminated_at_ms.is_none())?;
                let wanted = match target {
                    InterruptTarget::Any => true,
                    InterruptTarget::AnySpot => {
                        instance.instance.capacity_type == CapacityType::Spot
                    }
                    InterruptTarget::NodeClaim(wanted) => name == wanted,
                };
                wanted.then(|| (name.clone(), id.clone()))
            })
            .collect()
    }

    /// An interruption storm: a seeded draw of `fraction` of the matching machines, one message
    /// each, spread evenly over the storm's duration.
    pub(super) fn storm(&mut self, kind: &InterruptKind, target: &InterruptTarget, storm: &Storm) {
        let mut machines: Vec<String> = self
            .matching_machines(target)
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        let n = ((machines.len() as f64) * storm.fraction).ceil() as usize;
        // A partial Fisher-Yates shuffle with the world's generator.
        for i in 0..n.min(machines.len()) {
            let j = i + (self.rng.next_u64() % (machines.len() - i) as u64) as usize;
            machines.swap(i, j);
        }
        machines.truncate(n);
        let now = self.now_ms;
        for (i, nodeclaim) in machines.into_iter().enumerate() {
            let at = now + storm.over_ms * i as u64 / n.max(1) as u64;
            self.schedule(
                at,
                WorldEvent::Interrupt {
                    kind: kind.clone(),
                    nodeclaim,
                },
            );
        }
    }

    /// Sends an interruption message about one running machine, as the queue would, and
    /// takes the instance away when the message says so.
    pub(super) fn interrupt(&mut self, kind: &InterruptKind, target: &InterruptTarget) {
        let now = self.now_ms;
        let Some((_, instance_id)) = self.matching_machines(target).into_iter().next() else {
            return;
        };
        self.interruptions += 1;
        let message_id = format!("sim-interruption-{}", self.interruptions);
        let (interruption, reclaim_at) = match kind {
            InterruptKind::SpotInterruption => {
                let deadline = now + SPOT_INTERRUPTION_NOTICE_MS;
                (
                    Interruption::SpotInterruption {
                        deadline_ms: deadline,
                    },
                    Some(deadline),
                )
            }
            InterruptKind::Rebalance => (Interruption::RebalanceRecommendation, None),
            InterruptKind::ScheduledChange(code) => (
                Interruption::ScheduledChange {
                    event_type: code.clone(),
                },
                None,
            ),
            InterruptKind::StateChange(state) => (
                Interruption::StateChange {
                    state: state.clone(),
                },
                LEAVING_STATES.contains(&state.as_str()).then_some(now),
            ),
        };
        self.emit(EventKind::InterruptionReceived {
            message_id,
            instance_id: instance_id.clone(),
            interruption,
        });
        if matches!(kind, InterruptKind::SpotInterruption)
            && let Some(i) = self.cloud.instance(&instance_id)
        {
            // The core marks a reclaimed spot offering unavailable, as for lack of capacity.
            self.capacity_failures.push((
                OfferingKey {
                    instance_type: i.instance.instance_type.clone(),
                    zone: i.instance.zone.clone(),
                    capacity_type: i.instance.capacity_type,
                },
                now,
            ));
        }
        if let Some(at) = reclaim_at {
            self.schedule(at, WorldEvent::InstanceReclaimed { instance_id });
        }
    }
}
