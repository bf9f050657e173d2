//! The launch options of a planned machine: every allowed, available offering of its cheapest
//! instance types, at most `max_types` of them, keeping `minValues` satisfied.

use std::collections::BTreeSet;

use crate::catalog::{CapacityType, OfferingZones, PreparedCatalog, Price};
use crate::model::labels;
use crate::model::nodeclaim::LaunchOption;
use crate::model::requirements::Requirements;
use crate::state::ClusterState;

/// Whether the requirements allow an offering in this zone with this capacity type.
pub fn offering_allowed(reqs: &Requirements, zone: &str, capacity_type: &str) -> bool {
    OfferingFilter::new(reqs).allows(zone, capacity_type)
}

/// The zone and capacity-type requirements, looked up once for many offerings.
#[derive(Debug, Clone, Copy)]
pub struct OfferingFilter<'a> {
    zone: Option<&'a crate::model::requirements::Requirement>,
    capacity_type: Option<&'a crate::model::requirements::Requirement>,
}

impl<'a> OfferingFilter<'a> {
    /// The zone and capacity-type requirements of `reqs`.
    pub fn new(reqs: &'a Requirements) -> Self {
        OfferingFilter {
            zone: reqs.get(labels::ZONE),
            capacity_type: reqs.get(labels::CAPACITY_TYPE),
        }
    }

    /// Whether an offering in `zone` with `capacity_type` meets them.
    pub fn allows(&self, zone: &str, capacity_type: &str) -> bool {
        self.zone.is_none_or(|r| r.has(zone))
            && self.capacity_type.is_none_or(|r| r.has(capacity_type))
    }
}

/// Which offerings of the catalog an [`OfferingFilter`] allows and may be launched now,
/// answered by position: each of the catalog's zones and capacity types is checked once
/// against the requirements, and the offerings marked unavailable are found once by position,
/// so an offering is a few lookups instead of searches by name. Answers as
/// `filter.allows(zone, capacity type) && state.offering_available(..)` does.
pub struct OfferingMask<'a> {
    state: &'a ClusterState,
    prepared: &'a PreparedCatalog,
    zones: &'a OfferingZones,
    /// By position in `zones.names`.
    zone_allowed: Vec<bool>,
    /// By [`CapacityType`] (its declaration order).
    capacity_allowed: [bool; 3],
    /// `(type, offering)` of the offerings marked unavailable now, in order.
    unavailable: Vec<(usize, usize)>,
    now_ms: u64,
}

impl<'a> OfferingMask<'a> {
    /// The mask of `filter` over the prepared catalog, with the state's unavailable offerings
    /// at `now_ms`.
    pub fn new(
        state: &'a ClusterState,
        prepared: &'a PreparedCatalog,
        filter: OfferingFilter<'a>,
        now_ms: u64,
    ) -> Self {
        let catalog = &prepared.catalog;
        let zones = catalog.offering_zones();
        let zone_allowed = zones
            .names
            .iter()
            .map(|zone| filter.zone.is_none_or(|r| r.has(zone)))
            .collect();
        let capacity_allowed = [
            CapacityType::Reserved,
            CapacityType::Spot,
            CapacityType::OnDemand,
        ]
        .map(|c| filter.capacity_type.is_none_or(|r| r.has(c.as_str())));
        let mut unavailable: Vec<(usize, usize)> = state
            .unavailable
            .iter()
            .filter(|(_, until)| **until > now_ms)
            .filter_map(|(key, _)| Some((key, catalog.position(&key.instance_type)?)))
            .flat_map(|(key, t)| {
                catalog.instance_types[t]
                    .offerings
                    .iter()
                    .enumerate()
                    .filter(move |(_, o)| {
                        o.zone == key.zone && o.capacity_type == key.capacity_type
                    })
                    .map(move |(o, _)| (t, o))
            })
            .collect();
        unavailable.sort_unstable();
        OfferingMask {
            state,
            prepared,
            zones,
            zone_allowed,
            capacity_allowed,
            unavailable,
            now_ms,
        }
    }

    /// Whether type `t` has an offering that is allowed and may be launched now.
    pub fn allows_any(&self, t: usize) -> bool {
        (0..self.prepared.catalog.instance_types[t].offerings.len()).any(|o| self.allows(t, o))
    }

    /// Whether offering `o` of type `t` is allowed and may be launched now.
    pub fn allows(&self, t: usize, o: usize) -> bool {
        let it = &self.prepared.catalog.instance_types[t];
        let offering = &it.offerings[o];
        // The zones were read from this catalog: every offering has its position there.
        let zone_allowed = self.zone_allowed[self.zones.of_offering[t][o]];
        if !zone_allowed || !self.capacity_allowed[offering.capacity_type as usize] {
            return false;
        }
        if offering.capacity_type == CapacityType::Reserved {
            // Whether its reservations hold one more: asked of the state, as it counts them.
            return self.state.offering_available(it, offering, self.now_ms);
        }
        self.unavailable.is_empty() || self.unavailable.binary_search(&(t, o)).is_err()
    }
}

