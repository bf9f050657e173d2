//! What the pods bound to one node come to, kept with the node between the passes that read
//! it: every disruption pass asks of each node whether it runs workload pods and whether one
//! of them is protected, and every solve what its pods request. Reading those off the node's
//! pods each time walked every pod of the cluster several times per pass.
//!
//! It comes in three summaries, each made the first time it is read (a pass and a disruption
//! budget read the first, a consolidation search the third, a solve the first two) and kept
//! until the node's pods change: whoever adds a pod to a node's list, takes one off, or
//! replaces a listed pod in the table calls [`super::NodeState::pods_changed`] (and whoever
//! replaces the node, whose allocatable the third reads, [`super::NodeState::replace_node`]).
//! Debug builds (every test's) compare each summary read with one made afresh.

use crate::config::LostWork;
use crate::model::affinity::HostPort;
use crate::model::do_not_disrupt::Protection;
use crate::model::pod::Pod;
use crate::model::resources::Resources;

use super::PodTable;

/// The workload pods (not DaemonSet pods, not mirror pods) bound to a node, as a disruption
/// pass reads them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkloadSummary {
    /// How many there are.
    pub pods: u32,
    /// What their `karpenter.sh/do-not-disrupt` asks for together.
    pub protection: WorkloadProtection,
    /// How many of them a drain evicts ([`Pod::drain_evicts`]).
    pub evicted: u32,
    /// Of those, how many no replicating controller makes again (the pods
    /// [`LostWork::AllButReplicated`] counts): those an expiration may leave to finish.
    pub evicted_unreplicated: u32,
}

/// What all the pods bound to a node (DaemonSet pods included) hold of it, as a solve reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requested {
    /// Their requests, summed in the node's pod order.
    pub requests: Resources,
    /// Their host ports, in the node's pod order.
    pub host_ports: Vec<HostPort>,
}

/// The workload pods of a node as consolidation prices disrupting them: what every search read
/// of each pod of each candidate, read once.
#[derive(Debug, Clone, PartialEq)]
pub struct PricedPods {
    /// The setting their lost work is counted under (`Config::count_lost_work`).
    pub lost_work: LostWork,
    /// Karpenter's disruption cost of the pods ([`Pod::disruption_cost`]), summed in the node's
    /// pod order.
    pub disruption_cost: f64,
    /// Each pod, in the node's pod order.
    pub pods: Vec<PricedPod>,
}

/// One pod as the cost of its eviction reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PricedPod {
    /// When it was created: its age counts the work it loses.
    pub created_at_ms: u64,
    /// Whether its work is counted lost when it is evicted ([`LostWork::counts`]).
    pub loses_work: bool,
    /// Its share of its node (its fullest resource), when its work is counted lost; else 0.
    pub share: f64,
}

impl PricedPod {
    /// `pod` on a node with `allocatable`, its lost work counted under `lost_work`.
    pub fn of(pod: &Pod, allocatable: &Resources, lost_work: LostWork) -> Self {
        let loses_work = lost_work.counts(pod);
        PricedPod {
            created_at_ms: pod.created_at_ms,
            loses_work,
            share: if loses_work {
                pod.requests.dominant_share_of(allocatable)
            } else {
                0.0
            },
        }
    }
}

impl PricedPods {
    /// Whether both are the same, bit for bit (a pod's deletion cost may read as NaN, which
    /// equals nothing).
    pub fn same_bits(&self, other: &PricedPods) -> bool {
        let pod_bits = |p: &PricedPod| (p.created_at_ms, p.loses_work, p.share.to_bits());
        self.lost_work == other.lost_work
            && self.disruption_cost.to_bits() == other.disruption_cost.to_bits()
            && self.pods.len() == other.pods.len()
            && self
                .pods
                .iter()
                .map(pod_bits)
                .eq(other.pods.iter().map(pod_bits))
    }

