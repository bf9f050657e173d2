//! Expiration: a NodeClaim older than its `expireAfter` is terminated, forced and outside
//! budgets. With `Config::expiration_waits_for_jobs` its drain leaves the pods that would lose
//! their work to finish; while only they keep the machine, it counts against no budget.

use std::collections::BTreeSet;

use crate::config::Config;
use crate::model::duration::format_duration_ms;
use crate::model::pod::Pod;
use crate::state::{ClusterState, NodeClaimState};
use crate::wake::Wake;

/// How many of the pods left to finish an expiration names in its reason.
const NAMED_PODS: usize = 5;

/// NodeClaims past their `expireAfter`, with the explanation; and the next expiry to come.
pub fn expired(
    state: &ClusterState,
    config: &Config,
    now_ms: u64,
) -> (Vec<(String, String)>, Option<u64>) {
    let mut out = Vec::new();
    let mut next = Wake::default();
    for (name, claim) in &state.nodeclaims {
        if claim.terminating.is_some() {
            continue;
        }
        let Some(expire_after) = claim.spec.expire_after_ms else {
            continue;
        };
        let at = claim.created_at_ms + expire_after;
        if at <= now_ms {
            let mut detail = format!(
                "NodeClaim is {} old, past expireAfter {} (forced; budgets do not apply)",
                format_duration_ms(now_ms - claim.created_at_ms),
                format_duration_ms(expire_after)
            );
            // A terminationGracePeriod of zero forces the drain at once: nothing is waited for.
            let forced_at_once = state
                .nodepools
                .get(&claim.spec.nodepool)
                .is_some_and(|p| p.termination_grace_period_ms == Some(0));
            let waited_for = if forced_at_once {
                Vec::new()
            } else {
                left_to_finish(state, config, claim)
            };
            if !waited_for.is_empty() {
                detail.push_str(&format!(
                    "; left to finish (expirationWaitsForJobs): {}",
                    named(&waited_for)
                ));
            }
            out.push((name.clone(), detail));
        } else {
            next.offer(at);
        }
    }
    (out, next.ms())
}

/// Whether the NodeClaim `name`, past its `expireAfter`, is kept only by pods its drain leaves
/// to finish (`Config::expiration_waits_for_jobs`): its drain is among `leaving_to_finish`
/// (not forced, its terminationGracePeriod deadline not reached) and every workload pod left
/// on its node is one it leaves to finish. Its other pods are gone and none is being evicted,
/// so it disrupts nothing and does not count against the NodePool's disruption budgets.
pub fn waits_only_for_jobs(
    state: &ClusterState,
    config: &Config,
    leaving_to_finish: &BTreeSet<String>,
    name: &str,
    claim: &NodeClaimState,
) -> bool {
    if !leaving_to_finish.contains(name) {
        return false;
    }
    let Some(node_name) = claim.node_name.as_deref() else {
        return false;
    };
    let Some(node) = state.nodes.get(node_name) else {
        return false;
    };
    // DaemonSet pods leave after the workload's (the drain's tiers): they keep nothing. The
    // workload pods' summary counts those a drain evicts, and those of them it may leave.
    let pods = state.workload_on(node);
    let waits = config.expiration_waits_for_jobs
        && pods.evicted > 0
        && pods.evicted_unreplicated == pods.evicted;
    debug_assert_eq!(
        waits,
        {
            let mut workload = state
                .drainable_pods_of(node_name)
                .filter(|p| !p.is_daemonset_pod())
                .peekable();
            workload.peek().is_some() && workload.all(|p| config.expiration_waits_for(p))
        },
        "node {node_name}: its summary says otherwise of the pods its expiration may leave"
    );
    waits
}

/// The pods on `claim`'s node that its expiration leaves to finish.
fn left_to_finish<'a>(
    state: &'a ClusterState,
    config: &Config,
    claim: &NodeClaimState,
) -> Vec<&'a Pod> {
    if !config.expiration_waits_for_jobs {
        return Vec::new();
    }
    let Some(node) = &claim.node_name else {
        return Vec::new();
    };
    state
        .drainable_pods_on_node(node)
        .into_iter()
        .filter(|p| config.expiration_waits_for(p))
        .collect()
}

/// The first few pods by name, and how many more.
fn named(pods: &[&Pod]) -> String {
    let mut text = pods
        .iter()
        .take(NAMED_PODS)
        .map(|p| p.key.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if pods.len() > NAMED_PODS {
        text.push_str(&format!(" and {} more", pods.len() - NAMED_PODS));
    }
    text
}
