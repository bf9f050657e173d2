//! The cluster as the core knows it, built only from events.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::catalog::{self, CapacitySettings, ClassResources, InstanceType, NodeResources};
use crate::config::LostWork;
use crate::model::daemonset::DaemonSet;
use crate::model::derived::Derived;
use crate::model::do_not_disrupt::{Asked, Protection};
use crate::model::labels;
use crate::model::node::Node;
use crate::model::nodeclaim::{
    Instance, NodeClaimSpec, OfferingKey, OfferingParts, TerminationReason,
};
use crate::model::nodeclass::{NodeClass, NodeOs};
use crate::model::nodepool::NodePool;
use crate::model::pod::{Pod, PodKey};
use crate::model::resources::Resources;

/// How long an offering that failed with insufficient capacity is avoided.
pub const UNAVAILABLE_OFFERING_TTL_MS: u64 = 3 * 60_000;

pub use crate::catalog::PreparedCatalog;

mod name_map;
mod pod_table;
mod pods_summary;

pub use name_map::NameMap;
pub use pod_table::{PodId, PodTable};
pub use pods_summary::{PricedPod, PricedPods, Requested, WorkloadProtection, WorkloadSummary};

/// Where a NodeClaim is in its life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeClaimState {
    /// What the core decided.
    pub spec: NodeClaimSpec,
    /// When it was decided.
    pub created_at_ms: u64,
    /// Its instance, once the launch succeeded.
    pub instance: Option<Instance>,
    /// When the launch succeeded.
    pub launched_at_ms: Option<u64>,
    /// Its node, once registered.
    pub node_name: Option<String>,
    /// When its node registered.
    pub registered_at_ms: Option<u64>,
    /// When its node was first ready and no longer held for its siblings.
    pub initialized_at_ms: Option<u64>,
    /// Set once the core has asked for termination.
    pub terminating: Option<(TerminationReason, u64)>,
}

impl NodeClaimState {
    /// A NodeClaim just decided, not launched yet.
    pub fn new(spec: NodeClaimSpec, now_ms: u64) -> Self {
        NodeClaimState {
            spec,
            created_at_ms: now_ms,
            instance: None,
            launched_at_ms: None,
            node_name: None,
            registered_at_ms: None,
            initialized_at_ms: None,
            terminating: None,
        }
    }

    /// Whether its node has been ready and no longer held for its siblings.
    pub fn is_initialized(&self) -> bool {
        self.initialized_at_ms.is_some()
    }
}

/// A node and what runs on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeState {
    /// The node as last seen, shared with the event that told it (a node is some hundreds of
    /// bytes of labels and annotations, and is told again at every change of it).
    pub node: Arc<Node>,
    /// Its NodeClaim, when nodewright launched it.
    pub nodeclaim: Option<String>,
    /// The pods bound to it, in key order, with their ids in [`ClusterState::pods`].
    pub pods: BTreeMap<PodKey, PodId>,
    /// The last time a pod was bound to or removed from the node (or it became ready).
    pub last_pod_event_ms: u64,
    /// What the node's `karpenter.sh/do-not-disrupt` asks for, read the first time a
    /// disruption pass asks (every pass does, and a node has many annotations). Whoever
    /// replaces [`NodeState::node`] starts it again ([`NodeState::replace_node`]).
    #[serde(skip)]
    pub asked: Derived<Asked>,
    /// Whether the node carries the `kubernetes.io/hostname` label, read the first time a
    /// solve asks; started again with [`NodeState::asked`].
    #[serde(skip)]
    pub hostname_labelled: Derived<bool>,
    /// What its workload pods come to, made the first time it is read
    /// ([`ClusterState::workload_on`]). Whoever changes [`NodeState::pods`], or a listed pod in
    /// the table, starts it again ([`NodeState::pods_changed`]).
    #[serde(skip)]
    pub workload: Derived<WorkloadSummary>,
    /// What its pods hold of it, made the first time it is read ([`ClusterState::requested_on`]);
    /// started again with [`NodeState::workload`].
    #[serde(skip)]
    pub requested: Derived<Requested>,
    /// Its allocatable less what its pods request, made the first time it is read
    /// ([`ClusterState::free_room_on`]); started again with [`NodeState::workload`], and when
    /// the node is replaced (its allocatable may differ).
    #[serde(skip)]
    pub free_room: Derived<Resources>,
    /// Its workload pods as consolidation prices them, made the first time it is read
    /// ([`ClusterState::priced_pods_on`]); started again with [`NodeState::workload`], and
    /// when the node is replaced (their shares are of its allocatable).
    #[serde(skip)]
    pub priced: Derived<PricedPods>,
}

