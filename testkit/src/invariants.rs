//! Invariants the simulator checks after every step. This first set covers what the
//! provisioning and lifecycle rules promise; more come with disruption and interruption.

use nodewright_core::disruption::drift::DriftCause;
use nodewright_core::model::pod::PodKey;
use nodewright_core::{Command, Core, EventKind, Replacing};

use crate::report::Violation;
use crate::sim::cloud::SimInstance;

fn violation(now_ms: u64, kind: &str, detail: String) -> Violation {
    Violation {
        at_seconds: now_ms as f64 / 1000.0,
        // Set by the run loop, which knows the driver's count.
        event: 0,
        kind: kind.to_string(),
        detail,
    }
}

/// Checks on the commands of one step.
pub fn check_step(core: &Core, commands: &[Command], now_ms: u64) -> Vec<Violation> {
    let mut out = Vec::new();
    let state = core.state();
    for command in commands {
        if let Command::LaunchNodeClaim { nodeclaim, .. } = command {
            for o in nodeclaim.options.iter() {
                let parts = (o.instance_type.as_str(), o.zone.as_str(), o.capacity_type);
                if state.is_unavailable(&parts, now_ms) {
                    out.push(violation(
                        now_ms,
                        "launch-into-unavailable-offering",
                        format!(
                            "NodeClaim {} offers {}, marked unavailable",
                            nodeclaim.name,
                            o.key()
                        ),
                    ));
                }
            }
            if nodeclaim.options.is_empty() {
                out.push(violation(
                    now_ms,
                    "launch-without-options",
                    format!("NodeClaim {} has no launch option", nodeclaim.name),
                ));
            }
        }
    }
    // No voluntary disruption of a do-not-disrupt pod or node: such a pod is only evicted when
    // forced (terminationGracePeriod ran out), and a voluntary termination never picks a node
    // that carries the annotation or runs such a pod.
    for command in commands {
        match command {
            Command::EvictPod {
                pod, forced: false, ..
            } if state
                .pods
                .get(pod)
                .is_some_and(|p| p.do_not_disrupt().active_at(now_ms)) =>
            {
                out.push(violation(
                    now_ms,
                    "do-not-disrupt-pod-evicted",
                    format!("pod {pod} has karpenter.sh/do-not-disrupt and was evicted before terminationGracePeriod"),
                ));
            }
            Command::CordonNode { node, reason, .. } => {
                let voluntary = ["Empty", "Underutilized", "Drifted"]
                    .iter()
                    .any(|r| reason.starts_with(r));
                let protected = state.do_not_disrupt_on_node(node, now_ms).is_some();
                if voluntary && protected {
                    out.push(violation(
                        now_ms,
                        "do-not-disrupt-node-disrupted",
                        format!("node {node} is protected by karpenter.sh/do-not-disrupt but was chosen: {reason}"),
                    ));
                }
            }
            _ => {}
        }
    }
    // NodePool limits, counting every live NodeClaim at its largest possible capacity.
    let mut usages = state.usage_under_limits();
    for pool in state.nodepools.values().filter(|p| !p.limits.is_empty()) {
        let (usage, count) = usages.remove(pool.name.as_str()).unwrap_or_default();
        for (resource, limit) in &pool.limits {
            let used = if resource == "nodes" {
                count
            } else {
                usage.get(resource)
            };
            if used > *limit {
                out.push(violation(
                    now_ms,
                    "nodepool-over-limit",
                    format!(
                        "NodePool {} uses {used} of limits.{resource} {limit}",
                        pool.name
                    ),
                ));
            }
        }
    }
    out
}

/// Replace loops: a machine replaced for drift that its replacement has too is replaced again,
/// and again, forever (a NodePool requirement the launched nodes never meet, say). Remembers
/// what drifted on each machine a replacement was launched for, and fails the run when the
/// replacement is itself replaced for that same drift.
#[derive(Debug, Default)]
pub struct ReplaceLoops {
    /// Each replacement NodeClaim launched for drift: the machine it replaced, and what drifted.
    launched_for: std::collections::BTreeMap<String, (String, DriftCause)>,
}

impl ReplaceLoops {
    pub fn check(&mut self, core: &Core, now_ms: u64) -> Vec<Violation> {
        let claims = &core.state().nodeclaims;
        self.see(core.replacing(), |claim| claims.contains_key(claim), now_ms)
    }

