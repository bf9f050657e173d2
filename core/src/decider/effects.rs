//! What each kind of event can affect, decided in one table: the match below names every kind,
//! so a new kind does not compile until it is classified here.

use crate::event::EventKind;

/// What an event of one kind can affect beyond its own update of the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Effects {
    /// It may change what the rules read: the epoch moves, so the next disruption pass looks
    /// again. (A tick only moves time; a listing changes nothing by itself, and what it finds is
    /// counted when acted on.)
    pub(super) changes_cluster: bool,
    /// Every drain looks again after it. A pod event tells the drains which nodes' pods it
    /// changed instead, and a tick only the drains whose time came.
    pub(super) wakes_every_drain: bool,
    /// A NodePool's shape (its instance types, rooms and DaemonSet overhead) may have changed.
    pub(super) reshapes_pools: bool,
    /// It may add or remove a NodeClaim, or give one its instance and launch time: what the
    /// garbage collector compares with the cloud's listing. (A NodeClaim that starts to
    /// terminate, while any event is handled, tells the collector itself; a launch decided adds
    /// its NodeClaim the same way.)
    pub(super) changes_nodeclaims: bool,
}

/// The effects of `kind`.
pub(super) fn effects(kind: &EventKind) -> Effects {
    let (changes_cluster, wakes_every_drain, reshapes_pools, changes_nodeclaims) = match kind {
        EventKind::Tick => (false, false, false, false),
        EventKind::InstancesListed { .. } | EventKind::InstancesRelisted { .. } => {
            (false, true, false, false)
        }
        EventKind::PodApplied(_) | EventKind::PodBound { .. } | EventKind::PodDeleted { .. } => {
            (true, false, false, false)
        }
        EventKind::CatalogUpdated(_)
        | EventKind::NodePoolApplied(_)
        | EventKind::NodePoolDeleted { .. }
        | EventKind::NodeClassApplied(_)
        | EventKind::NodeClassDeleted { .. }
        | EventKind::NodeClassResolved(_)
        | EventKind::DaemonSetApplied(_)
        | EventKind::DaemonSetDeleted { .. } => (true, true, true, false),
        EventKind::NodeApplied(_)
        | EventKind::NodeDeleted { .. }
        | EventKind::PodDisruptionBudgetApplied(_)
        | EventKind::PodDisruptionBudgetDeleted { .. }
        | EventKind::EvictionRefused { .. }
        | EventKind::InterruptionReceived { .. } => (true, true, false, false),
        // Only the terminator's own retry changes.
        EventKind::TerminationFailed { .. } => (false, false, false, false),
        EventKind::LaunchSucceeded { .. }
        | EventKind::LaunchFailed { .. }
        | EventKind::NodeClaimTerminated { .. }
        | EventKind::NodeClaimDeleted { .. }
        | EventKind::NodeClaimsObserved { .. }
        | EventKind::NodeDeleting { .. } => (true, true, false, true),
    };
    Effects {
        changes_cluster,
        wakes_every_drain,
        reshapes_pools,
        changes_nodeclaims,
    }
}
