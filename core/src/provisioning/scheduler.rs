//! The provisioning solver. For each pending pod, largest first (CPU, memory, age, name): an
//! existing node or a machine on its way; else a machine planned in this batch, fewest pods
//! first; else a new machine from the first NodePool (by weight) that can take it. A pod that
//! fits nowhere is retried with its preferences relaxed one at a time (Karpenter's order), and
//! requeued behind the others; the solve ends when a full pass over the queue places nothing.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, OnceLock};

use super::pool_shape::{PoolShape, PoolShapes};

use crate::catalog::Price;
use crate::config::{Config, MinValuesPolicy};
use crate::model::affinity::HostPort;
use crate::model::labels;
use crate::model::nodeclaim::LaunchOption;
use crate::model::nodepool::NodePool;
use crate::model::pod::{Pod, PodKey};
use crate::model::requirements::{Requirement, Requirements};
use crate::model::resources::{AMD_GPU, AWS_NEURON, NVIDIA_GPU, Resources};
use crate::model::taints::{Taint, TaintEffect, first_untolerated};
use crate::state::{ClusterState, PreparedCatalog};

use super::domain_pins::DomainIds;
use super::launch::{self, OfferingFilter};
use super::profile::PodProfile;
use super::topology::{DomainSource, PodGroups, Scan, Topology};

/// A machine this batch wants: the pods it is for and the instance types that can still hold
/// them all.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlannedClaim {
    /// The NodePool that launches it.
    pub nodepool: String,
    /// What its machine must meet: the pool's template and its pods' requirements.
    pub requirements: Requirements,
    /// The pods it is for.
    pub pods: Vec<PodKey>,
    /// The pods' requests (without DaemonSet overhead).
    pub requests: Resources,
    /// Catalog indices of the instance types that fit every pod and the requirements.
    pub types: Vec<usize>,
    /// `minValues` per key, from the NodePool (lowered under `BestEffort` when unmet).
    pub min_values: Vec<(String, u32)>,
}

/// Why a pending pod fits nowhere. Text is made of it only where a person reads it (the
/// `ReportUnschedulable` command, explain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unplaceable {
    /// No NodePool exists.
    NoNodePool,
    /// NodePools exist, but the instance types are not known yet (the catalog is being read).
    CatalogUnknown,
    /// It fits no existing node, and no NodePool can launch a machine for it: what ruled out
    /// each, and the preferences relaxed on the way.
    FitsNowhere {
        /// What the pod asks.
        requests: Resources,
        /// What ruled out each NodePool and node.
        ruled_out: Vec<String>,
        /// The preferences relaxed on the way.
        relaxed: Vec<String>,
    },
}

impl Unplaceable {
    /// What ruled the pod out, one reason each (for a list a person reads).
    pub fn ruled_out(&self) -> Vec<String> {
        match self {
            Unplaceable::FitsNowhere { ruled_out, .. } => ruled_out.clone(),
            other => vec![other.to_string()],
        }
    }
}

impl std::fmt::Display for Unplaceable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unplaceable::NoNodePool => {
                f.write_str("no NodePool exists; create one whose requirements the pod meets")
            }
            Unplaceable::CatalogUnknown => f.write_str(
                "the instance types are not known yet (the catalog is being read); the pod is tried again when they are",
            ),
            Unplaceable::FitsNowhere {
                requests,
                ruled_out,
                relaxed,
            } => {
                write!(
                    f,
                    "fits no existing node and no NodePool can launch a machine for it ({requests}): {}",
                    ruled_out.join("; ")
                )?;
                if !relaxed.is_empty() {
                    write!(f, " (after relaxing: {})", relaxed.join(", "))?;
                }
                Ok(())
            }
        }
    }
}

/// What one solve decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SolveResult {
    /// Pods that fit existing or in-flight capacity: (pod, node or NodeClaim name).
    pub nominations: Vec<(PodKey, String)>,
    /// The machines to launch for the rest.
    pub new_claims: Vec<PlannedClaim>,
    /// Pods that fit nowhere, with the reason a user can act on.
    pub unschedulable: Vec<(PodKey, Unplaceable)>,
}

/// What a new machine must at least be for pods to move (see
/// [`ClusterView::new_machine_needs`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NewMachineNeeds {
    /// Room it must have.
    pub room: Resources,
    /// For each pod that can go nowhere else, its required node-affinity alternatives: the
    /// machine's type meets one of each.
    pub alternatives: Vec<Vec<Requirements>>,
}

/// A node or a machine on its way, as one pending pod sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateVerdict {
    /// The node's name, or the NodeClaim's while the machine is on its way.
    pub name: String,
    /// Whether it is a machine on its way (no node yet).
    pub on_its_way: bool,
    /// What rules it out; none when the pod fits.
    pub ruled_out: Option<String>,
}

/// Capacity that exists or is on its way. A view owns its targets and its solves borrow them,
/// so what one works out (`known`) serves every solve of the view.
struct Target<'a> {
    name: &'a str,
    /// The NodeClaim behind it (what a disruption simulation takes away).
    nodeclaim: Option<&'a str>,
    /// One label set per way the machine may turn out (one once launched); the pod must fit
    /// every one of them. A node's own labels are borrowed.
    label_sets: LabelSets<'a>,
    /// The labels every label set agrees on, as labels and as requirements (made when
    /// topology first needs them).
    known: OnceLock<(BTreeMap<String, String>, Requirements)>,
    /// Its taints, but those expected to go away; a node's borrowed when none is left out.
    taints: Cow<'a, [Taint]>,
    available: Resources,
    host_ports: Vec<HostPort>,
    initialized: bool,
}

impl<'a> Target<'a> {
    /// Its room, none where it has less than none.
    fn room_left(&self) -> Resources {
        self.available.max(&Resources::default())
    }

    fn known(&self) -> &(BTreeMap<String, String>, Requirements) {
        self.known.get_or_init(|| {
            let known = common_labels(self.label_sets.all());
            let reqs = Requirements::from_labels(&known);
            (known, reqs)
        })
    }
}

/// The label sets of a target: a node's or a launched machine's one, or one per launch option
/// of a machine waiting for its instance.
enum LabelSets<'a> {
    One(Cow<'a, BTreeMap<String, String>>),
    PerOption(Vec<Cow<'a, BTreeMap<String, String>>>),
}

impl<'a> LabelSets<'a> {
    fn all(&self) -> &[Cow<'a, BTreeMap<String, String>>] {
        match self {
            LabelSets::One(set) => std::slice::from_ref(set),
            LabelSets::PerOption(sets) => sets,
        }
    }
}

/// What one solve placed on a target so far: the requests it took (no allocation until it
/// takes some) and the host ports.
#[derive(Debug, Default)]
struct Taken {
    requests: Resources,
    host_ports: Vec<HostPort>,
}

/// The solver's view of one NodePool for this batch.
struct PoolContext<'a> {
    pool: &'a NodePool,
    /// Template, resources and room by type, kept by the core between solves.
    shape: Arc<PoolShape>,
    /// Types compatible with the template and offered, available now, where it allows.
    types: Arc<[usize]>,
    /// The largest room of `types` in every dimension: a new machine's before its first pod.
    max_room: Resources,
    /// Capacity of live NodeClaims (at their largest) and their number; left at zero for a
    /// NodePool without limits (nothing else reads it).
    usage: PoolUsage,
}

/// What counts against a NodePool's limits: live NodeClaims, then machines planned in a solve.
#[derive(Clone)]
struct PoolUsage {
    resources: Resources,
    count: i64,
}

impl PoolContext<'_> {
    fn room(&self, t: usize) -> &Resources {
        &self.shape.rooms[t]
    }
}

/// A planned machine during the solve.
struct Planned {
    claim: PlannedClaim,
    pool: usize,
    target: usize,
    host_ports: Vec<HostPort>,
    /// Component-wise maximum room (allocatable − overhead − requests) over its types.
    max_room: Resources,
    /// Largest capacity over its types (what counts against limits).
    limit_capacity: Resources,
}

