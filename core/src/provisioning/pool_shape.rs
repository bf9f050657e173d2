//! What every solve needs of a NodePool that changes only with the catalog, the NodePool, its
//! EC2NodeClass or the DaemonSets: its template requirements, every instance type's resources
//! and room once DaemonSets are counted, and the types it may launch. Computing it means
//! intersecting every type of the catalog with the template and with every DaemonSet, so the
//! core keeps it ([`PoolShapes`]) and a solve only checks that it still holds.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use crate::catalog::PreparedCatalog;
use crate::catalog::{CapacitySettings, CapacityType, ClassResources, NodeResources, Price};
use crate::model::daemonset::DaemonSet;
use crate::model::labels;
use crate::model::nodeclass::NodeClass;
use crate::model::nodepool::NodePool;
use crate::model::requirements::{Requirement, Requirements};
use crate::model::resource_rows::ResourceRows;
use crate::model::resources::Resources;
use crate::state::ClusterState;

use super::launch::OfferingFilter;
use super::overhead::daemonset_overhead;

/// One NodePool's shape, with what it was computed from.
#[derive(Debug)]
pub struct PoolShape {
    /// The NodePool's template requirements (its requirements, labels and name).
    pub template: Requirements,
    /// Node resources and capacity rows by catalog index (shared with the catalog's memo).
    pub class_resources: Arc<ClassResources>,
    /// Allocatable minus DaemonSet overhead, by catalog index.
    pub rooms: Vec<Resources>,
    /// Types compatible with the template, with room for the DaemonSets, offered in a zone and
    /// capacity type the template allows (whether the offering is available now aside).
    /// Shared with every solve's view of the pool (narrowed there only when an offering is
    /// marked unavailable).
    pub types: Arc<[usize]>,
    /// The largest room of each resource over `types`.
    pub max_room: Resources,
    /// `rooms` as rows of integers, for the largest room over a planned machine's types.
    pub room_rows: ResourceRows,
    /// The template's `minValues`, by key.
    pub min_values: Vec<(String, u32)>,
    /// By catalog index, for `types`: the cheapest offering the template allows (whether it
    /// is available now aside).
    pub cheapest_allowed: Vec<Option<Price>>,
    /// `types` by their cheapest allowed offering, cheapest first (ties by catalog index): a
    /// search for a type below a price stops at the first one that is not.
    pub types_by_price: Vec<usize>,
    /// Each type's requirements under this pool's node class when they are not the catalog's
    /// (a Windows class's), by catalog index: read through [`PoolShape::type_requirements`].
    class_requirements: Option<Vec<Requirements>>,
    /// Each topology key's values on the machines of this pool when all of `types` may be
    /// launched, filled as solves ask (see `scheduler::pool_domains`).
    pub domains: Mutex<BTreeMap<String, BTreeSet<String>>>,
    // What it was computed from.
    catalog: Arc<PreparedCatalog>,
    pool: NodePool,
    nodeclass: NodeClass,
    daemonsets: BTreeMap<(String, String), DaemonSet>,
    capacity_settings: CapacitySettings,
    subnet_zones: Option<BTreeSet<String>>,
}

