//! `lower_bound_usd`: a cost no autoscaler can beat on the same pod timeline. The argument is in
//! `docs/lower-bound.md`; in short:
//!
//! - Resources are CPU, memory and NVIDIA GPUs.
//! - A pod `p` may run on instance type `t` only if some NodePool (any version the run saw)
//!   allows `t` for it: the pod tolerates the pool's taints, one of its node-affinity
//!   alternatives is compatible with the pool's template and `t`'s labels, `t` has an offering
//!   in a zone and capacity type both allow, and `t`'s allocatable holds the pod's requests.
//!   `c_p(t)` is the cheapest such offering's price.
//! - Prices by the unit: give each type `t` per-unit prices `μ_t ≥ 0` with
//!   `μ_t · alloc_t = c(t)`, and let a pod pay `π_p = min_t μ_t · req_p` over the types it may
//!   run on. An instance of `t` at price `c ≥ c_p(t)` hosting pods `P` costs at least
//!   `Σ_{p∈P} π_p`, since `Σ req_p ≤ alloc_t` (a dual solution of the packing LP). The
//!   weights searched spread a type's price over its resources in the same proportions for
//!   every type of a kind (with GPUs, without), on a grid; all on one resource is the
//!   per-resource bound.
//! - Whole machines: the machines running at a moment cost at least the cheapest machine that
//!   holds the hardest live pod to house; pods that ask for GPUs, in groups that share no type,
//!   need their group's machine each, which pods without GPUs can fill but not avoid.
//! - Every placement, while few pods are alive: the machines running at a moment cost at least
//!   the cheapest way to put the pods alive then, each whole, on machines of types they may run
//!   on; `packing` finds it exactly while the search is small (at every moment of the openb
//!   trace), and the bounds above stand alone where it gives up.
//! - Capacity nodewright does not pay for (nodes that existed before) can hold at most their
//!   allocatable `E`, worth at most `E · ν` with `ν` the dearest per-unit prices any pod paid;
//!   that is taken off, and whole machines (and placements) are not counted then.
//! - A pod counts from `L` after its creation, `L` the fastest launch plus registration of the
//!   simulated cloud (no new machine can serve it sooner), until its deletion or the end of the
//!   run, and only if the run ever placed it (a pod nothing can place adds no cost to anyone).
//!
//! Integrating the per-hour bound over time gives a cost every autoscaler that serves each pod
//! within `L` of its creation pays at least. DaemonSet pods are left out (that only lowers it).

use std::collections::BTreeMap;

use nodewright_core::catalog::{CapacitySettings, NodeResources};
use nodewright_core::model::nodeclass::NodeClass;
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::pod::Pod;
use nodewright_core::model::resources::{NVIDIA_GPU, Resources};
use nodewright_core::model::taints::first_untolerated;
use nodewright_core::provisioning::launch::OfferingFilter;
use nodewright_core::state::PreparedCatalog;

use packing::{PackedShape, Packing};

mod packing;

/// What the bound is computed over.
pub struct BoundInput<'a> {
    pub catalog: &'a PreparedCatalog,
    pub settings: CapacitySettings,
    /// Every NodePool version the run saw.
    pub nodepools: &'a [NodePool],
    /// Every EC2NodeClass version the run saw.
    pub nodeclasses: &'a [NodeClass],
    /// Allocatable of the capacity that existed before (not nodewright's to pay for).
    pub existing: Resources,
    /// The fastest a new machine can serve a pod.
    pub min_latency_ms: u64,
}

/// The distinct pod shapes of a run, for [`PodSpan::pod`]: pods alike in what the bound reads
/// (requirements, tolerations, requests) share one copy, so a run of many thousands of pods
/// keeps a handful.
#[derive(Debug, Clone, Default)]
pub struct PodShapes {
    pods: Vec<Pod>,
    index: BTreeMap<String, usize>,
}

impl PodShapes {
    /// The index of `pod`'s shape, added when new.
    pub fn intern(&mut self, pod: &Pod) -> usize {
        let next = self.pods.len();
        let at = *self.index.entry(shape_key(pod)).or_insert(next);
        if at == next {
            self.pods.push(pod.clone());
        }
        at
    }

