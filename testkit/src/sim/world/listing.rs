//! What a (re)started controller lists: the Kubernetes objects, the catalog and the cloud's
//! instances, the recently terminated ones included.

use super::*;

impl World {
    /// DescribeInstances: this cluster's instances, the recently terminated ones included.
    pub(super) fn listed_instances(&self) -> Vec<ListedInstance> {
        // Listed while `now < terminated + TERMINATED_LISTED_MS`.
        let since = (self.now_ms + 1).saturating_sub(TERMINATED_LISTED_MS);
        self.cloud
            .listed(since)
            .into_iter()
            .map(|i| ListedInstance {
                instance_id: i.instance.instance_id.clone(),
                nodeclaim: Some(i.nodeclaim.clone()),
                launched_at_ms: i.launched_at_ms,
                running: i.terminated_at_ms.is_none(),
            })
            .collect()
    }

    /// What a restarted controller lists: the Kubernetes objects as they are, the catalog, and
    /// the cloud's instances.
    pub(crate) fn listing(&self) -> Listing {
        Listing {
            catalog: Some(self.catalog.clone()),
            pods: Some(self.cluster.pods.values().cloned().collect()),
            instances: Some(self.listed_instances()),
            ..self.kubernetes_listing()
        }
    }

    /// The Kubernetes objects as they are but the pods (what the end-of-run view check compares
    /// besides the pods, which it compares in place; the catalog, 1.1 MB to copy and compare,
    /// and the instances play no part there).
    pub(super) fn kubernetes_listing(&self) -> Listing {
        Listing {
            catalog: None,
            nodeclasses: self.nodeclasses.values().cloned().collect(),
            nodepools: self.nodepools.values().cloned().collect(),
            nodes: self
                .cluster
                .nodes
                .values()
                .map(|n| n.node.clone())
                .collect(),
            pods: None,
            pdbs: self.cluster.pdbs.values().cloned().collect(),
            daemonsets: Some(
                self.cluster
                    .daemonsets
                    .values()
                    .map(SimCluster::daemonset_object)
                    .collect(),
            ),
            instances: None,
        }
    }
}