impl NodeState {
    /// A node seen first, with no pod yet.
    pub fn new(node: impl Into<Arc<Node>>, nodeclaim: Option<String>, now_ms: u64) -> Self {
        NodeState {
            node: node.into(),
            nodeclaim,
            pods: BTreeMap::new(),
            last_pod_event_ms: now_ms,
            asked: Derived::default(),
            hostname_labelled: Derived::default(),
            workload: Derived::default(),
            requested: Derived::default(),
            free_room: Derived::default(),
            priced: Derived::default(),
        }
    }

    /// The node as seen now, in place of the one seen before.
    pub fn replace_node(&mut self, node: impl Into<Arc<Node>>) {
        self.node = node.into();
        self.asked = Derived::default();
        self.hostname_labelled = Derived::default();
        self.free_room = Derived::default();
        self.priced = Derived::default();
    }

    /// Whether the node carries the `kubernetes.io/hostname` label.
    pub fn hostname_labelled(&self) -> bool {
        let labelled = *self
            .hostname_labelled
            .get_or_init(|| self.node.labels.contains_key(labels::HOSTNAME));
        debug_assert_eq!(
            labelled,
            self.node.labels.contains_key(labels::HOSTNAME),
            "a node's labels changed without being read again"
        );
        labelled
    }

    /// Forgets what its pods came to: a pod was added to its list or taken off, or a listed
    /// pod was replaced in the table.
    pub fn pods_changed(&mut self) {
        self.workload = Derived::default();
        self.requested = Derived::default();
        self.free_room = Derived::default();
        self.priced = Derived::default();
    }

    /// What the node's `karpenter.sh/do-not-disrupt` asks for, before it is known when its
    /// machine started.
    pub fn asks(&self) -> Asked {
        *self.asked.get_or_init(|| Asked::of(&self.node.annotations))
    }

