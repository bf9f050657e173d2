//! Node registration, as Karpenter does it: a Node whose `spec.providerID` is a NodeClaim's
//! instance is linked to it — the NodeClaim's labels, taints and startup taints go onto the
//! Node with `karpenter.sh/registered`, the termination finalizer and an owner reference; the
//! NodeClaim gets `status.nodeName` and `Registered=True`. Once the Node is Ready and its
//! startup taints are gone, both are marked initialized (`Initialized=True`, `Ready=True`,
//! `karpenter.sh/initialized`).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::reflector::Store;
use nodewright_api::{NodeClaim, Time};
use nodewright_kubernetes::nodeclaims::{NodeClaims, condition_is, set_condition};
use nodewright_kubernetes::nodes::Nodes;
use tracing::{info, warn};

use crate::cache::cached;

/// How often every NodeClaim is looked at, besides when a Node or NodeClaim changes.
const SWEEP_EVERY: Duration = Duration::from_secs(10);
/// Changes arriving this close together are looked at once.
const SETTLE: Duration = Duration::from_millis(100);

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn has_taint(node: &Node, key: &str, effect: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == key && t.effect == effect))
}

/// Whether the node has come up: Ready, and none of the claim's startup taints left.
fn initialized(node: &Node, claim: &NodeClaim) -> bool {
    node_ready(node)
        && !claim
            .spec
            .startup_taints
            .iter()
            .any(|t| has_taint(node, &t.key, &t.effect))
}

/// Links Nodes to NodeClaims until the process stops.
pub async fn run(client: kube::Client, claims: NodeClaims, nodes: Nodes) {
    let (node_store, mut node_changes) = cached(Api::<Node>::all(client.clone()));
    let (claim_store, mut claim_changes) = cached(Api::<NodeClaim>::all(client));
    if node_store.wait_until_ready().await.is_err() || claim_store.wait_until_ready().await.is_err()
    {
        return;
    }
    let mut sweep = tokio::time::interval(SWEEP_EVERY);
    loop {
        tokio::select! {
            change = node_changes.recv() => {
                if change.is_none() {
                    return;
                }
                tokio::time::sleep(SETTLE).await;
            }
            change = claim_changes.recv() => {
                if change.is_none() {
                    return;
                }
                tokio::time::sleep(SETTLE).await;
            }
            _ = sweep.tick() => {}
        }
        reconcile(&node_store, &claim_store, &claims, &nodes).await;
    }
}

/// One look at every NodeClaim with an instance that is not initialized yet.
pub async fn reconcile(
    node_store: &Store<Node>,
    claim_store: &Store<NodeClaim>,
    claims: &NodeClaims,
    nodes: &Nodes,
) {
    let by_provider: BTreeMap<String, std::sync::Arc<Node>> = node_store
        .state()
        .into_iter()
        .filter_map(|n| {
            let id = n.spec.as_ref()?.provider_id.clone()?;
            Some((id, n))
        })
        .collect();
    let mut pending: Vec<std::sync::Arc<NodeClaim>> = claim_store
        .state()
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none() && !condition_is(c, "Initialized"))
        .collect();
    pending.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for claim in pending {
        let Some(provider_id) = claim.status.as_ref().and_then(|s| s.provider_id.clone()) else {
            continue;
        };
        let Some(node) = by_provider.get(&provider_id) else {
            continue;
        };
        let claim_name = claim.metadata.name.clone().unwrap_or_default();
        let node_name = node.metadata.name.clone().unwrap_or_default();
        if let Err(e) = link(&claim, node, &claim_name, &node_name, claims, nodes).await {
            warn!(nodeclaim = claim_name, node = node_name, error = %e, "registering the node failed; retried at the next change");
        }
    }
}

async fn link(
    claim: &NodeClaim,
    node: &Node,
    claim_name: &str,
    node_name: &str,
    claims: &NodeClaims,
    nodes: &Nodes,
) -> Result<(), kube::Error> {
    let registered = condition_is(claim, "Registered");
    if !registered {
        nodes.register(node_name, claim).await?;
        info!(nodeclaim = claim_name, node = node_name, "registered");
    }
    let up = initialized(node, claim);
    if up {
        nodes.mark_initialized(node_name).await?;
    }
    if registered && !up {
        return Ok(());
    }
    let at = Time(Timestamp::now());
    claims
        .update(claim_name, |c| {
            let status = c.status.get_or_insert_with(Default::default);
            status.node_name = Some(node_name.to_string());
            set_condition(
                &mut status.conditions,
                "Registered",
                true,
                "Registered",
                "",
                &at,
            );
            if up {
                set_condition(
                    &mut status.conditions,
                    "Initialized",
                    true,
                    "Initialized",
                    "",
                    &at,
                );
                set_condition(&mut status.conditions, "Ready", true, "Ready", "", &at);
            }
        })
        .await?;
    if up {
        info!(nodeclaim = claim_name, node = node_name, "initialized");
    }
    Ok(())
}
