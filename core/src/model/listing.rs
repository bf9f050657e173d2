//! An instance listing as what changed since the listing before it.
//!
//! The controller lists the cluster's instances every two minutes, and most listings are the
//! one before: logged whole they were most of a long log's bytes. A listing is logged as its
//! changes when those rebuild it exactly — same instances, same order — and whole otherwise, so
//! the core decides on the very listing the cloud gave.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::model::nodeclaim::ListedInstance;

/// An instance new or different since the last listing, and where the new listing has it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ListedAt {
    /// Its place in the new listing.
    pub position: u32,
    /// The instance as listed.
    pub instance: ListedInstance,
}

/// What a listing changed: the instances new or different since the last one, and the ids of
/// those no longer listed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListingChanges {
    /// The instances new or different, with their places.
    pub changed: Vec<ListedAt>,
    /// The ids no longer listed.
    pub gone: Vec<String>,
}

/// `before` without `gone` and without the instances `changed` lists again, in their order,
/// with each of `changed` put at its position (in the order of positions; past the end, at
/// the end).
pub fn rebuild(
    before: &[ListedInstance],
    changed: &[ListedAt],
    gone: &[String],
) -> Vec<ListedInstance> {
    let mut listing = before.to_vec();
    rebuild_in_place(&mut listing, changed, gone);
    listing
}

/// [`rebuild`] in place: `listing` without `gone` and without the instances `changed` lists
/// again, with each of `changed` put at its position. The instances kept are moved, not copied.
pub fn rebuild_in_place(listing: &mut Vec<ListedInstance>, changed: &[ListedAt], gone: &[String]) {
    if changed.is_empty() && gone.is_empty() {
        return;
    }
    let left_out: BTreeSet<&str> = gone
        .iter()
        .map(String::as_str)
        .chain(changed.iter().map(|c| c.instance.instance_id.as_str()))
        .collect();
    listing.retain(|i| !left_out.contains(i.instance_id.as_str()));
    let mut placed: Vec<&ListedAt> = changed.iter().collect();
    placed.sort_by_key(|c| c.position);
    // Each at its position, but after the one placed before it, and at the end once the
    // instances kept run out.
    let mut next_free = 0usize;
    for c in placed {
        let at = usize::try_from(c.position)
            .unwrap_or(usize::MAX)
            .max(next_free)
            .min(listing.len());
        listing.insert(at, c.instance.clone());
        next_free = at + 1;
    }
}

/// The changes from `before` to `after`, when [`rebuild`] makes `after` of them exactly;
/// `None` when it would not (the instances listed before reordered, an id listed twice): then
/// the listing is kept whole.
pub fn changes(before: &[ListedInstance], after: &[ListedInstance]) -> Option<ListingChanges> {
    // Most listings are the one before: no change, found without building the maps (each id
    // listed once, as the walk below needs for an empty change to rebuild the listing).
    if before == after && ids_listed_once(after) {
        return Some(ListingChanges::default());
    }
    // Both in id order (as the cloud lists them, and so as a listing rebuilt from changes to
    // one is): the changes are found in one walk over both, without maps (while every
    // position is a `u32`, as a rebuild reads it).
    if after.len() <= u32::MAX as usize && in_id_order(before) && in_id_order(after) {
        let found = changes_in_id_order(before, after);
        debug_assert_eq!(
            Some(&found),
            changes_by_walk(before, after).as_ref(),
            "two listings in id order changed otherwise than by the walk"
        );
        return Some(found);
    }
    changes_by_walk(before, after)
}

/// Whether each id is listed after a smaller one (so none twice).
pub fn in_id_order(listing: &[ListedInstance]) -> bool {
    listing
        .windows(2)
        .all(|pair| pair[0].instance_id < pair[1].instance_id)
}

/// [`changes`] of two listings [`in_id_order`]: the same changes, in the same order, as
/// [`changes_by_walk`] finds, and [`rebuild`] makes `after` of them (the instances kept are in
/// the same order in both).
fn changes_in_id_order(before: &[ListedInstance], after: &[ListedInstance]) -> ListingChanges {
    let mut found = ListingChanges::default();
    let mut old = before.iter().peekable();
    for (position, instance) in after.iter().enumerate() {
        while let Some(gone) = old.next_if(|o| o.instance_id < instance.instance_id) {
            found.gone.push(gone.instance_id.clone());
        }
        let same = old
            .next_if(|o| o.instance_id == instance.instance_id)
            .is_some_and(|o| o == instance);
        if !same {
            found.changed.push(ListedAt {
                position: u32::try_from(position).unwrap_or(u32::MAX),
                instance: instance.clone(),
            });
        }
    }
    found.gone.extend(old.map(|o| o.instance_id.clone()));
    found
}

