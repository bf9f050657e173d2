//! The run report (contract keys in `docs/scenarios.md`), and its text summary.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    pub scenario: String,
    pub seed: u64,
    pub events: u64,
    pub commands: u64,
    pub decision_digest: String,
    pub duration_seconds: f64,
    pub pods: PodsReport,
    pub nodes: NodesReport,
    pub cost: CostReport,
    pub utilization: UtilizationReport,
    pub disruptions: DisruptionsReport,
    pub invariant_violations: Vec<Violation>,
    pub expectations: Vec<ExpectationResult>,
    pub machines: Vec<MachineReport>,
    pub pod_placements: Vec<PodPlacement>,
    pub unschedulable: Vec<Unschedulable>,
    /// Pods deleted while unschedulable (a scale-down, a finished trace pod): never scheduled,
    /// with the reason they were given.
    pub deleted_unschedulable: Vec<Unschedulable>,
    /// Fields of the scenario's NodePools and EC2NodeClasses the simulation accepted but did
    /// not model (each said once at load).
    pub unmodelled_fields: Vec<UnmodelledFieldReport>,
    /// The run over time, for plots.
    pub series: Series,
}

/// The run over time: each list holds one time-weighted mean per step of `step_seconds`, from
/// the start of the run.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Series {
    pub step_seconds: f64,
    /// Machines nodewright launched, running.
    pub machines: Vec<f64>,
    /// What they cost, per hour.
    pub usd_per_hour: Vec<f64>,
    /// Workload pods waiting for a node.
    pub pending_pods: Vec<f64>,
    /// Requests over allocatable on nodewright's nodes.
    pub cpu_utilization: Vec<f64>,
    pub memory_utilization: Vec<f64>,
}

/// How many points each series has.
pub const SERIES_POINTS: u64 = 240;

impl Series {
    /// The step for a run of `duration_ms`: at least a second.
    pub fn step_ms(duration_ms: u64) -> u64 {
        duration_ms.div_ceil(SERIES_POINTS).max(1_000)
    }

    /// Time-weighted means per step of `weight` over the intervals `[from_ms, to_ms)`.
    pub fn weighted(
        step_ms: u64,
        points: usize,
        intervals: impl Iterator<Item = (u64, u64, f64)>,
    ) -> Vec<f64> {
        let mut out = vec![0.0; points];
        for (from, to, weight) in intervals {
            Self::split(step_ms, from, to, |bucket, ms| match out.get_mut(bucket) {
                Some(slot) => {
                    *slot += weight * ms as f64 / step_ms as f64;
                    true
                }
                None => false,
            });
        }
        out
    }

