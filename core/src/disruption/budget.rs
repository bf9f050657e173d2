//! Disruption budgets: how many of a NodePool's nodes may be disrupted at once for a reason.

use crate::model::nodepool::{DisruptionReason, NodePool};
use crate::state::ClusterState;

/// How many more nodes of `pool` may be disrupted now for `reason`: the most restrictive
/// budget that applies, minus the nodes already being deleted or not yet ready.
///
/// Scheduled budgets (`schedule` + `duration`) are treated as always active, the conservative
/// reading, until cron windows are evaluated.
pub fn allowed_disruptions(
    state: &ClusterState,
    pool: &NodePool,
    reason: DisruptionReason,
) -> (u32, String) {
    let claims: Vec<_> = state
        .nodeclaims
        .values()
        .filter(|c| c.spec.nodepool == pool.name)
        .collect();
    let total = claims.len() as u32;
    let disrupting = claims
        .iter()
        .filter(|c| c.terminating.is_some() || !c.is_initialized())
        .count() as u32;
    let mut budget: Option<(u32, String)> = None;
    for b in pool.budgets.iter().filter(|b| b.applies_to(reason)) {
        let allowed = b.nodes.allowed_of(total);
        let text = match b.nodes {
            crate::model::nodepool::BudgetNodes::Count(n) => format!("nodes: {n}"),
            crate::model::nodepool::BudgetNodes::Percent(p) => format!("nodes: {p}% of {total}"),
        };
        if budget.as_ref().is_none_or(|(a, _)| allowed < *a) {
            budget = Some((allowed, text));
        }
    }
    let (limit, text) = budget.unwrap_or((total, "no budget".to_string()));
    let allowed = limit.saturating_sub(disrupting);
    (
        allowed,
        format!("budget {text} allows {limit}, {disrupting} already disrupting or not ready"),
    )
}
