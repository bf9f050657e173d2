//! The kinds the core follows, each with its key, the event an object gives and the event its
//! deletion gives. An EC2NodeClass gives its spec here; what its selectors find in EC2
//! (`NodeClassResolved`) comes from the controller, which asks the cloud.

use k8s_openapi::api::apps::v1::DaemonSet as KubeDaemonSet;
use k8s_openapi::api::core::v1::{Node as KubeNode, Pod as KubePod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget as KubePdb;
use nodewright_adapters::manifest::{Manifest, nodeclass_from_api, nodepool_from_api};
use nodewright_core::EventKind;
use nodewright_core::model::pod::PodKey;

use crate::ObserveError;
use crate::node::core_node;
use crate::pod::pod_event;
use crate::translate::manifest_of;
use crate::volumes::SharedStorage;
use crate::watch::Observed;

/// Pods, by namespace and name; a pod's PersistentVolumeClaims restrict where it runs, read
/// from the cluster's volumes as the storage watcher keeps them.
#[derive(Clone, Default)]
pub struct Pods {
    pub storage: SharedStorage,
}

impl Observed for Pods {
    type Object = KubePod;
    type Key = PodKey;
    fn key(pod: &KubePod) -> PodKey {
        PodKey::new(
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or_default(),
        )
    }
    fn applied(&self, pod: &KubePod) -> Result<Option<EventKind>, ObserveError> {
        // A finished pod is a deletion: handled by the mirror as one.
        let storage = self
            .storage
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(match pod_event(pod, &storage)? {
            Some(EventKind::PodDeleted { .. }) => None,
            other => other,
        })
    }
    fn deleted(key: PodKey) -> EventKind {
        EventKind::PodDeleted { pod: key }
    }
}

/// Nodes, by name.
#[derive(Clone, Copy, Default)]
pub struct Nodes;

impl Observed for Nodes {
    type Object = KubeNode;
    type Key = String;
    fn key(node: &KubeNode) -> String {
        node.metadata.name.clone().unwrap_or_default()
    }
    fn applied(&self, node: &KubeNode) -> Result<Option<EventKind>, ObserveError> {
        Ok(Some(EventKind::NodeApplied(std::sync::Arc::new(
            core_node(node)?,
        ))))
    }
    fn deleted(name: String) -> EventKind {
        EventKind::NodeDeleted { name }
    }
    /// A Node being deleted (its `deletionTimestamp` set): Karpenter's termination finalizer
    /// holds it while its machine is drained and terminated.
    fn followed_by(&self, node: &KubeNode) -> Option<EventKind> {
        node.metadata
            .deletion_timestamp
            .is_some()
            .then(|| EventKind::NodeDeleting {
                name: Self::key(node),
            })
    }
}

/// NodePools, by name, through the loader's translation.
#[derive(Clone, Copy, Default)]
pub struct NodePools;

impl Observed for NodePools {
    type Object = nodewright_api::NodePool;
    type Key = String;
    fn key(pool: &Self::Object) -> String {
        pool.metadata.name.clone().unwrap_or_default()
    }
    fn applied(&self, pool: &Self::Object) -> Result<Option<EventKind>, ObserveError> {
        // A NodePool being deleted launches nothing more: for the core it is gone.
        if pool.metadata.deletion_timestamp.is_some() {
            return Ok(None);
        }
        let name = Self::key(pool);
        let core = nodepool_from_api(pool.clone(), &format!("cluster NodePool {name}"))?;
        Ok(Some(EventKind::NodePoolApplied(Box::new(core))))
    }
    fn deleted(name: String) -> EventKind {
        EventKind::NodePoolDeleted { name }
    }
}

/// EC2NodeClasses, by name, through the loader's translation.
#[derive(Clone, Copy, Default)]
pub struct NodeClasses;

impl Observed for NodeClasses {
    type Object = nodewright_api::EC2NodeClass;
    type Key = String;
    fn key(class: &Self::Object) -> String {
        class.metadata.name.clone().unwrap_or_default()
    }
    fn applied(&self, class: &Self::Object) -> Result<Option<EventKind>, ObserveError> {
        if class.metadata.deletion_timestamp.is_some() {
            return Ok(None);
        }
        let name = Self::key(class);
        let (core, _) = nodeclass_from_api(class.clone(), &format!("cluster EC2NodeClass {name}"))?;
        Ok(Some(EventKind::NodeClassApplied(Box::new(core))))
    }
    fn deleted(name: String) -> EventKind {
        EventKind::NodeClassDeleted { name }
    }
}

fn namespaced(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_else(|| "default".into()),
        meta.name.clone().unwrap_or_default(),
    )
}

/// DaemonSets, by namespace and name: their pods are overhead on every node they fit.
#[derive(Clone, Copy, Default)]
pub struct DaemonSets;

impl Observed for DaemonSets {
    type Object = KubeDaemonSet;
    type Key = (String, String);
    fn key(ds: &KubeDaemonSet) -> (String, String) {
        namespaced(&ds.metadata)
    }
    fn applied(&self, ds: &KubeDaemonSet) -> Result<Option<EventKind>, ObserveError> {
        let (namespace, name) = Self::key(ds);
        match manifest_of("DaemonSet", &format!("{namespace}/{name}"), ds)? {
            Manifest::DaemonSet(read) => Ok(Some(EventKind::DaemonSetApplied(Box::new(
                nodewright_core::event::DaemonSet {
                    namespace: read.namespace,
                    name: read.name,
                    template: read.template.pod,
                },
            )))),
            _ => Ok(None),
        }
    }
    fn deleted((namespace, name): (String, String)) -> EventKind {
        EventKind::DaemonSetDeleted { namespace, name }
    }
}

/// PodDisruptionBudgets, by namespace and name.
#[derive(Clone, Copy, Default)]
pub struct PodDisruptionBudgets;

impl Observed for PodDisruptionBudgets {
    type Object = KubePdb;
    type Key = (String, String);
    fn key(pdb: &KubePdb) -> (String, String) {
        namespaced(&pdb.metadata)
    }
    fn applied(&self, pdb: &KubePdb) -> Result<Option<EventKind>, ObserveError> {
        let (namespace, name) = Self::key(pdb);
        match manifest_of("PodDisruptionBudget", &format!("{namespace}/{name}"), pdb)? {
            Manifest::PodDisruptionBudget(read) => {
                Ok(Some(EventKind::PodDisruptionBudgetApplied(Box::new(read))))
            }
            _ => Ok(None),
        }
    }
    fn deleted((namespace, name): (String, String)) -> EventKind {
        EventKind::PodDisruptionBudgetDeleted { namespace, name }
    }
}