/// The price of the cheapest offering of `types` that `mask` lets a launch take now (its zones
/// and capacity types, no offering out of capacity), at the catalog's prices; unbounded when
/// there is none.
fn cheapest_offering(
    prepared: &PreparedCatalog,
    types: &[usize],
    mask: &launch::OfferingMask,
) -> Price {
    let offerings = types.iter().flat_map(|&t| {
        let offerings = &prepared.catalog.instance_types[t].offerings;
        (0..offerings.len())
            .filter(move |&o| mask.allows(t, o))
            .map(move |o| offerings[o].price)
    });
    offerings.min().unwrap_or(Price(u64::MAX))
}

fn requirement_changed(old: &Requirements, new: &Requirements) -> Vec<String> {
    new.iter()
        .filter(|r| old.get(&r.key) != Some(*r))
        .map(|r| r.key.clone())
        .collect()
}

/// Whether a type's requirement on `key` allows `wanted` (Karpenter's Intersects, one key);
/// `hint` is where the key usually is among a type's requirements.
fn type_allows(type_reqs: &Requirements, wanted: &Requirement, hint: usize) -> bool {
    match type_reqs.get_hinted(&wanted.key, hint) {
        None => true,
        Some(ours) => ours.overlaps(wanted) || (ours.allows_absence() && wanted.allows_absence()),
    }
}

fn has_allowed_offering(
    state: &ClusterState,
    prepared: &PreparedCatalog,
    t: usize,
    reqs: &Requirements,
    now_ms: u64,
) -> bool {
    has_offering_passing(state, prepared, t, &OfferingFilter::new(reqs), now_ms)
}

/// Whether type `t` has a reserved offering the filter allows in a reservation with room.
fn reserved_with_room(
    state: &ClusterState,
    prepared: &PreparedCatalog,
    t: usize,
    filter: &OfferingFilter,
    now_ms: u64,
) -> bool {
    let reserved = crate::catalog::CapacityType::Reserved;
    offering_passing(state, prepared, t, filter, now_ms, |o| {
        o.capacity_type == reserved
    })
}

fn has_offering_passing(
    state: &ClusterState,
    prepared: &PreparedCatalog,
    t: usize,
    filter: &OfferingFilter,
    now_ms: u64,
) -> bool {
    offering_passing(state, prepared, t, filter, now_ms, |_| true)
}

/// Whether type `t` has an offering the filter allows, available now, that `also` takes.
fn offering_passing(
    state: &ClusterState,
    prepared: &PreparedCatalog,
    t: usize,
    filter: &OfferingFilter,
    now_ms: u64,
    also: impl Fn(&crate::catalog::Offering) -> bool,
) -> bool {
    let it = &prepared.catalog.instance_types[t];
    it.offerings.iter().any(|o| {
        also(o)
            && filter.allows(&o.zone, o.capacity_type.as_str())
            && state.offering_available(it, o, now_ms)
    })
}

/// [`pool_domains`], kept by the pool's shape while every type of the shape may be launched
/// (no offering is marked unavailable): the values then change only with the shape.
fn pool_domains_kept(
    prepared: Option<&PreparedCatalog>,
    ctx: &PoolContext,
    key: &str,
) -> BTreeSet<String> {
    // `ctx.types` is a filter of the shape's types: the same length is the same types.
    if ctx.types.len() != ctx.shape.types.len() {
        return pool_domains(prepared, ctx, key);
    }
    // A poisoned lock only means a panic elsewhere; the map is still whole.
    let mut kept = ctx
        .shape
        .domains
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(set) = kept.get(key) {
        return set.clone();
    }
    let set = pool_domains(prepared, ctx, key);
    kept.insert(key.to_string(), set.clone());
    set
}

/// The values a topology key takes on the machines one NodePool can launch: its template's,
/// when the template names them; else those of its instance types and offerings that the
/// template allows.
fn pool_domains(
    prepared: Option<&PreparedCatalog>,
    ctx: &PoolContext,
    key: &str,
) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    let template = ctx.shape.template.get(key);
    if let Some(r) = template
        && !r.complement
    {
        set.extend(r.values.iter().cloned());
        return set;
    }
    let Some(prepared) = prepared else {
        return set;
    };
    let mut add = |v: &str| {
        if !set.contains(v) && template.is_none_or(|r| r.has(v)) {
            set.insert(v.to_string());
        }
    };
    for &t in ctx.types.iter() {
        let it = &prepared.catalog.instance_types[t];
        match key {
            labels::ZONE => it.offerings.iter().for_each(|o| add(&o.zone)),
            labels::CAPACITY_TYPE => it
                .offerings
                .iter()
                .for_each(|o| add(o.capacity_type.as_str())),
            _ => {
                if let Some(v) = it.labels.get(key) {
                    add(v)
                }
            }
        }
    }
    set
}

/// Where topology domains come from: for each NodePool (with its taints), the values each key
/// takes on its instance types, offerings and template (kept by the view: they do not change
/// between the solves of one view); for each existing node (with its taints), its labels.
fn domain_sources(
    view: &ClusterView,
    state: &ClusterState,
    keys: &BTreeSet<String>,
) -> Vec<DomainSource> {
    let keys: Vec<&String> = keys
        .iter()
        .filter(|k| k.as_str() != labels::HOSTNAME)
        .collect();
    let mut out = Vec::new();
    {
        let mut memo = view.pool_domains.borrow_mut();
        for key in &keys {
            if !memo.contains_key(*key) {
                let per_pool = view
                    .contexts
                    .iter()
                    .map(|ctx| pool_domains_kept(view.prepared, ctx, key))
                    .collect();
                memo.insert((*key).clone(), per_pool);
            }
        }
        for (i, ctx) in view.contexts.iter().enumerate() {
            let domains = keys
                .iter()
                .map(|key| ((*key).clone(), memo[*key][i].clone()))
                .collect();
            out.push(DomainSource {
                taints: ctx.pool.taints.clone(),
                domains,
            });
        }
    }
    for node in state.nodes.values() {
        let domains: BTreeMap<String, BTreeSet<String>> = keys
            .iter()
            .filter_map(|k| {
                node.node
                    .labels
                    .get(*k)
                    .map(|v| ((*k).clone(), BTreeSet::from([v.clone()])))
            })
            .collect();
        if !domains.is_empty() {
            out.push(DomainSource {
                taints: node.node.taints.clone(),
                domains,
            });
        }
    }
    out
}

