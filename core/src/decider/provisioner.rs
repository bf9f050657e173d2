//! The provisioner's work: closing a batch of pending pods into nominations and launches,
//! static NodePools, and the NodeClaim a planned machine becomes.

use super::*;
use crate::provisioning::launch_memo::LaunchChoice;

impl Core {
    pub(super) fn has_pending_pods(&self) -> bool {
        debug_assert_eq!(
            self.provisioner.pending_pods,
            self.state.pending_pods().count(),
            "the pending pod count follows the pod events"
        );
        self.provisioner.pending_pods > 0
    }

    pub(super) fn trigger_if_pending(&mut self) {
        if self.has_pending_pods() {
            self.provisioner.batcher.trigger(self.now_ms);
        }
    }

    /// Closes the batch: nominate pods onto existing capacity, launch machines for the rest.
    pub(super) fn provision(&mut self, commands: &mut Vec<Command>) {
        self.refresh_pool_shapes();
        let now = self.now_ms;
        let pending: Vec<&Pod> = self.state.pending_pods().collect();
        if pending.is_empty() {
            return;
        }
        let result = scheduler::solve(
            &self.state,
            &self.caches.pool_shapes,
            &self.config,
            now,
            &pending,
        );
        let hold = self.sibling_hold_plan(&result);
        let mut launched_held: Vec<String> = Vec::new();
        for (pod, target) in result.nominations {
            self.provisioner.unschedulable.remove(&pod);
            if self.provisioner.nominations.get(&pod) != Some(&target) {
                self.provisioner
                    .nominations
                    .insert(pod.clone(), target.clone());
                commands.push(Command::NominatePod {
                    reason: format!("pod fits the free capacity of {target}"),
                    pod,
                    target,
                });
            }
        }
        for (index, planned) in result.new_claims.into_iter().enumerate() {
            let Some((mut spec, mut reason)) = self.claim_spec(&planned) else {
                // No offering is left to launch with (it can only happen if the catalog
                // changed under the solve): the pods are told, and retried next batch.
                for pod in &planned.pods {
                    self.provisioner.nominations.remove(pod);
                    let reason = format!(
                        "nodepool {}: no instance type offering is available to launch with",
                        planned.nodepool
                    );
                    if self.provisioner.unschedulable.get(pod) != Some(&reason) {
                        self.provisioner
                            .unschedulable
                            .insert(pod.clone(), reason.clone());
                        commands.push(Command::ReportUnschedulable {
                            pod: pod.clone(),
                            reason,
                        });
                    }
                }
                continue;
            };
            {
                if hold.as_ref().is_some_and(|h| h.launched.contains(&index)) {
                    spec.startup_taints.push(sibling_hold::hold_taint());
                    launched_held.push(spec.name.clone());
                    reason.summary.push_str(&format!(
                        "; starts held ({}) until the other machines this decision placed spreading pods on have registered, at most {} after the first",
                        labels::SIBLING_HOLD_TAINT,
                        crate::model::duration::format_duration_ms(self.config.sibling_hold_ms)
                    ));
                }
                for pod in &planned.pods {
                    self.provisioner.unschedulable.remove(pod);
                    self.provisioner
                        .nominations
                        .insert(pod.clone(), spec.name.clone());
                }
                self.launch(spec, reason, commands);
            }
        }
        if let Some(hold) = hold {
            self.provisioner
                .sibling_holds
                .hold(&launched_held, &hold.joining);
        }
        for (pod, why) in result.unschedulable {
            self.provisioner.nominations.remove(&pod);
            // The command and the log carry the reason as text, for people.
            let reason = why.to_string();
            if self.provisioner.unschedulable.get(&pod) != Some(&reason) {
                self.provisioner
                    .unschedulable
                    .insert(pod.clone(), reason.clone());
                commands.push(Command::ReportUnschedulable { pod, reason });
            }
        }
    }

    /// Records a new machine and asks for it.
    pub(super) fn launch(
        &mut self,
        spec: NodeClaimSpec,
        reason: LaunchReason,
        commands: &mut Vec<Command>,
    ) {
        // A new machine has deadlines of its own, and may be what a listed instance waits for.
        self.caches.claim_deadline_ms = None;
        self.caches.garbage_quiet_until_ms = None;
        // A name used before is a new machine to drift.
        self.caches.drift_clean.remove(&spec.name);
        self.state.nodeclaims.insert(
            spec.name.clone(),
            NodeClaimState::new(spec.clone(), self.now_ms),
        );
        commands.push(Command::LaunchNodeClaim {
            nodeclaim: Box::new(spec),
            reason,
        });
    }

