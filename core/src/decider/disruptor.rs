//! The disruptor's work: the disruption pass (emptiness, drift, consolidation) and the
//! replacements it launches.

use super::*;
use crate::disruption::drift::DriftCause;

impl Core {
    /// One disruption pass, when one is due (see [`PassMark`]); returns when the next is.
    pub(super) fn disruption_pass(&mut self, commands: &mut Vec<Command>) -> Option<u64> {
        let now = self.now_ms;
        let poll = self.config.disruption_poll_ms.max(1);
        if let Some(mark) = self.disruptor.last_pass {
            match mark.next_ms(self.epoch, poll) {
                Some(at) if at <= now => {}
                next => return next,
            }
        }
        let before = commands.len();
        let wake_ms = self.run_disruption_pass(commands);
        // A pass that acted looks again at the next poll: what it did may allow more. The
        // epoch is the one after the pass: its own doings are not news to the next one.
        let mark = PassMark {
            at_ms: now,
            epoch: self.epoch,
            wake_ms: if commands.len() == before {
                wake_ms
            } else {
                Some(now + poll)
            },
        };
        self.disruptor.last_pass = Some(mark);
        mark.next_ms(self.epoch, poll)
    }

    /// Emptiness, then drift, then consolidation: the first that acts ends the pass. Returns
    /// the earliest time something the pass looked at changes by itself.
    fn run_disruption_pass(&mut self, commands: &mut Vec<Command>) -> Option<u64> {
        let now = self.now_ms;
        let poll = self.config.disruption_poll_ms.max(1);
        // Many pods are nominated to the same few machines: each name is copied once.
        let mut nominated: BTreeSet<String> = BTreeSet::new();
        for target in self.provisioner.nominations.values() {
            if !nominated.contains(target) {
                nominated.insert(target.clone());
            }
        }
        // Read once for the pass: what the pass terminates is empty, drifted or
        // underutilized, never expired, so no drain it starts leaves pods to finish.
        let leaving_to_finish = self.drains_leaving_pods_to_finish();
        let mut next = Wake::default();
        let mut pools: Vec<String> = self
            .state
            .nodepools
            .values()
            .map(|p| p.name.clone())
            .collect();
        pools.sort();
        let mut acted = false;
        for name in &pools {
            // Terminating a machine changes no NodePool: each is still there.
            let Some(pool) = self.state.nodepools.get(name) else {
                continue;
            };
            let (chosen, pool_next, blocked) = emptiness::select(
                &self.state,
                &self.config,
                &leaving_to_finish,
                pool,
                &nominated,
                now,
            );
            for (candidate, detail) in chosen {
                acted = true;
                self.terminate(
                    &candidate.nodeclaim,
                    TerminationReason::Empty,
                    detail,
                    commands,
                );
            }
            if blocked {
                // Budget-blocked nodes are looked at again on the next pass.
                let at = now + poll;
                next.offer(at);
            }
            next.offer_some(pool_next);
        }
        if !acted && self.disruptor.pending_consolidation.is_none() {
            acted = self.drift(commands, &leaving_to_finish);
        }
        if let Some(at) = self.disruptor.drift_wake_ms {
            // Already due but not looked at (another method acted): the next pass will, when
            // drift may run then (no replacement in flight; those wake the core themselves).
            let at = if at > now {
                Some(at)
            } else {
                self.disruptor.replacements.is_empty().then_some(now + poll)
            };
            next.offer_some(at);
        }
        if !acted {
            let (at, _) = self.consolidate(commands, &nominated, &leaving_to_finish);
            next.offer_some(at);
        }
        next.ms()
    }