impl PoolShape {
    /// The shape of `pool` launched with `nodeclass`, under these DaemonSets and settings, in
    /// the zones of the class's subnets (every zone when it has not been resolved).
    pub fn compute(
        catalog: &Arc<PreparedCatalog>,
        pool: &NodePool,
        nodeclass: &NodeClass,
        daemonsets: &BTreeMap<(String, String), DaemonSet>,
        capacity_settings: &CapacitySettings,
        subnet_zones: Option<&BTreeSet<String>>,
    ) -> Self {
        let mut template = pool.template_requirements();
        // A machine of this node class launches only in a zone where it has a subnet.
        if let Some(zones) = subnet_zones {
            template.add(Requirement::values_in(labels::ZONE, zones.iter().cloned()));
        }
        // Reserved offerings are for the classes whose terms select a reservation.
        let reservations = &catalog.catalog.reservations;
        if !reservations.is_empty()
            && !reservations
                .iter()
                .any(|r| nodeclass.selects_reservation(r))
        {
            template.add(Requirement::values_not_in(
                labels::CAPACITY_TYPE,
                [CapacityType::Reserved.as_str().to_string()],
            ));
        }
        let class_resources = catalog.node_resources(nodeclass, capacity_settings);
        let resources = &class_resources.resources;
        let class_requirements = catalog.requirements_under(nodeclass);
        let type_requirements = class_requirements
            .as_deref()
            .unwrap_or(catalog.requirements());
        let overhead = daemonset_overhead(pool, &template, type_requirements, daemonsets.values());
        let filter = OfferingFilter::new(&template);
        let types: Vec<usize> = (0..catalog.catalog.instance_types.len())
            .filter(|&t| {
                catalog.admits(nodeclass, t)
                    && type_requirements[t].meets(&template)
                    && overhead[t].fits_in(&resources[t].allocatable)
                    && catalog.catalog.instance_types[t]
                        .offerings
                        .iter()
                        .any(|o| filter.allows(&o.zone, o.capacity_type.as_str()))
            })
            .collect();
        // The cheapest offering the template allows, of the types it may launch.
        let mut cheapest_allowed: Vec<Option<Price>> =
            vec![None; catalog.catalog.instance_types.len()];
        for &t in &types {
            cheapest_allowed[t] = catalog.catalog.instance_types[t]
                .offerings
                .iter()
                .filter(|o| filter.allows(&o.zone, o.capacity_type.as_str()))
                .map(|o| o.price)
                .min();
        }
        let mut types_by_price = types.clone();
        types_by_price.sort_by_key(|&t| (cheapest_allowed[t].is_none(), cheapest_allowed[t], t));
        let rooms: Vec<Resources> = resources
            .iter()
            .zip(&overhead)
            .map(|(r, o)| r.allocatable.minus(o))
            .collect();
        let room_rows = ResourceRows::new(&rooms);
        let max_room = room_rows.max_of(types.iter().copied());
        let min_values = pool
            .requirements
            .iter()
            .filter_map(|r| r.min_values.map(|m| (r.key.clone(), m)))
            .collect();
        PoolShape {
            template,
            class_resources: Arc::clone(&class_resources),
            rooms,
            types: types.into(),
            max_room,
            room_rows,
            min_values,
            cheapest_allowed,
            types_by_price,
            class_requirements,
            domains: Mutex::default(),
            catalog: Arc::clone(catalog),
            pool: pool.clone(),
            nodeclass: nodeclass.clone(),
            daemonsets: daemonsets.clone(),
            capacity_settings: *capacity_settings,
            subnet_zones: subnet_zones.cloned(),
        }
    }

    /// Node resources by catalog index.
    pub fn resources(&self) -> &[NodeResources] {
        &self.class_resources.resources
    }

    /// Each type's capacity (what counts against limits) as rows of integers.
    pub fn capacity_rows(&self) -> &ResourceRows {
        &self.class_resources.capacity_rows
    }

    /// The requirements of type `t` (a catalog index) on a machine of this pool.
    pub fn type_requirements(&self, t: usize) -> &Requirements {
        match &self.class_requirements {
            Some(reqs) => &reqs[t],
            None => &self.catalog.requirements()[t],
        }
    }

    /// Whether it was computed from exactly these.
    fn holds_for(&self, state: &ClusterState, pool: &NodePool, nodeclass: &NodeClass) -> bool {
        state
            .catalog
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, &self.catalog))
            && self.pool == *pool
            && self.nodeclass == *nodeclass
            && self.daemonsets == state.daemonsets
            && self.capacity_settings == state.capacity_settings
            && self.subnet_zones.as_ref() == state.subnet_zones.get(&nodeclass.name)
    }
}

/// The shapes of every NodePool, kept by the core.
#[derive(Debug, Clone, Default)]
pub struct PoolShapes(BTreeMap<String, Arc<PoolShape>>);

impl PoolShapes {
    /// Computes again the shapes that no longer hold, drops those of NodePools that are gone.
    pub fn refresh(&mut self, state: &ClusterState) {
        let Some(catalog) = &state.catalog else {
            self.0.clear();
            return;
        };
        self.0.retain(|name, _| state.nodepools.contains_key(name));
        for (name, pool) in &state.nodepools {
            let Some(nodeclass) = state.nodeclasses.get(&pool.node_class_ref.name) else {
                self.0.remove(name);
                continue;
            };
            if self
                .0
                .get(name)
                .is_some_and(|s| s.holds_for(state, pool, nodeclass))
            {
                continue;
            }
            let shape = PoolShape::compute(
                catalog,
                pool,
                nodeclass,
                &state.daemonsets,
                &state.capacity_settings,
                state.subnet_zones.get(&nodeclass.name),
            );
            self.0.insert(name.clone(), Arc::new(shape));
        }
    }

    /// The shape of `pool`, kept or computed now.
    pub fn get(
        &self,
        state: &ClusterState,
        pool: &NodePool,
        nodeclass: &NodeClass,
    ) -> Option<Arc<PoolShape>> {
        let catalog = state.catalog.as_ref()?;
        if let Some(shape) = self.0.get(&pool.name)
            && shape.holds_for(state, pool, nodeclass)
        {
            return Some(Arc::clone(shape));
        }
        Some(Arc::new(PoolShape::compute(
            catalog,
            pool,
            nodeclass,
            &state.daemonsets,
            &state.capacity_settings,
            state.subnet_zones.get(&nodeclass.name),
        )))
    }
}
