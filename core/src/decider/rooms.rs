//! The core's state, room by room: each sub-machine of the decider owns its part, and the
//! caches rebuilt after a restore are kept apart from what a snapshot holds.
//!
//! The decider ([`super::Core`]) is the recipe over them: an event updates the cluster
//! ([`crate::state::ClusterState`]), then the provisioner places pending pods, the disruptor
//! looks for machines to take away, the terminator drains and terminates, and warnings are
//! told once each.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::draining::{Drain, Touched};
use super::{PassMark, Replacement};
use crate::disruption::consolidation;
use crate::model::pod::PodKey;
use crate::names::NameGenerator;
use crate::provisioning::Batcher;
use crate::provisioning::pool_shape::PoolShapes;
use crate::provisioning::sibling_hold::SiblingHolds;

/// Pending pods to machines: the batch window, the names of new NodeClaims, what each pending
/// pod was told, and the machines of one solve held for each other.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Provisioner {
    pub(super) batcher: Batcher,
    pub(super) names: NameGenerator,
    /// The last nomination told to each pending pod (so it is told once, not every batch).
    pub(super) nominations: BTreeMap<PodKey, String>,
    /// The last unschedulable reason told to each pending pod.
    pub(super) unschedulable: BTreeMap<PodKey, String>,
    /// Pods waiting for a node (DaemonSet pods aside): `ClusterState::pending_pods` counted,
    /// kept up to date by the pod events so that no event has to count them.
    pub(super) pending_pods: usize,
    /// Machines started held until their siblings register (`Config::sibling_hold_ms`).
    pub(super) sibling_holds: SiblingHolds,
}

impl Provisioner {
    pub(super) fn new(seed: u64) -> Self {
        Provisioner {
            batcher: Batcher::default(),
            names: NameGenerator::new(seed),
            nominations: BTreeMap::new(),
            unschedulable: BTreeMap::new(),
            pending_pods: 0,
            sibling_holds: SiblingHolds::default(),
        }
    }
}

/// Machines to take away: the pacing of disruption passes, the consolidation and drift
/// searches, and the machines being replaced.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Disruptor {
    /// When the last disruption pass ran, the epoch it saw, and when it asked to look again
    /// though nothing changes meanwhile.
    pub(super) last_pass: Option<PassMark>,
    /// The earliest time a disruption or lifecycle rule may act again.
    pub(super) next_rule_ms: Option<u64>,
    /// A consolidation waiting out its validation period, and when it was decided.
    pub(super) pending_consolidation: Option<(consolidation::Decision, u64)>,
    /// The epoch and time of the last search for a consolidation.
    pub(super) last_consolidation_search: Option<(u64, u64)>,
    /// When another node becomes old enough to consolidate.
    pub(super) consolidation_next_ms: Option<u64>,
    /// Machines being replaced: once every replacement is initialized, the old one goes.
    pub(super) replacements: BTreeMap<String, Replacement>,
    /// The epoch and time of the last search for drifted machines.
    pub(super) last_drift_search: Option<(u64, u64)>,
    /// When a do-not-disrupt duration that holds a drifted machine back runs out.
    pub(super) drift_wake_ms: Option<u64>,
}

/// Machines on their way out: drains, and the `karpenter.sh/disrupted` taints set and lifted.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Terminator {
    /// Machines being drained, by NodeClaim.
    pub(super) draining: BTreeMap<String, Drain>,
    /// Nodes nodewright tainted `karpenter.sh/disrupted`, with their NodeClaims.
    pub(super) cordoned: BTreeMap<String, String>,
    /// Nodes asked to lose that taint, until a node without it is seen.
    pub(super) uncordoning: BTreeMap<String, String>,
    /// Terminations that failed, by NodeClaim: asked again when their time comes.
    pub(super) retrying: BTreeMap<String, TerminationRetry>,
}

/// A termination that failed, to be asked again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct TerminationRetry {
    /// How many times it failed in a row.
    pub(super) failures: u32,
    /// When it is asked again (`u64::MAX`: asked, waiting for the result).
    pub(super) at_ms: u64,
}

/// What users were warned about, so each warning is told once.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Warnings {
    /// Pods already warned about missing requests.
    pub(super) missing_requests: BTreeSet<PodKey>,
    /// Objects already warned about an annotation value, with that value.
    pub(super) annotations: BTreeMap<String, String>,
}

/// What the core derives and keeps between events to skip work, never in a snapshot: a
/// restored core starts with it empty and computes it again at its next event.
#[derive(Debug, Clone, Default)]
pub(super) struct Caches {
    /// What the event being handled changed, for the drains to know whether to look again.
    pub(super) touched: Touched,
    /// The earliest launch, registration or expiry deadline of a NodeClaim, once computed
    /// (`None`: unknown, computed at the next event). Only events about machines and new
    /// launches move it, so pod events and ticks before it skip the scan.
    pub(super) claim_deadline_ms: Option<Option<u64>>,
    /// What solves need of each NodePool, kept between them (derived from the cluster; a
    /// solve checks that a shape still holds, and computes it when it does not).
    pub(super) pool_shapes: PoolShapes,
    /// A NodePool, its class, the DaemonSets or the catalog changed since `pool_shapes` were
    /// last refreshed.
    pub(super) pool_shapes_stale: bool,
    /// What drift compares machines with, once computed; forgotten when a NodePool or an
    /// EC2NodeClass changes.
    pub(super) drift_inputs: Option<std::sync::Arc<crate::disruption::drift::DriftInputs>>,
    /// The last search for drifted machines found none, and nothing it reads changed since: no
    /// NodePool, EC2NodeClass or catalog ([`super::effects::Effects::reshapes_pools`]), and no
    /// machine got its instance or became initialized (a machine leaving drifts no other): the
    /// next finds none either.
    pub(super) drift_found_none: bool,
    /// The NodeClaims the last drift searches found not drifted, while nothing drift reads of
    /// them has changed (their instance, their node's initialization, a NodePool, class or the
    /// catalog): the next search does not look at them again.
    pub(super) drift_clean: BTreeSet<String>,
    /// The last garbage collection found nothing, and neither the listing nor a NodeClaim
    /// changed since: the next finds nothing either before this time (`u64::MAX`: ever).
    pub(super) garbage_quiet_until_ms: Option<u64>,
    /// The NodeClaims whose drains left pods to finish at the last disruption pass
    /// ([`super::Core::drains_leaving_pods_to_finish`]), shared with the next pass when they are the
    /// same.
    pub(super) leaving_to_finish: std::sync::Arc<BTreeSet<String>>,
    /// Recent launches' options by what chose them; forgotten when the catalog or a NodePool
    /// changes.
    pub(super) launch_memo: crate::provisioning::launch_memo::LaunchMemo,
}

impl Caches {
    /// What drift reads of `nodeclaim` changed (it got its instance, or was initialized): the
    /// next search looks at it again, so it may find something.
    pub(super) fn new_to_drift(&mut self, nodeclaim: &str) {
        self.drift_found_none = false;
        self.drift_clean.remove(nodeclaim);
    }
}