fn existing_targets<'a>(
    state: &'a ClusterState,
    shapes: &PoolShapes,
    contexts: &[PoolContext],
) -> Vec<Target<'a>> {
    let mut targets = Vec::with_capacity(state.nodes.len() + state.nodeclaims.len());
    for (name, node_state) in &state.nodes {
        let node = &node_state.node;
        let claim = node_state
            .nodeclaim
            .as_ref()
            .and_then(|c| state.nodeclaims.get(c));
        let usable = !node.unschedulable
            && claim.is_none_or(|c| c.terminating.is_none())
            && !node.has_taint(labels::DISRUPTED_TAINT);
        // Startup taints and the unregistered taint are expected to go away.
        let goes_away = |t: &Taint| {
            t.key == labels::UNREGISTERED_TAINT
                || claim.is_some_and(|c| c.spec.startup_taints.contains(t))
        };
        let taints = if node.taints.iter().any(goes_away) {
            Cow::Owned(
                node.taints
                    .iter()
                    .filter(|t| !goes_away(t))
                    .cloned()
                    .collect(),
            )
        } else {
            Cow::Borrowed(node.taints.as_slice())
        };
        // What its pods request and which host ports they hold, summed once until they change.
        let pods = state.requested_on(node_state);
        let labels_map = if node_state.hostname_labelled() {
            Cow::Borrowed(&node.labels)
        } else {
            let mut owned = node.labels.clone();
            owned.insert(labels::HOSTNAME.to_string(), name.clone());
            Cow::Owned(owned)
        };
        targets.push(Target {
            name: name.as_str(),
            nodeclaim: node_state.nodeclaim.as_deref(),
            label_sets: LabelSets::One(labels_map),
            known: OnceLock::new(),
            taints,
            available: if usable {
                state.free_room_on(node_state).clone()
            } else {
                Resources::new(-1, -1, -1)
            },
            host_ports: pods.host_ports.clone(),
            initialized: node.ready && claim.is_none_or(|c| c.is_initialized()),
        });
    }
    for (name, claim) in &state.nodeclaims {
        if claim.node_name.is_some() || claim.terminating.is_some() {
            continue;
        }
        let Some(resources) = state.nodeclaim_resources(claim) else {
            continue;
        };
        let label_sets: Vec<BTreeMap<String, String>> = match &claim.instance {
            Some(_) => vec![state.nodeclaim_labels(claim)],
            None => {
                let Some(prepared) = state.catalog.as_deref() else {
                    continue;
                };
                claim
                    .spec
                    .options
                    .iter()
                    .map(|o| {
                        let mut l = claim.spec.labels.clone();
                        if let Some(it) = prepared.catalog.get(&o.instance_type) {
                            l.extend(it.labels_under(state.os_of(claim)).into_owned());
                        }
                        l.insert(labels::ZONE.to_string(), o.zone.to_string());
                        l.insert(
                            labels::CAPACITY_TYPE.to_string(),
                            o.capacity_type.as_str().to_string(),
                        );
                        l
                    })
                    .collect()
            }
        };
        if label_sets.is_empty() {
            continue;
        }
        let mut label_sets: Vec<Cow<BTreeMap<String, String>>> = label_sets
            .into_iter()
            .map(|mut l| {
                l.insert(labels::HOSTNAME.to_string(), name.clone());
                Cow::Owned(l)
            })
            .collect();
        targets.push(Target {
            name: name.as_str(),
            nodeclaim: Some(name.as_str()),
            label_sets: if label_sets.len() == 1 {
                LabelSets::One(label_sets.remove(0))
            } else {
                LabelSets::PerOption(label_sets)
            },
            known: OnceLock::new(),
            taints: Cow::Borrowed(claim.spec.taints.as_slice()),
            // DaemonSet pods will land on it too once it registers.
            available: resources
                .allocatable
                .minus(&in_flight_overhead(state, shapes, contexts, claim)),
            host_ports: Vec::new(),
            initialized: false,
        });
    }
    // Initialized nodes first, then by name.
    targets.sort_by(|a, b| {
        b.initialized
            .cmp(&a.initialized)
            .then_with(|| a.name.cmp(b.name))
    });
    targets
}

/// The DaemonSet overhead a machine on its way will carry: its type's, or the largest of its
/// options' while the type is not known.
fn in_flight_overhead(
    state: &ClusterState,
    shapes: &PoolShapes,
    contexts: &[PoolContext],
    claim: &crate::state::NodeClaimState,
) -> Resources {
    let Some(prepared) = state.catalog.as_deref() else {
        return Resources::default();
    };
    // A static pool has no context (it launches nothing for pods): its shape is read directly.
    let shape = match contexts.iter().find(|c| c.pool.name == claim.spec.nodepool) {
        Some(ctx) => Arc::clone(&ctx.shape),
        None => {
            let found = state.nodepools.get(&claim.spec.nodepool).and_then(|pool| {
                let class = state.nodeclasses.get(&pool.node_class_ref.name)?;
                shapes.get(state, pool, class)
            });
            match found {
                Some(shape) => shape,
                None => return Resources::default(),
            }
        }
    };
    let index = |name: &str| {
        prepared
            .catalog
            .instance_types
            .binary_search_by(|it| it.name.as_str().cmp(name))
            .ok()
    };
    let names = state.nodeclaim_type_names(claim);
    let mut out = Resources::default();
    for t in names.into_iter().filter_map(index) {
        out.max_assign(&shape.resources()[t].allocatable.minus(&shape.rooms[t]));
    }
    out
}

/// How many nodes and machines on their way with room for one pod
/// [`ClusterView::new_machine_needs`] looks at closely (taints, host ports, labels) before it
/// counts the pod as one that may go elsewhere.
const TARGETS_LOOKED_AT: usize = 16;

/// The labels every label set agrees on (what is known of a machine on its way).
fn common_labels(sets: &[Cow<BTreeMap<String, String>>]) -> BTreeMap<String, String> {
    let Some(first) = sets.first() else {
        return BTreeMap::new();
    };
    first
        .iter()
        .filter(|(k, v)| sets.iter().all(|s| s.get(*k) == Some(v)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn untolerated<'a>(profile: &PodProfile, pod: &Pod, taints: &'a [Taint]) -> Option<&'a Taint> {
    profile.untolerated(pod, taints)
}

fn port_conflict(pod: &Pod, used: &[HostPort]) -> Option<u16> {
    pod.host_ports
        .iter()
        .find(|p| used.iter().any(|u| u.conflicts_with(p)))
        .map(|p| p.port)
}

/// Planned machines by pod count, fewest first: a bucket per count. Within a bucket the order
/// is insertion order with O(1) moves (a removal swaps the bucket's last machine into the
/// hole), which depends only on the input, so decisions stay deterministic.
#[derive(Debug, Default)]
struct ClaimOrder {
    buckets: Vec<Vec<usize>>,
    /// (bucket, position) of each planned machine.
    position: Vec<(usize, usize)>,
}

impl ClaimOrder {
    fn insert(&mut self, claim: usize, pods: usize) {
        if self.buckets.len() <= pods {
            self.buckets.resize_with(pods + 1, Vec::new);
        }
        if self.position.len() <= claim {
            self.position.resize(claim + 1, (0, 0));
        }
        self.position[claim] = (pods, self.buckets[pods].len());
        self.buckets[pods].push(claim);
    }

    fn remove(&mut self, claim: usize) {
        let (bucket, pos) = self.position[claim];
        let list = &mut self.buckets[bucket];
        list.swap_remove(pos);
        if let Some(&moved) = list.get(pos) {
            self.position[moved] = (bucket, pos);
        }
    }

    /// The machine after `cursor` in order (`None` starts from the first).
    fn next_after(&self, cursor: Option<(usize, usize)>) -> Option<((usize, usize), usize)> {
        let (mut bucket, mut pos) = match cursor {
            None => (0, 0),
            Some((b, p)) => (b, p + 1),
        };
        while bucket < self.buckets.len() {
            if let Some(&claim) = self.buckets[bucket].get(pos) {
                return Some(((bucket, pos), claim));
            }
            bucket += 1;
            pos = 0;
        }
        None
    }
}

/// Why a planned machine cannot take a pod (formatted only when shown).
#[derive(Debug, Clone)]
enum AddError {
    Taint(Taint),
    HostPort(u16),
    NoRoom(Resources),
    TopologyRulesOut,
    Topology(String),
    Requirements(String),
    NoInstanceType(String, Resources),
    MinValues {
        key: String,
        min: u32,
        got: usize,
        types: usize,
    },
    NoCatalog,
    /// The machine could go into a capacity reservation with room, and would not with the pod.
    LeavesReservation,
}

impl std::fmt::Display for AddError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AddError::Taint(t) => write!(f, "the pod does not tolerate taint {t}"),
            AddError::HostPort(p) => write!(f, "host port {p} is taken on this machine"),
            AddError::NoRoom(r) => write!(f, "no instance type has room for {r}"),
            AddError::TopologyRulesOut => {
                write!(f, "the pod's topology constraints rule this machine out")
            }
            AddError::Topology(s) | AddError::Requirements(s) => f.write_str(s),
            AddError::NoInstanceType(reqs, r) => {
                write!(f, "no instance type satisfies {reqs} with room for {r}")
            }
            AddError::MinValues {
                key,
                min,
                got,
                types,
            } => write!(
                f,
                "minValues {min} for {key} cannot be met: only {got} distinct values among the {types} instance types that fit"
            ),
            AddError::NoCatalog => write!(f, "no instance catalog is known yet"),
            AddError::LeavesReservation => write!(
                f,
                "the machine would no longer fit the capacity reservation it can go into"
            ),
        }
    }
}