    /// The workload pods `ids` (a node's list, in its order) of a node with `allocatable`,
    /// read from `table`.
    pub(super) fn of<'a>(
        table: &PodTable,
        ids: impl Iterator<Item = &'a super::PodId>,
        allocatable: &Resources,
        lost_work: LostWork,
    ) -> Self {
        let pods: Vec<&Pod> = ids
            .filter(|&&id| !table.follows_its_node(id))
            .map(|&id| table.pod(id))
            .collect();
        PricedPods {
            lost_work,
            disruption_cost: pods.iter().map(|p| p.disruption_cost()).sum::<f64>(),
            pods: pods
                .iter()
                .map(|p| PricedPod::of(p, allocatable, lost_work))
                .collect(),
        }
    }
}

/// The `karpenter.sh/do-not-disrupt` protections of a node's workload pods, combined: what
/// [`Protection::active_at`] and [`Protection::ends_after`] say of all of them at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkloadProtection {
    /// Some pod is protected for as long as it runs.
    pub forever: bool,
    /// The latest time a pod is protected until (0 when none is for a time).
    pub until_ms: u64,
}

impl WorkloadProtection {
    /// Adds one pod's protection.
    fn add(&mut self, protection: Protection) {
        match protection {
            Protection::None => {}
            Protection::Forever => self.forever = true,
            Protection::Until(until) => self.until_ms = self.until_ms.max(until),
        }
    }

    /// The protections in force at `now_ms`, as one: `Forever` when one of them never runs
    /// out, else the one that runs out last; `None` when none is in force. A time-bound
    /// protection is in force while `now_ms` is before its end, so the latest end is in force
    /// exactly when any is.
    pub fn in_force_at(self, now_ms: u64) -> Protection {
        if self.forever {
            Protection::Forever
        } else if self.until_ms > now_ms {
            Protection::Until(self.until_ms)
        } else {
            Protection::None
        }
    }
}

impl WorkloadSummary {
    /// The summary of the pods `ids` (a node's list), read from `table`.
    pub(super) fn of<'a>(table: &PodTable, ids: impl Iterator<Item = &'a super::PodId>) -> Self {
        let mut summary = WorkloadSummary::default();
        for &id in ids.filter(|&&id| !table.follows_its_node(id)) {
            summary.pods += 1;
            summary.protection.add(table.protection(id));
            let pod = table.pod(id);
            if pod.drain_evicts() {
                summary.evicted += 1;
                summary.evicted_unreplicated += u32::from(LostWork::AllButReplicated.counts(pod));
            }
        }
        summary
    }
}

impl Requested {
    /// What the pods `ids` (a node's list, in its order) hold, read from `table`.
    pub(super) fn of<'a>(table: &PodTable, ids: impl Iterator<Item = &'a super::PodId>) -> Self {
        let mut requested = Requested::default();
        for &id in ids {
            let pod = table.pod(id);
            requested.requests.add(&pod.requests);
            requested.host_ports.extend(pod.host_ports.iter().cloned());
        }
        requested
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_protections_are_in_force_as_the_pods_ones_are() {
        let cases: [&[Protection]; 5] = [
            &[],
            &[Protection::None, Protection::None],
            &[
                Protection::Until(50),
                Protection::Until(80),
                Protection::None,
            ],
            &[Protection::Until(50), Protection::Forever],
            &[Protection::Until(20)],
        ];
        for protections in cases {
            let mut combined = WorkloadProtection::default();
            for &p in protections {
                combined.add(p);
            }
            for now in [0, 19, 20, 49, 50, 79, 80, 200] {
                let in_force: Vec<Protection> = protections
                    .iter()
                    .copied()
                    .filter(|p| p.active_at(now))
                    .collect();
                let one = combined.in_force_at(now);
                assert_eq!(
                    one.active_at(now),
                    !in_force.is_empty(),
                    "{protections:?} at {now}"
                );
                let never_ends = in_force.iter().any(|p| p.ends_after(now).is_none());
                let last_end = in_force.iter().filter_map(|p| p.ends_after(now)).max();
                if !in_force.is_empty() {
                    let expected = if never_ends { None } else { last_end };
                    assert_eq!(one.ends_after(now), expected, "{protections:?} at {now}");
                }
            }
        }
    }
}