    /// Single-node consolidation: finish a decision whose validation period is over, or look
    /// for a new one (at most once per poll interval, and only when the cluster changed or a
    /// node became eligible). Returns when to look again.
    fn consolidate(
        &mut self,
        commands: &mut Vec<Command>,
        nominated: &BTreeSet<String>,
        leaving_to_finish: &BTreeSet<String>,
    ) -> (Option<u64>, bool) {
        self.refresh_pool_shapes();
        let now = self.now_ms;
        if let Some((decision, decided_at)) = self.disruptor.pending_consolidation.take() {
            let due = decided_at + consolidation::VALIDATION_MS;
            if now < due {
                self.disruptor.pending_consolidation = Some((decision, decided_at));
                return (Some(due), false);
            }
            // Validation: the same decision must still hold.
            if let Ok(again) = consolidation::simulate_many(
                &self.state,
                &self.caches.pool_shapes,
                &self.config,
                leaving_to_finish,
                &decision.nodeclaims,
                now,
            ) && again.replacement.is_some() == decision.replacement.is_some()
            {
                self.execute_consolidation(again, commands);
                return (None, true);
            }
            return (None, false);
        }
        if !self.disruptor.replacements.is_empty() {
            // One replacement at a time.
            return (None, false);
        }
        let poll = self.config.disruption_poll_ms.max(1);
        let searched = self.disruptor.last_consolidation_search;
        let changed = searched.is_none_or(|(epoch, _)| epoch != self.epoch);
        let newly_eligible = self
            .disruptor
            .consolidation_next_ms
            .is_some_and(|t| t <= now);
        if !changed && !newly_eligible {
            return (self.disruptor.consolidation_next_ms, false);
        }
        if let Some((_, at)) = searched
            && now < at + poll
        {
            return (Some(at + poll), false);
        }
        let (decision, next) = consolidation::search(
            &self.state,
            &self.caches.pool_shapes,
            &self.config,
            nominated,
            leaving_to_finish,
            now,
        );
        self.disruptor.last_consolidation_search = Some((self.epoch, now));
        self.disruptor.consolidation_next_ms = next;
        match decision {
            Some(d) => {
                self.disruptor.pending_consolidation = Some((d, now));
                (Some(now + consolidation::VALIDATION_MS), false)
            }
            None => (next, false),
        }
    }

    fn execute_consolidation(
        &mut self,
        decision: consolidation::Decision,
        commands: &mut Vec<Command>,
    ) {
        match &decision.replacement {
            None => {
                for nodeclaim in &decision.nodeclaims {
                    self.terminate(
                        nodeclaim,
                        TerminationReason::Underutilized,
                        decision.detail.clone(),
                        commands,
                    );
                }
            }
            Some(planned) => {
                let Some(first) = decision.nodeclaims.first() else {
                    return;
                };
                // Every machine of the decision is tainted before the replacement launches: none
                // takes a new pod meanwhile.
                for other in decision.nodeclaims.iter().skip(1) {
                    if let Some(node) = self
                        .state
                        .nodeclaims
                        .get(other)
                        .and_then(|c| c.node_name.clone())
                    {
                        self.cordon(
                            &node,
                            other,
                            format!(
                                "{}: {}; replacements launch first",
                                TerminationReason::Underutilized,
                                decision.detail
                            ),
                            commands,
                        );
                    }
                }
                self.replace(
                    first,
                    std::slice::from_ref(planned),
                    (TerminationReason::Underutilized, None),
                    decision.detail.clone(),
                    commands,
                );
                // The other machines go with the first, once the same replacement is up.
                if let Some(r) = self.disruptor.replacements.get(first).cloned() {
                    for other in decision.nodeclaims.iter().skip(1) {
                        self.disruptor.replacements.insert(other.clone(), r.clone());
                    }
                } else {
                    // No replacement could be launched: the others stay, and take pods again.
                    for other in decision.nodeclaims.iter().skip(1) {
                        self.uncordon(other, "no replacement could be launched".into(), commands);
                    }
                }
            }
        }
    }

    /// Launches a NodeClaim for each planned machine, its reason led by `why`; returns their
    /// names (a machine with no offering left to launch with is skipped).
    pub(super) fn launch_planned(
        &mut self,
        planned: &[PlannedClaim],
        why: &str,
        commands: &mut Vec<Command>,
    ) -> Vec<String> {
        let mut launched = Vec::new();
        for p in planned {
            let Some((spec, mut reason)) = self.claim_spec(p) else {
                continue;
            };
            reason.summary = format!("{why}; {}", reason.summary);
            launched.push(spec.name.clone());
            self.launch(spec, reason, commands);
        }
        launched
    }

    /// Launches the replacements of a machine; it is terminated once they are all initialized.
    fn replace(
        &mut self,
        old: &str,
        planned: &[PlannedClaim],
        (reason, drift): (TerminationReason, Option<DriftCause>),
        detail: String,
        commands: &mut Vec<Command>,
    ) {
        // Karpenter's order: taint the machine first, so that nothing new lands on it while
        // its replacements come up.
        if let Some(node) = self
            .state
            .nodeclaims
            .get(old)
            .and_then(|c| c.node_name.clone())
            && !planned.is_empty()
        {
            self.cordon(
                &node,
                old,
                format!("{reason}: {detail}; replacements launch first"),
                commands,
            );
        }
        let new: BTreeSet<String> = self
            .launch_planned(planned, &format!("replaces {old}: {detail}"), commands)
            .into_iter()
            .collect();
        if new.is_empty() {
            self.terminate(old, reason, detail, commands);
        } else {
            self.disruptor.replacements.insert(
                old.to_string(),
                Replacement {
                    new,
                    reason,
                    detail,
                    drift,
                },
            );
        }
    }