    /// Brings every static NodePool to its replicas ([`static_pool`]): launches what is
    /// missing, terminates what is beyond. Returns when to look again when a launch found no
    /// offering to launch with (when an unavailable offering comes back).
    pub(super) fn static_pools(&mut self, commands: &mut Vec<Command>) -> Option<u64> {
        self.refresh_pool_shapes();
        let now = self.now_ms;
        let plan = static_pool::plan(&self.state);
        for (claim, detail) in plan.remove {
            self.terminate(&claim, TerminationReason::ScaledDown, detail, commands);
        }
        let mut stuck = false;
        for (pool, count, why) in plan.launch {
            let Some(planned) = self.static_claim(&pool) else {
                stuck = true;
                continue;
            };
            for _ in 0..count {
                let Some((spec, mut reason)) = self.claim_spec(&planned) else {
                    stuck = true;
                    break;
                };
                reason.summary = format!("{why}; {}", reason.summary);
                self.launch(spec, reason, commands);
            }
        }
        if !stuck {
            return None;
        }
        self.state
            .unavailable
            .values()
            .copied()
            .filter(|until| *until > now)
            .min()
    }

    /// Where the workload pods of a machine (NodeClaim `nodeclaim` on `node`) would go if it
    /// went: the rest of the cluster, plus new machines. Pods already pending compete for the
    /// same capacity (machines on their way are meant for them), so they are placed in the
    /// same simulation, as Karpenter's is. Returns the pods that would move, unbound.
    pub(super) fn solve_moving_out(
        &self,
        nodeclaim: &str,
        node: Option<&str>,
    ) -> (Vec<Pod>, scheduler::SolveResult) {
        let pods = self.state.movable_pods(node);
        let mut refs: Vec<&Pod> = pods.iter().collect();
        refs.extend(self.state.pending_pods());
        let removed = BTreeSet::from([nodeclaim.to_string()]);
        let result = scheduler::solve_without(
            &self.state,
            &self.caches.pool_shapes,
            &self.config,
            self.now_ms,
            &refs,
            &removed,
        );
        (pods, result)
    }

    /// A machine of a static pool: its template, every type it allows, no pod.
    fn static_claim(&self, pool: &str) -> Option<PlannedClaim> {
        let pool = self.state.nodepools.get(pool)?;
        let class = self.state.nodeclasses.get(&pool.node_class_ref.name)?;
        let shape = self.caches.pool_shapes.get(&self.state, pool, class)?;
        Some(PlannedClaim {
            nodepool: pool.name.clone(),
            requirements: shape.template.clone(),
            pods: Vec::new(),
            requests: Resources::default(),
            types: shape.types.to_vec(),
            min_values: shape.min_values.clone(),
        })
    }

    /// Which machines of a solve start held ([`sibling_hold`]): when pods that spread or keep
    /// apart are placed over two or more machines on their way, the new ones among them (by
    /// index in `new_claims`) and the held ones already launched (`joining`).
    fn sibling_hold_plan(&self, result: &scheduler::SolveResult) -> Option<HoldPlan> {
        if self.config.sibling_hold_ms == 0 {
            return None;
        }
        let constrained = |pod: &PodKey| {
            self.state
                .pods
                .get(pod)
                .is_some_and(sibling_hold::constrains)
        };
        let launched: BTreeSet<usize> = result
            .new_claims
            .iter()
            .enumerate()
            .filter(|(_, c)| c.pods.iter().any(constrained))
            .map(|(i, _)| i)
            .collect();
        let joining: BTreeSet<String> = result
            .nominations
            .iter()
            .filter(|(pod, _)| constrained(pod))
            .filter_map(|(_, target)| {
                if self.state.nodeclaims.contains_key(target) {
                    Some(target.clone())
                } else {
                    self.state
                        .nodes
                        .get(target)
                        .and_then(|n| n.nodeclaim.clone())
                }
            })
            .filter(|claim| self.provisioner.sibling_holds.is_held(claim))
            .collect();
        (launched.len() + joining.len() >= 2).then_some(HoldPlan { launched, joining })
    }

