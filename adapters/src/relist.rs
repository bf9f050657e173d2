//! The re-list after a restart: a controller that comes back lists the world again (the
//! informers' initial list, EC2's DescribeInstances) and must bring the recovered core up to
//! date with it. Events that were in flight when the old process stopped are lost; the listing
//! still shows what they did.
//!
//! [`relist_events`] compares the listing with what the core knows and returns the events that
//! close the gap: objects new or changed are applied, objects the core knows that the listing
//! lacks are deleted (an informer's `DeletedFinalStateUnknown`), and the cloud's instances are
//! listed for the garbage collector. An object the core already has exactly is not sent: a
//! restart after a clean stop adds nothing but the instance listing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use nodewright_core::EventKind;
use nodewright_core::catalog::Catalog;
use nodewright_core::event::DaemonSet;
use nodewright_core::model::node::Node;
use nodewright_core::model::nodeclaim::ListedInstance;
use nodewright_core::model::nodeclass::NodeClass;
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::pdb::PodDisruptionBudget;
use nodewright_core::model::pod::{Pod, PodKey};
use nodewright_core::state::ClusterState;

/// The pod events that bring `known` up to date with `listed`, every pod there is: pods new
/// or changed are applied in key order (the last of two with one key wins), then the pods the
/// core knows that are not listed are deleted. Only what differs is copied.
pub fn pod_gap<'a>(
    known: &ClusterState,
    listed: impl IntoIterator<Item = &'a Pod>,
) -> Vec<EventKind> {
    let mut by_key: BTreeMap<&PodKey, &Pod> = BTreeMap::new();
    for pod in listed {
        by_key.insert(&pod.key, pod);
    }
    let mut events: Vec<EventKind> = by_key
        .values()
        .filter(|pod| known.pods.get(&pod.key) != Some(**pod))
        .map(|pod| EventKind::PodApplied(Box::new((*pod).clone())))
        .collect();
    events.extend(
        known
            .pods
            .keys()
            .filter(|k| !by_key.contains_key(k))
            .map(|key| EventKind::PodDeleted { pod: key.clone() }),
    );
    events
}

/// Everything a restarted controller lists, as it is now.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// The instance-type catalog the controller starts with.
    pub catalog: Option<Arc<Catalog>>,
    pub nodeclasses: Vec<NodeClass>,
    pub nodepools: Vec<NodePool>,
    pub nodes: Vec<Node>,
    /// The pods (none: they were not listed, and what the core knows of them stays).
    pub pods: Option<Vec<Pod>>,
    pub pdbs: Vec<PodDisruptionBudget>,
    /// The DaemonSets (none: they were not listed, and what the core knows of them stays).
    pub daemonsets: Option<Vec<DaemonSet>>,
    /// This cluster's instances (none: the cloud was not listed).
    pub instances: Option<Vec<ListedInstance>>,
}

/// The events that bring `known` up to date with `listing`, in the order an informer start
/// delivers them: classes and pools before the nodes that use them, nodes before their pods,
/// deletions of pods before deletions of their nodes, the instances last.
pub fn relist_events(known: &ClusterState, listing: Listing) -> Vec<EventKind> {
    let mut events = Vec::new();
    if let Some(catalog) = listing.catalog {
        let same = known.catalog.as_ref().is_some_and(|c| {
            if catalog.is_normalized() {
                *c.catalog == *catalog
            } else {
                *c.catalog == Catalog::clone(&catalog).normalized()
            }
        });
        if !same {
            events.push(EventKind::CatalogUpdated(catalog));
        }
    }

    let classes: BTreeSet<String> = listing.nodeclasses.iter().map(|c| c.name.clone()).collect();
    for class in listing.nodeclasses {
        if known.nodeclasses.get(&class.name) != Some(&class) {
            events.push(EventKind::NodeClassApplied(Box::new(class)));
        }
    }
    let pools: BTreeSet<String> = listing.nodepools.iter().map(|p| p.name.clone()).collect();
    for pool in listing.nodepools {
        if known.nodepools.get(&pool.name) != Some(&pool) {
            events.push(EventKind::NodePoolApplied(Box::new(pool)));
        }
    }
    let pdbs: BTreeSet<(String, String)> = listing
        .pdbs
        .iter()
        .map(|p| (p.namespace.clone(), p.name.clone()))
        .collect();
    for pdb in listing.pdbs {
        if known.pdbs.get(&(pdb.namespace.clone(), pdb.name.clone())) != Some(&pdb) {
            events.push(EventKind::PodDisruptionBudgetApplied(Box::new(pdb)));
        }
    }
    let daemonsets: Option<BTreeSet<(String, String)>> = listing.daemonsets.map(|sets| {
        let mut keys = BTreeSet::new();
        for ds in sets {
            let key = (ds.namespace.clone(), ds.name.clone());
            if known.daemonsets.get(&key) != Some(&ds) {
                events.push(EventKind::DaemonSetApplied(Box::new(ds)));
            }
            keys.insert(key);
        }
        keys
    });
    let nodes: BTreeSet<String> = listing.nodes.iter().map(|n| n.name.clone()).collect();
    for node in listing.nodes {
        if known.nodes.get(&node.name).is_none_or(|k| *k.node != node) {
            events.push(EventKind::NodeApplied(Arc::new(node)));
        }
    }
    if let Some(pods) = &listing.pods {
        events.extend(pod_gap(known, pods));
    }
    for name in known.nodes.keys().filter(|n| !nodes.contains(*n)) {
        events.push(EventKind::NodeDeleted { name: name.clone() });
    }
    for (namespace, name) in known.pdbs.keys().filter(|k| !pdbs.contains(*k)) {
        events.push(EventKind::PodDisruptionBudgetDeleted {
            namespace: namespace.clone(),
            name: name.clone(),
        });
    }
    if let Some(listed) = &daemonsets {
        for (namespace, name) in known.daemonsets.keys().filter(|k| !listed.contains(*k)) {
            events.push(EventKind::DaemonSetDeleted {
                namespace: namespace.clone(),
                name: name.clone(),
            });
        }
    }
    for name in known.nodepools.keys().filter(|n| !pools.contains(*n)) {
        events.push(EventKind::NodePoolDeleted { name: name.clone() });
    }
    for name in known.nodeclasses.keys().filter(|n| !classes.contains(*n)) {
        events.push(EventKind::NodeClassDeleted { name: name.clone() });
    }
    if let Some(instances) = listing.instances {
        events.push(EventKind::InstancesListed {
            instances: instances.into(),
        });
    }
    events
}