    /// [`ReplaceLoops::check`] over what is being replaced now and which NodeClaims live.
    fn see<'a>(
        &mut self,
        replacing: impl Iterator<Item = Replacing<'a>>,
        live: impl Fn(&str) -> bool,
        now_ms: u64,
    ) -> Vec<Violation> {
        let mut out = Vec::new();
        for Replacing {
            old, new, drift, ..
        } in replacing
        {
            // Replaced again, for whatever reason: what it was launched for is settled.
            let launched_for = self.launched_for.remove(old);
            let Some(drift) = drift else {
                continue;
            };
            if let Some((replaced, first)) = launched_for
                && first == *drift
            {
                out.push(violation(
                    now_ms,
                    "replace-loop",
                    format!(
                        "NodeClaim {old} replaced {replaced} (drifted: {first}) and is replaced for the same drift; its replacements would be too"
                    ),
                ));
            }
            for claim in new {
                self.launched_for
                    .entry(claim.clone())
                    .or_insert_with(|| (old.to_string(), drift.clone()));
            }
        }
        self.launched_for.retain(|claim, _| live(claim));
        out
    }
}

/// Checks on the world: no instance runs without a NodeClaim past the registration timeout.
pub fn check_world<'a>(
    core: &Core,
    running: impl Iterator<Item = &'a SimInstance>,
    now_ms: u64,
) -> Vec<Violation> {
    let state = core.state();
    let grace = core.config().registration_timeout_ms;
    running
        .filter(|i| !state.nodeclaims.contains_key(&i.nodeclaim))
        .filter(|i| now_ms > i.launched_at_ms + grace)
        .map(|i| {
            violation(
                now_ms,
                "orphan-instance",
                format!(
                    "instance {} ({}) runs without NodeClaim {} for longer than the registration timeout",
                    i.instance.instance_id, i.instance.instance_type, i.nodeclaim
                ),
            )
        })
        .collect()
}

/// A machine that joined is being removed as empty while pods it was launched for are still
/// pending: they did not fit on it (the core's view of its room, or of what else runs there, was
/// wrong), and the next launch would go the same way.
pub fn check_launched_in_vain(
    nodeclaim: &str,
    reason: nodewright_core::model::nodeclaim::TerminationReason,
    still_pending: &[&PodKey],
    now_ms: u64,
) -> Vec<Violation> {
    if reason != nodewright_core::model::nodeclaim::TerminationReason::Empty
        || still_pending.is_empty()
    {
        return Vec::new();
    }
    let shown: Vec<String> = still_pending
        .iter()
        .take(5)
        .map(|p| p.to_string())
        .collect();
    vec![violation(
        now_ms,
        "machine-launched-in-vain",
        format!(
            "NodeClaim {nodeclaim} is removed as empty, and {} pod(s) it was launched for are still pending: {}",
            still_pending.len(),
            shown.join(", ")
        ),
    )]
}

/// The core's view of the cluster matches the cluster: `gap` is what a re-list would still
/// tell it (the instance listing and the catalog aside).
pub fn check_view(gap: &[EventKind], now_ms: u64) -> Vec<Violation> {
    let stale: Vec<String> = gap
        .iter()
        .filter(|k| {
            !matches!(
                k,
                EventKind::InstancesListed { .. }
                    | EventKind::InstancesRelisted { .. }
                    | EventKind::CatalogUpdated(_)
            )
        })
        .map(describe_gap)
        .collect();
    if stale.is_empty() {
        return Vec::new();
    }
    let shown: Vec<&str> = stale.iter().take(5).map(String::as_str).collect();
    vec![violation(
        now_ms,
        "core-view-stale",
        format!(
            "{} objects differ between the cluster and the core's view: {}",
            stale.len(),
            shown.join("; ")
        ),
    )]
}

fn describe_gap(kind: &EventKind) -> String {
    match kind {
        EventKind::PodApplied(p) => format!("pod {} differs", p.key),
        EventKind::PodDeleted { pod } => format!("pod {pod} is gone"),
        EventKind::NodeApplied(n) => format!("node {} differs", n.name),
        EventKind::NodeDeleted { name } => format!("node {name} is gone"),
        other => format!("{} differs", other.name()),
    }
}

