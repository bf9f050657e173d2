//! `lower_bound_usd`: a cost no autoscaler can beat on the same pod timeline. The argument is in
//! `docs/lower-bound.md`; in short:
//!
//! - Resources are CPU, memory and NVIDIA GPUs.
//! - A pod `p` may run on instance type `t` only if some NodePool (any version the run saw)
//!   allows `t` for it: the pod tolerates the pool's taints, one of its node-affinity
//!   alternatives is compatible with the pool's template and `t`'s labels, `t` has an offering
//!   in a zone and capacity type both allow, and `t`'s allocatable holds the pod's requests.
//!   `best_p[r]` is the cheapest price per allocatable unit of resource `r` over those types
//!   and offerings (for GPUs, 0 when the pod asks for none).
//! - An instance of type `t` at price `c` hosting pods `P` costs, per hour, at least
//!   `Σ_{p∈P} best_p[r] · req_p[r]` for each `r`, since `c / alloc_t[r] ≥ best_p[r]` for every
//!   `p` on it and `Σ req_p[r] ≤ alloc_t[r]`. Summed over instances, any placement of the pods
//!   alive at a moment costs at least `max_r Σ_p best_p[r] · req_p[r]` per hour.
//! - Capacity nodewright does not pay for (nodes that existed before) can hold at most their
//!   allocatable `E[r]` of resource `r`, worth at most `E[r] · max_p best_p[r]`; that is taken off.
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

/// USD per hour per milli-CPU, per byte and per NVIDIA GPU (0 for a pod without GPUs).
#[derive(Debug, Clone, Copy, PartialEq)]
struct UnitPrice {
    cpu: f64,
    memory: f64,
    gpu: f64,
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
    // Pods alike (same constraints and requests) share their unit prices.
    let mut cache: BTreeMap<String, Option<UnitPrice>> = BTreeMap::new();
    // (time, cpu, memory and GPU contributions: + at the start, - at the end), for the sweep.
    let mut steps: Vec<(u64, [f64; 3])> = Vec::new();
    let mut max_unit = UnitPrice {
        cpu: 0.0,
        memory: 0.0,
        gpu: 0.0,
    };
    for span in spans {
        if span.from_ms >= span.until_ms {
            continue;
        }
        let pod = span.pod;
        let unit = *cache
            .entry(shape_key(pod))
            .or_insert_with(|| best_unit_price(input, &resources, pod));
        let Some(unit) = unit else {
            continue;
        };
        max_unit.cpu = max_unit.cpu.max(unit.cpu);
        max_unit.memory = max_unit.memory.max(unit.memory);
        max_unit.gpu = max_unit.gpu.max(unit.gpu);
        let share = [
            unit.cpu * pod.requests.cpu_milli as f64,
            unit.memory * pod.requests.memory_bytes as f64,
            unit.gpu * gpus(&pod.requests) as f64,
        ];
        steps.push((span.from_ms, share));
        steps.push((span.until_ms, share.map(|x| -x)));
    }
    // In time order; at one moment the order does not matter (no time passes between them).
    steps.sort_by_key(|s| s.0);
    let free = [
        input.existing.cpu_milli as f64 * max_unit.cpu,
        input.existing.memory_bytes as f64 * max_unit.memory,
        gpus(&input.existing) as f64 * max_unit.gpu,
    ];
    let mut demand = [0.0f64; 3];
    let mut usd = 0.0f64;
    let mut last_ms = 0u64;
    for (at_ms, delta) in steps {
        let rate = (0..3).map(|r| demand[r] - free[r]).fold(0.0f64, f64::max);
        usd += rate * (at_ms - last_ms) as f64 / 3_600_000.0;
        last_ms = at_ms;
        for r in 0..3 {
            demand[r] += delta[r];
        }
    }
    usd
}

fn gpus(resources: &Resources) -> i64 {
    resources.extended.get(NVIDIA_GPU).copied().unwrap_or(0)
}

/// The cheapest price per unit of CPU, memory and GPU over every offering that may host `pod`;
/// none when nothing may.
fn best_unit_price(
    input: &BoundInput,
    resources: &[(String, Vec<NodeResources>)],
    pod: &Pod,
) -> Option<UnitPrice> {
    let catalog = input.catalog;
    let mut best: Option<UnitPrice> = None;
    let alternatives = pod.requirement_alternatives();
    for pool in input.nodepools {
        if first_untolerated(&pool.taints, &pod.tolerations).is_some() {
            continue;
        }
        let template = pool.template_requirements();
        for (class, by_type) in resources {
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
                    let allocatable = &by_type[t].allocatable;
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
                    let usd = price.usd_per_hour();
                    let gpu_count = gpus(allocatable);
                    let unit = UnitPrice {
                        cpu: usd / allocatable.cpu_milli as f64,
                        memory: usd / allocatable.memory_bytes as f64,
                        // Only a pod that asks for GPUs is charged for them, on types that
                        // have them (it fits nowhere else).
                        gpu: if gpu_count > 0 && gpus(&pod.requests) > 0 {
                            usd / gpu_count as f64
                        } else {
                            0.0
                        },
                    };
                    best = Some(match best {
                        None => unit,
                        Some(b) => UnitPrice {
                            cpu: b.cpu.min(unit.cpu),
                            memory: b.memory.min(unit.memory),
                            gpu: b.gpu.min(unit.gpu),
                        },
                    });
                }
            }
        }
    }
    best
}