/// The solver's working state.
struct Solver<'a> {
    state: &'a ClusterState,
    config: &'a Config,
    now_ms: u64,
    prepared: Option<&'a PreparedCatalog>,
    contexts: &'a [PoolContext<'a>],
    usage: Vec<PoolUsage>,
    /// The view's existing nodes and machines on their way (less those a simulation takes
    /// away), borrowed: what a solve changes of them is in `taken`.
    targets: Vec<&'a Target<'a>>,
    /// What this solve placed on each target: its requests and host ports.
    taken: Vec<Taken>,
    planned: Vec<Planned>,
    /// Planned machines, fewest pods first.
    order: ClaimOrder,
    topology: Topology,
    /// The domains the walks over planned machines compare, interned.
    domain_ids: DomainIds,
}

impl<'a> Solver<'a> {
    /// Tries existing targets, then planned machines, then a new machine. On success the pod
    /// is placed and counted; on failure the reasons per NodePool.
    fn place(
        &mut self,
        pod: &Pod,
        profile: &PodProfile,
        groups: &PodGroups,
        result: &mut SolveResult,
    ) -> Result<(), Vec<String>> {
        let total_targets = (self.targets.len() + self.planned.len()) as u32;
        let blocked_everywhere = self
            .topology
            .hostname_blocked_everywhere(profile, total_targets);
        if !blocked_everywhere {
            // 1. Existing nodes and machines on their way.
            for ti in 0..self.targets.len() {
                let target = self.targets[ti];
                let taken = &self.taken[ti];
                if !pod.requests.fits_beside(&taken.requests, &target.available)
                    || untolerated(profile, pod, &target.taints).is_some()
                    || port_conflict(pod, &target.host_ports).is_some()
                    || port_conflict(pod, &taken.host_ports).is_some()
                    || !target
                        .label_sets
                        .all()
                        .iter()
                        .all(|l| profile.requirements.matches_labels(l))
                {
                    continue;
                }
                if !self.topology.is_empty() {
                    let (known, known_reqs) = target.known();
                    let mut reqs = known_reqs.clone();
                    if self
                        .topology
                        .admit(pod, profile, groups, ti, &mut reqs)
                        .is_err()
                    {
                        continue;
                    }
                    if !reqs.matches_labels(known) {
                        continue;
                    }
                    self.topology.record(groups, ti, &reqs);
                }
                let taken = &mut self.taken[ti];
                taken.requests.add(&pod.requests);
                taken.host_ports.extend(pod.host_ports.iter().cloned());
                result
                    .nominations
                    .push((pod.key.clone(), target.name.to_string()));
                return Ok(());
            }
            // 2. Machines planned in this batch, fewest pods first. A failed try changes
            // nothing, so the walk may continue from where it was.
            let scan = self.topology.scan(pod, profile, groups);
            let rules = self.domain_ids.rules(scan.domains());
            let mut cursor: Option<(usize, usize)> = None;
            while let Some((at, claim)) = self.order.next_after(cursor) {
                cursor = Some(at);
                if !rules.is_empty()
                    && self.domain_ids.rejects(
                        &rules,
                        claim,
                        &self.planned[claim].claim.requirements,
                    )
                {
                    continue;
                }
                if self
                    .try_add(claim, pod, profile, groups, Some(&scan), false)
                    .is_ok()
                {
                    return Ok(());
                }
            }
        }
        // 3. A new machine from the first NodePool that can take the pod.
        let Some(prepared) = self.prepared else {
            return Err(vec!["no instance catalog is known yet".to_string()]);
        };
        let mut reasons = Vec::new();
        for ci in 0..self.contexts.len() {
            let ctx = &self.contexts[ci];
            if let Some(taint) = untolerated(profile, pod, &ctx.pool.taints) {
                reasons.push(format!(
                    "nodepool {}: the pod does not tolerate taint {taint}",
                    ctx.pool.name
                ));
                continue;
            }
            if ctx.types.is_empty() {
                // Nothing is offered now (zones, capacity types, recent insufficient capacity):
                // say so rather than blame the limits.
                reasons.push(format!(
                    "nodepool {}: {}",
                    ctx.pool.name,
                    self.explain_new_claim(
                        prepared,
                        ci,
                        pod,
                        profile,
                        "no instance type is offered".to_string()
                    )
                ));
                continue;
            }
            let usage = &self.usage[ci];
            let remaining = ctx.pool.remaining(&usage.resources, usage.count);
            if let Some(remaining) = &remaining
                && remaining.get("nodes").is_some_and(|n| *n < 1)
            {
                reasons.push(format!(
                    "nodepool {}: limits.nodes is reached",
                    ctx.pool.name
                ));
                continue;
            }
            let types: Vec<usize> = match &remaining {
                None => ctx.types.to_vec(),
                Some(remaining) => ctx
                    .types
                    .iter()
                    .copied()
                    .filter(|&t| {
                        let capacity = &ctx.shape.resources()[t].capacity;
                        !remaining
                            .iter()
                            .any(|(name, left)| name != "nodes" && capacity.get(name) > *left)
                    })
                    .collect(),
            };
            if types.is_empty() {
                reasons.push(format!(
                    "nodepool {}: every instance type would exceed the NodePool limits (remaining: {})",
                    ctx.pool.name,
                    describe_remaining(remaining.as_ref())
                ));
                continue;
            }
            let target = self.targets.len() + self.planned.len();
            let max_room = if remaining.is_none() {
                // `types` is every type of the context.
                ctx.max_room.clone()
            } else {
                ctx.shape.room_rows.max_of(types.iter().copied())
            };
            let claim = PlannedClaim {
                nodepool: ctx.pool.name.clone(),
                requirements: ctx.shape.template.clone(),
                pods: Vec::new(),
                requests: Resources::default(),
                types,
                min_values: ctx.shape.min_values.clone(),
            };
            self.planned.push(Planned {
                claim,
                pool: ci,
                target,
                host_ports: Vec::new(),
                max_room,
                limit_capacity: Resources::default(),
            });
            let index = self.planned.len() - 1;
            // A machine dropped before may have held this index.
            self.domain_ids.forget(index);
            let best_effort = self.config.min_values_policy == MinValuesPolicy::BestEffort;
            match self.try_add(index, pod, profile, groups, None, best_effort) {
                Ok(()) => {
                    self.usage[ci].count += 1;
                    return Ok(());
                }
                Err(reason) => {
                    self.planned.pop();
                    let ctx = &self.contexts[ci];
                    reasons.push(format!(
                        "nodepool {}: {}",
                        ctx.pool.name,
                        self.explain_new_claim(prepared, ci, pod, profile, reason.to_string())
                    ));
                }
            }
        }
        let _ = result;
        Err(reasons)
    }

