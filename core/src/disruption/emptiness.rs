//! Emptiness: a node that has run no workload pod for `consolidateAfter` is removed, within the
//! NodePool's budget. Both consolidation policies include it.

use std::collections::BTreeSet;

use super::budget::allowed_disruptions;
use crate::config::Config;
use crate::model::duration::format_duration_ms;
use crate::model::nodepool::{DisruptionReason, NodePool};
use crate::state::ClusterState;
use crate::wake::Wake;

/// A node that may be removed as empty, and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmptyCandidate {
    /// The NodeClaim.
    pub nodeclaim: String,
    /// Its node.
    pub node: String,
    /// Since when it has run no workload pod.
    pub empty_since_ms: u64,
}

/// The nodes of `pool` that are empty and eligible, whatever the budget, oldest first; also the
/// earliest future time another node becomes eligible.
pub fn candidates(
    state: &ClusterState,
    pool: &NodePool,
    nominated: &BTreeSet<String>,
    now_ms: u64,
) -> (Vec<EmptyCandidate>, Option<u64>) {
    // A static pool's machines are never consolidated, empty or not: it keeps its count.
    let Some(after_ms) = pool.consolidate_after.as_ms().filter(|_| !pool.is_static()) else {
        return (Vec::new(), None);
    };
    // Only a node that runs no workload pod, or one a do-not-disrupt may protect, is a
    // candidate or says when to look again: the others, most of a busy cluster, are passed over
    // by name, without looking each NodeClaim's node up.
    let quiet: Vec<&str> = state
        .nodes
        .iter()
        .filter(|(_, node)| state.empty_or_maybe_protected(node, now_ms))
        .map(|(name, _)| name.as_str())
        .collect();
    if quiet.is_empty() {
        return (Vec::new(), None);
    }
    let mut out = Vec::new();
    let mut next = Wake::default();
    for (name, claim) in &state.nodeclaims {
        if claim.spec.nodepool != pool.name
            || claim.terminating.is_some()
            || !claim.is_initialized()
        {
            continue;
        }
        let Some(node_name) = &claim.node_name else {
            continue;
        };
        if quiet.binary_search(&node_name.as_str()).is_err() {
            debug_assert!(
                state.nodes.get(node_name).is_none_or(|node| {
                    state
                        .do_not_disrupt_among((name, claim), node, now_ms)
                        .is_none()
                        && state.workload_on(node).pods > 0
                }),
                "node {node_name} passed over, yet it is empty or protected"
            );
            continue;
        }
        let Some(node) = state.nodes.get(node_name) else {
            continue;
        };
        if let Some(ends) = state.do_not_disrupt_among((name, claim), node, now_ms) {
            if let Some(at) = ends {
                next.offer(at);
            }
            continue;
        }
        if nominated.contains(node_name)
            || nominated.contains(name)
            || state.workload_on(node).pods > 0
        {
            continue;
        }
        let eligible_at = node.last_pod_event_ms + after_ms;
        if eligible_at <= now_ms {
            out.push(EmptyCandidate {
                nodeclaim: name.clone(),
                node: node_name.clone(),
                empty_since_ms: node.last_pod_event_ms,
            });
        } else {
            next.offer(eligible_at);
        }
    }
    out.sort_by(|a, b| {
        a.empty_since_ms
            .cmp(&b.empty_since_ms)
            .then_with(|| a.nodeclaim.cmp(&b.nodeclaim))
    });
    (out, next.ms())
}