    /// The pod that stands for shape `index`.
    ///
    /// Panics when `index` did not come from [`PodShapes::intern`] on this set.
    pub fn get(&self, index: usize) -> &Pod {
        &self.pods[index]
    }
}

/// What the bound reads of a pod, as one comparable string.
fn shape_key(pod: &Pod) -> String {
    format!(
        "{:?}|{:?}|{:?}",
        pod.requirement_alternatives(),
        pod.tolerations,
        pod.requests
    )
}

/// One pod's stretch of the timeline: it counts over `from_ms..until_ms`.
pub struct PodSpan<'a> {
    pub pod: &'a Pod,
    pub from_ms: u64,
    pub until_ms: u64,
}

/// Milli-CPU, memory bytes and NVIDIA GPUs: the resources the bound prices, in this order.
const RESOURCES: usize = 3;
const GPU: usize = 2;

/// How finely the resource weights are searched: steps of `1 / WEIGHT_STEPS`.
const WEIGHT_STEPS: usize = 10;

/// One instance type a pod may run on: the cheapest offering of it some NodePool allows the pod,
/// and its allocatable (milli-CPU, bytes, GPUs) — the largest of each resource under any
/// EC2NodeClass (version) a NodePool that allows the pod the type names, so that no machine of
/// the type is priced below it or holds more.
#[derive(Debug, Clone, Copy)]
struct Host {
    usd: f64,
    allocatable: [f64; RESOURCES],
}

impl Host {
    /// USD per hour per unit of each resource the type has, if the whole price were that
    /// resource's.
    fn unit_prices(&self) -> [f64; RESOURCES] {
        self.allocatable
            .map(|a| if a > 0.0 { self.usd / a } else { f64::INFINITY })
    }

    fn has_gpus(&self) -> bool {
        self.allocatable[GPU] > 0.0
    }

    /// The per-unit prices `μ` under `weights`: the price spread over the type's resources in
    /// the proportions of the weights of its kind (with GPUs or without), so that
    /// `μ · allocatable` is exactly the price.
    fn prices_under(&self, weights: &Weights) -> [f64; RESOURCES] {
        // A host has CPU and memory (`hosts_of` keeps no other), and a kind's weights sum to 1
        // over the resources its types have: GPUs only for the kind with GPUs.
        let w = if self.has_gpus() {
            weights.with_gpus
        } else {
            weights.without_gpus
        };
        debug_assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{w:?}");
        let mut mu = [0.0; RESOURCES];
        for r in 0..RESOURCES {
            if w[r] > 0.0 {
                mu[r] = self.usd * w[r] / self.allocatable[r];
            }
        }
        mu
    }
}

/// One way to price resources by the unit: weights over CPU, memory and GPUs for instance
/// types with GPUs, and over CPU and memory for types without.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Weights {
    without_gpus: [f64; RESOURCES],
    with_gpus: [f64; RESOURCES],
}

/// Every weighting on a grid of `1 / WEIGHT_STEPS`: the vertices (all on one resource, the
/// per-resource bound) and every mix between them.
fn weight_grid() -> Vec<Weights> {
    let n = WEIGHT_STEPS;
    let step = 1.0 / n as f64;
    let without: Vec<[f64; RESOURCES]> = (0..=n)
        .map(|c| [c as f64 * step, (n - c) as f64 * step, 0.0])
        .collect();
    let mut with = Vec::new();
    for c in 0..=n {
        for m in 0..=n - c {
            with.push([c as f64 * step, m as f64 * step, (n - c - m) as f64 * step]);
        }
    }
    let mut grid = Vec::with_capacity(without.len() * with.len());
    for &without_gpus in &without {
        for &with_gpus in &with {
            grid.push(Weights {
                without_gpus,
                with_gpus,
            });
        }
    }
    grid
}