/// Checks at the end of a run. Every instance that still runs has joined as a node (an instance
/// that never became a node and was never terminated is a leak). Every pod still pending after
/// `patience_ms` was told why (reported unschedulable): none is stranded in silence.
pub fn check_end<'a>(
    running: impl Iterator<Item = &'a SimInstance>,
    joined: impl Fn(&str) -> bool,
    pending: impl Iterator<Item = (&'a PodKey, u64, bool)>,
    patience_ms: u64,
    now_ms: u64,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for i in running {
        if !joined(&i.instance.instance_id) && now_ms > i.launched_at_ms + patience_ms {
            out.push(violation(
                now_ms,
                "instance-without-node",
                format!(
                    "instance {} of NodeClaim {} runs at the end without ever joining as a node",
                    i.instance.instance_id, i.nodeclaim
                ),
            ));
        }
    }
    for (pod, created_at_ms, reported) in pending {
        if !reported && now_ms > created_at_ms + patience_ms {
            out.push(violation(
                now_ms,
                "pod-stranded",
                format!(
                    "pod {pod} is still pending at the end, {}s after its creation, and was never reported unschedulable",
                    (now_ms - created_at_ms) / 1000
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use nodewright_core::model::nodeclaim::TerminationReason;
    use nodewright_core::model::requirements::Requirement;

    #[test]
    fn an_empty_machine_removed_while_its_pods_wait_was_launched_in_vain() {
        let pod = PodKey::new("default", "api");
        let found =
            check_launched_in_vain("default-abcde", TerminationReason::Empty, &[&pod], 60_000);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].kind, "machine-launched-in-vain");
        assert!(
            found[0].detail.contains("default/api"),
            "{}",
            found[0].detail
        );
        // Removed for another reason, or with its pods placed: nothing is wrong.
        assert!(check_launched_in_vain("x", TerminationReason::Drifted, &[&pod], 0).is_empty());
        assert!(check_launched_in_vain("x", TerminationReason::Empty, &[], 0).is_empty());
    }

    #[test]
    fn a_core_view_that_lags_the_cluster_is_reported_with_what_differs() {
        let gap = vec![
            EventKind::InstancesListed {
                instances: Vec::new().into(),
            },
            EventKind::PodDeleted {
                pod: PodKey::new("default", "gone"),
            },
        ];
        let found = check_view(&gap, 0);
        assert_eq!(found.len(), 1);
        assert!(
            found[0].detail.contains("pod default/gone is gone"),
            "{}",
            found[0].detail
        );
        assert!(
            check_view(&gap[..1], 0).is_empty(),
            "the instance listing is not a gap"
        );
    }

    #[test]
    fn a_replacement_replaced_for_its_own_drift_is_a_loop() {
        let mut loops = ReplaceLoops::default();
        let unmet = DriftCause::RequirementUnmet(Requirement::single("team", "a"));
        let template = DriftCause::TemplateChanged {
            nodepool: "default".to_string(),
        };
        let b = BTreeSet::from(["b".to_string()]);
        let c = BTreeSet::from(["c".to_string()]);
        let live = |_: &str| true;
        let replacing = |old, new, drift| Replacing {
            old,
            new,
            reason: TerminationReason::Drifted,
            drift,
        };
        // a is replaced by b: nothing wrong yet, however often it is seen.
        for _ in 0..2 {
            let seen = [replacing("a", &b, Some(&unmet))];
            assert!(loops.see(seen.into_iter(), live, 0).is_empty());
        }
        // b is replaced by c for another drift, or for another reason: not a loop.
        for other in [
            replacing("b", &c, Some(&template)),
            Replacing {
                reason: TerminationReason::Underutilized,
                ..replacing("b", &c, None)
            },
        ] {
            let mut fresh = ReplaceLoops::default();
            fresh.see([replacing("a", &b, Some(&unmet))].into_iter(), live, 0);
            assert!(
                fresh.see([other].into_iter(), live, 0).is_empty(),
                "{other:?}"
            );
        }
        // b, replaced for another reason first, then for the drift it replaced a for: what it
        // was launched for was settled by the first, so no loop.
        let mut settled = ReplaceLoops::default();
        settled.see([replacing("a", &b, Some(&unmet))].into_iter(), live, 0);
        let underutilized = Replacing {
            reason: TerminationReason::Underutilized,
            ..replacing("b", &c, None)
        };
        settled.see([underutilized].into_iter(), live, 0);
        let again = [replacing("b", &c, Some(&unmet))];
        assert!(settled.see(again.into_iter(), live, 0).is_empty());
        // b is replaced by c for the drift it replaced a for: a loop, named once.
        let seen = [replacing("b", &c, Some(&unmet))];
        let found = loops.see(seen.into_iter(), live, 7_000);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].kind, "replace-loop");
        assert!(
            found[0].detail.contains(
                "NodeClaim b replaced a (drifted: its labels no longer meet the NodePool requirement team In [a])"
            ),
            "{}",
            found[0].detail
        );
        assert!(loops.see(seen.into_iter(), live, 8_000).is_empty());
    }
}
