//! DaemonSet overhead: the requests of every DaemonSet that would run on a machine of a
//! NodePool and instance type, added before deciding what fits.

use crate::model::daemonset::DaemonSet;
use crate::model::nodepool::NodePool;
use crate::model::requirements::Requirements;
use crate::model::resources::Resources;
use crate::model::taints::first_untolerated;

/// Overhead per instance type (by catalog index) for machines of `pool`.
pub fn daemonset_overhead<'a>(
    pool: &NodePool,
    template: &Requirements,
    type_requirements: &[Requirements],
    daemonsets: impl Iterator<Item = &'a DaemonSet>,
) -> Vec<Resources> {
    let mut overhead = vec![Resources::default(); type_requirements.len()];
    for ds in daemonsets {
        let pod = &ds.template;
        // A DaemonSet pod must tolerate the machine's taints (startup taints are temporary).
        if first_untolerated(&pool.taints, &pod.tolerations).is_some() {
            continue;
        }
        // Required node-affinity terms are alternatives: the DaemonSet runs where any holds.
        let combined: Vec<Requirements> = pod
            .requirement_alternatives()
            .into_iter()
            .filter(|reqs| template.admits(reqs))
            .map(|reqs| template.intersect(&reqs))
            .collect();
        if combined.is_empty() {
            continue;
        }
        for (t, type_reqs) in type_requirements.iter().enumerate() {
            if combined.iter().any(|c| type_reqs.meets(c)) {
                overhead[t].add(&pod.requests);
            }
        }
    }
    overhead
}
