//! The launch options of a planned machine: every allowed, available offering of its cheapest
//! instance types, at most `max_types` of them, keeping `minValues` satisfied.

use std::collections::BTreeSet;

use crate::catalog::PreparedCatalog;
use crate::catalog::Price;
use crate::model::labels;
use crate::model::nodeclaim::LaunchOption;
use crate::model::requirements::Requirements;
use crate::state::ClusterState;

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
    pub fn new(reqs: &'a Requirements) -> Self {
        OfferingFilter {
            zone: reqs.get(labels::ZONE),
            capacity_type: reqs.get(labels::CAPACITY_TYPE),
        }
    }

    pub fn allows(&self, zone: &str, capacity_type: &str) -> bool {
        self.zone.is_none_or(|r| r.has(zone))
            && self.capacity_type.is_none_or(|r| r.has(capacity_type))
    }
}

/// One offering of the prepared catalog, by position: its type's index and the offering's
/// index in that type, with its price. Choosing among offerings this way builds no strings;
/// [`OfferingAt::option`] makes the launch option of the chosen ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OfferingAt {
    pub t: usize,
    pub o: usize,
    pub price: Price,
}

impl OfferingAt {
    pub fn option(&self, prepared: &PreparedCatalog) -> LaunchOption {
        let it = &prepared.catalog.instance_types[self.t];
        let o = &it.offerings[self.o];
        LaunchOption {
            instance_type: it.name.clone(),
            zone: o.zone.clone(),
            capacity_type: o.capacity_type,
            price: o.price,
        }
    }
}

/// The allowed, available offerings of one type.
fn type_offerings<'a>(
    state: &'a ClusterState,
    prepared: &'a PreparedCatalog,
    t: usize,
    filter: OfferingFilter<'a>,
    now_ms: u64,
) -> impl Iterator<Item = OfferingAt> + 'a {
    let it = &prepared.catalog.instance_types[t];
    it.offerings
        .iter()
        .enumerate()
        .filter(move |(_, o)| filter.allows(&o.zone, o.capacity_type.as_str()))
        .filter(move |(_, o)| state.offering_available(it, o, now_ms))
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
    let filter = OfferingFilter::new(reqs);
    // The cheapest allowed, available offering of each type, without building options yet.
    // Types are in name order in the prepared catalog, so (price, index) orders them by price,
    // then name.
    let mut per_type: Vec<(Price, usize)> = types
        .iter()
        .filter_map(|&t| {
            type_offerings(state, prepared, t, filter, now_ms)
                .map(|o| o.price)
                .min()
                .map(|price| (price, t))
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
        .flat_map(|i| type_offerings(state, prepared, per_type[*i].1, filter, now_ms))
        .collect();
    let offering = |a: &OfferingAt| &prepared.catalog.instance_types[a.t].offerings[a.o];
    out.sort_by(|a, b| {
        a.price.cmp(&b.price).then(a.t.cmp(&b.t)).then_with(|| {
            let (oa, ob) = (offering(a), offering(b));
            oa.zone
                .cmp(&ob.zone)
                .then(oa.capacity_type.cmp(&ob.capacity_type))
        })
    });
    out
}
