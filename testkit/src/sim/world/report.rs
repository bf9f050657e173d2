//! The run's report, built from the world at its end: pods, machines, cost and its split,
//! the lower bound, the series for plots, the expectations.

use super::*;
use crate::sim::meter::EvictedCapacity;

fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// [`crate::lower_bound`] over this run's pod timeline.
fn lower_bound(scenario: &Scenario, world: &World, core: &nodewright_core::Core) -> f64 {
    let Some(catalog) = core.state().catalog.as_deref() else {
        return 0.0;
    };
    let input = crate::lower_bound::BoundInput {
        catalog,
        settings: world.capacity_settings,
        nodepools: &world.seen_nodepools,
        nodeclasses: &world.seen_nodeclasses,
        existing: world.existing.clone(),
        min_latency_ms: scenario.cloud.launch_latency.min_ms
            + scenario.cloud.registration_latency.min_ms,
    };
    let end = world.now_ms;
    // A Job's pod evicted before its end did work that is done again: the Job's pod that runs
    // to the end carries the work, once.
    let spans = world
        .pods
        .values()
        .filter(|r| !redone(r))
        .filter_map(|record| {
            let pod = world.pod_shapes.get(record.shape?);
            let bound_at = record.bound_at_ms?;
            Some(crate::lower_bound::PodSpan {
                pod,
                // Not before this run placed it either: a pod that waited (limits, a capacity
                // shortage) costs this run nothing meanwhile, and stays on its node once placed.
                from_ms: (record.created_at_ms + input.min_latency_ms).max(bound_at),
                until_ms: record.deleted_at_ms.unwrap_or(end).min(end),
            })
        });
    crate::lower_bound::lower_bound_usd(&input, spans)
}

/// A Job's pod evicted before its end: the Job makes it again, and the work is done again.
fn redone(record: &PodRecord) -> bool {
    record.job && record.evictions > 0
}

/// What the capacity pods later evicted used cost while they ran (each such pod's dominant
/// share of its machine, CPU, memory or GPUs requested over allocatable, at the machine's
/// price): all of them, and the Jobs' pods among them, whose work is done again.
fn evicted_usd(world: &World, end: u64) -> EvictedCapacity {
    let machines: BTreeMap<&str, (u64, &nodewright_core::model::resources::Resources)> = world
        .machines
        .values()
        .filter_map(|m| {
            let instance = world.cloud.instance(m.instance_id.as_ref()?)?;
            Some((
                m.node.as_deref()?,
                (instance.instance.price.0, m.allocatable.as_ref()?),
            ))
        })
        .collect();
    let mut evicted = EvictedCapacity::default();
    for r in world.pods.values().filter(|r| r.evictions > 0) {
        let (Some(shape), Some(bound), Some(node)) = (r.shape, r.bound_at_ms, r.node.as_deref())
        else {
            continue;
        };
        let Some((price, alloc)) = machines.get(node) else {
            continue;
        };
        let dominant = world
            .pod_shapes
            .get(shape)
            .requests
            .dominant_share_of(alloc);
        let ran = r
            .deleted_at_ms
            .unwrap_or(end)
            .min(end)
            .saturating_sub(bound);
        let usd = *price as f64 * ran as f64 * dominant / 1e6 / 3.6e6;
        evicted.all_usd += usd;
        if redone(r) {
            evicted.redone_usd += usd;
        }
    }
    evicted
}

