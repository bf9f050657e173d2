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
            || state.pods_summary(node).workload > 0
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
