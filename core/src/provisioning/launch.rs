//! The launch options of a planned machine: every allowed, available offering of its cheapest
//! instance types, at most `max_types` of them, keeping `minValues` satisfied.

use std::collections::BTreeSet;

use crate::catalog::Price;
use crate::model::labels;
use crate::model::nodeclaim::LaunchOption;
use crate::model::requirements::Requirements;
use crate::state::{ClusterState, PreparedCatalog};

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

/// The allowed, available offerings of one type.
pub fn type_options(
    state: &ClusterState,
    prepared: &PreparedCatalog,
    t: usize,
    reqs: &Requirements,
    now_ms: u64,
) -> Vec<LaunchOption> {
    let it = &prepared.catalog.instance_types[t];
    let filter = OfferingFilter::new(reqs);
    it.offerings
        .iter()
        .filter(|o| filter.allows(&o.zone, o.capacity_type.as_str()))
        .filter(|o| state.offering_available(it, o, now_ms))
        .map(|o| LaunchOption {
            instance_type: it.name.clone(),
            zone: o.zone.clone(),
            capacity_type: o.capacity_type,
            price: o.price,
        })
        .collect()
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
/// `minValues`; returns their options cheapest first.
pub fn launch_options(
    state: &ClusterState,
    prepared: &PreparedCatalog,
    types: &[usize],
    reqs: &Requirements,
    min_values: &[(String, u32)],
    now_ms: u64,
    max_types: usize,
) -> Vec<LaunchOption> {
    let filter = OfferingFilter::new(reqs);
    // The cheapest allowed, available offering of each type, without building options yet.
    let mut per_type: Vec<(Price, &str, usize)> = Vec::new();
    for &t in types {
        let it = &prepared.catalog.instance_types[t];
        let cheapest = it
            .offerings
            .iter()
            .filter(|o| filter.allows(&o.zone, o.capacity_type.as_str()))
            .filter(|o| state.offering_available(it, o, now_ms))
            .map(|o| o.price)
            .min();
        if let Some(price) = cheapest {
            per_type.push((price, it.name.as_str(), t));
        }
    }
    per_type.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(b.1)));
    let mut chosen: Vec<usize> = Vec::new();
    // Meet minValues first, cheapest types that bring a new value.
    for (key, min) in min_values {
        let mut seen: BTreeSet<String> = chosen
            .iter()
            .flat_map(|i| values_for_key(prepared, per_type[*i].2, key))
            .collect();
        for (i, entry) in per_type.iter().enumerate() {
            if seen.len() >= *min as usize {
                break;
            }
            let values = values_for_key(prepared, entry.2, key);
            if values.iter().any(|v| !seen.contains(v)) && !chosen.contains(&i) {
                chosen.push(i);
                seen.extend(values);
            }
        }
    }
    for i in 0..per_type.len() {
        if chosen.len() >= max_types.max(1) {
            break;
        }
        if !chosen.contains(&i) {
            chosen.push(i);
        }
    }
    let chosen: BTreeSet<usize> = chosen.into_iter().collect();
    let mut out: Vec<LaunchOption> = chosen
        .iter()
        .flat_map(|i| type_options(state, prepared, per_type[*i].2, reqs, now_ms))
        .collect();
    out.sort_by(|a, b| {
        a.price
            .cmp(&b.price)
            .then(a.instance_type.cmp(&b.instance_type))
            .then(a.zone.cmp(&b.zone))
            .then(a.capacity_type.cmp(&b.capacity_type))
    });
    out
}