    /// [`Node::do_not_disrupt`] of the node, its machine started at `started_ms`.
    pub fn do_not_disrupt(&self, started_ms: u64) -> Protection {
        let protection = self.asks().from(started_ms);
        debug_assert_eq!(
            protection,
            self.node.do_not_disrupt(started_ms),
            "a node's annotations changed without its do-not-disrupt being read again"
        );
        protection
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
/// The cluster as the core knows it: the state every decision reads.
pub struct ClusterState {
    /// Shared, so that simulations (consolidation, drift) copy the cluster cheaply. Not in a
    /// snapshot: it is most of the state's bytes and changes rarely, so a snapshot names the
    /// event that carried it instead ([`crate::Core::install_catalog`]).
    #[serde(skip)]
    pub catalog: Option<Arc<PreparedCatalog>>,
    /// NodePools by name.
    pub nodepools: BTreeMap<String, NodePool>,
    /// EC2NodeClasses by name.
    pub nodeclasses: BTreeMap<String, NodeClass>,
    /// Every pod, under a dense id.
    pub pods: PodTable,
    /// Nodes by name.
    pub nodes: NameMap<NodeState>,
    /// NodeClaims by name, from decision until terminated.
    pub nodeclaims: NameMap<NodeClaimState>,
    /// Offerings that recently failed for lack of capacity, with the time they may be tried again.
    pub unavailable: BTreeMap<OfferingKey, u64>,
    /// DaemonSets by (namespace, name).
    pub daemonsets: BTreeMap<(String, String), DaemonSet>,
    /// PodDisruptionBudgets by (namespace, name).
    pub pdbs: BTreeMap<(String, String), crate::model::pdb::PodDisruptionBudget>,
    /// Cluster-wide capacity settings (from the configuration).
    pub capacity_settings: CapacitySettings,
    /// The zones where each EC2NodeClass has a subnet, as the cloud last resolved it
    /// (`NodeClassResolved`); a node class never resolved (the simulated world) may launch in
    /// every zone of the catalog.
    pub subnet_zones: BTreeMap<String, std::collections::BTreeSet<String>>,
}

impl ClusterState {
    /// The pods waiting for a node (DaemonSet pods aside).
    pub fn pending_pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods
            .values()
            .filter(|p| p.node_name.is_none() && !p.is_daemonset_pod())
    }

    /// Whether an offering is marked unavailable at `now_ms` (an [`OfferingKey`], or its parts
    /// borrowed: `&(type, zone, capacity type)`).
    pub fn is_unavailable(&self, key: &dyn OfferingParts, now_ms: u64) -> bool {
        self.unavailable
            .get(key)
            .is_some_and(|until| *until > now_ms)
    }

    /// Whether an offering of a type may be launched now (not marked unavailable).
    pub fn offering_available(
        &self,
        it: &catalog::InstanceType,
        o: &catalog::Offering,
        now_ms: u64,
    ) -> bool {
        if o.capacity_type == catalog::CapacityType::Reserved && !self.reserved_free(it, o) {
            return false;
        }
        let key = (it.name.as_str(), o.zone.as_str(), o.capacity_type);
        self.unavailable.is_empty()
            || self
                .unavailable
                .get(&key as &dyn OfferingParts)
                .is_none_or(|until| *until <= now_ms)
    }

    /// Whether the reservations of a reserved offering hold an instance more: fewer machines
    /// use them than they hold (a machine launched into one uses it until it is gone; one on
    /// its way, whose cheapest option is the reserved offering, counts as using it).
    fn reserved_free(&self, it: &catalog::InstanceType, o: &catalog::Offering) -> bool {
        let Some(prepared) = self.catalog.as_deref() else {
            return false;
        };
        let held = prepared.catalog.reserved_count(&it.name, &o.zone);
        if held == 0 {
            return false;
        }
        let is_this = |instance_type: &str, zone: &str, capacity_type| {
            capacity_type == catalog::CapacityType::Reserved
                && instance_type == it.name
                && zone == o.zone
        };
        let used =
            self.nodeclaims
                .values()
                .filter(|c| match &c.instance {
                    Some(i) => is_this(&i.instance_type, &i.zone, i.capacity_type),
                    None => {
                        c.terminating.is_none()
                            && c.spec.options.first().is_some_and(|o| {
                                is_this(&o.instance_type, &o.zone, o.capacity_type)
                            })
                    }
                })
                .count();
        used < held as usize
    }

    /// The first PodDisruptionBudget that allows no more disruption of this pod now (pods in
    /// `leaving` count as unavailable already).
    pub fn pdb_blocking(
        &self,
        pod: &Pod,
        leaving: &BTreeSet<PodKey>,
    ) -> Option<&crate::model::pdb::PodDisruptionBudget> {
        self.pdbs.values().find(|pdb| {
            pdb.selects(pod)
                && pdb.allowed_among(self.pods.values(), |p| leaving.contains(&p.key)) <= 0
        })
    }

    /// The PodDisruptionBudgets that allow no eviction now (nobody leaving): a pod one of them
    /// selects keeps its node out of voluntary disruption. One pass over the pods per budget,
    /// for a whole disruption pass.
    pub fn exhausted_pdbs(&self) -> Vec<&crate::model::pdb::PodDisruptionBudget> {
        if self.pdbs.is_empty() {
            // No budget: no pass over the pods.
            return Vec::new();
        }
        let pdbs: Vec<&crate::model::pdb::PodDisruptionBudget> = self.pdbs.values().collect();
        // Each budget is filed under one label its selector requires (namespace, key, value),
        // so a pod is only matched against the budgets one of its labels may satisfy.
        let mut by_label: BTreeMap<(&str, &str, &str), Vec<usize>> = BTreeMap::new();
        let mut scan: Vec<usize> = Vec::new();
        for (i, pdb) in pdbs.iter().enumerate() {
            match pdb.selector.match_labels.iter().next() {
                Some((k, v)) => by_label
                    .entry((pdb.namespace.as_str(), k.as_str(), v.as_str()))
                    .or_default()
                    .push(i),
                None => scan.push(i),
            }
        }
        let mut counts = vec![(0i64, 0i64); pdbs.len()];
        let mut count = |i: usize, pod: &Pod| {
            if pdbs[i].selects(pod) {
                counts[i].0 += 1;
                counts[i].1 += pod.node_name.is_some() as i64;
            }
        };
        for pod in self.pods.values() {
            for (k, v) in &pod.labels {
                if let Some(list) =
                    by_label.get(&(pod.key.namespace.as_str(), k.as_str(), v.as_str()))
                {
                    for &i in list {
                        count(i, pod);
                    }
                }
            }
            for &i in &scan {
                count(i, pod);
            }
        }
        pdbs.into_iter()
            .zip(counts)
            .filter(|(pdb, (expected, healthy))| pdb.allowed(*expected, *healthy) <= 0)
            .map(|(pdb, _)| pdb)
            .collect()
    }

    /// Every pod a node lists is in the pod table under the id the node gives, and bound to
    /// that node: what a state read from bytes must hold before a node's pods are read by id.
    pub fn check_pod_ids(&self) -> Result<(), String> {
        for (name, node) in &self.nodes {
            for (key, &id) in &node.pods {
                if self.pods.id(key) != Some(id) {
                    return Err(format!(
                        "node {name} lists pod {key} under an id the pod table does not give it"
                    ));
                }
                if self.pods.get(key).and_then(|p| p.node_name.as_deref()) != Some(name.as_str()) {
                    return Err(format!(
                        "node {name} lists pod {key}, which is not bound to it"
                    ));
                }
            }
        }
        Ok(())
    }

    /// The sum of requests of the pods bound to a node.
    pub fn requests_on_node(&self, node: &str) -> Resources {
        self.nodes
            .get(node)
            .map(|state| self.requested_on(state).requests.clone())
            .unwrap_or_default()
    }

    /// What the workload pods bound to `node` come to: made the first time it is asked and
    /// kept until they change. Debug builds compare it with one made afresh.
    pub fn workload_on(&self, node: &NodeState) -> WorkloadSummary {
        let summary = *node
            .workload
            .get_or_init(|| WorkloadSummary::of(&self.pods, node.pods.values()));
        debug_assert_eq!(
            summary,
            WorkloadSummary::of(&self.pods, node.pods.values()),
            "node {}: its pods changed without their summary being made again",
            node.node.name
        );
        summary
    }

    /// What the pods bound to `node` hold of it: made the first time it is asked and kept
    /// until they change. Debug builds compare it with one made afresh.
    pub fn requested_on<'s>(&'s self, node: &'s NodeState) -> &'s Requested {
        let requested = node
            .requested
            .get_or_init(|| Requested::of(&self.pods, node.pods.values()));
        debug_assert_eq!(
            *requested,
            Requested::of(&self.pods, node.pods.values()),
            "node {}: its pods changed without what they hold being summed again",
            node.node.name
        );
        requested
    }

    /// The room left on `node` by its pods: its allocatable less what they request (less than
    /// none where they ask more). Made the first time it is asked and kept until they or the
    /// node change; debug builds compare it with one made afresh.
    pub fn free_room_on<'s>(&'s self, node: &'s NodeState) -> &'s Resources {
        let fresh = || {
            node.node
                .allocatable
                .minus(&self.requested_on(node).requests)
        };
        let free = node.free_room.get_or_init(fresh);
        debug_assert_eq!(
            *free,
            fresh(),
            "node {}: its pods or allocatable changed without its free room being made again",
            node.node.name
        );
        free
    }

    /// The workload pods bound to `node` as consolidation prices them, their lost work counted
    /// under `lost_work`: made the first time it is asked and kept until they or the node
    /// change (made afresh, and not kept, when asked under another setting than the kept one).
    /// Debug builds compare it with one made afresh.
    pub fn priced_pods_on<'s>(
        &'s self,
        node: &'s NodeState,
        lost_work: LostWork,
    ) -> std::borrow::Cow<'s, PricedPods> {
        let fresh = || {
            PricedPods::of(
                &self.pods,
                node.pods.values(),
                &node.node.allocatable,
                lost_work,
            )
        };
        let kept = node.priced.get_or_init(fresh);
        let priced = if kept.lost_work == lost_work {
            std::borrow::Cow::Borrowed(kept)
        } else {
            std::borrow::Cow::Owned(fresh())
        };
        debug_assert!(
            priced.same_bits(&fresh()),
            "node {}: its pods changed without their prices being read again",
            node.node.name
        );
        priced
    }

    /// Whether `karpenter.sh/do-not-disrupt` on the node or on one of its workload pods keeps it
    /// out of voluntary disruption now: `None` when nothing does, else when the last protection
    /// in force runs out (`Some(None)` when one of them never does).
    pub fn do_not_disrupt_on_node(&self, node: &str, now_ms: u64) -> Option<Option<u64>> {
        let state = self.nodes.get(node)?;
        let started = self.machine_started_ms(state);
        let workload = self.workload_on(state).protection;
        protected_until(state, started, workload, now_ms)
    }

    /// [`Self::do_not_disrupt_on_node`] for the node of NodeClaim `claim` (called `nodeclaim`),
    /// given the node's state: nothing is looked up again where the node names that NodeClaim.
    pub fn do_not_disrupt_among(
        &self,
        (nodeclaim, claim): (&str, &NodeClaimState),
        node: &NodeState,
        now_ms: u64,
    ) -> Option<Option<u64>> {
        let started = match node.nodeclaim.as_deref() {
            Some(named) if named == nodeclaim => claim.created_at_ms,
            _ => self.machine_started_ms(node),
        };
        let workload = self.workload_on(node).protection;
        protected_until(node, started, workload, now_ms)
    }

    /// Whether the node runs no workload pod, or a `karpenter.sh/do-not-disrupt` may protect it
    /// at `now_ms` (the node's own, whenever its machine started, or a pod's in force): the
    /// nodes an emptiness pass has anything to say of. Of any other, [`Self::do_not_disrupt_among`]
    /// is `None` whichever NodeClaim asks, and it runs workload pods.
    pub fn empty_or_maybe_protected(&self, node: &NodeState, now_ms: u64) -> bool {
        let pods = self.workload_on(node);
        pods.pods == 0
            || node.asks() != Asked::Nothing
            || pods.protection.in_force_at(now_ms) != Protection::None
    }

    /// When the machine of a node was asked for: its NodeClaim's creation (0 for a node
    /// nodewright did not launch), from which a node's do-not-disrupt duration counts.
    fn machine_started_ms(&self, node: &NodeState) -> u64 {
        node.nodeclaim
            .as_ref()
            .and_then(|c| self.nodeclaims.get(c))
            .map_or(0, |c| c.created_at_ms)
    }

    /// The workload pods (not DaemonSet pods, not mirror pods) bound to a node, as its state
    /// lists them.
    pub fn workload_pods_of<'s>(&'s self, node: &'s NodeState) -> impl Iterator<Item = &'s Pod> {
        node.pods
            .values()
            .filter(|&&id| !self.pods.follows_its_node(id))
            .map(|&id| self.pods.pod(id))
    }

    /// The pods a drain of the node evicts: every pod bound to it, DaemonSet pods included,
    /// except those that tolerate `karpenter.sh/disrupted:NoSchedule` (they would come back)
    /// and mirror pods (the kubelet runs them, whatever the API says).
    pub fn drainable_pods_on_node(&self, node: &str) -> Vec<&Pod> {
        self.drainable_pods_of(node).collect()
    }

    /// [`Self::drainable_pods_on_node`], one by one, for a reader that may stop early.
    pub fn drainable_pods_of<'s>(&'s self, node: &str) -> impl Iterator<Item = &'s Pod> + 's {
        self.nodes
            .get(node)
            .into_iter()
            .flat_map(|state| state.pods.values())
            .map(|&id| self.pods.pod(id))
            .filter(|p| p.drain_evicts())
    }

    /// Workload pods (not DaemonSet pods, not mirror pods) bound to a node.
    pub fn workload_pods_on_node(&self, node: &str) -> Vec<&Pod> {
        self.nodes
            .get(node)
            .map(|state| self.workload_pods_of(state).collect())
            .unwrap_or_default()
    }

    /// The workload pods of a node as they would be if it went away: unbound copies, for a
    /// simulation of where they go.
    pub fn movable_pods(&self, node: Option<&str>) -> Vec<Pod> {
        node.map(|n| {
            self.workload_pods_on_node(n)
                .into_iter()
                .map(|p| {
                    let mut p = p.clone();
                    p.node_name = None;
                    p
                })
                .collect()
        })
        .unwrap_or_default()
    }

    /// The instance types a NodeClaim's machine may be: its type once launched, else every
    /// type of its launch options.
    pub fn nodeclaim_type_names<'a>(&self, claim: &'a NodeClaimState) -> Vec<&'a str> {
        match &claim.instance {
            Some(instance) => vec![instance.instance_type.as_str()],
            None => claim
                .spec
                .options
                .iter()
                .map(|o| o.instance_type.as_str())
                .collect(),
        }
    }

    /// The node resources by type under the NodeClaim's class, and the positions of the types
    /// its machine may be (each once).
    fn nodeclaim_types(&self, claim: &NodeClaimState) -> Option<(Arc<ClassResources>, Vec<usize>)> {
        let prepared = self.catalog.as_deref()?;
        let class = self.nodeclasses.get(&claim.spec.nodeclass);
        // A machine on its way lists an option per offering: each type once (its callers take
        // the smallest or largest of each resource, which repeats do not change).
        let mut types: Vec<usize> = self
            .nodeclaim_type_names(claim)
            .into_iter()
            .filter_map(|name| prepared.catalog.position(name))
            .collect();
        types.sort_unstable();
        types.dedup();
        Some((
            prepared.node_resources_of(class, &self.capacity_settings),
            types,
        ))
    }

    /// The node resources of a NodeClaim's machine: its instance type once launched, else the
    /// smallest of its options in every dimension (what it is sure to offer).
    pub fn nodeclaim_resources(&self, claim: &NodeClaimState) -> Option<NodeResources> {
        let (by_type, types) = self.nodeclaim_types(claim)?;
        let mut each = types.iter().map(|&t| &by_type.resources[t]);
        let first = each.next()?.clone();
        Some(each.fold(first, |acc, r| NodeResources {
            capacity: acc.capacity.min(&r.capacity),
            allocatable: acc.allocatable.min(&r.allocatable),
        }))
    }

    /// Largest capacity a NodeClaim can have (what counts against NodePool limits).
    pub fn nodeclaim_limit_capacity(&self, claim: &NodeClaimState) -> Resources {
        let mut out = Resources::default();
        if let Some((by_type, types)) = self.nodeclaim_types(claim) {
            for t in types {
                out.max_assign(&by_type.resources[t].capacity);
            }
        }
        out
    }

    /// What each NodePool with limits uses now (usage is read only against limits): the
    /// capacity of its live NodeClaims (at their largest), and how many there are, in one walk
    /// over the NodeClaims. A pool without limits, or without a live NodeClaim, is absent.
    pub fn usage_under_limits(&self) -> BTreeMap<&str, (Resources, i64)> {
        let mut usages: BTreeMap<&str, (Resources, i64)> = BTreeMap::new();
        if self.nodepools.values().all(|p| p.limits.is_empty()) {
            return usages;
        }
        let limited = |name: &str| {
            self.nodepools
                .get(name)
                .is_some_and(|p| !p.limits.is_empty())
        };
        for claim in self.nodeclaims.values() {
            if claim.terminating.is_none() && limited(&claim.spec.nodepool) {
                let (usage, count) = usages.entry(claim.spec.nodepool.as_str()).or_default();
                usage.add(&self.nodeclaim_limit_capacity(claim));
                *count += 1;
            }
        }
        usages
    }

    /// The labels a launched NodeClaim's node will carry, one key at a time: a label of
    /// [`ClusterState::nodeclaim_labels`] without building the map (its instance type looked
    /// up once for every key asked).
    pub fn nodeclaim_label_reader<'a>(
        &'a self,
        claim: &'a NodeClaimState,
    ) -> impl Fn(&str) -> Option<&'a str> + 'a {
        self.nodeclaim_label_reader_of(claim, self.instance_type_of(claim))
    }

    /// The catalog's type of a launched NodeClaim's instance (`None` before its launch, or when
    /// the catalog no longer offers the type).
    pub fn instance_type_of(&self, claim: &NodeClaimState) -> Option<&InstanceType> {
        let instance = claim.instance.as_ref()?;
        self.catalog.as_ref()?.catalog.get(&instance.instance_type)
    }

    /// [`ClusterState::nodeclaim_label_reader`] with the claim's type looked up already
    /// ([`ClusterState::instance_type_of`]).
    pub fn nodeclaim_label_reader_of<'a>(
        &'a self,
        claim: &'a NodeClaimState,
        it: Option<&'a InstanceType>,
    ) -> impl Fn(&str) -> Option<&'a str> + 'a {
        let instance = claim.instance.as_ref();
        move |key: &str| {
            if let Some(instance) = instance {
                if key == labels::ZONE {
                    return Some(&instance.zone);
                }
                if key == labels::CAPACITY_TYPE {
                    return Some(instance.capacity_type.as_str());
                }
                if let Some(it) = it {
                    // A Windows class's machines carry its OS labels, not the type's Linux
                    // ones (the claim's own labels say them).
                    let os_key = key == labels::OS || key == labels::WINDOWS_BUILD;
                    if !(os_key && self.os_of(claim) != NodeOs::Linux)
                        && let Some(value) = it.labels.get(key)
                    {
                        return Some(value);
                    }
                }
            }
            claim.spec.labels.get(key).map(String::as_str)
        }
    }

    /// The OS of a NodeClaim's machines: its EC2NodeClass's (Linux when the class is gone).
    pub fn os_of(&self, claim: &NodeClaimState) -> NodeOs {
        self.nodeclasses
            .get(&claim.spec.nodeclass)
            .map_or(NodeOs::Linux, |class| class.os())
    }

    /// The labels a NodeClaim's node carries: its own, its instance type's, its zone and capacity
    /// type.
    pub fn nodeclaim_labels(&self, claim: &NodeClaimState) -> BTreeMap<String, String> {
        let mut out = claim.spec.labels.clone();
        if let Some(instance) = &claim.instance {
            if let Some(it) = self.instance_type_of(claim) {
                out.extend(it.labels_under(self.os_of(claim)).into_owned());
            }
            out.insert(labels::ZONE.to_string(), instance.zone.clone());
            out.insert(
                labels::CAPACITY_TYPE.to_string(),
                instance.capacity_type.as_str().to_string(),
            );
        }
        out
    }

    /// The NodeClaim whose instance this provider id names.
    pub fn nodeclaim_for_provider_id(&self, provider_id: &str) -> Option<String> {
        self.nodeclaims
            .iter()
            .find(|(_, c)| {
                c.instance
                    .as_ref()
                    .is_some_and(|i| i.has_provider_id(provider_id))
            })
            .map(|(name, _)| name.clone())
    }
}

