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
}

impl Effects {
    /// It may change what drift reads: a machine, a NodePool, an EC2NodeClass or the catalog —
    /// an event that changes the cluster and is about more than one pod. (A pod event or a
    /// tick does not, nor a listing: what it finds only ends machines.)
    pub(super) fn changes_machines(&self) -> bool {
        self.changes_cluster && self.wakes_every_drain
    }
}

/// The effects of `kind`.
pub(super) fn effects(kind: &EventKind) -> Effects {
    let (changes_cluster, wakes_every_drain, reshapes_pools) = match kind {
        EventKind::Tick => (false, false, false),
        EventKind::InstancesListed { .. } | EventKind::InstancesRelisted { .. } => {
            (false, true, false)
        }
        EventKind::PodApplied(_) | EventKind::PodBound { .. } | EventKind::PodDeleted { .. } => {
            (true, false, false)
        }
        EventKind::CatalogUpdated(_)
        | EventKind::NodePoolApplied(_)
        | EventKind::NodePoolDeleted { .. }
        | EventKind::NodeClassApplied(_)
        | EventKind::NodeClassDeleted { .. }
        | EventKind::NodeClassResolved(_)
        | EventKind::DaemonSetApplied(_)
        | EventKind::DaemonSetDeleted { .. } => (true, true, true),
        EventKind::NodeApplied(_)
        | EventKind::NodeDeleted { .. }
        | EventKind::LaunchSucceeded { .. }
        | EventKind::LaunchFailed { .. }
        | EventKind::NodeClaimTerminated { .. }
        | EventKind::NodeClaimDeleted { .. }
        | EventKind::PodDisruptionBudgetApplied(_)
        | EventKind::PodDisruptionBudgetDeleted { .. }
        | EventKind::EvictionRefused { .. }
        | EventKind::InterruptionReceived { .. } => (true, true, false),
    };
    Effects {
        changes_cluster,
        wakes_every_drain,
        reshapes_pools,
    }
}