/// The empty nodes to remove now, with the sentence that explains each.
pub fn select(
    state: &ClusterState,
    config: &Config,
    leaving_to_finish: &BTreeSet<String>,
    pool: &NodePool,
    nominated: &BTreeSet<String>,
    now_ms: u64,
) -> (Vec<(EmptyCandidate, String)>, Option<u64>, bool) {
    let (candidates, next) = candidates(state, pool, nominated, now_ms);
    if candidates.is_empty() {
        return (Vec::new(), next, false);
    }
    let (allowed, budget_text) = match allowed_disruptions(
        state,
        config,
        leaving_to_finish,
        pool,
        DisruptionReason::Empty,
        now_ms,
    ) {
        Ok(a) => a,
        Err(_) => return (Vec::new(), next, true),
    };
    let blocked = (candidates.len() as u32) > allowed;
    let after = pool.consolidate_after.as_ms().unwrap_or(0);
    let chosen = candidates
        .into_iter()
        .take(allowed as usize)
        .map(|c| {
            let detail = format!(
                "node {} ran no workload pod for {} (consolidateAfter {}, policy {:?}); {}",
                c.node,
                format_duration_ms(now_ms - c.empty_since_ms),
                format_duration_ms(after),
                pool.consolidation_policy,
                budget_text
            );
            (c, detail)
        })
        .collect();
    (chosen, next, blocked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::duration::MaybeNever;
    use crate::model::labels::DO_NOT_DISRUPT;
    use crate::model::node::Node;
    use crate::model::nodeclaim::NodeClaimSpec;
    use crate::model::pod::Pod;
    use crate::state::{NodeClaimState, NodeState};

    const MIN: u64 = 60_000;

    /// A pool whose nodes go 5 minutes after their last pod, with machine `m` (node `n-m`) for
    /// each of `machines`: its node's do-not-disrupt annotation, and its pods' (one pod each,
    /// `None` for a node with none).
    fn cluster(machines: &[(Option<&str>, Option<Option<&str>>)]) -> (ClusterState, NodePool) {
        let mut pool = NodePool::new("default", "default");
        pool.consolidate_after = MaybeNever::After(5 * MIN);
        let mut state = ClusterState::default();
        for (i, (node_asks, pod)) in machines.iter().enumerate() {
            let (claim_name, node_name) = (format!("m{i}"), format!("n-m{i}"));
            let mut claim = NodeClaimState::new(
                NodeClaimSpec {
                    name: claim_name.clone(),
                    nodepool: "default".into(),
                    ..NodeClaimSpec::default()
                },
                0,
            );
            claim.node_name = Some(node_name.clone());
            claim.initialized_at_ms = Some(0);
            state.nodeclaims.insert(claim_name.clone(), claim);
            let mut node = Node {
                name: node_name.clone(),
                provider_id: None,
                labels: Default::default(),
                annotations: Default::default(),
                taints: Vec::new(),
                allocatable: Default::default(),
                ready: true,
                unschedulable: false,
            };
            if let Some(asks) = node_asks {
                node.annotations
                    .insert(DO_NOT_DISRUPT.into(), asks.to_string());
            }
            let mut listed = NodeState::new(node, Some(claim_name), 0);
            if let Some(pod_asks) = pod {
                let mut p = Pod::new("default", &format!("p{i}"), 100, 1 << 20);
                p.node_name = Some(node_name.clone());
                if let Some(asks) = pod_asks {
                    p.annotations
                        .insert(DO_NOT_DISRUPT.into(), asks.to_string());
                }
                let key = p.key.clone();
                let (id, _) = state.pods.insert(p);
                listed.pods.insert(key, id);
            }
            state.nodes.insert(node_name, listed);
        }
        (state, pool)
    }

    fn at(
        now_ms: u64,
        machines: &[(Option<&str>, Option<Option<&str>>)],
    ) -> (Vec<String>, Option<u64>) {
        let (state, pool) = cluster(machines);
        let (found, next) = candidates(&state, &pool, &BTreeSet::new(), now_ms);
        (found.into_iter().map(|c| c.nodeclaim).collect(), next)
    }

    #[test]
    fn an_empty_node_is_a_candidate_once_its_wait_is_over() {
        assert_eq!(at(MIN, &[(None, None)]), (vec![], Some(5 * MIN)));
        assert_eq!(at(5 * MIN, &[(None, None)]), (vec!["m0".to_string()], None));
        // A node running a pod is none, and says nothing of when to look again.
        assert_eq!(at(5 * MIN, &[(None, Some(None))]), (vec![], None));
    }

    #[test]
    fn a_protection_in_force_wakes_the_pass_when_it_runs_out_even_on_a_busy_node() {
        // The pod's 20 minutes, counted from its start (0), on a node that runs it.
        assert_eq!(
            at(MIN, &[(None, Some(Some("20m")))]),
            (vec![], Some(20 * MIN))
        );
        // The node's own, counted from its NodeClaim's creation (0).
        assert_eq!(
            at(MIN, &[(Some("30m"), Some(None))]),
            (vec![], Some(30 * MIN))
        );
        // For as long as it is there: nothing to wake for.
        assert_eq!(at(MIN, &[(Some("true"), Some(None))]), (vec![], None));
        // Run out: the busy node is passed over, the empty one goes.
        assert_eq!(
            at(40 * MIN, &[(Some("30m"), Some(None)), (Some("30m"), None)]),
            (vec!["m1".to_string()], None)
        );
        // The earliest end among machines, beside an empty node's wait.
        assert_eq!(
            at(
                MIN,
                &[
                    (None, Some(Some("20m"))),
                    (None, Some(Some("3m"))),
                    (None, None)
                ]
            ),
            (vec![], Some(3 * MIN))
        );
    }
}