/// What the bound knows of a pod shape: what it pays under each weighting of the grid (the
/// cheapest of `μ · requests` over the types it may run on) and the per-unit prices `μ` of that
/// type; the cheapest single machine that holds it; the types it may run on (by position in the
/// catalog) and its requests.
struct PricedShape {
    price: Vec<f64>,
    unit: Vec<[f64; RESOURCES]>,
    cheapest_machine: f64,
    hosts: Vec<(usize, Host)>,
    requests: [f64; RESOURCES],
}

impl PricedShape {
    fn new(hosts: &[(usize, Host)], requests: [f64; RESOURCES], grid: &[Weights]) -> PricedShape {
        let cheapest_machine = hosts.iter().map(|h| h.1.usd).fold(f64::INFINITY, f64::min);
        let undominated = undominated(hosts.iter().map(|h| h.1).collect());
        let mut price = Vec::with_capacity(grid.len());
        let mut unit = Vec::with_capacity(grid.len());
        for weights in grid {
            let mut best = (f64::INFINITY, [0.0; RESOURCES]);
            for host in &undominated {
                let mu = host.prices_under(weights);
                let pays: f64 = (0..RESOURCES).map(|r| mu[r] * requests[r]).sum();
                if pays < best.0 {
                    best = (pays, mu);
                }
            }
            price.push(best.0);
            unit.push(best.1);
        }
        PricedShape {
            price,
            unit,
            cheapest_machine,
            hosts: hosts.to_vec(),
            requests,
        }
    }

    fn asks_gpus(&self) -> bool {
        self.requests[GPU] > 0.0
    }

    /// The types it may run on when it asks for GPUs (to tell which pods compete for the same
    /// machines); none when it does not.
    fn gpu_types(&self) -> impl Iterator<Item = usize> + '_ {
        self.hosts
            .iter()
            .filter(|_| self.asks_gpus())
            .map(|(t, _)| *t)
    }
}