/// One offering of the prepared catalog, by position: its type's index and the offering's
/// index in that type, with its price. Choosing among offerings this way builds no strings;
/// [`OfferingAt::option`] makes the launch option of the chosen ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OfferingAt {
    /// The type's index in the catalog.
    pub t: usize,
    /// The offering's index in its type.
    pub o: usize,
    /// Its price.
    pub price: Price,
}

impl OfferingAt {
    /// The launch option it is (the type's and the zone's names shared with the catalog).
    pub fn option(&self, prepared: &PreparedCatalog) -> LaunchOption {
        let catalog = &prepared.catalog;
        let o = &catalog.instance_types[self.t].offerings[self.o];
        let zones = catalog.offering_zones();
        LaunchOption {
            instance_type: catalog.shared_type_names()[self.t].clone(),
            zone: zones.shared[zones.of_offering[self.t][self.o]].clone(),
            capacity_type: o.capacity_type,
            price: o.price,
        }
    }
}

/// The allowed, available offerings of one type.
fn type_offerings<'a>(
    mask: &'a OfferingMask<'a>,
    t: usize,
) -> impl Iterator<Item = OfferingAt> + 'a {
    let it = &mask.prepared.catalog.instance_types[t];
    it.offerings
        .iter()
        .enumerate()
        .filter(move |(o, _)| mask.allows(t, *o))
        .map(move |(o, offering)| OfferingAt {
            t,
            o,
            price: offering.price,
        })
}

/// The value a type has for a `minValues` key (offering-level keys have several).
pub fn values_for_key(prepared: &PreparedCatalog, t: usize, key: &str) -> Vec<String> {
    let it = &prepared.catalog.instance_types[t];
    match key {
        labels::ZONE => it.offerings.iter().map(|o| o.zone.clone()).collect(),
        labels::CAPACITY_TYPE => it
            .offerings
            .iter()
            .map(|o| o.capacity_type.as_str().to_string())
            .collect(),
        _ => it.labels.get(key).cloned().into_iter().collect(),
    }
}

/// How many distinct values `types` offer for each `minValues` key, and the first key whose
/// minimum is not met.
pub fn unmet_min_values(
    prepared: &PreparedCatalog,
    types: &[usize],
    min_values: &[(String, u32)],
) -> Option<(String, u32, usize)> {
    for (key, min) in min_values {
        let distinct: BTreeSet<String> = types
            .iter()
            .flat_map(|t| values_for_key(prepared, *t, key))
            .collect();
        if distinct.len() < *min as usize {
            return Some((key.clone(), *min, distinct.len()));
        }
    }
    None
}