    /// Karpenter's NodeClaim.CanAdd + Add for planned machine `i`.
    fn try_add(
        &mut self,
        i: usize,
        pod: &Pod,
        profile: &PodProfile,
        groups: &PodGroups,
        scan: Option<&Scan>,
        relax_min_values: bool,
    ) -> Result<(), AddError> {
        let planned = &self.planned[i];
        let ctx = &self.contexts[planned.pool];
        if let Some(taint) = untolerated(profile, pod, &ctx.pool.taints) {
            return Err(AddError::Taint(taint.clone()));
        }
        if let Some(port) = port_conflict(pod, &planned.host_ports) {
            return Err(AddError::HostPort(port));
        }
        // The walk of `place` (the only caller with a scan) checked the domains already.
        if let Some(scan) = scan
            && self.topology.hosts_reject(scan, planned.target)
        {
            return Err(AddError::TopologyRulesOut);
        }
        let requests = planned.claim.requests.plus(&pod.requests);
        if !requests.fits_in(&planned.max_room) {
            return Err(AddError::NoRoom(requests));
        }
        let mut reqs = planned.claim.requirements.clone();
        if !profile.requirements.is_empty() {
            reqs.compatible(&profile.requirements)
                .map_err(|c| AddError::Requirements(format!("incompatible requirements: {c}")))?;
            reqs = reqs.intersect(&profile.requirements);
        }
        if !self.topology.is_empty() {
            self.topology
                .admit(pod, profile, groups, planned.target, &mut reqs)
                .map_err(AddError::Topology)?;
        }
        let changed = requirement_changed(&planned.claim.requirements, &reqs);
        let offering_keys_changed = changed
            .iter()
            .any(|k| k == labels::ZONE || k == labels::CAPACITY_TYPE);
        let Some(prepared) = self.prepared else {
            return Err(AddError::NoCatalog);
        };
        let changed_reqs: Vec<&Requirement> = changed.iter().filter_map(|k| reqs.get(k)).collect();
        if changed_reqs
            .iter()
            .any(|r| r.is_empty_set() && !r.allows_absence())
        {
            return Err(AddError::Requirements(format!(
                "requirements conflict on {}",
                changed.join(", ")
            )));
        }
        let filter = OfferingFilter::new(&reqs);
        // Offerings are looked at again only when the zone or capacity type narrowed.
        let mask = offering_keys_changed
            .then(|| launch::OfferingMask::new(self.state, prepared, filter, self.now_ms));
        // Every type's requirements have the same keys in the same places.
        let hints: Vec<usize> = changed_reqs
            .iter()
            .map(|r| {
                planned
                    .claim
                    .types
                    .first()
                    .and_then(|&t| ctx.shape.type_requirements(t).position_of(&r.key))
                    .unwrap_or(0)
            })
            .collect();
        // The requests as a row over the pool's rooms: a type's room is compared by integers.
        let wanted = ctx.shape.room_rows.row_of(&requests);
        let types: Vec<usize> = planned
            .claim
            .types
            .iter()
            .copied()
            .filter(|&t| {
                wanted
                    .as_ref()
                    .is_some_and(|row| ctx.shape.room_rows.holds(t, row))
                    && changed_reqs
                        .iter()
                        .zip(&hints)
                        .all(|(r, &hint)| type_allows(ctx.shape.type_requirements(t), r, hint))
                    && mask.as_ref().is_none_or(|m| m.allows_any(t))
            })
            .collect();
        if types.is_empty() {
            return Err(AddError::NoInstanceType(
                describe_requirements(&reqs),
                requests,
            ));
        }
        // As Karpenter's reserved capacity: a machine that can go into a reservation with room
        // stays able to; a pod that would take that away opens another machine.
        if !planned.claim.pods.is_empty() && !prepared.catalog.reservations.is_empty() {
            let before = OfferingFilter::new(&planned.claim.requirements);
            let reservable = |types: &[usize], filter: &OfferingFilter| {
                types
                    .iter()
                    .any(|&t| reserved_with_room(self.state, prepared, t, filter, self.now_ms))
            };
            if reservable(&planned.claim.types, &before) && !reservable(&types, &filter) {
                return Err(AddError::LeavesReservation);
            }
        }
        let mut min_values = planned.claim.min_values.clone();
        if let Some((key, min, got)) = launch::unmet_min_values(prepared, &types, &min_values) {
            if !relax_min_values {
                return Err(AddError::MinValues {
                    key,
                    min,
                    got,
                    types: types.len(),
                });
            }
            for (k, m) in &mut min_values {
                let distinct: BTreeSet<String> = types
                    .iter()
                    .flat_map(|t| launch::values_for_key(prepared, *t, k))
                    .collect();
                *m = (*m).min(distinct.len() as u32);
            }
        }
        // Commit. `types` only ever narrows `planned.claim.types` (a filter of it, in its
        // order): the same length is the same types, whose maxima the claim's last commit
        // computed (a claim without pods has had none).
        let (max_room, limit_capacity) =
            if !planned.claim.pods.is_empty() && types.len() == planned.claim.types.len() {
                (planned.max_room.clone(), planned.limit_capacity.clone())
            } else {
                let max_room = ctx.shape.room_rows.max_of(types.iter().copied());
                let limit_capacity = if ctx.pool.limits.is_empty() {
                    Resources::default()
                } else {
                    ctx.shape.capacity_rows().max_of(types.iter().copied())
                };
                (max_room, limit_capacity)
            };
        let pool_index = planned.pool;
        let old_capacity = planned.limit_capacity.clone();
        let target = planned.target;
        self.domain_ids.forget(i);
        let planned = &mut self.planned[i];
        let old_len = planned.claim.pods.len();
        planned.claim.requirements = reqs;
        planned.claim.requests = requests;
        planned.claim.types = types;
        planned.claim.min_values = min_values;
        planned.claim.pods.push(pod.key.clone());
        planned.host_ports.extend(pod.host_ports.iter().cloned());
        planned.max_room = max_room;
        planned.limit_capacity = limit_capacity.clone();
        if old_len > 0 {
            self.order.remove(i);
        }
        self.order.insert(i, old_len + 1);
        if !self.contexts[pool_index].pool.limits.is_empty() {
            let usage = &mut self.usage[pool_index].resources;
            usage.sub(&old_capacity);
            usage.add(&limit_capacity);
        }
        if !self.topology.is_empty() {
            let reqs = self.planned[i].claim.requirements.clone();
            self.topology.record(groups, target, &reqs);
        }
        Ok(())
    }

    /// Beyond Karpenter (`Config::separate_when_cheaper`): each planned machine for pods that
    /// ask for accelerators (NVIDIA or AMD GPUs, AWS Neuron) whose pods, each on a machine of its own,
    /// cost less than the machine does, is made one machine per pod — two one-GPU pods on two
    /// one-GPU machines rather than on a four-GPU one, which consolidation would soon take
    /// apart again, evicting them. Accelerators come 1, 4 or 8 to a machine, so two pods can
    /// cost a machine twice their size; CPU and memory come in sizes that double, and there
    /// the catalog's prices leave out what each machine costs besides (its root volume, its
    /// addresses, its DaemonSets' work), so a machine is not split for them. Each keeps the
    /// machine's requirements (its zone among them); both sides are priced at the offerings a
    /// launch may take now. Left as planned: machines of a NodePool with limits, or with
    /// `minValues`, machines holding a pod with pod affinity, pod anti-affinity or topology
    /// spread, whose placement the plan counted on, and every machine while capacity
    /// reservations are known (machines apart could count one free slot twice).
    fn separate_where_cheaper(&mut self, pods: &[&Pod], profiles: &[PodProfile]) {
        let Some(prepared) = self.prepared else {
            return;
        };
        // Most solves plan no machine for several accelerator pods: they look no further.
        if !self.planned.iter().any(|p| self.may_split(prepared, p)) {
            return;
        }
        let index: BTreeMap<&PodKey, usize> =
            pods.iter().enumerate().map(|(i, p)| (&p.key, i)).collect();
        let mut kept = Vec::with_capacity(self.planned.len());
        for planned in std::mem::take(&mut self.planned) {
            let apart = self
                .may_split(prepared, &planned)
                .then(|| self.apart(prepared, &planned, pods, profiles, &index))
                .flatten();
            match apart {
                Some(apart) => kept.extend(apart),
                None => kept.push(planned),
            }
        }
        self.planned = kept;
    }

    /// Whether `planned` is for several pods asking accelerators, of a NodePool without limits
    /// or `minValues`, while no capacity reservation is known (machines apart could count one
    /// free slot twice): what [`Solver::apart`] asks before it prices anything.
    fn may_split(&self, prepared: &PreparedCatalog, planned: &Planned) -> bool {
        let claim = &planned.claim;
        let accelerated = [NVIDIA_GPU, AMD_GPU, AWS_NEURON]
            .iter()
            .any(|r| claim.requests.extended.contains_key(r));
        claim.pods.len() >= 2
            && accelerated
            && self.contexts[planned.pool].pool.limits.is_empty()
            && claim.min_values.is_empty()
            && prepared.catalog.reservations.is_empty()
    }