/// Puts the shapes that ask for GPUs into groups that share no instance type: two shapes that
/// may run on a common type are in one group. Group 0 is every shape without GPUs; the others
/// are numbered from 1 in the order of their first shape. Returns each shape's group and the
/// number of groups.
fn gpu_groups(shapes: &[PricedShape]) -> (Vec<usize>, usize) {
    // Union-find over the shapes, joined through the first shape seen on each type.
    let mut parent: Vec<usize> = (0..shapes.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut first_on_type: BTreeMap<usize, usize> = BTreeMap::new();
    for (s, shape) in shapes.iter().enumerate() {
        for t in shape.gpu_types() {
            let other = *first_on_type.entry(t).or_insert(s);
            let (a, b) = (root(&mut parent, s), root(&mut parent, other));
            parent[a.max(b)] = a.min(b);
        }
    }
    let mut number: BTreeMap<usize, usize> = BTreeMap::new();
    let mut group = Vec::with_capacity(shapes.len());
    for (s, shape) in shapes.iter().enumerate() {
        if !shape.asks_gpus() {
            group.push(0);
            continue;
        }
        let r = root(&mut parent, s);
        let next = number.len() + 1;
        group.push(*number.entry(r).or_insert(next));
    }
    (group, number.len() + 1)
}

/// The lower bound in USD over the spans.
pub fn lower_bound_usd<'a>(input: &BoundInput, spans: impl Iterator<Item = PodSpan<'a>>) -> f64 {
    let resources: Vec<(String, Vec<NodeResources>)> = input
        .nodeclasses
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                input
                    .catalog
                    .node_resources(c, &input.settings)
                    .resources
                    .clone(),
            )
        })
        .collect();
    let grid = weight_grid();
    // Pods alike (same constraints and requests) share their prices: a shape's index in
    // `priced`, or none when nothing may host it.
    let mut shapes: BTreeMap<String, Option<usize>> = BTreeMap::new();
    let mut priced: Vec<PricedShape> = Vec::new();
    // (time, shape, +1 at the start or -1 at the end), for the sweep.
    let mut steps: Vec<(u64, usize, i32)> = Vec::new();
    for span in spans {
        if span.from_ms >= span.until_ms {
            continue;
        }
        let pod = span.pod;
        let key = shape_key(pod);
        let at = match shapes.get(&key) {
            Some(at) => *at,
            None => {
                let hosts = hosts_of(input, &resources, pod);
                let at = (!hosts.is_empty()).then(|| {
                    priced.push(PricedShape::new(&hosts, amounts(&pod.requests), &grid));
                    priced.len() - 1
                });
                shapes.insert(key, at);
                at
            }
        };
        let Some(at) = at else {
            continue;
        };
        steps.push((span.from_ms, at, 1));
        steps.push((span.until_ms, at, -1));
    }
    // In time order; at one moment the order does not matter (no time passes between them).
    steps.sort_by_key(|s| s.0);
    // What the capacity that existed before may hold is worth at most its allocatable at the
    // dearest per-unit prices any pod was priced at.
    let existing = amounts(&input.existing);
    let free: Vec<f64> = (0..grid.len())
        .map(|g| {
            (0..RESOURCES)
                .map(|r| {
                    let dearest = priced.iter().map(|s| s.unit[g][r]).fold(0.0, f64::max);
                    existing[r] * dearest
                })
                .sum()
        })
        .collect();
    // Pods run on whole machines: a group of pods that ask for GPUs needs at least the cheapest
    // machine of its types that holds the hardest of them to house, and all pods together at
    // least the one for the hardest of all. That holds only where no capacity that existed
    // before could take that pod instead.
    let whole_machines = existing == [0.0; RESOURCES];
    let (group, groups) = gpu_groups(&priced);
    // The exact placement of the live pods on whole machines, while it is quick to find.
    let (mut packing, class) = if whole_machines {
        let shapes: Vec<PackedShape> = priced
            .iter()
            .map(|s| PackedShape {
                requests: s.requests,
                hosts: &s.hosts,
            })
            .collect();
        let (packing, class) = Packing::new(&shapes);
        (Some(packing), class)
    } else {
        (None, Vec::new())
    };
    let mut packed = 0.0f64;
    let mut changed = false;
    let mut alive = vec![0u32; priced.len()];
    // Per group, what its pods pay under each weighting.
    let mut demand = vec![vec![0.0f64; grid.len()]; groups];
    let mut usd = 0.0f64;
    let mut last_ms = 0u64;
    for (at_ms, shape, sign) in steps {
        if at_ms > last_ms {
            // Per group, its hardest pod's machine; group 0 (without GPUs) gets none, as its
            // pods may sit on any machine. And what whole machines cost at least: the hardest
            // pod's alone, or the live pods' exact placement where it was found.
            let mut machines = vec![0.0f64; groups];
            let mut whole = 0.0f64;
            if whole_machines {
                for (s, shape) in priced.iter().enumerate() {
                    if alive[s] > 0 {
                        whole = whole.max(shape.cheapest_machine);
                        if group[s] > 0 {
                            machines[group[s]] = machines[group[s]].max(shape.cheapest_machine);
                        }
                    }
                }
                if std::mem::take(&mut changed) {
                    packed = packing
                        .as_mut()
                        .and_then(Packing::cheapest_now)
                        .unwrap_or(0.0);
                }
                whole = whole.max(packed);
            }
            let rate = (0..grid.len())
                .map(|g| rate_under(&demand, &machines, g) - free[g])
                .fold(whole, f64::max);
            usd += rate * (at_ms - last_ms) as f64 / 3_600_000.0;
            last_ms = at_ms;
        }
        let count = &mut alive[shape];
        *count = count.saturating_add_signed(sign);
        if let Some(packing) = packing.as_mut() {
            packing.count(class[shape], sign);
            changed = true;
        }
        for (d, p) in demand[group[shape]].iter_mut().zip(&priced[shape].price) {
            *d += f64::from(sign) * p;
        }
    }
    usd
}

