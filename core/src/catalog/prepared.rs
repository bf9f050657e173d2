//! The catalog as the solver reads it: in name order, each type's requirements built once.

use std::sync::{Arc, Mutex, PoisonError};

use super::{
    CapacitySettings, Catalog, ClassResources, NodeResources, ResourcesKey, capacity_of_class,
};
use crate::model::nodeclass::{NodeClass, NodeOs};
use crate::model::requirements::Requirements;
use crate::model::resource_rows::ResourceRows;

/// The catalog with what the solver needs precomputed.
#[derive(Debug, Clone)]
pub struct PreparedCatalog {
    /// Shared with the event that carried it when it came in name order and with no
    /// reservation (else a copy, with the reserved offerings among the types' own).
    pub catalog: Arc<Catalog>,
}

impl PreparedCatalog {
    /// The catalog in name order, with its reservations' offerings added.
    pub fn new(catalog: impl Into<Arc<Catalog>>) -> Self {
        let catalog: Arc<Catalog> = catalog.into();
        let catalog = if catalog.is_normalized() && catalog.reservations.is_empty() {
            catalog
        } else {
            // Reservations are offerings of their types: `reserved` ones.
            Arc::new(
                Catalog::clone(&catalog)
                    .normalized()
                    .with_reserved_offerings(),
            )
        };
        // Built here, once per shared catalog, rather than at the first solve.
        catalog.type_requirements();
        PreparedCatalog { catalog }
    }

    /// `requirements()[i]` belongs to `catalog.instance_types[i]`.
    pub fn requirements(&self) -> &[Requirements] {
        self.catalog.type_requirements()
    }

    /// Every type's requirements under a node class whose machines are not Linux (a Windows
    /// AMI family), by type index; `None` for a Linux class, whose are [`Self::requirements`].
    pub fn requirements_under(&self, class: &NodeClass) -> Option<Vec<Requirements>> {
        let os = class.os();
        (os != NodeOs::Linux).then(|| {
            self.catalog
                .instance_types
                .iter()
                .map(|it| it.requirements_under(os))
                .collect()
        })
    }

    /// Whether a machine of this class may be of type `t`: with nested virtualization enabled,
    /// only types whose processors support it (Karpenter's compatibility check).
    pub fn admits(&self, class: &NodeClass, t: usize) -> bool {
        !class.nested_virtualization
            || self
                .catalog
                .nested_virtualization
                .contains(&self.catalog.instance_types[t].name)
    }

    /// Node resources of every type under one node class (its kubelet config and storage), by
    /// type index, with their capacities as rows: computed once for each few classes and
    /// settings asked lately, and kept with the catalog.
    pub fn node_resources(
        &self,
        class: &NodeClass,
        settings: &CapacitySettings,
    ) -> Arc<ClassResources> {
        self.node_resources_of(Some(class), settings)
    }

    /// [`PreparedCatalog::node_resources`]; without a class, under the default kubelet
    /// config and storage (as [`capacity_of_class`]).
    pub fn node_resources_of(
        &self,
        class: Option<&NodeClass>,
        settings: &CapacitySettings,
    ) -> Arc<ClassResources> {
        /// Different classes and settings kept at once.
        const KEPT: usize = 8;
        let memo = self
            .catalog
            .node_resources_memo
            .get_or_init(|| Mutex::new(Vec::new()));
        // Asked for every NodeClaim of every solve: found by comparing in place, the key is
        // copied only when new.
        let same = |k: &ResourcesKey| {
            k.settings == *settings
                && match class {
                    Some(c) => k.kubelet == c.kubelet && k.storage == c.storage,
                    None => k.kubelet == Default::default() && k.storage == Default::default(),
                }
        };
        // A poisoned lock only means a panic elsewhere; the list is still whole.
        let kept = memo.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, found)) = kept.iter().find(|(k, _)| same(k)) {
            return Arc::clone(found);
        }
        drop(kept);
        let key = ResourcesKey {
            kubelet: class.map(|c| c.kubelet.clone()).unwrap_or_default(),
            storage: class.map(|c| c.storage.clone()).unwrap_or_default(),
            settings: *settings,
        };
        let resources: Vec<NodeResources> = self
            .catalog
            .instance_types
            .iter()
            .map(|it| capacity_of_class(it, class, settings))
            .collect();
        let capacity_rows = ResourceRows::new(resources.iter().map(|r| &r.capacity));
        let computed = Arc::new(ClassResources {
            resources,
            capacity_rows,
        });
        let mut kept = memo.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= KEPT {
            kept.remove(0);
        }
        kept.push((key, Arc::clone(&computed)));
        computed
    }
}