/// [`changes`] without its shortcut for an unchanged listing.
fn changes_by_walk(before: &[ListedInstance], after: &[ListedInstance]) -> Option<ListingChanges> {
    let old: BTreeMap<&str, &ListedInstance> =
        before.iter().map(|i| (i.instance_id.as_str(), i)).collect();
    let new: BTreeSet<&str> = after.iter().map(|i| i.instance_id.as_str()).collect();
    let found = ListingChanges {
        changed: after
            .iter()
            .enumerate()
            .filter(|(_, i)| old.get(i.instance_id.as_str()) != Some(i))
            .map(|(position, i)| ListedAt {
                position: u32::try_from(position).unwrap_or(u32::MAX),
                instance: i.clone(),
            })
            .collect(),
        gone: before
            .iter()
            .filter(|i| !new.contains(i.instance_id.as_str()))
            .map(|i| i.instance_id.clone())
            .collect(),
    };
    (rebuild(before, &found.changed, &found.gone) == after).then_some(found)
}

/// Whether no instance id is listed twice.
fn ids_listed_once(listing: &[ListedInstance]) -> bool {
    // A listing in id order (as the cloud lists them) says so in one pass.
    if in_id_order(listing) {
        return true;
    }
    let mut ids: Vec<&str> = listing.iter().map(|i| i.instance_id.as_str()).collect();
    ids.sort_unstable();
    ids.windows(2).all(|pair| pair[0] != pair[1])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(id: &str, running: bool) -> ListedInstance {
        ListedInstance {
            instance_id: id.to_string(),
            nodeclaim: Some(format!("claim-{id}")),
            launched_at_ms: 1_000,
            running,
        }
    }

    #[test]
    fn the_same_listing_changes_nothing() {
        let a = vec![listed("i-1", true), listed("i-2", true)];
        let found = changes(&a, &a).expect("rebuilds");
        assert!(found.changed.is_empty() && found.gone.is_empty());
        assert_eq!(rebuild(&a, &found.changed, &found.gone), a);
    }

    #[test]
    fn new_stopped_and_gone_instances_are_the_changes() {
        let before = vec![
            listed("i-1", true),
            listed("i-2", true),
            listed("i-3", true),
        ];
        let after = vec![
            listed("i-1", true),
            listed("i-3", false),
            listed("i-4", true),
        ];
        let found = changes(&before, &after).expect("rebuilds");
        let changed: Vec<(u32, ListedInstance)> = found
            .changed
            .iter()
            .map(|c| (c.position, c.instance.clone()))
            .collect();
        assert_eq!(
            changed,
            vec![(1, listed("i-3", false)), (2, listed("i-4", true))]
        );
        assert_eq!(found.gone, vec!["i-2".to_string()]);
        assert_eq!(rebuild(&before, &found.changed, &found.gone), after);
    }

    #[test]
    fn a_reordered_listing_is_kept_whole() {
        let before = vec![listed("i-1", true), listed("i-2", true)];
        let after = vec![listed("i-2", true), listed("i-1", true)];
        assert_eq!(changes(&before, &after), None);
        let twice = vec![listed("i-1", true), listed("i-1", false)];
        assert_eq!(changes(&before, &twice), None);
    }

    fn any_listing() -> impl proptest::strategy::Strategy<Value = Vec<ListedInstance>> {
        use proptest::prelude::*;
        prop::collection::vec(
            (0u8..6, any::<bool>(), 0u64..3).prop_map(|(id, running, at)| ListedInstance {
                instance_id: format!("i-{id}"),
                nodeclaim: (id % 2 == 0).then(|| format!("claim-{id}")),
                launched_at_ms: at,
                running,
            }),
            0..6,
        )
    }

    proptest::proptest! {
        /// The changes found rebuild the listing exactly, and are found whenever each listing
        /// names an instance once and the instances unchanged keep their order.
        #[test]
        fn changes_rebuild_the_listing(before in any_listing(), after in any_listing()) {
            let distinct = |l: &[ListedInstance]| {
                l.iter().map(|i| &i.instance_id).collect::<std::collections::BTreeSet<_>>().len() == l.len()
            };
            match changes(&before, &after) {
                Some(found) => proptest::prop_assert_eq!(rebuild(&before, &found.changed, &found.gone), after),
                None => {
                    // The instances listed both times, unchanged, in each listing's order.
                    let same = |l: &[ListedInstance], other: &[ListedInstance]| -> Vec<ListedInstance> {
                        l.iter().filter(|i| other.contains(i)).cloned().collect()
                    };
                    let kept = same(&after, &before);
                    let order = same(&before, &after);
                    proptest::prop_assert!(
                        !distinct(&before) || !distinct(&after) || kept != order,
                        "a listing that could be rebuilt was kept whole"
                    );
                }
            }
        }
    }

    proptest::proptest! {
        /// The shortcut for a listing unchanged answers as the walk over it does, ids listed
        /// twice included.
        #[test]
        fn an_unchanged_listing_changes_nothing_as_the_walk_finds(listing in any_listing()) {
            proptest::prop_assert_eq!(changes(&listing, &listing), changes_by_walk(&listing, &listing));
        }
    }

    /// A listing as the cloud gives it: each id once, in id order.
    fn listing_in_id_order() -> impl proptest::strategy::Strategy<Value = Vec<ListedInstance>> {
        use proptest::prelude::*;
        any_listing().prop_map(|mut listing| {
            listing.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
            listing.dedup_by(|a, b| a.instance_id == b.instance_id);
            listing
        })
    }

    proptest::proptest! {
        /// Two listings in id order: the one walk finds the changes the maps find, and they
        /// rebuild the new listing.
        #[test]
        fn listings_in_id_order_change_as_the_walk_finds(
            before in listing_in_id_order(),
            after in listing_in_id_order(),
        ) {
            let found = changes_in_id_order(&before, &after);
            proptest::prop_assert_eq!(Some(found.clone()), changes_by_walk(&before, &after));
            proptest::prop_assert_eq!(rebuild(&before, &found.changed, &found.gone), after);
        }
    }

    /// The rebuild as the format defines it, instance by instance: the kept ones in order,
    /// each changed one taken when the listing built so far reaches its position.
    fn rebuild_by_merge(
        before: &[ListedInstance],
        changed: &[ListedAt],
        gone: &[String],
    ) -> Vec<ListedInstance> {
        let left_out: BTreeSet<&str> = gone
            .iter()
            .map(String::as_str)
            .chain(changed.iter().map(|c| c.instance.instance_id.as_str()))
            .collect();
        let mut kept = before
            .iter()
            .filter(|i| !left_out.contains(i.instance_id.as_str()))
            .peekable();
        let mut placed: Vec<&ListedAt> = changed.iter().collect();
        placed.sort_by_key(|c| c.position);
        let mut placed = placed.into_iter().peekable();
        let mut after: Vec<ListedInstance> = Vec::with_capacity(before.len() + changed.len());
        loop {
            let here = after.len() as u64;
            let next = match (placed.peek(), kept.peek()) {
                (Some(c), Some(_)) if u64::from(c.position) > here => kept.next(),
                (Some(_), _) => placed.next().map(|c| &c.instance),
                (None, Some(_)) => kept.next(),
                (None, None) => break,
            };
            if let Some(instance) = next {
                after.push(instance.clone());
            }
        }
        after
    }

    proptest::proptest! {
        /// Rebuilding in place gives the rebuild the format defines, for any changes, positions
        /// past the end and repeated included.
        #[test]
        fn a_listing_rebuilt_in_place_is_the_one_rebuilt(
            before in any_listing(),
            changed in proptest::collection::vec((0u32..8, any_listing()), 0..4),
            gone in proptest::collection::vec(0u8..6, 0..3),
        ) {
            let changed: Vec<ListedAt> = changed
                .into_iter()
                .filter_map(|(position, l)| l.into_iter().next().map(|instance| ListedAt { position, instance }))
                .collect();
            let gone: Vec<String> = gone.iter().map(|id| format!("i-{id}")).collect();
            let mut listing = before.clone();
            rebuild_in_place(&mut listing, &changed, &gone);
            proptest::prop_assert_eq!(listing, rebuild_by_merge(&before, &changed, &gone));
        }
    }

    #[test]
    fn the_first_listing_is_all_changes() {
        let after = vec![listed("i-2", true), listed("i-1", true)];
        let found = changes(&[], &after).expect("rebuilds");
        assert_eq!(found.changed.len(), 2);
        assert_eq!(rebuild(&[], &found.changed, &found.gone), after);
    }

    #[test]
    fn a_new_instance_takes_its_place_in_the_listing() {
        let before = vec![listed("i-2", true), listed("i-5", true)];
        let after = vec![
            listed("i-1", true),
            listed("i-2", true),
            listed("i-3", true),
            listed("i-5", true),
        ];
        let found = changes(&before, &after).expect("rebuilds");
        assert_eq!(found.changed.len(), 2);
        assert_eq!(rebuild(&before, &found.changed, &found.gone), after);
    }
}