/// The run's report; `counts` are the driver's events and commands.
pub(crate) fn build_report(
    scenario: &Scenario,
    world: &World,
    core: &nodewright_core::Core,
    counts: (u64, u64),
    digest: &DecisionDigest,
    invariant_violations: Vec<Violation>,
) -> Report {
    let end = scenario.duration_ms;
    let mut pending: Vec<f64> = Vec::new();
    let mut placements = Vec::new();
    let mut scheduled = 0;
    let mut bound_ms: u64 = 0;
    // Each node's machine, the first by NodeClaim name should a node name come back.
    let mut claim_of_node: BTreeMap<&str, &str> = BTreeMap::new();
    for (claim, m) in &world.machines {
        if let Some(node) = &m.node {
            claim_of_node.entry(node.as_str()).or_insert(claim.as_str());
        }
    }
    for (key, r) in &world.pods {
        if let Some(bound) = r.bound_at_ms {
            scheduled += 1;
            pending.push(secs(bound - r.created_at_ms));
            let until = r.deleted_at_ms.unwrap_or(end).min(end);
            bound_ms += until.saturating_sub(bound);
        }
        // A machine nodewright launched is named by its NodeClaim; other nodes by their name.
        let node = r.node.as_ref().map(|n| {
            claim_of_node
                .get(n.as_str())
                .map_or_else(|| n.clone(), |claim| claim.to_string())
        });
        placements.push(PodPlacement {
            pod: key.to_string(),
            node,
            created_at_seconds: secs(r.created_at_ms),
            bound_at_seconds: r.bound_at_ms.map(secs),
            evictions: r.evictions,
        });
    }
    let unschedulable: Vec<Unschedulable> = world
        .pods
        .iter()
        .filter(|(_, r)| r.deleted_at_ms.is_none() && r.bound_at_ms.is_none())
        .map(|(key, _)| Unschedulable {
            pod: key.to_string(),
            reason: world
                .unschedulable
                .get(key)
                .cloned()
                .unwrap_or_else(|| "still waiting for a machine to become ready".to_string()),
        })
        .collect();
    let deleted_unschedulable: Vec<Unschedulable> = world
        .deleted_unschedulable
        .iter()
        .map(|(key, reason)| Unschedulable {
            pod: key.to_string(),
            reason: reason.clone(),
        })
        .collect();
    let machines: Vec<MachineReport> = world
        .machines
        .iter()
        .filter_map(|(name, m)| {
            let id = m.instance_id.as_ref()?;
            let instance = world.cloud.instance(id)?;
            Some(MachineReport {
                name: name.clone(),
                nodepool: m.spec.nodepool.clone(),
                instance_type: instance.instance.instance_type.clone(),
                zone: instance.instance.zone.clone(),
                capacity_type: instance.instance.capacity_type.as_str().to_string(),
                price_usd_per_hour: instance.instance.price.usd_per_hour(),
                launched_at_seconds: secs(instance.launched_at_ms),
                terminated_at_seconds: instance.terminated_at_ms.map(secs),
                launch_reason: m.launch_reason.clone(),
                termination_reason: m
                    .termination
                    .as_ref()
                    .map(|(reason, detail)| format!("{reason}: {detail}")),
            })
        })
        .collect();
    let launched = machines.len() as u64;
    let terminated = machines
        .iter()
        .filter(|m| m.terminated_at_seconds.is_some())
        .count() as u64;
    let ratio = |used: i128, alloc: i128| {
        if alloc > 0 {
            used as f64 / alloc as f64
        } else {
            0.0
        }
    };
    let mut report = Report {
        scenario: scenario.name.clone(),
        seed: scenario.seed,
        events: counts.0,
        commands: counts.1,
        decision_digest: digest.hex(),
        duration_seconds: secs(end),
        pods: PodsReport {
            total: world.pods.len() as u64,
            scheduled,
            never_scheduled: world.pods.len() as u64 - scheduled,
            missing_requests: world.missing_requests,
            pending_seconds: Percentiles::of(&mut pending),
            scheduled_pod_hours: bound_ms as f64 / 3_600_000.0,
        },
        nodes: NodesReport {
            launched,
            terminated,
            peak: world.peak_nodes,
            final_count: launched - terminated,
        },
        cost: CostReport {
            total_usd: world.cost_micro_usd_ms as f64 / 1e6 / 3.6e6,
            final_usd_per_hour: world.cloud.price_now().usd_per_hour(),
            peak_usd_per_hour: world.peak_price as f64 / 1e6,
            lower_bound_usd: 0.0,
            above_bound: Default::default(),
        },
        utilization: UtilizationReport {
            cpu_mean: ratio(world.cpu_used_ms, world.cpu_alloc_ms),
            memory_mean: ratio(world.mem_used_ms, world.mem_alloc_ms),
        },
        disruptions: DisruptionsReport {
            refused_evictions: world.refused_evictions,
            ..world.disruptions.clone()
        },
        invariant_violations,
        expectations: Vec::new(),
        machines,
        pod_placements: placements,
        unschedulable,
        deleted_unschedulable,
        unmodelled_fields: scenario
            .unmodelled
            .iter()
            .map(crate::report::UnmodelledFieldReport::of)
            .collect(),
        series: Series::default(),
    };
    report.cost.lower_bound_usd = lower_bound(scenario, world, core);
    report.cost.above_bound = world.cost_meter.split(
        report.cost.total_usd,
        report.cost.lower_bound_usd,
        evicted_usd(world, end),
    );
    report.series = series(world, end);
    let pod_times: Vec<(String, u64, Option<u64>, Option<u64>)> = world
        .pods
        .iter()
        .map(|(k, r)| {
            (
                k.to_string(),
                r.created_at_ms,
                r.bound_at_ms,
                r.deleted_at_ms,
            )
        })
        .collect();
    let breaches = if scenario
        .expectations
        .iter()
        .any(|e| matches!(e, crate::scenario::Expectation::PlacementHonoured))
    {
        world.cluster.placement_breaches()
    } else {
        Vec::new()
    };
    report.expectations =
        crate::expect::evaluate(&scenario.expectations, &report, &pod_times, &breaches, end);
    report
}

/// The report's series: machines and their cost from the cloud's instances, pending pods from
/// the pod records, utilisation from what the clock integrated.
fn series(world: &World, end_ms: u64) -> Series {
    let step = world.series_step_ms;
    let points = world.usage_series.len();
    let instances = || {
        world.cloud.instances().map(|i| {
            (
                i.launched_at_ms,
                i.terminated_at_ms.unwrap_or(end_ms).min(end_ms),
                i.instance.price.usd_per_hour(),
            )
        })
    };
    let pending = world.pods.values().filter_map(|r| {
        // A DaemonSet pod (no shape) waits for its own node, not for a machine.
        r.shape?;
        let until = r
            .bound_at_ms
            .or(r.deleted_at_ms)
            .unwrap_or(end_ms)
            .min(end_ms);
        Some((r.created_at_ms, until, 1.0))
    });
    let ratio = |used: usize, alloc: usize| -> Vec<f64> {
        world
            .usage_series
            .iter()
            .map(|s| {
                if s[alloc] > 0 {
                    s[used] as f64 / s[alloc] as f64
                } else {
                    0.0
                }
            })
            .collect()
    };
    Series {
        step_seconds: secs(step),
        machines: Series::weighted(step, points, instances().map(|(a, b, _)| (a, b, 1.0))),
        usd_per_hour: Series::weighted(step, points, instances()),
        pending_pods: Series::weighted(step, points, pending),
        cpu_utilization: ratio(0, 1),
        memory_utilization: ratio(2, 3),
    }
}