    /// `planned` (one [`Solver::may_split`] allows) as one machine per pod, when those cost
    /// less than it and none of its pods has pod affinity, anti-affinity or spread.
    fn apart(
        &self,
        prepared: &PreparedCatalog,
        planned: &Planned,
        pods: &[&Pod],
        profiles: &[PodProfile],
        index: &BTreeMap<&PodKey, usize>,
    ) -> Option<Vec<Planned>> {
        let claim = &planned.claim;
        let ctx = &self.contexts[planned.pool];
        let filter = OfferingFilter::new(&claim.requirements);
        let mask = launch::OfferingMask::new(self.state, prepared, filter, self.now_ms);
        let together = cheapest_offering(prepared, &claim.types, &mask);
        let mut apart = Vec::with_capacity(claim.pods.len());
        let mut apart_usd = 0u64;
        for key in &claim.pods {
            let i = *index.get(key)?;
            let (pod, profile) = (pods[i], &profiles[i]);
            if !profile.affinity.is_empty()
                || !profile.anti_affinity.is_empty()
                || !profile.spread.is_empty()
            {
                return None;
            }
            // The NodePool's types that hold the pod and meet the machine's requirements: the
            // machine's own, and the smaller ones only the other pods ruled out.
            let row = ctx.shape.room_rows.row_of(&pod.requests)?;
            let types: Vec<usize> = ctx
                .types
                .iter()
                .copied()
                .filter(|&t| {
                    ctx.shape.room_rows.holds(t, &row)
                        && ctx.shape.type_requirements(t).meets(&claim.requirements)
                        && mask.allows_any(t)
                })
                .collect();
            if types.is_empty() {
                return None;
            }
            apart_usd = apart_usd.saturating_add(cheapest_offering(prepared, &types, &mask).0);
            apart.push(Planned {
                claim: PlannedClaim {
                    nodepool: claim.nodepool.clone(),
                    requirements: claim.requirements.clone(),
                    pods: vec![key.clone()],
                    requests: pod.requests.clone(),
                    types,
                    min_values: Vec::new(),
                },
                pool: planned.pool,
                target: planned.target,
                host_ports: pod.host_ports.clone(),
                max_room: planned.max_room.clone(),
                limit_capacity: planned.limit_capacity.clone(),
            });
        }
        (apart_usd < together.0).then_some(apart)
    }

    /// Why no machine of a NodePool can take the pod, in the terms a user acts on.
    fn explain_new_claim(
        &self,
        prepared: &PreparedCatalog,
        ci: usize,
        pod: &Pod,
        profile: &PodProfile,
        reason: String,
    ) -> String {
        let ctx = &self.contexts[ci];
        if let Err(conflict) = ctx.shape.template.compatible(&profile.requirements) {
            return format!("incompatible requirements: {conflict}");
        }
        if !reason.starts_with("no instance type") {
            return reason;
        }
        let reqs = ctx.shape.template.intersect(&profile.requirements);
        let shown = describe_requirements(&reqs);
        let meeting: Vec<usize> = (0..prepared.catalog.instance_types.len())
            .filter(|&t| ctx.shape.type_requirements(t).meets(&reqs))
            .collect();
        if meeting.is_empty() {
            return format!("no instance type satisfies {shown}");
        }
        let fitting = meeting
            .iter()
            .filter(|&&t| pod.requests.fits_in(ctx.room(t)))
            .count();
        if fitting == 0 {
            // The resources no type meeting the requirements has enough of, by name.
            let short: Vec<String> = pod
                .requests
                .names()
                .into_iter()
                .filter(|name| {
                    let asked = pod.requests.get(name);
                    meeting.iter().all(|&t| ctx.room(t).get(name) < asked)
                })
                .collect();
            let short = if short.is_empty() {
                String::new()
            } else {
                format!("; none offers enough {}", short.join(", "))
            };
            return format!(
                "no instance type satisfies {shown} with room for {} ({} types meet the requirements, none is large enough{short})",
                pod.requests,
                meeting.len()
            );
        }
        format!(
            "the {fitting} instance types that fit {shown} have no offering available now (zones, capacity types, or recent insufficient capacity)"
        )
    }
}

/// Requirements as a user wrote them (without the NodePool's own name label).
fn describe_requirements(reqs: &Requirements) -> String {
    let parts: Vec<String> = reqs
        .iter()
        .filter(|r| r.key != labels::NODEPOOL && r.key != labels::HOSTNAME)
        .map(|r| r.to_string())
        .collect();
    if parts.is_empty() {
        "no requirements".to_string()
    } else {
        parts.join(" AND ")
    }
}

