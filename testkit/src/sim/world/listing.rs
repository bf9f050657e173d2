//! What a (re)started controller lists: the Kubernetes objects, the catalog and the cloud's
//! instances, the recently terminated ones included.

use super::*;

impl World {
    /// The listing the garbage collector's periodic DescribeInstances gets: the one before,
    /// while no instance was launched or terminated and none of the terminated ones listed
    /// aged out of it since (most listings are the one before).
    pub(super) fn periodic_listing(&mut self) -> std::sync::Arc<[ListedInstance]> {
        let changes = self.cloud.changes();
        if let Some(kept) = &self.instance_listing
            && kept.cloud_changes == changes
            && self.now_ms < kept.until_ms
        {
            debug_assert_eq!(
                *kept.instances,
                *self.listed_instances(),
                "a listing kept while the cloud changed"
            );
            return std::sync::Arc::clone(&kept.instances);
        }
        let instances: std::sync::Arc<[ListedInstance]> = self.listed_instances().into();
        // The first terminated instance listed leaves the listing when it is this old.
        let until_ms = self
            .cloud
            .first_terminated_since(Self::listed_since(self.now_ms))
            .map_or(u64::MAX, |at| at.saturating_add(TERMINATED_LISTED_MS));
        self.instance_listing = Some(KeptListing {
            cloud_changes: changes,
            until_ms,
            instances: std::sync::Arc::clone(&instances),
        });
        instances
    }

    /// The earliest termination a listing at `now_ms` still shows: an instance is listed
    /// while `now < terminated + TERMINATED_LISTED_MS`.
    fn listed_since(now_ms: u64) -> u64 {
        (now_ms + 1).saturating_sub(TERMINATED_LISTED_MS)
    }

    /// DescribeInstances: this cluster's instances, the recently terminated ones included.
    pub(super) fn listed_instances(&self) -> Vec<ListedInstance> {
        let since = Self::listed_since(self.now_ms);
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

/// A listing of the cloud's instances, kept for the next periodic one.
#[derive(Debug, Clone)]
pub(super) struct KeptListing {
    /// [`crate::sim::cloud::SimCloud::changes`] when it was made.
    cloud_changes: u64,
    /// When a terminated instance in it ages out of the listing.
    until_ms: u64,
    instances: std::sync::Arc<[ListedInstance]>,
}
