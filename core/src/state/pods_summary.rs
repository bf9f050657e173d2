//! What the pods bound to one node come to, kept with the node between the passes that read
//! it: every disruption pass asks of each node whether it runs workload pods and whether one
//! of them is protected, and every solve what its pods request. Reading those off the node's
//! pods each time walked every pod of the cluster several times per pass.
//!
//! It comes in two summaries, each made the first time it is read (a pass reads only the first,
//! a solve both) and kept until the node's pods change: whoever adds a pod to a node's list,
//! takes one off, or replaces a listed pod in the table calls
//! [`super::NodeState::pods_changed`]. Debug builds (every test's) compare each summary read
//! with one made afresh.

use crate::model::affinity::HostPort;
use crate::model::do_not_disrupt::Protection;
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
}

/// What all the pods bound to a node (DaemonSet pods included) hold of it, as a solve reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requested {
    /// Their requests, summed in the node's pod order.
    pub requests: Resources,
    /// Their host ports, in the node's pod order.
    pub host_ports: Vec<HostPort>,
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
