//! The clock and what is measured over it: cost and utilization integrated over each interval,
//! each pod's life as the cluster reports it.

use super::*;

impl World {
    /// Moves the clock, integrating cost and utilization over the interval.
    pub(crate) fn advance_to(&mut self, t_ms: u64) {
        if t_ms <= self.now_ms {
            return;
        }
        let dt = (t_ms - self.now_ms) as i128;
        self.cost_micro_usd_ms += self.cloud.price_now().0 as u128 * dt as u128;
        let rates = match self.meter_rates.take() {
            Some(rates) => {
                debug_assert_eq!(
                    rates,
                    self.meter_rates_now(),
                    "the world changed what it meters without forgetting its rates"
                );
                rates
            }
            None => self.meter_rates_now(),
        };
        for row in &rates.machines {
            self.cost_meter
                .add(row.price, row.cheapest, row.phase, dt as u64);
        }
        let sums = rates.sums;
        self.cpu_used_ms += sums[0] * dt;
        self.cpu_alloc_ms += sums[1] * dt;
        self.mem_used_ms += sums[2] * dt;
        self.mem_alloc_ms += sums[3] * dt;
        self.meter_rates = Some(rates);
        // The same, per step of the report's series.
        let series = &mut self.usage_series;
        Series::split(self.series_step_ms, self.now_ms, t_ms, |bucket, ms| {
            let Some(slot) = series.get_mut(bucket) else {
                return false;
            };
            for (total, sum) in slot.iter_mut().zip(sums) {
                *total += sum * ms as i128;
            }
            true
        });
        self.now_ms = t_ms;
    }

    /// What the clock's moving is metered by, read from the machines and nodes as they are.
    fn meter_rates_now(&self) -> MeterRates {
        debug_assert_eq!(
            self.meter_links.values().cloned().collect::<Vec<_>>(),
            self.meter_links_now(),
            "the world launched, ended or joined a machine without keeping its meter link"
        );
        let machines = self
            .meter_links
            .values()
            .map(|link| {
                let node = link
                    .node
                    .as_ref()
                    .and_then(|n| self.cluster.nodes.get(n))
                    .filter(|n| n.node.ready && !n.node.has_taint(labels::SIBLING_HOLD_TAINT));
                let phase = match node {
                    Some(n) => crate::sim::meter::Phase::of_node(
                        n.workload_pods,
                        &n.used,
                        &n.node.allocatable,
                    ),
                    None => crate::sim::meter::Phase::Booting,
                };
                MeteredMachine {
                    price: link.price,
                    cheapest: link.cheapest,
                    phase,
                }
            })
            .collect();
        // CPU and memory requested and allocatable on nodewright's nodes.
        let mut sums = [0i128; 4];
        for n in self
            .cluster
            .nodes
            .values()
            .filter(|n| n.nodeclaim.is_some())
        {
            sums[0] += n.used.cpu_milli as i128;
            sums[1] += n.node.allocatable.cpu_milli as i128;
            sums[2] += n.used.memory_bytes as i128;
            sums[3] += n.node.allocatable.memory_bytes as i128;
        }
        MeterRates { machines, sums }
    }

    /// [`World::meter_links`] read from the cloud and the machines as they are.
    fn meter_links_now(&self) -> Vec<MeterLink> {
        self.cloud
            .running()
            .map(|i| {
                let machine = self.machines.get(&i.nodeclaim);
                let price = i.instance.price.0;
                MeterLink {
                    price,
                    cheapest: machine.map_or(price, |m| m.cheapest_price),
                    node: machine.and_then(|m| m.node.clone()),
                }
            })
            .collect()
    }

    /// A machine's instance was launched: the meter links it at its price.
    pub(crate) fn meter_launched(
        &mut self,
        instance: &nodewright_core::model::nodeclaim::Instance,
        cheapest: u64,
    ) {
        self.meter_links.insert(
            instance.instance_id.clone(),
            MeterLink {
                price: instance.price.0,
                cheapest,
                node: None,
            },
        );
    }

    /// An instance's node joined the cluster as `node`.
    pub(crate) fn meter_joined(&mut self, instance_id: &str, node: &str) {
        if let Some(link) = self.meter_links.get_mut(instance_id) {
            link.node = Some(node.to_string());
        }
    }

    /// The instance `instance_id` ends: EC2 terminates it, and the meter stops counting it
    /// (from the rates read again after the world event or command that ended it).
    pub(crate) fn end_in_cloud(&mut self, instance_id: &str) {
        self.cloud.terminate(instance_id, self.now_ms);
        self.meter_links.remove(instance_id);
    }

    /// The world changed a machine, a node or a pod's place: what it meters is read again
    /// when the clock next moves.
    pub(crate) fn forget_meter_rates(&mut self) {
        self.meter_rates = None;
    }

    pub(crate) fn record_changes(&mut self) {
        for change in std::mem::take(&mut self.changes) {
            match change {
                PodChange::Created { pod, at_ms } => {
                    let spec = self.cluster.pods.get(&pod);
                    let job = spec
                        .and_then(|p| p.owner.as_ref())
                        .is_some_and(|o| o.kind == "Job");
                    let shape = spec
                        .filter(|spec| !spec.is_daemonset_pod())
                        .map(|spec| self.pod_shapes.intern(spec));
                    self.pods.insert(
                        pod,
                        PodRecord {
                            created_at_ms: at_ms,
                            shape,
                            job,
                            ..PodRecord::default()
                        },
                    );
                }
                PodChange::Bound { pod, node, at_ms } => {
                    if let Some(r) = self.pods.get_mut(&pod) {
                        r.bound_at_ms.get_or_insert(at_ms);
                        r.node = Some(node);
                    }
                    self.unschedulable.remove(&pod);
                }
                PodChange::Deleted {
                    pod,
                    at_ms,
                    evicted,
                } => {
                    if let Some(r) = self.pods.get_mut(&pod) {
                        r.deleted_at_ms = Some(at_ms);
                        if evicted {
                            r.evictions += 1;
                            self.disruptions.evictions += 1;
                        }
                    }
                    if let Some(reason) = self.unschedulable.remove(&pod) {
                        self.deleted_unschedulable.insert(pod, reason);
                    }
                }
            }
        }
        let running = self.cloud.running_count() as u64;
        self.peak_nodes = self.peak_nodes.max(running);
        self.peak_price = self.peak_price.max(self.cloud.price_now().0);
    }
}

/// What the clock's moving is metered by while the world stands still: each running machine's
/// price and phase, and the CPU and memory used and allocatable on nodewright's nodes. Kept
/// between steps that change nothing the meter reads (most steps are listings and ticks), so
/// they do not read every machine again.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MeterRates {
    /// The running machines, in instance id order (the order their costs are added in).
    machines: Vec<MeteredMachine>,
    /// CPU used, CPU allocatable, memory used, memory allocatable.
    sums: [i128; 4],
}

#[derive(Debug, Clone, PartialEq)]
struct MeteredMachine {
    price: u64,
    cheapest: u64,
    phase: crate::sim::meter::Phase,
}

/// A running machine as the meter reads it before its node: its price, its launch's cheapest
/// price, and its node's name once it joined. Kept by the world as machines launch, join and
/// end, so that metering does not look every machine up again.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MeterLink {
    price: u64,
    cheapest: u64,
    node: Option<String>,
}
