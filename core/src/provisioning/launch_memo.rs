//! The launch options of recent launches, kept by what chose them. A launch's options are its
//! types' allowed offerings, cheapest first ([`super::launch::launch_offerings`]); jobs of one
//! shape ask for the same types under the same requirements again and again, and choosing and
//! naming a hundred-odd options each time was a third of a launch's work.
//!
//! The options depend on the catalog, the types, the zone and capacity-type requirements and
//! `max_types`, and, through the state, on the offerings marked unavailable and on the
//! capacity reservations' room. Only launches that read none of the state are kept: while an
//! offering is marked unavailable, or the catalog has reservations, or `minValues` apply, the
//! options are chosen afresh. The memo is a cache, never in a snapshot: the core forgets it
//! when the catalog or a NodePool changes, and a restored core starts without it.

use std::collections::VecDeque;
use std::sync::Arc;

use super::scheduler::{self, PlannedClaim};
use crate::catalog::PreparedCatalog;
use crate::model::labels;
use crate::model::nodeclaim::LaunchOption;
use crate::model::requirements::Requirement;
use crate::state::ClusterState;

/// Launches kept: a trace's many pod shapes come back within a few dozen launches.
const KEPT: usize = 64;

/// A planned machine's launch options, and how many instance types they name.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchChoice {
    /// Cheapest first (shared: each NodeClaim launched from them holds the same options).
    pub options: Arc<[LaunchOption]>,
    /// The distinct instance types among them.
    pub type_count: usize,
}

/// What chose a kept launch's options (when the state takes no part): the zone and
/// capacity-type requirements are what [`super::launch::OfferingFilter`] reads.
#[derive(Debug, Clone)]
struct Key {
    types: Vec<usize>,
    zone: Option<Requirement>,
    capacity_type: Option<Requirement>,
    max_types: usize,
}

/// The last [`KEPT`] launch choices that read nothing of the state, oldest first.
#[derive(Debug, Clone, Default)]
pub struct LaunchMemo {
    kept: VecDeque<(Key, LaunchChoice)>,
}

impl LaunchMemo {
    /// Forgets every kept choice (the catalog or a NodePool changed).
    pub fn clear(&mut self) {
        self.kept.clear();
    }

    /// The launch options of `planned` at `now_ms`, at most `max_types` types: a kept choice
    /// when one was made from the same inputs and the state takes no part, else chosen now.
    /// `None` without a catalog, or when no offering is left.
    pub fn choose(
        &mut self,
        state: &ClusterState,
        planned: &PlannedClaim,
        now_ms: u64,
        max_types: usize,
    ) -> Option<LaunchChoice> {
        let prepared = state.catalog.as_deref()?;
        if !stateless(state, prepared, planned, now_ms) {
            return choose_now(state, prepared, planned, now_ms, max_types);
        }
        // Compared with the claim as it is: a key is built only for a choice kept anew.
        let kept = self.kept.iter().find(|(k, _)| k.is_of(planned, max_types));
        if let Some((_, kept)) = kept {
            debug_assert_eq!(
                Some(kept),
                choose_now(state, prepared, planned, now_ms, max_types).as_ref(),
                "a kept launch choice differs from one made now"
            );
            return Some(kept.clone());
        }
        let choice = choose_now(state, prepared, planned, now_ms, max_types)?;
        if self.kept.len() == KEPT {
            self.kept.pop_front();
        }
        self.kept
            .push_back((Key::of(planned, max_types), choice.clone()));
        Some(choice)
    }
}

impl Key {
    /// What chooses `planned`'s options (the state taking no part).
    fn of(planned: &PlannedClaim, max_types: usize) -> Key {
        Key {
            types: planned.types.clone(),
            zone: planned.requirements.get(labels::ZONE).cloned(),
            capacity_type: planned.requirements.get(labels::CAPACITY_TYPE).cloned(),
            max_types,
        }
    }

    /// Whether it is what chooses `planned`'s options: [`Key::of`] without the copy.
    fn is_of(&self, planned: &PlannedClaim, max_types: usize) -> bool {
        self.max_types == max_types
            && self.types == planned.types
            && self.zone.as_ref() == planned.requirements.get(labels::ZONE)
            && self.capacity_type.as_ref() == planned.requirements.get(labels::CAPACITY_TYPE)
    }
}

/// Whether nothing of the state can change `planned`'s options: no offering marked unavailable
/// now, no capacity reservation in the catalog, no `minValues`.
fn stateless(
    state: &ClusterState,
    prepared: &PreparedCatalog,
    planned: &PlannedClaim,
    now_ms: u64,
) -> bool {
    planned.min_values.is_empty()
        && prepared.catalog.reservations.is_empty()
        && !state.unavailable.values().any(|until| *until > now_ms)
}