/// When the protections in force now of a node (whose machine started at `started_ms`) and of
/// its workload pods run out: `None` when none is in force, `Some(None)` when one never does.
/// The pods' protections come combined ([`WorkloadProtection`]): what is in force of them at
/// once ends when the last of them does.
fn protected_until(
    node: &NodeState,
    started_ms: u64,
    workload: WorkloadProtection,
    now_ms: u64,
) -> Option<Option<u64>> {
    let mut ends: Option<Option<u64>> = None;
    let protections = [
        node.do_not_disrupt(started_ms),
        workload.in_force_at(now_ms),
    ];
    for protection in protections.into_iter().filter(|p| p.active_at(now_ms)) {
        let end = protection.ends_after(now_ms);
        ends = Some(match (ends, end) {
            (None, e) => e,
            (Some(None), _) | (Some(_), None) => None,
            (Some(Some(a)), Some(b)) => Some(a.max(b)),
        });
    }
    ends
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::affinity::LabelSelector;
    use crate::model::pdb::{IntOrPercent, PodDisruptionBudget};
    use crate::model::requirements::{Operator, RequirementSpec};

    fn pdb(
        ns: &str,
        name: &str,
        labels: &[(&str, &str)],
        expr: Option<RequirementSpec>,
        max: i64,
    ) -> PodDisruptionBudget {
        PodDisruptionBudget {
            namespace: ns.into(),
            name: name.into(),
            selector: LabelSelector {
                match_labels: labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                match_expressions: expr.into_iter().collect(),
            },
            min_available: None,
            max_unavailable: Some(IntOrPercent::Int(max)),
        }
    }

    /// A node's priced pods and free room follow its allocatable (a node replaced) and its
    /// pods; its priced pods the setting asked under too.
    #[test]
    fn priced_pods_and_free_room_follow_the_node_its_pods_and_the_setting() {
        use crate::config::LostWork;
        use crate::model::pod::OwnerRef;
        let machine = |cpu: i64| Node {
            name: "n".to_string(),
            provider_id: None,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            taints: Vec::new(),
            allocatable: Resources::new(cpu, 64 << 30, 110),
            ready: true,
            unschedulable: false,
        };
        let mut state = ClusterState::default();
        state
            .nodes
            .insert("n".into(), NodeState::new(machine(4_000), None, 0));
        let mut job = Pod::new("default", "train", 2_000, 1 << 30);
        job.owner = Some(OwnerRef {
            kind: "Job".into(),
            name: "train".into(),
        });
        job.created_at_ms = 7;
        job.node_name = Some("n".into());
        let (id, _) = state.pods.insert(job.clone());
        let on = state.nodes.get_mut("n").unwrap();
        on.pods.insert(job.key.clone(), id);
        on.pods_changed();
        let priced = |state: &ClusterState, setting| {
            state
                .priced_pods_on(&state.nodes["n"], setting)
                .into_owned()
        };
        let free_cpu = |state: &ClusterState| state.free_room_on(&state.nodes["n"]).cpu_milli;
        assert_eq!(free_cpu(&state), 2_000);
        let half = priced(&state, LostWork::AllButReplicated);
        assert_eq!(half.pods.len(), 1);
        assert_eq!(half.pods[0].created_at_ms, 7);
        assert!(half.pods[0].loses_work);
        assert_eq!(half.pods[0].share, 0.5);
        assert_eq!(half.disruption_cost, 1.0);
        // Asked under another setting: made for it, the kept one left as it was.
        let off = priced(&state, LostWork::Off);
        assert!(!off.pods[0].loses_work);
        assert_eq!(off.pods[0].share, 0.0);
        assert_eq!(
            priced(&state, LostWork::AllButReplicated).pods[0].share,
            0.5
        );
        // The node replaced with twice the CPU: the pod holds a quarter of it.
        state
            .nodes
            .get_mut("n")
            .unwrap()
            .replace_node(machine(8_000));
        assert_eq!(
            priced(&state, LostWork::AllButReplicated).pods[0].share,
            0.25
        );
        assert_eq!(free_cpu(&state), 6_000);
        // Its pod gone from its list: nothing to price.
        let on = state.nodes.get_mut("n").unwrap();
        on.pods.clear();
        on.pods_changed();
        let none = priced(&state, LostWork::AllButReplicated);
        assert!(none.pods.is_empty());
        assert_eq!(none.disruption_cost, 0.0);
        assert_eq!(free_cpu(&state), 8_000);
    }

    #[test]
    fn a_node_listing_a_pod_the_table_does_not_hold_so_is_refused() {
        let mut state = ClusterState::default();
        let node = |name: &str| {
            NodeState::new(
                Node {
                    name: name.to_string(),
                    provider_id: None,
                    labels: BTreeMap::new(),
                    annotations: BTreeMap::new(),
                    taints: Vec::new(),
                    allocatable: Resources::default(),
                    ready: true,
                    unschedulable: false,
                },
                None,
                0,
            )
        };
        state.nodes.insert("a".into(), node("a"));
        state.nodes.insert("b".into(), node("b"));
        for (name, on) in [("p", "a"), ("q", "b")] {
            let mut pod = Pod::new("default", name, 100, 1 << 20);
            pod.node_name = Some(on.into());
            let key = pod.key.clone();
            let (id, _) = state.pods.insert(pod);
            state.nodes.get_mut(on).unwrap().pods.insert(key, id);
        }
        assert_eq!(state.check_pod_ids(), Ok(()));
        // Node a lists q (bound to b) under q's id; then under p's id.
        let q = PodKey::new("default", "q");
        let p = PodKey::new("default", "p");
        let q_id = state.pods.id(&q).unwrap();
        let p_id = state.pods.id(&p).unwrap();
        let mut wrong = state.clone();
        wrong
            .nodes
            .get_mut("a")
            .unwrap()
            .pods
            .insert(q.clone(), q_id);
        assert!(
            wrong
                .check_pod_ids()
                .unwrap_err()
                .contains("not bound to it")
        );
        let mut wrong = state.clone();
        wrong.nodes.get_mut("b").unwrap().pods.insert(q, p_id);
        assert!(wrong.check_pod_ids().unwrap_err().contains("id"));
    }

    #[test]
    fn exhausted_pdbs_agree_with_counting_every_pod() {
        let mut state = ClusterState::default();
        let apps = ["web", "db", "cache"];
        for i in 0..60 {
            let ns = if i % 4 == 0 { "other" } else { "default" };
            let mut pod = Pod::new(ns, &format!("p{i}"), 100, 1 << 20);
            pod.labels.insert("app".into(), apps[i % 3].into());
            pod.labels.insert("tier".into(), format!("t{}", i % 2));
            // Every fifth pod is pending (unhealthy for its budgets).
            if i % 5 != 0 {
                pod.node_name = Some("n".into());
            }
            state.pods.insert(pod);
        }
        let budgets = vec![
            pdb("default", "web", &[("app", "web")], None, 1),
            pdb(
                "default",
                "web-t1",
                &[("app", "web"), ("tier", "t1")],
                None,
                2,
            ),
            pdb("other", "db", &[("app", "db")], None, 1),
            pdb("default", "db-loose", &[("app", "db")], None, 9),
            pdb(
                "default",
                "cache-expr",
                &[],
                Some(RequirementSpec::new("app", Operator::In, &["cache"])),
                2,
            ),
            pdb("default", "none", &[("app", "nothing")], None, 0),
        ];
        for b in budgets {
            state.pdbs.insert((b.namespace.clone(), b.name.clone()), b);
        }
        let naive: Vec<String> = state
            .pdbs
            .values()
            .filter(|pdb| {
                let selected: Vec<&Pod> = state.pods.values().filter(|p| pdb.selects(p)).collect();
                let healthy = selected.iter().filter(|p| p.node_name.is_some()).count() as i64;
                pdb.allowed(selected.len() as i64, healthy) <= 0
            })
            .map(|p| p.name.clone())
            .collect();
        let indexed: Vec<String> = state
            .exhausted_pdbs()
            .iter()
            .map(|p| p.name.clone())
            .collect();
        assert_eq!(indexed, naive);
        assert!(
            !naive.is_empty() && naive.len() < state.pdbs.len(),
            "{naive:?}"
        );
    }
}