    /// Cuts `[from_ms, to_ms)` at the steps: `each(step index, ms in it)`, until it says false.
    pub fn split(step_ms: u64, from_ms: u64, to_ms: u64, mut each: impl FnMut(usize, u64) -> bool) {
        let mut at = from_ms;
        while at < to_ms {
            let bucket = at / step_ms;
            let end = ((bucket + 1) * step_ms).min(to_ms);
            if !each(bucket as usize, end - at) {
                return;
            }
            at = end;
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PodsReport {
    pub total: u64,
    pub scheduled: u64,
    pub never_scheduled: u64,
    pub missing_requests: u64,
    pub pending_seconds: Percentiles,
    /// Hours pods spent bound to a node, from binding to deletion or the end of the run: the
    /// work the cost paid for.
    pub scheduled_pod_hours: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `values` (seconds).
    pub fn of(values: &mut [f64]) -> Self {
        if values.is_empty() {
            return Percentiles::default();
        }
        values.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            let idx = ((p * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1;
            values[idx]
        };
        Percentiles {
            p50: rank(0.50),
            p99: rank(0.99),
            max: values[values.len() - 1],
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NodesReport {
    pub launched: u64,
    pub terminated: u64,
    pub peak: u64,
    #[serde(rename = "final")]
    pub final_count: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CostReport {
    pub total_usd: f64,
    pub final_usd_per_hour: f64,
    pub peak_usd_per_hour: f64,
    /// A lower bound is computed by the trace work; until then it is 0 (no claim made).
    pub lower_bound_usd: f64,
    /// The cost above the lower bound, by cause (`testkit/src/sim/meter.rs`).
    pub above_bound: CostSplit,
}

/// The cost above the lower bound, split by its causes: booting, idle, fragmentation and
/// premium are disjoint parts of what was paid, and `other_usd` is what is left of the gap —
/// the pods' own capacity, at the cheapest offering that fit, above the bound's fractional
/// cheapest price per resource (instance shapes, DaemonSet overhead; negative where the
/// bound's cluster-wide sums charge more than one machine's fullest resource).
/// `evicted_usd` is shown beside them, not one of them.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CostSplit {
    /// `total_usd - lower_bound_usd`.
    pub above_bound_usd: f64,
    /// Paid while machines booted and registered, or were held for their siblings.
    pub booting_usd: f64,
    /// Paid for machines up without a workload pod (waiting for `consolidateAfter`, or for
    /// pods that went elsewhere).
    pub idle_usd: f64,
    /// The CPU, memory or GPUs machines carrying pods left free (by the fullest resource).
    pub fragmentation_usd: f64,
    /// What the chosen offerings cost over the cheapest offering that fit each launch.
    pub premium_usd: f64,
    /// Capacity paid for Jobs' pods later evicted, while they ran: the Job makes each again
    /// and its work is done again; the bound counts only the run that ended.
    pub redone_usd: f64,
    /// Capacity paid for every pod later evicted, while it ran (work lost when it restarts).
    /// Not a part of the sum beyond `redone_usd`: the bound counts the run of another evicted
    /// pod (a Deployment's, which served while it ran) as useful.
    pub evicted_usd: f64,
    pub other_usd: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UtilizationReport {
    pub cpu_mean: f64,
    pub memory_mean: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct DisruptionsReport {
    pub empty: u64,
    pub underutilized: u64,
    pub drifted: u64,
    pub expired: u64,
    pub interrupted: u64,
    pub evictions: u64,
    /// Evictions the Eviction API refused (a PodDisruptionBudget held them back).
    pub refused_evictions: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Violation {
    pub at_seconds: f64,
    /// Events the driver had handled when it was seen: `simulate --seed N` stops there again.
    pub event: u64,
    pub kind: String,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ExpectationResult {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MachineReport {
    pub name: String,
    pub nodepool: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub price_usd_per_hour: f64,
    pub launched_at_seconds: f64,
    pub terminated_at_seconds: Option<f64>,
    pub launch_reason: String,
    pub termination_reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PodPlacement {
    pub pod: String,
    pub node: Option<String>,
    pub created_at_seconds: f64,
    pub bound_at_seconds: Option<f64>,
    pub evictions: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Unschedulable {
    pub pod: String,
    pub reason: String,
}

/// A field the simulation accepted but did not model.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UnmodelledFieldReport {
    /// `EC2NodeClass/default`.
    pub object: String,
    /// `spec.userData`.
    pub field: String,
    /// What it does on a real node.
    pub effect: String,
    /// Whether the controller applies it (at launch).
    pub applied_by_controller: bool,
}

impl UnmodelledFieldReport {
    pub fn of(field: &nodewright_adapters::manifest::UnmodelledField) -> Self {
        UnmodelledFieldReport {
            object: format!("{}/{}", field.kind, field.name),
            field: field.field.to_string(),
            effect: field.effect.to_string(),
            applied_by_controller: field.in_controller
                == nodewright_adapters::manifest::InController::AppliedAtLaunch,
        }
    }
}

/// Pods grouped by their reason: the most pods first, then by reason; each group's pods in the
/// order given.
pub fn group_by_reason<'a>(
    pods: impl IntoIterator<Item = &'a Unschedulable>,
) -> Vec<UnschedulableGroup<'a>> {
    let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for u in pods {
        groups
            .entry(u.reason.as_str())
            .or_default()
            .push(u.pod.as_str());
    }
    let mut groups: Vec<UnschedulableGroup<'_>> = groups
        .into_iter()
        .map(|(reason, pods)| UnschedulableGroup { reason, pods })
        .collect();
    groups.sort_by(|a, b| b.pods.len().cmp(&a.pods.len()).then(a.reason.cmp(b.reason)));
    groups
}

/// Pods named per reason in the summary; the JSON report lists them all.
const SHOWN_PODS: usize = 3;

/// Pods never scheduled for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnschedulableGroup<'a> {
    pub reason: &'a str,
    /// In the report's order.
    pub pods: Vec<&'a str>,
}

impl Report {
    /// The pods never scheduled, grouped by their reason: the most pods first, then by reason.
    pub fn unschedulable_by_reason(&self) -> Vec<UnschedulableGroup<'_>> {
        group_by_reason(&self.unschedulable)
    }

    /// True when no invariant broke and every expectation held.
    pub fn passed(&self) -> bool {
        self.invariant_violations.is_empty() && self.expectations.iter().all(|e| e.passed)
    }

    /// The summary `nodewright simulate` prints.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "scenario {} (seed {}): {} events, {} commands, {:.0}s simulated",
            self.scenario, self.seed, self.events, self.commands, self.duration_seconds
        );
        let _ = writeln!(
            s,
            "pods: {} total, {} scheduled, {} never scheduled; pending p50 {:.1}s p99 {:.1}s max {:.1}s",
            self.pods.total,
            self.pods.scheduled,
            self.pods.never_scheduled,
            self.pods.pending_seconds.p50,
            self.pods.pending_seconds.p99,
            self.pods.pending_seconds.max
        );
        if self.pods.missing_requests > 0 {
            let _ = writeln!(
                s,
                "warning: {} pods set no CPU or memory request (scheduled as zero; they pack badly)",
                self.pods.missing_requests
            );
        }
        let _ = writeln!(
            s,
            "machines: {} launched, {} terminated, peak {}, final {}; cost ${:.4} total, ${:.4}/h at the end",
            self.nodes.launched,
            self.nodes.terminated,
            self.nodes.peak,
            self.nodes.final_count,
            self.cost.total_usd,
            self.cost.final_usd_per_hour
        );
        if self.cost.lower_bound_usd > 0.0 {
            let c = &self.cost.above_bound;
            let _ = writeln!(
                s,
                "cost above the lower bound ${:.4}: ${:.4} = booting ${:.4} + idle ${:.4} + fragmentation ${:.4} + offering premium ${:.4} + work done again ${:.4} + other ${:.4}; pods later evicted ran on ${:.4}",
                self.cost.lower_bound_usd,
                c.above_bound_usd,
                c.booting_usd,
                c.idle_usd,
                c.fragmentation_usd,
                c.premium_usd,
                c.redone_usd,
                c.other_usd,
                c.evicted_usd
            );
        }
        for m in &self.machines {
            let end = match m.terminated_at_seconds {
                Some(t) => format!(
                    "terminated at {t:.0}s ({})",
                    m.termination_reason.as_deref().unwrap_or("")
                ),
                None => "still running".to_string(),
            };
            let _ = writeln!(
                s,
                "  {} {} {} {} ${:.4}/h launched at {:.0}s, {}",
                m.name,
                m.instance_type,
                m.zone,
                m.capacity_type,
                m.price_usd_per_hour,
                m.launched_at_seconds,
                end
            );
            let _ = writeln!(s, "    why: {}", m.launch_reason);
        }
        let _ = writeln!(
            s,
            "utilization: cpu {:.1}%, memory {:.1}% (requests / allocatable of launched machines, time-weighted)",
            self.utilization.cpu_mean * 100.0,
            self.utilization.memory_mean * 100.0
        );
        let d = &self.disruptions;
        let _ = writeln!(
            s,
            "disruptions: empty {}, underutilized {}, drifted {}, expired {}, interrupted {}; evictions {} ({} refused by PodDisruptionBudgets and retried)",
            d.empty,
            d.underutilized,
            d.drifted,
            d.expired,
            d.interrupted,
            d.evictions,
            d.refused_evictions
        );
        let groups = self.unschedulable_by_reason();
        if !groups.is_empty() {
            let _ = writeln!(
                s,
                "never scheduled: {} {}, for {} {}",
                self.unschedulable.len(),
                if self.unschedulable.len() == 1 {
                    "pod"
                } else {
                    "pods"
                },
                groups.len(),
                if groups.len() == 1 {
                    "reason"
                } else {
                    "reasons"
                }
            );
        }
        for group in &groups {
            let shown: Vec<&str> = group.pods.iter().take(SHOWN_PODS).copied().collect();
            let more = match group.pods.len().saturating_sub(SHOWN_PODS) {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            let _ = writeln!(
                s,
                "  {} {} ({}{more}): {}",
                group.pods.len(),
                if group.pods.len() == 1 { "pod" } else { "pods" },
                shown.join(", "),
                group.reason
            );
        }
        for v in &self.invariant_violations {
            let _ = writeln!(
                s,
                "INVARIANT BROKEN at {:.0}s (event {}): {}: {}",
                v.at_seconds, v.event, v.kind, v.detail
            );
        }
        for e in &self.expectations {
            let _ = writeln!(
                s,
                "expect {}: {} ({})",
                e.name,
                if e.passed { "passed" } else { "FAILED" },
                e.detail
            );
        }
        let _ = writeln!(s, "decision digest {}", self.decision_digest);
        s
    }
}
