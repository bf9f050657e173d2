//! Disruption budgets: how many of a NodePool's nodes may be disrupted at once for a reason.
//! A budget with a `schedule` is active for `duration` after each time the schedule fires
//! (UTC); several active budgets: the most restrictive wins; no active budget: no limit.

use std::collections::BTreeSet;

use super::expiration;
use super::schedule::{CronError, CronSchedule};
use crate::config::Config;
use crate::model::nodepool::{BudgetNodes, DisruptionReason, NodePool};
use crate::state::ClusterState;

/// The first budget schedule of a NodePool that does not parse.
pub fn invalid_schedule(pool: &NodePool) -> Option<CronError> {
    pool.budgets
        .iter()
        .filter_map(|b| b.schedule.as_deref())
        .find_map(|s| CronSchedule::parse(s).err())
}

/// How many more nodes of `pool` may be disrupted at `now_ms` for `reason`: the most
/// restrictive active budget that applies, minus the nodes already being deleted or not yet
/// ready (but for expired machines kept only by pods their drains leave to finish,
/// [`expiration::waits_only_for_jobs`]: they disrupt nothing); and the sentence that explains
/// it. `leaving_to_finish` names the NodeClaims whose drains may leave pods to finish now.
/// `Err` when a schedule is invalid: disruption is blocked until the NodePool is fixed.
pub fn allowed_disruptions(
    state: &ClusterState,
    config: &Config,
    leaving_to_finish: &BTreeSet<String>,
    pool: &NodePool,
    reason: DisruptionReason,
    now_ms: u64,
) -> Result<(u32, String), String> {
    if let Some(err) = invalid_schedule(pool) {
        return Err(format!("disruption blocked: {err}"));
    }
    // One walk over the NodeClaims counts the pool's and those of them on their way out.
    let mut total = 0u32;
    let mut disrupting = 0u32;
    let mut waiting = 0u32;
    for (name, claim) in &state.nodeclaims {
        if claim.spec.nodepool != pool.name {
            continue;
        }
        total += 1;
        if claim.terminating.is_none() && claim.is_initialized() {
            continue;
        }
        if expiration::waits_only_for_jobs(state, config, leaving_to_finish, name, claim) {
            waiting += 1;
        } else {
            disrupting += 1;
        }
    }
    let mut budget: Option<(u32, String)> = None;
    for b in pool.budgets.iter().filter(|b| b.applies_to(reason)) {
        let active = match (&b.schedule, b.duration_ms) {
            (Some(s), Some(d)) => CronSchedule::parse(s)
                .map(|c| c.active_at(now_ms, d))
                .unwrap_or(false),
            _ => true,
        };
        if !active {
            continue;
        }
        let allowed = b.nodes.allowed_of(total);
        let mut text = match b.nodes {
            BudgetNodes::Count(n) => format!("nodes: {n}"),
            BudgetNodes::Percent(p) => format!("nodes: {p}% of {total}"),
        };
        if let Some(s) = &b.schedule {
            text.push_str(&format!(" (schedule {s:?}, active now)"));
        }
        if budget.as_ref().is_none_or(|(a, _)| allowed < *a) {
            budget = Some((allowed, text));
        }
    }
    let (limit, text) = budget.unwrap_or((total, "no active budget".to_string()));
    let allowed = limit.saturating_sub(disrupting);
    let mut explained =
        format!("budget {text} allows {limit}, {disrupting} already disrupting or not ready");
    if waiting > 0 {
        explained.push_str(&format!(
            " ({waiting} expired, waiting only for Jobs' pods to finish, not counted)"
        ));
    }
    Ok((allowed, explained))
}