    /// Drift: the first drifted machine the `Drifted` budget allows is replaced (or removed if
    /// its pods fit elsewhere). Returns whether it acted.
    fn drift(&mut self, commands: &mut Vec<Command>, leaving_to_finish: &BTreeSet<String>) -> bool {
        if !self.disruptor.replacements.is_empty() {
            return false;
        }
        let now = self.now_ms;
        // Searched already with nothing changed since: nothing new to find, unless a
        // do-not-disrupt duration ran out meanwhile.
        let protection_ran_out = self.disruptor.drift_wake_ms.is_some_and(|t| t <= now);
        if !protection_ran_out
            && self.disruptor.last_drift_search.is_some_and(|(epoch, at)| {
                epoch == self.epoch && now < at + self.config.disruption_poll_ms
            })
        {
            return false;
        }
        self.disruptor.last_drift_search = Some((self.epoch, now));
        if self.caches.drift_found_none {
            // As the search would leave it: nothing drifted, so nothing to wake for.
            #[cfg(debug_assertions)]
            {
                let inputs = self.drift_inputs();
                debug_assert!(
                    crate::disruption::drift::drifted(&self.state, &inputs).is_empty(),
                    "an event that changes what drift reads did not say so"
                );
            }
            self.disruptor.drift_wake_ms = None;
            return false;
        }
        let mut wake = Wake::default();
        let acted = self.drift_search(now, &mut wake, leaving_to_finish, commands);
        self.disruptor.drift_wake_ms = wake.ms();
        acted
    }

    fn drift_search(
        &mut self,
        now: u64,
        wake: &mut Wake,
        leaving_to_finish: &BTreeSet<String>,
        commands: &mut Vec<Command>,
    ) -> bool {
        self.refresh_pool_shapes();
        let exhausted: Vec<crate::model::pdb::PodDisruptionBudget> =
            self.state.exhausted_pdbs().into_iter().cloned().collect();
        let inputs = self.drift_inputs();
        let (drifted, clean) = crate::disruption::drift::drifted_except(
            &self.state,
            &inputs,
            &self.caches.drift_clean,
        );
        debug_assert_eq!(
            drifted,
            crate::disruption::drift::drifted(&self.state, &inputs),
            "a NodeClaim kept as not drifted has drifted"
        );
        self.caches.drift_clean.extend(clean);
        self.caches.drift_found_none = drifted.is_empty();
        for (name, why) in drifted {
            let Some(claim) = self.state.nodeclaims.get(&name) else {
                continue;
            };
            let Some(pool) = self.state.nodepools.get(&claim.spec.nodepool) else {
                continue;
            };
            let Ok((allowed, budget_text)) = crate::disruption::budget::allowed_disruptions(
                &self.state,
                &self.config,
                leaving_to_finish,
                pool,
                crate::model::nodepool::DisruptionReason::Drifted,
                now,
            ) else {
                continue;
            };
            if allowed == 0 {
                continue;
            }
            let node = claim.node_name.clone();
            if let Some(n) = &node {
                if let Some(ends) = self.state.do_not_disrupt_on_node(n, now) {
                    wake.offer_some(ends);
                    continue;
                }
                if self
                    .state
                    .workload_pods_on_node(n)
                    .iter()
                    .any(|p| exhausted.iter().any(|pdb| pdb.selects(p)))
                {
                    continue;
                }
            }
            // Where its pods would go: the rest of the cluster, plus new machines.
            let (pods, result) = self.solve_moving_out(&name, node.as_deref());
            // Only its own pods must fit: a pending pod that fits nowhere is the provisioner's
            // to report, and holds no replacement back.
            if result
                .unschedulable
                .iter()
                .any(|(pod, _)| pods.iter().any(|p| &p.key == pod))
            {
                continue;
            }
            let detail = format!("drifted: {why}; {} pods move; {budget_text}", pods.len());
            // Every machine the simulation needs is launched, those it planned for pending pods
            // too: the solver may have given a machine on its way to the drifted node's pods
            // and a new one to the pending pods, and launching only the "own" ones would leave
            // a pod short. The provisioner sees them all as machines on their way.
            self.replace(
                &name,
                &result.new_claims,
                (TerminationReason::Drifted, Some(why)),
                detail,
                commands,
            );
            return true;
        }
        false
    }
}
