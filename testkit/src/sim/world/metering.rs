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
        let meter = &mut self.cost_meter;
        for i in self.cloud.running() {
            let machine = self.machines.get(&i.nodeclaim);
            let node = machine
                .and_then(|m| m.node.as_ref())
                .and_then(|n| self.cluster.nodes.get(n))
                .filter(|n| n.node.ready && !n.node.has_taint(labels::SIBLING_HOLD_TAINT));
            let phase = match node {
                Some(n) => {
                    crate::sim::meter::Phase::of_node(n.workload_pods, &n.used, &n.node.allocatable)
                }
                None => crate::sim::meter::Phase::Booting,
            };
            let price = i.instance.price.0;
            meter.add(
                price,
                machine.map_or(price, |m| m.cheapest_price),
                phase,
                dt as u64,
            );
        }
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
        self.cpu_used_ms += sums[0] * dt;
        self.cpu_alloc_ms += sums[1] * dt;
        self.mem_used_ms += sums[2] * dt;
        self.mem_alloc_ms += sums[3] * dt;
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
