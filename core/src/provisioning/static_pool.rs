//! Static NodePools (`spec.replicas`), as Karpenter's static capacity keeps them: a pool with
//! replicas keeps that many machines whatever the pods ask. It launches none for pending pods
//! (pods still land on its nodes), its machines are never consolidated, and drift, expiration
//! and interruption replace them as any other's. When it has fewer machines than its replicas
//! (not counting those terminating) it launches the difference, as far as `limits.nodes` (which
//! counts the terminating ones too) allows; when it has more — its replicas were lowered — the
//! extra machines are terminated: those not yet initialized first, then those with the fewest
//! pods, the newest first. Scaling down drains through the Eviction API (PodDisruptionBudgets
//! hold) but no disruption budget paces it.

use std::cmp::Reverse;

use crate::model::nodepool::NodePool;
use crate::state::{ClusterState, NodeClaimState};

/// What the static pools need now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StaticPlan {
    /// Machines to launch: (NodePool, how many, why).
    pub launch: Vec<(String, u32, String)>,
    /// Machines to terminate: (NodeClaim, why).
    pub remove: Vec<(String, String)>,
}

/// The launches and terminations that bring every static pool to its replicas, pools by name.
pub fn plan(state: &ClusterState) -> StaticPlan {
    let mut out = StaticPlan::default();
    for pool in state.nodepools.values() {
        let Some(replicas) = pool.replicas else {
            continue;
        };
        let claims: Vec<(&String, &NodeClaimState)> = state
            .nodeclaims
            .iter()
            .filter(|(_, c)| c.spec.nodepool == pool.name)
            .collect();
        let total = claims.len() as u64;
        let mut active: Vec<(&String, &NodeClaimState)> = claims
            .into_iter()
            .filter(|(_, c)| c.terminating.is_none())
            .collect();
        let count = active.len() as u64;
        let wanted = u64::from(replicas);
        if count < wanted {
            let room = node_limit(pool).map_or(u64::MAX, |limit| limit.saturating_sub(total));
            let launch = (wanted - count).min(room);
            if launch > 0 {
                let capped = if launch < wanted - count {
                    format!(
                        " (limits.nodes {} allows {launch} more now)",
                        node_limit(pool).unwrap_or_default()
                    )
                } else {
                    String::new()
                };
                out.launch.push((
                    pool.name.clone(),
                    launch as u32,
                    format!(
                        "static nodepool {} keeps {replicas} machine(s) and has {count}{capped}",
                        pool.name
                    ),
                ));
            }
        } else if count > wanted {
            // Not yet initialized first, then the fewest pods, then the newest, then by name.
            active.sort_by_key(|(name, c)| {
                (
                    c.is_initialized(),
                    pods_on(state, c),
                    Reverse(c.created_at_ms),
                    name.as_str(),
                )
            });
            for (name, claim) in active.into_iter().take((count - wanted) as usize) {
                out.remove.push((
                    name.clone(),
                    format!(
                        "static nodepool {} keeps {replicas} machine(s) and has {count}; this one has {} pod(s)",
                        pool.name,
                        pods_on(state, claim)
                    ),
                ));
            }
        }
    }
    out
}

fn node_limit(pool: &NodePool) -> Option<u64> {
    pool.limits
        .get("nodes")
        .map(|&n| u64::try_from(n).unwrap_or(0))
}

fn pods_on(state: &ClusterState, claim: &NodeClaimState) -> usize {
    claim
        .node_name
        .as_deref()
        .map_or(0, |node| state.workload_pods_on_node(node).len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::nodeclaim::{NodeClaimSpec, TerminationReason};

    fn state_with(replicas: u32, claims: &[(&str, bool, u64)]) -> ClusterState {
        let mut state = ClusterState::default();
        let mut pool = NodePool::new("static", "default");
        pool.replicas = Some(replicas);
        state.nodepools.insert(pool.name.clone(), pool);
        for &(name, terminating, created) in claims {
            let spec = NodeClaimSpec {
                name: name.to_string(),
                nodepool: "static".to_string(),
                ..NodeClaimSpec::default()
            };
            let mut claim = NodeClaimState::new(spec, created);
            if terminating {
                claim.terminating = Some((TerminationReason::Drifted, created));
            }
            state.nodeclaims.insert(name.to_string(), claim);
        }
        state
    }

    #[test]
    fn launches_the_missing_machines_not_counting_terminating_ones() {
        let state = state_with(3, &[("a", false, 0), ("b", true, 0)]);
        let plan = plan(&state);
        assert_eq!(plan.launch.len(), 1);
        assert_eq!((plan.launch[0].0.as_str(), plan.launch[0].1), ("static", 2));
        assert!(plan.remove.is_empty());
    }

    #[test]
    fn limits_nodes_counts_every_machine_and_caps_the_launches() {
        let mut state = state_with(3, &[("a", false, 0), ("b", true, 0)]);
        state
            .nodepools
            .get_mut("static")
            .expect("the pool")
            .limits
            .insert("nodes".into(), 3);
        let plan = plan(&state);
        assert_eq!(plan.launch[0].1, 1);
        assert!(
            plan.launch[0].2.contains("limits.nodes 3"),
            "{:?}",
            plan.launch
        );
    }

    #[test]
    fn scaling_down_takes_the_newest_of_the_uninitialized_first() {
        let state = state_with(
            1,
            &[("old", false, 10), ("new", false, 20), ("mid", false, 15)],
        );
        let plan = plan(&state);
        assert!(plan.launch.is_empty());
        let removed: Vec<&str> = plan.remove.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(removed, ["new", "mid"]);
    }

    #[test]
    fn a_pool_at_its_count_or_a_dynamic_pool_needs_nothing() {
        assert_eq!(
            plan(&state_with(1, &[("a", false, 0)])),
            StaticPlan::default()
        );
        let mut state = state_with(1, &[]);
        state
            .nodepools
            .get_mut("static")
            .expect("the pool")
            .replicas = None;
        assert_eq!(plan(&state), StaticPlan::default());
    }
}