/// Chooses at most `max_types` types, cheapest first, but first enough types to meet every
/// `minValues`; returns their offerings cheapest first, by position in the catalog
/// ([`OfferingAt::option`] makes each a launch option).
pub fn launch_offerings(
    state: &ClusterState,
    prepared: &PreparedCatalog,
    types: &[usize],
    reqs: &Requirements,
    min_values: &[(String, u32)],
    now_ms: u64,
    max_types: usize,
) -> Vec<OfferingAt> {
    let mask = OfferingMask::new(state, prepared, OfferingFilter::new(reqs), now_ms);
    // The cheapest allowed, available offering of each type, without building options yet.
    // Types are in name order in the prepared catalog, so (price, index) orders them by price,
    // then name.
    // Each type's offerings are looked at cheapest first: the first allowed one is its price.
    let by_price = prepared.catalog.offerings_by_price();
    let mut per_type: Vec<(Price, usize)> = types
        .iter()
        .filter_map(|&t| {
            let offerings = &prepared.catalog.instance_types[t].offerings;
            by_price[t]
                .iter()
                .copied()
                .find(|&o| mask.allows(t, o))
                .map(|o| (offerings[o].price, t))
        })
        .collect();
    let max_types = max_types.max(1);
    if min_values.is_empty() && per_type.len() > max_types {
        // Only the cheapest `max_types` are chosen: no need to order the rest.
        per_type.select_nth_unstable(max_types - 1);
        per_type.truncate(max_types);
    }
    per_type.sort_unstable();
    let mut chosen: Vec<usize> = Vec::new();
    // Meet minValues first, cheapest types that bring a new value.
    for (key, min) in min_values {
        let mut seen: BTreeSet<String> = chosen
            .iter()
            .flat_map(|i| values_for_key(prepared, per_type[*i].1, key))
            .collect();
        for (i, entry) in per_type.iter().enumerate() {
            if seen.len() >= *min as usize {
                break;
            }
            let values = values_for_key(prepared, entry.1, key);
            if values.iter().any(|v| !seen.contains(v)) && !chosen.contains(&i) {
                chosen.push(i);
                seen.extend(values);
            }
        }
    }
    for i in 0..per_type.len() {
        if chosen.len() >= max_types {
            break;
        }
        if !chosen.contains(&i) {
            chosen.push(i);
        }
    }
    chosen.sort_unstable();
    let mut out: Vec<OfferingAt> = chosen
        .iter()
        .flat_map(|i| type_offerings(&mask, per_type[*i].1))
        .collect();
    let offering = |a: &OfferingAt| &prepared.catalog.instance_types[a.t].offerings[a.o];
    // Zones compare by position: the catalog's zone names are in name order.
    let zone_of = &mask.zones.of_offering;
    out.sort_by(|a, b| {
        a.price.cmp(&b.price).then(a.t.cmp(&b.t)).then_with(|| {
            (zone_of[a.t][a.o], offering(a).capacity_type)
                .cmp(&(zone_of[b.t][b.o], offering(b).capacity_type))
        })
    });
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::catalog::{Catalog, builtin};
    use crate::model::nodeclaim::OfferingKey;
    use crate::model::requirements::Requirement;

    /// Every 40th type of the built-in catalog: all its zones and capacity types, quickly.
    fn catalog() -> Arc<PreparedCatalog> {
        static PREPARED: std::sync::OnceLock<Arc<PreparedCatalog>> = std::sync::OnceLock::new();
        PREPARED
            .get_or_init(|| {
                let full = builtin::us_east_1();
                Arc::new(PreparedCatalog::new(Catalog {
                    region: full.region.clone(),
                    instance_types: full.instance_types.iter().step_by(40).cloned().collect(),
                    ..Catalog::default()
                }))
            })
            .clone()
    }

    proptest! {
        #[test]
        fn the_mask_answers_as_the_filter_and_the_state(
            zones in prop::collection::vec(any::<bool>(), 6),
            zone_not_in in any::<bool>(),
            capacities in prop::collection::vec(any::<bool>(), 3),
            constrain_zone in any::<bool>(),
            constrain_capacity in any::<bool>(),
            marked in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), 0u64..2_000), 0..12),
        ) {
            let prepared = catalog();
            let names = &prepared.catalog.offering_zones().names;
            let mut reqs = Requirements::new();
            if constrain_zone {
                let chosen = names.iter().zip(&zones).filter(|(_, on)| **on).map(|(z, _)| z.clone());
                reqs.add(if zone_not_in {
                    Requirement::values_not_in(labels::ZONE, chosen)
                } else {
                    Requirement::values_in(labels::ZONE, chosen)
                });
            }
            if constrain_capacity {
                let chosen = [CapacityType::Reserved, CapacityType::Spot, CapacityType::OnDemand]
                    .into_iter()
                    .zip(&capacities)
                    .filter(|(_, on)| **on)
                    .map(|(c, _)| c.as_str().to_string());
                reqs.add(Requirement::values_in(labels::CAPACITY_TYPE, chosen));
            }
            let mut state = ClusterState {
                catalog: Some(prepared.clone()),
                ..ClusterState::default()
            };
            let types = &prepared.catalog.instance_types;
            for (t, o, until) in marked {
                let it = &types[t.index(types.len())];
                let offering = &it.offerings[o.index(it.offerings.len())];
                state.unavailable.insert(
                    OfferingKey {
                        instance_type: it.name.clone(),
                        zone: offering.zone.clone(),
                        capacity_type: offering.capacity_type,
                    },
                    until,
                );
            }
            let now_ms = 1_000;
            let filter = OfferingFilter::new(&reqs);
            let mask = OfferingMask::new(&state, &prepared, filter, now_ms);
            for (t, it) in types.iter().enumerate() {
                for (o, offering) in it.offerings.iter().enumerate() {
                    let expected = filter.allows(&offering.zone, offering.capacity_type.as_str())
                        && state.offering_available(it, offering, now_ms);
                    prop_assert_eq!(mask.allows(t, o), expected, "type {} offering {}", it.name, o);
                }
                let any = it.offerings.iter().any(|offering| {
                    filter.allows(&offering.zone, offering.capacity_type.as_str())
                        && state.offering_available(it, offering, now_ms)
                });
                prop_assert_eq!(mask.allows_any(t), any);
            }
        }
    }
}