    pub(super) fn claim_spec(
        &mut self,
        planned: &PlannedClaim,
    ) -> Option<(NodeClaimSpec, LaunchReason)> {
        let pool = self.state.nodepools.get(&planned.nodepool)?.clone();
        let LaunchChoice {
            options,
            type_count,
        } = self.caches.launch_memo.choose(
            &self.state,
            planned,
            self.now_ms,
            self.config.max_instance_types,
        )?;
        let cheapest = options.first()?.clone();
        let name = loop {
            let candidate = format!("{}-{}", pool.name, self.provisioner.names.suffix());
            if !self.state.nodeclaims.contains_key(&candidate) {
                break candidate;
            }
        };
        let mut node_labels = pool.template_labels.clone();
        node_labels.extend(planned.requirements.node_labels());
        node_labels.insert(labels::NODEPOOL.to_string(), pool.name.clone());
        // A Windows class's machines say so whatever their type's catalog labels are.
        if let Some(NodeOs::Windows { build }) = self
            .state
            .nodeclasses
            .get(&pool.node_class_ref.name)
            .map(|class| class.os())
        {
            node_labels.insert(labels::OS.to_string(), "windows".to_string());
            node_labels.insert(labels::WINDOWS_BUILD.to_string(), build.to_string());
        }
        let requirements: Vec<RequirementSpec> = planned
            .requirements
            .iter()
            .flat_map(|r| requirement_specs(r, &planned.min_values))
            .collect();
        let pods_text: Vec<String> = planned.pods.iter().map(|p| p.to_string()).collect();
        // A static pool's machine is for no pod: its summary starts at the pool.
        let lead = if planned.pods.is_empty() {
            String::new()
        } else {
            format!(
                "{} pending pod(s) [{}] need {}; ",
                planned.pods.len(),
                pods_text.join(", "),
                planned.requests
            )
        };
        let summary = format!(
            "{lead}nodepool {} ({}); {} instance types fit, cheapest {} {} {} at {}",
            pool.name,
            describe_pool_requirements(&pool),
            type_count,
            cheapest.instance_type,
            cheapest.zone,
            cheapest.capacity_type,
            cheapest.price,
        );
        let mut annotations = pool.template_annotations.clone();
        let hashes = self.drift_inputs();
        annotations.insert(
            crate::disruption::drift::NODEPOOL_HASH.to_string(),
            hashes.pool_hash(&pool.name).map_or_else(
                || crate::disruption::drift::nodepool_hash(&pool),
                str::to_string,
            ),
        );
        if let Some(class) = self.state.nodeclasses.get(&pool.node_class_ref.name) {
            annotations.insert(
                crate::disruption::drift::NODECLASS_HASH.to_string(),
                hashes.class_hash(&class.name).map_or_else(
                    || crate::disruption::drift::nodeclass_hash(class),
                    str::to_string,
                ),
            );
        }
        let spec = NodeClaimSpec {
            name,
            nodepool: pool.name.clone(),
            nodeclass: pool.node_class_ref.name.clone(),
            labels: node_labels,
            annotations,
            taints: pool.taints.clone(),
            startup_taints: pool.startup_taints.clone(),
            requirements,
            requests: planned.requests.clone(),
            options,
            expire_after_ms: pool.expire_after.as_ms(),
        };
        Some((
            spec,
            LaunchReason {
                pods: planned.pods.clone(),
                summary,
            },
        ))
    }
}

/// The machines one solve holds for each other: new ones by index, launched ones by name.
struct HoldPlan {
    launched: BTreeSet<usize>,
    joining: BTreeSet<String>,
}

fn describe_pool_requirements(pool: &crate::model::nodepool::NodePool) -> String {
    if pool.requirements.is_empty() {
        return "no requirements".to_string();
    }
    pool.requirements
        .iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// A requirement set as NodeClaim requirements: the value set with its operator, and integer
/// bounds as separate Gt / Lt terms, with the `minValues` in force.
fn requirement_specs(
    r: &crate::model::requirements::Requirement,
    min_values: &[(String, u32)],
) -> Vec<RequirementSpec> {
    use crate::model::requirements::Operator;
    let min_values = min_values
        .iter()
        .find(|(k, _)| *k == r.key)
        .map(|(_, m)| *m)
        .or(r.min_values);
    let mut out = Vec::new();
    let values: Vec<String> = r.values.iter().cloned().collect();
    let set_op = match (r.complement, values.is_empty()) {
        (true, true) => Operator::Exists,
        (true, false) => Operator::NotIn,
        (false, true) => Operator::DoesNotExist,
        (false, false) => Operator::In,
    };
    let has_bounds = r.greater_than.is_some() || r.less_than.is_some();
    // `Exists` adds nothing next to a bound (a bound already requires the label).
    if !(set_op == Operator::Exists && has_bounds) {
        out.push(RequirementSpec {
            key: r.key.clone(),
            operator: set_op,
            values,
            min_values,
        });
    }
    if let Some(gt) = r.greater_than {
        out.push(RequirementSpec {
            key: r.key.clone(),
            operator: Operator::Gt,
            values: vec![gt.to_string()],
            min_values: None,
        });
    }
    if let Some(lt) = r.less_than {
        out.push(RequirementSpec {
            key: r.key.clone(),
            operator: Operator::Lt,
            values: vec![lt.to_string()],
            min_values: None,
        });
    }
    if let Some(first) = out.first_mut() {
        first.min_values = min_values;
    }
    out
}