fn describe_remaining(remaining: Option<&BTreeMap<String, i64>>) -> String {
    match remaining {
        None => "unlimited".to_string(),
        Some(map) => map
            .iter()
            .map(|(k, v)| match k.as_str() {
                "cpu" => format!("cpu={}", crate::model::resources::format_milli_cpu(*v)),
                "memory" => format!("memory={}", crate::model::resources::format_bytes(*v)),
                _ => format!("{k}={v}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// Places `pods` (pending, any order) given the cluster state and what is known of its
/// NodePools' shapes (an empty [`PoolShapes`] computes each as it is needed).
pub fn solve(
    state: &ClusterState,
    shapes: &PoolShapes,
    config: &Config,
    now_ms: u64,
    pods: &[&Pod],
) -> SolveResult {
    ClusterView::new(state, shapes, config, now_ms).solve(pods, &BTreeSet::new())
}

/// [`solve`] as if the NodeClaims in `removed` (and their nodes and pods) were gone: how a
/// disruption simulates taking machines away without copying the cluster.
pub fn solve_without(
    state: &ClusterState,
    shapes: &PoolShapes,
    config: &Config,
    now_ms: u64,
    pods: &[&Pod],
    removed: &BTreeSet<String>,
) -> SolveResult {
    ClusterView::new(state, shapes, config, now_ms).solve(pods, removed)
}

/// The solver's view of the cluster that does not depend on the pods being placed: every
/// NodePool's usable instance types, rooms and usage, and every node and machine on its way.
/// Built once, it serves every simulation of a disruption pass.
pub struct ClusterView<'a> {
    state: &'a ClusterState,
    config: &'a Config,
    now_ms: u64,
    prepared: Option<&'a PreparedCatalog>,
    /// NodePools in priority order (those whose EC2NodeClass exists).
    contexts: Vec<PoolContext<'a>>,
    /// NodePools that launch no machine for pending pods — whose EC2NodeClass does not exist,
    /// or that are static — as the user reads it.
    not_launching: Vec<String>,
    targets: Vec<Target<'a>>,
    /// Bound pods with required pod anti-affinity (every pending pod must respect them).
    anti_affinity_pods: Vec<&'a Pod>,
    any_prefer_no_schedule: bool,
    /// Each topology key's values per NodePool (by context), filled as solves ask.
    pool_domains: std::cell::RefCell<BTreeMap<String, Vec<BTreeSet<String>>>>,
    /// The free room of every target together, and the targets of each NodeClaim, made when
    /// a simulation first asks ([`ClusterView::new_machine_needs`]).
    free_room: std::cell::OnceCell<(Resources, Vec<(&'a str, usize)>)>,
}

impl<'a> ClusterView<'a> {
    /// The cluster as a solve sees it now: each launching NodePool's usable types and room,
    /// and every node and machine on its way with what it can still take.
    pub fn new(
        state: &'a ClusterState,
        shapes: &PoolShapes,
        config: &'a Config,
        now_ms: u64,
    ) -> Self {
        let prepared = state.catalog.as_deref();
        let mut pools: Vec<&NodePool> = state.nodepools.values().collect();
        pools.sort_by(|a, b| NodePool::priority_order(a, b));
        let mut not_launching = Vec::new();
        let mut usages = state.usage_under_limits();
        let contexts: Vec<PoolContext> = pools
            .iter()
            .filter_map(|pool| {
                if let Some(replicas) = pool.replicas {
                    not_launching.push(format!(
                        "nodepool {}: static (replicas {replicas}), it keeps its machine count and launches none for pending pods",
                        pool.name
                    ));
                    return None;
                }
                let Some(nodeclass) = state.nodeclasses.get(&pool.node_class_ref.name) else {
                    not_launching.push(format!(
                        "nodepool {}: its nodeClassRef names EC2NodeClass {:?}, which does not exist",
                        pool.name, pool.node_class_ref.name
                    ));
                    return None;
                };
                let prepared = prepared?;
                let shape = shapes.get(state, pool, nodeclass)?;
                let (usage, count) = usages.remove(pool.name.as_str()).unwrap_or_default();
                // Only a type with an offering marked unavailable can have lost every allowed
                // offering: the shape's types offer one the template allows.
                let blocked: BTreeSet<usize> = state
                    .unavailable
                    .iter()
                    .filter(|(_, until)| **until > now_ms)
                    .filter_map(|(key, _)| prepared.catalog.position(&key.instance_type))
                    .filter(|&t| !has_allowed_offering(state, prepared, t, &shape.template, now_ms))
                    .collect();
                let (types, max_room) = if blocked.is_empty() {
                    (shape.types.clone(), shape.max_room.clone())
                } else {
                    let types: Arc<[usize]> = shape
                        .types
                        .iter()
                        .copied()
                        .filter(|t| !blocked.contains(t))
                        .collect();
                    let max_room = shape.room_rows.max_of(types.iter().copied());
                    (types, max_room)
                };
                Some(PoolContext {
                    pool,
                    shape,
                    types,
                    max_room,
                    usage: PoolUsage {
                        resources: usage,
                        count,
                    },
                })
            })
            .collect();
        let targets = existing_targets(state, shapes, &contexts);
        // Bound pods with a required anti-affinity term: looked for only when the table counts
        // some pod with one.
        let anti_affinity_pods = if state.pods.any_with_required_anti_affinity() {
            state
                .pods
                .values()
                .filter(|p| p.node_name.is_some() && p.has_required_anti_affinity())
                .collect()
        } else {
            Vec::new()
        };
        let any_prefer_no_schedule = pools.iter().any(|p| {
            p.taints
                .iter()
                .any(|t| t.effect == TaintEffect::PreferNoSchedule)
        });
        ClusterView {
            state,
            config,
            now_ms,
            prepared,
            contexts,
            not_launching,
            targets,
            anti_affinity_pods,
            any_prefer_no_schedule,
            pool_domains: Default::default(),
            free_room: std::cell::OnceCell::new(),
        }
    }

    /// Each node and machine on its way, with what rules it out for `pod` alone (none: the pod
    /// fits there), checked in the solver's order: room, taints, host ports, node labels. Topology
    /// is not weighed: it depends on the other pods of a batch. For `nodewright explain`.
    pub fn existing_verdicts(&self, pod: &Pod) -> Vec<CandidateVerdict> {
        let profile = PodProfile::new(pod, self.config.preference_policy);
        self.targets
            .iter()
            .map(|target| {
                let node = self.state.nodes.get(target.name);
                let unusable = node.is_some_and(|n| {
                    n.node.unschedulable || n.node.has_taint(labels::DISRUPTED_TAINT)
                });
                let ruled_out = if unusable {
                    Some("it is cordoned or being disrupted: no new pod lands on it".to_string())
                } else if let Some(resource) = pod.requests.first_excess(&target.available) {
                    Some(format!(
                        "not enough {resource}: the pod asks {}, {} is free",
                        pod.requests, target.available
                    ))
                } else if let Some(taint) = untolerated(&profile, pod, &target.taints) {
                    Some(format!("the pod does not tolerate taint {taint}"))
                } else if let Some(port) = port_conflict(pod, &target.host_ports) {
                    Some(format!("host port {port} is taken"))
                } else {
                    target.label_sets.all().iter().find_map(|labels| {
                        profile
                            .requirements
                            .first_unmet(labels)
                            .map(|r| format!("its labels do not meet {r}"))
                    })
                };
                CandidateVerdict {
                    name: target.name.to_string(),
                    on_its_way: node.is_none(),
                    ruled_out,
                }
            })
            .collect()
    }

    /// What a new machine must at least be if the `pods` are placed as if the NodeClaims in
    /// `removed` were gone; `None` when they may all go on the remaining nodes and machines on
    /// their way. It holds the pods that can go on none of those, and whatever the pods ask
    /// together beyond the free room of all of them.
    ///
    /// A pod is placed on a node only where, from the start of a solve, it fits by its
    /// requests, tolerates every taint that is not `PreferNoSchedule`, finds its host ports
    /// free, and one of its required node-affinity alternatives (with its node selector) meets
    /// every label set the node may have — however far its preferences are relaxed; and a node
    /// only loses room and ports as the solve goes.
    pub fn new_machine_needs(
        &self,
        pods: &[&Pod],
        removed: &BTreeSet<String>,
    ) -> Option<NewMachineNeeds> {
        // Together the pods fit on the remaining nodes only up to their free room: what is
        // beyond it goes on a new machine, whichever pods those are. (Every target's room,
        // summed once per view, less the removed ones'.)
        let (every_target, targets_of_claim) = self.free_room.get_or_init(|| {
            let mut free = Resources::default();
            // (NodeClaim, target position), in that order: a claim's targets in position order.
            let mut of_claim: Vec<(&str, usize)> = Vec::with_capacity(self.targets.len());
            for (i, target) in self.targets.iter().enumerate() {
                free.add(&target.room_left());
                if let Some(claim) = target.nodeclaim {
                    of_claim.push((claim, i));
                }
            }
            of_claim.sort_unstable();
            (free, of_claim)
        });
        let mut free = every_target.clone();
        // The targets of the removed NodeClaims, by position.
        let mut gone = vec![false; self.targets.len()];
        for claim in removed {
            let from = targets_of_claim.partition_point(|(c, _)| *c < claim.as_str());
            for &(_, i) in targets_of_claim[from..]
                .iter()
                .take_while(|(c, _)| *c == claim.as_str())
            {
                free.sub(&self.targets[i].room_left());
                gone[i] = true;
            }
        }
        let remaining = || {
            self.targets
                .iter()
                .zip(&gone)
                .filter_map(|(target, gone)| (!gone).then_some(target))
        };
        let mut asked = Resources::default();
        let mut homeless = Resources::default();
        let mut homeless_alternatives: Vec<Vec<Requirements>> = Vec::new();
        for pod in pods {
            asked.add(&pod.requests);
            // Built at the first target with room, if any.
            let mut alternatives: Option<Vec<Requirements>> = None;
            // Every target's room is looked at (a comparison of a few numbers); in a large
            // cluster a pod that fits none of the first targets with room is counted as one
            // that may go (a pod not counted here only weakens the bound).
            let mut looked = 0usize;
            let may_go = remaining().any(|target| {
                if !pod.requests.fits_in(&target.available) {
                    return false;
                }
                looked += 1;
                if looked > TARGETS_LOOKED_AT {
                    return true;
                }
                if port_conflict(pod, &target.host_ports).is_some()
                    || first_untolerated(&target.taints, &pod.tolerations).is_some()
                {
                    return false;
                }
                alternatives
                    .get_or_insert_with(|| pod.requirement_alternatives())
                    .iter()
                    .any(|alt| {
                        target
                            .label_sets
                            .all()
                            .iter()
                            .all(|l| alt.matches_labels(l))
                    })
            });
            if !may_go {
                homeless.add(&pod.requests);
                homeless_alternatives
                    .push(alternatives.unwrap_or_else(|| pod.requirement_alternatives()));
            }
        }
        let beyond = asked.minus(&free).max(&Resources::default());
        if homeless_alternatives.is_empty() && beyond.is_zero() {
            return None;
        }
        Some(NewMachineNeeds {
            room: homeless.max(&beyond),
            alternatives: homeless_alternatives,
        })
    }

    /// The least the new machine that `needs` says can cost, when it could cost less than
    /// `price`: over the types a launching NodePool may use that have the room, meet one
    /// alternative of every pod that must go on it, and have an offering their NodePool allows
    /// below the price, the cheapest such offering. A bound on what a solve's new machine can
    /// cost: its types are among these (narrowed further by the pods' other requirements), its
    /// offerings among theirs (narrowed further to those its requirements allow and available
    /// now). `None`: no new machine for `needs` costs less than `price`.
    pub fn least_new_machine_price(
        &self,
        needs: &NewMachineNeeds,
        price: crate::catalog::Price,
    ) -> Option<crate::catalog::Price> {
        self.contexts
            .iter()
            .filter_map(|ctx| {
                // `ctx.types` is the shape's types in catalog order, or a filter of them.
                let narrowed = ctx.types.len() != ctx.shape.types.len();
                // By price, cheapest first: the first that qualifies is the pool's least.
                ctx.shape
                    .types_by_price
                    .iter()
                    .take_while(|&&t| ctx.shape.cheapest_allowed[t].is_some_and(|p| p < price))
                    .filter(|&&t| !narrowed || ctx.types.binary_search(&t).is_ok())
                    .find(|&&t| {
                        needs.room.fits_in(ctx.room(t))
                            && needs.alternatives.iter().all(|alternatives| {
                                alternatives
                                    .iter()
                                    .any(|alt| ctx.shape.type_requirements(t).meets(alt))
                            })
                    })
                    .and_then(|&t| ctx.shape.cheapest_allowed[t])
            })
            .min()
    }

    /// Places `pods` as if the NodeClaims in `removed` (their nodes and pods) were gone.
    pub fn solve(&self, pods: &[&Pod], removed: &BTreeSet<String>) -> SolveResult {
        let state = self.state;
        let config = self.config;
        let prepared = self.prepared;
        let not_launching = &self.not_launching;
        let any_prefer_no_schedule = self.any_prefer_no_schedule;
        let mut result = SolveResult::default();
        let mut pods: Vec<&Pod> = pods.to_vec();
        pods.sort_by(|a, b| Pod::queue_order(a, b));

        let usage: Vec<PoolUsage> = self
            .contexts
            .iter()
            .map(|ctx| {
                let mut usage = ctx.usage.clone();
                if ctx.pool.limits.is_empty() {
                    return usage;
                }
                for name in removed {
                    if let Some(claim) = state.nodeclaims.get(name)
                        && claim.spec.nodepool == ctx.pool.name
                        && claim.terminating.is_none()
                    {
                        usage.resources.sub(&state.nodeclaim_limit_capacity(claim));
                        usage.count -= 1;
                    }
                }
                usage
            })
            .collect();

        let mut profiles: Vec<PodProfile> = pods
            .iter()
            .map(|p| PodProfile::new(p, config.preference_policy))
            .collect();
        let mut keys: BTreeSet<String> = BTreeSet::new();
        for (pod, profile) in pods.iter().zip(&profiles) {
            keys.extend(profile.spread.iter().map(|c| c.topology_key.clone()));
            keys.extend(profile.affinity.iter().map(|t| t.topology_key.clone()));
            keys.extend(pod.pod_anti_affinity.iter().map(|t| t.topology_key.clone()));
        }
        for p in &self.anti_affinity_pods {
            keys.extend(
                p.pod_anti_affinity
                    .iter()
                    .filter(|t| t.weight.is_none())
                    .map(|t| t.topology_key.clone()),
            );
        }
        let removed_nodes: BTreeSet<&str> = removed
            .iter()
            .filter_map(|c| state.nodeclaims.get(c))
            .filter_map(|c| c.node_name.as_deref())
            .collect();
        let on_removed = |p: &Pod| {
            p.node_name
                .as_deref()
                .is_some_and(|n| removed_nodes.contains(n))
        };
        let mut topology = Topology::new(domain_sources(self, state, &keys));
        for (pod, profile) in pods.iter().zip(profiles.iter_mut()) {
            topology.register_pending(pod, profile);
        }
        for p in self.anti_affinity_pods.iter().filter(|p| !on_removed(p)) {
            topology.register_running(p);
        }
        let pod_groups: Vec<PodGroups> = if topology.is_empty() {
            vec![PodGroups::default(); pods.len()]
        } else {
            pods.iter().map(|p| topology.prepare(p)).collect()
        };
        let targets: Vec<&Target> = self
            .targets
            .iter()
            .filter(|t| t.nodeclaim.is_none_or(|c| !removed.contains(c)))
            .collect();
        let taken = (0..targets.len()).map(|_| Taken::default()).collect();
        if !topology.is_empty() {
            let by_name: BTreeMap<&str, usize> = targets
                .iter()
                .enumerate()
                .map(|(i, t)| (t.name, i))
                .collect();
            for p in state
                .pods
                .values()
                .filter(|p| p.node_name.is_some() && !on_removed(p))
            {
                let Some(node) = p.node_name.as_deref() else {
                    continue;
                };
                let Some(&ti) = by_name.get(node) else {
                    continue;
                };
                let groups = topology.prepare(p);
                topology.record(&groups, ti, &targets[ti].known().1);
            }
        }

        let mut solver = Solver {
            state,
            config,
            now_ms: self.now_ms,
            prepared,
            contexts: &self.contexts,
            usage,
            targets,
            taken,
            planned: Vec::new(),
            order: ClaimOrder::default(),
            topology,
            domain_ids: DomainIds::default(),
        };

        // The queue: indices into `pods`, with the queue length when each was last pushed back.
        let mut queue: VecDeque<usize> = (0..pods.len()).collect();
        let mut pushed_at: BTreeMap<usize, usize> = BTreeMap::new();
        let mut errors: BTreeMap<usize, Unplaceable> = BTreeMap::new();
        while let Some(i) = queue.pop_front() {
            if pushed_at.get(&i) == Some(&(queue.len() + 1)) {
                // A full pass since this pod was pushed back placed nothing: stop.
                queue.push_front(i);
                break;
            }
            let pod = pods[i];
            let mut profile = profiles[i].clone();
            let outcome = loop {
                match solver.place(pod, &profile, &pod_groups[i], &mut result) {
                    Ok(()) => break Ok(()),
                    Err(reasons) => {
                        if !profile.relax(pod, any_prefer_no_schedule) {
                            break Err((reasons, profile.relaxed.clone()));
                        }
                    }
                }
            };
            match outcome {
                Ok(()) => {
                    errors.remove(&i);
                    pushed_at.clear();
                }
                Err((reasons, relaxed)) => {
                    let why = if solver.contexts.is_empty() && not_launching.is_empty() {
                        if state.nodepools.is_empty() {
                            Unplaceable::NoNodePool
                        } else {
                            // A controller that has just started: EC2 is still being read.
                            Unplaceable::CatalogUnknown
                        }
                    } else {
                        let mut ruled_out = reasons;
                        ruled_out.extend(not_launching.iter().cloned());
                        Unplaceable::FitsNowhere {
                            requests: pod.requests.clone(),
                            ruled_out,
                            relaxed,
                        }
                    };
                    errors.insert(i, why);
                    queue.push_back(i);
                    pushed_at.insert(i, queue.len());
                }
            }
        }
        for (i, why) in errors {
            result.unschedulable.push((pods[i].key.clone(), why));
        }
        // A pod is placed once in a solve: by its key alone is the order it always had.
        result.unschedulable.sort_by(|a, b| a.0.cmp(&b.0));
        if config.separate_when_cheaper && removed.is_empty() {
            // What the pending pods are launched on; a disruption's simulation keeps the
            // machine it plans for the pods it moves.
            solver.separate_where_cheaper(&pods, &profiles);
        }
        result.new_claims = solver.planned.into_iter().map(|p| p.claim).collect();
        result
    }
}

/// The launch options of a planned machine.
pub fn launch_options(
    state: &ClusterState,
    claim: &PlannedClaim,
    now_ms: u64,
    max_types: usize,
) -> Vec<LaunchOption> {
    let Some(prepared) = state.catalog.as_deref() else {
        return Vec::new();
    };
    launch_offerings(state, claim, now_ms, max_types)
        .iter()
        .map(|o| o.option(prepared))
        .collect()
}

/// [`launch_options`] by position in the catalog.
pub fn launch_offerings(
    state: &ClusterState,
    claim: &PlannedClaim,
    now_ms: u64,
    max_types: usize,
) -> Vec<launch::OfferingAt> {
    let Some(prepared) = state.catalog.as_deref() else {
        return Vec::new();
    };
    launch::launch_offerings(
        state,
        prepared,
        &claim.types,
        &claim.requirements,
        &claim.min_values,
        now_ms,
        max_types,
    )
}