/// The hourly rate under weighting `g`: every pod at its price, and where a group of GPU pods
/// pays less than the machine it needs, the difference — unless pods without GPUs could fill it.
///
/// The machines of a group's types cost at least the greater of that machine and what the pods
/// on them pay. Pods without GPUs may sit in a group's machines; the most they can save is
/// what they would pay, and they save it only by filling a group's shortfall, so the cost is at
/// least `Σ_k A_k + max(Σ_k max(0, M_k − A_k), C)`, with `A_k` what group `k`'s pods pay, `M_k`
/// its machine and `C` what the pods without GPUs pay.
fn rate_under(demand: &[Vec<f64>], machines: &[f64], g: usize) -> f64 {
    let without_gpus = demand[0][g];
    let mut with_gpus = 0.0;
    let mut shortfall = 0.0;
    for k in 1..demand.len() {
        with_gpus += demand[k][g];
        shortfall += (machines[k] - demand[k][g]).max(0.0);
    }
    with_gpus + shortfall.max(without_gpus)
}

/// Milli-CPU, bytes and GPUs of `resources`, as the bound prices them.
fn amounts(resources: &Resources) -> [f64; RESOURCES] {
    [
        resources.cpu_milli as f64,
        resources.memory_bytes as f64,
        gpus(resources) as f64,
    ]
}

fn gpus(resources: &Resources) -> i64 {
    resources.extended.get(NVIDIA_GPU).copied().unwrap_or(0)
}

/// Every instance type some NodePool may put `pod` on (by position in the catalog), at the
/// cheapest offering allowed.
fn hosts_of(
    input: &BoundInput,
    resources: &[(String, Vec<NodeResources>)],
    pod: &Pod,
) -> Vec<(usize, Host)> {
    let catalog = input.catalog;
    // By type position: its cheapest allowed price and its allocatable.
    let mut by_type: BTreeMap<usize, Host> = BTreeMap::new();
    let alternatives = pod.requirement_alternatives();
    for pool in input.nodepools {
        if first_untolerated(&pool.taints, &pod.tolerations).is_some() {
            continue;
        }
        let template = pool.template_requirements();
        for (class, class_types) in resources {
            if *class != pool.node_class_ref.name {
                continue;
            }
            for alternative in &alternatives {
                if !template.admits(alternative) {
                    continue;
                }
                let combined = template.intersect(alternative);
                let filter = OfferingFilter::new(&combined);
                for (t, it) in catalog.catalog.instance_types.iter().enumerate() {
                    let allocatable = &class_types[t].allocatable;
                    if !pod.requests.fits_in(allocatable)
                        || allocatable.cpu_milli <= 0
                        || allocatable.memory_bytes <= 0
                        || !catalog.requirements()[t].meets(&combined)
                    {
                        continue;
                    }
                    let Some(price) = it
                        .offerings
                        .iter()
                        .filter(|o| filter.allows(&o.zone, o.capacity_type.as_str()))
                        .map(|o| o.price)
                        .min()
                    else {
                        continue;
                    };
                    let host = Host {
                        usd: price.usd_per_hour(),
                        allocatable: amounts(allocatable),
                    };
                    by_type
                        .entry(t)
                        .and_modify(|h| {
                            // The same type under another pool or class: the cheaper price and
                            // the larger allocatable of each resource, so that no machine of
                            // the type is priced above it nor holds more than it.
                            h.usd = h.usd.min(host.usd);
                            for (most, a) in h.allocatable.iter_mut().zip(host.allocatable) {
                                *most = most.max(a);
                            }
                        })
                        .or_insert(host);
                }
            }
        }
    }
    by_type.into_iter().collect()
}

/// `hosts` less every one another of its kind (with GPUs or without) prices no lower on any
/// resource: under any weights the other prices every pod at most as high.
fn undominated(mut hosts: Vec<Host>) -> Vec<Host> {
    // Lexicographic by per-unit prices: a host can only be matched or beaten by one before it.
    hosts.sort_by(|a, b| {
        let (a, b) = (a.unit_prices(), b.unit_prices());
        (0..RESOURCES)
            .map(|r| a[r].total_cmp(&b[r]))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut kept: Vec<Host> = Vec::new();
    for host in hosts {
        let unit = host.unit_prices();
        let beaten = kept.iter().any(|k| {
            let k_unit = k.unit_prices();
            k.has_gpus() == host.has_gpus() && (0..RESOURCES).all(|r| k_unit[r] <= unit[r])
        });
        if !beaten {
            kept.push(host);
        }
    }
    kept
}