/// The options chosen now, as a launch without the memo chooses them.
fn choose_now(
    state: &ClusterState,
    prepared: &PreparedCatalog,
    planned: &PlannedClaim,
    now_ms: u64,
    max_types: usize,
) -> Option<LaunchChoice> {
    let offerings = scheduler::launch_offerings(state, planned, now_ms, max_types);
    if offerings.is_empty() {
        return None;
    }
    let options: Arc<[LaunchOption]> = offerings.iter().map(|o| o.option(prepared)).collect();
    let mut types: Vec<usize> = offerings.iter().map(|o| o.t).collect();
    types.sort_unstable();
    types.dedup();
    Some(LaunchChoice {
        options,
        type_count: types.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, builtin};
    use crate::model::requirements::Requirements;
    use crate::model::resources::Resources;

    /// Every 20th type of the built-in catalog, prepared.
    fn state() -> ClusterState {
        let full = builtin::us_east_1();
        ClusterState {
            catalog: Some(Arc::new(PreparedCatalog::new(Catalog {
                region: full.region.clone(),
                instance_types: full.instance_types.iter().step_by(20).cloned().collect(),
                ..Catalog::default()
            }))),
            ..ClusterState::default()
        }
    }

    fn planned(state: &ClusterState, types: usize, zone: Option<&str>) -> PlannedClaim {
        let mut requirements = Requirements::new();
        if let Some(zone) = zone {
            requirements.add(Requirement::single(labels::ZONE, zone));
        }
        let count = state
            .catalog
            .as_ref()
            .map_or(0, |p| p.catalog.instance_types.len());
        PlannedClaim {
            nodepool: "default".to_string(),
            requirements,
            pods: Vec::new(),
            requests: Resources::new(1_000, 1 << 30, 1),
            types: (0..count.min(types)).collect(),
            min_values: Vec::new(),
        }
    }

    /// A state, an empty memo, and a claim for the first 30 types.
    fn start() -> (ClusterState, LaunchMemo, PlannedClaim) {
        let state = state();
        let claim = planned(&state, 30, None);
        (state, LaunchMemo::default(), claim)
    }

    fn fresh(state: &ClusterState, planned: &PlannedClaim, now_ms: u64) -> Option<LaunchChoice> {
        let prepared = state.catalog.as_deref()?;
        choose_now(state, prepared, planned, now_ms, 20)
    }

    #[test]
    fn the_same_inputs_share_the_options_chosen_before() {
        let (state, mut memo, claim) = start();
        let first = memo.choose(&state, &claim, 0, 20).unwrap();
        let again = memo.choose(&state, &claim, 5_000, 20).unwrap();
        assert!(
            Arc::ptr_eq(&first.options, &again.options),
            "kept, not chosen again"
        );
        assert_eq!(Some(&again), fresh(&state, &claim, 5_000).as_ref());
        // Another zone, or other types, are other inputs.
        let zoned = planned(&state, 30, Some("us-east-1b"));
        let other = memo.choose(&state, &zoned, 5_000, 20).unwrap();
        assert!(!Arc::ptr_eq(&first.options, &other.options));
        assert!(other.options.iter().all(|o| o.zone == "us-east-1b"));
        assert_eq!(Some(other), fresh(&state, &zoned, 5_000));
        let fewer = planned(&state, 10, None);
        assert_eq!(
            memo.choose(&state, &fewer, 5_000, 20),
            fresh(&state, &fewer, 5_000)
        );
    }

    #[test]
    fn an_offering_marked_unavailable_is_left_out_while_it_is() {
        let (mut state, mut memo, claim) = start();
        let before = memo.choose(&state, &claim, 0, 20).unwrap();
        let cheapest = before.options[0].clone();
        state.unavailable.insert(cheapest.key(), 10_000);
        let during = memo.choose(&state, &claim, 5_000, 20).unwrap();
        assert!(
            !during.options.contains(&cheapest),
            "the kept choice is not used"
        );
        assert_eq!(Some(&during), fresh(&state, &claim, 5_000).as_ref());
        // Once it may be tried again, the choice is what it was.
        let after = memo.choose(&state, &claim, 10_000, 20).unwrap();
        assert_eq!(after, before);
    }

    #[test]
    fn a_cleared_memo_chooses_again() {
        let (state, mut memo, claim) = start();
        let first = memo.choose(&state, &claim, 0, 20).unwrap();
        memo.clear();
        let again = memo.choose(&state, &claim, 0, 20).unwrap();
        assert!(!Arc::ptr_eq(&first.options, &again.options));
        assert_eq!(first, again);
    }

    #[test]
    fn it_keeps_a_bounded_number_of_choices() {
        let state = state();
        let mut memo = LaunchMemo::default();
        for types in 1..(KEPT + 10) {
            let _ = memo.choose(&state, &planned(&state, types, None), 0, 20);
        }
        assert!(memo.kept.len() <= KEPT);
    }
}
