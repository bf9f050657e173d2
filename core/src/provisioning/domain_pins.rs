//! The domain rules of a pod's walk over the planned machines, in integers.
//!
//! A pod with a zonal spread or affinity may only join a planned machine pinned to a domain
//! its rules allow (see [`super::topology::Topology::scan`]). A large solve asks that of thousands of machines
//! per pod; asked through the machines' requirements, each answer is a search by label key and
//! a comparison of domain names. Here both sides are interned once — the rule's domains per
//! pod, each machine's pinned domain when its requirements change — and the walk compares
//! integers. The answers are the strings' answers exactly: a name is interned to one id, and
//! every name the walk compares is interned.

use std::collections::BTreeMap;

use super::topology::DomainRule;
use crate::model::requirements::Requirements;

/// Topology keys and their domain names, each under a small integer for one solve, and the
/// domain each planned machine is pinned to on each key, as far as walks have asked.
#[derive(Debug, Default)]
pub(super) struct DomainIds {
    keys: Vec<String>,
    values: Vec<BTreeMap<String, u32>>,
    /// By key, then by planned machine: its domain's id, [`UNREAD`] or [`UNPINNED`]. One
    /// integer per machine, side by side, so that a walk over thousands of machines reads a
    /// few cache lines, not each machine's requirements.
    pins: Vec<Vec<u32>>,
}

/// Not read since the machine's requirements last changed.
const UNREAD: u32 = u32::MAX;
/// Not pinned to one domain of the key (no requirement on it, several values, or `NotIn`).
const UNPINNED: u32 = u32::MAX - 1;

/// One domain rule of a pod, on interned ids (each list sorted).
#[derive(Debug)]
pub(super) enum IdRule {
    OneOf(Vec<u32>),
    NoneOf(Vec<u32>),
}

impl DomainIds {
    fn key(&mut self, key: &str) -> usize {
        match self.keys.iter().position(|k| k == key) {
            Some(i) => i,
            None => {
                self.keys.push(key.to_string());
                self.values.push(BTreeMap::new());
                self.pins.push(Vec::new());
                self.keys.len() - 1
            }
        }
    }

    fn value(&mut self, key: usize, value: &str) -> u32 {
        let values = &mut self.values[key];
        if let Some(&id) = values.get(value) {
            return id;
        }
        // Far fewer than 2^32 − 2 domains of one key: a cluster has a few zones, and a hostname
        // key is never a domain rule (hostname rules are counted per machine).
        let id = values.len() as u32;
        values.insert(value.to_string(), id);
        id
    }

    /// A scan's domain rules ([`super::topology::Scan::domains`]) on ids.
    pub(super) fn rules(&mut self, domains: &[(String, DomainRule)]) -> Vec<(usize, IdRule)> {
        domains
            .iter()
            .map(|(key, rule)| {
                let k = self.key(key);
                let mut ids = |names: &[String]| {
                    let mut ids: Vec<u32> = names.iter().map(|n| self.value(k, n)).collect();
                    ids.sort_unstable();
                    ids
                };
                let rule = match rule {
                    DomainRule::OneOf(allowed) => IdRule::OneOf(ids(allowed)),
                    DomainRule::NoneOf(blocked) => IdRule::NoneOf(ids(blocked)),
                };
                (k, rule)
            })
            .collect()
    }

    /// Forgets what was read of planned machine `machine`: its requirements changed, or it is
    /// a new machine in the place of one dropped.
    pub(super) fn forget(&mut self, machine: usize) {
        for pins in &mut self.pins {
            if let Some(pin) = pins.get_mut(machine) {
                *pin = UNREAD;
            }
        }
    }

    /// Whether the rules rule out planned machine `machine`, whose requirements are `reqs`:
    /// only a machine pinned to one domain of a key (an `In` of one value) is judged on that
    /// key, and it is ruled out when its domain is not one a `OneOf` allows, or is one a
    /// `NoneOf` blocks.
    pub(super) fn rejects(
        &mut self,
        rules: &[(usize, IdRule)],
        machine: usize,
        reqs: &Requirements,
    ) -> bool {
        rules.iter().any(|(key, rule)| {
            if self.pins[*key].len() <= machine {
                self.pins[*key].resize(machine + 1, UNREAD);
            }
            let mut pin = self.pins[*key][machine];
            if pin == UNREAD {
                pin = self.pinned(*key, reqs).unwrap_or(UNPINNED);
                self.pins[*key][machine] = pin;
            }
            if pin == UNPINNED {
                return false;
            }
            match rule {
                IdRule::OneOf(allowed) => allowed.binary_search(&pin).is_err(),
                IdRule::NoneOf(blocked) => blocked.binary_search(&pin).is_ok(),
            }
        })
    }

    fn pinned(&mut self, key: usize, reqs: &Requirements) -> Option<u32> {
        let r = reqs.get(&self.keys[key])?;
        if r.complement || r.values.len() != 1 {
            return None;
        }
        let value = r.values.iter().next()?;
        Some(self.value(key, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::requirements::{Operator, RequirementSpec};
    use proptest::prelude::*;

    /// The rule on names, as a machine's requirements state it: the answer the ids must give.
    fn rejects_by_name(scan_domains: &[(String, DomainRule)], reqs: &Requirements) -> bool {
        scan_domains.iter().any(|(key, rule)| {
            let Some(r) = reqs.get(key) else {
                return false;
            };
            if r.complement || r.values.len() != 1 {
                return false;
            }
            let Some(pinned) = r.values.iter().next() else {
                return false;
            };
            match rule {
                DomainRule::OneOf(allowed) => !allowed.contains(pinned),
                DomainRule::NoneOf(blocked) => blocked.contains(pinned),
            }
        })
    }

    const ZONES: [&str; 4] = ["za", "zb", "zc", "zd"];

    fn names(mask: u8) -> Vec<String> {
        (0..4)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| ZONES[i].to_string())
            .collect()
    }

    proptest! {
        /// Machines pinned or not, rules of either kind on one or two keys, machines asked
        /// again after another rule: the ids answer as the names do.
        #[test]
        fn ids_answer_as_names_do(
            machines in proptest::collection::vec((0u8..16, any::<bool>(), 0u8..16), 1..12),
            walks in proptest::collection::vec(proptest::collection::vec((any::<bool>(), any::<bool>(), 0u8..16), 0..3), 1..6),
        ) {
            let mut ids = DomainIds::default();
            let machines: Vec<Requirements> = machines
                .iter()
                .map(|&(zones, not_in, racks)| {
                    let zones: Vec<String> = names(zones);
                    let zones: Vec<&str> = zones.iter().map(String::as_str).collect();
                    let racks: Vec<String> = names(racks);
                    let racks: Vec<&str> = racks.iter().map(String::as_str).collect();
                    let op = if not_in { Operator::NotIn } else { Operator::In };
                    let mut specs = vec![RequirementSpec::new("zone", op, &zones)];
                    if !racks.is_empty() {
                        specs.push(RequirementSpec::new("rack", Operator::In, &racks));
                    }
                    Requirements::from_specs(&specs)
                })
                .collect();
            for walk in walks {
                let by_name: Vec<(String, DomainRule)> = walk
                    .iter()
                    .map(|&(rack, one_of, mask)| {
                        let key = if rack { "rack" } else { "zone" }.to_string();
                        let domains = names(mask);
                        (key, if one_of { DomainRule::OneOf(domains) } else { DomainRule::NoneOf(domains) })
                    })
                    .collect();
                let rules = ids.rules(&by_name);
                for (machine, reqs) in machines.iter().enumerate() {
                    prop_assert_eq!(ids.rejects(&rules, machine, reqs), rejects_by_name(&by_name, reqs));
                }
            }
        }
    }

    fn reqs(zones: &[&str]) -> Requirements {
        let mut r = Requirements::default();
        if !zones.is_empty() {
            r = r.intersect(&Requirements::from_specs(&[RequirementSpec::new(
                "zone",
                Operator::In,
                zones,
            )]));
        }
        r
    }

    #[test]
    fn judges_only_pinned_machines_and_as_the_names_do() {
        let mut ids = DomainIds::default();
        let rules = vec![(
            ids.key("zone"),
            IdRule::OneOf(vec![ids.value(0, "a"), ids.value(0, "c")]),
        )];
        assert!(!ids.rejects(&rules, 0, &reqs(&["a"])));
        assert!(ids.rejects(&rules, 1, &reqs(&["b"])));
        // A domain first seen on a machine gets an id of its own, in no rule.
        assert!(ids.rejects(&rules, 2, &reqs(&["z"])));
        assert!(!ids.rejects(&rules, 3, &reqs(&["a", "b"])));
        assert!(!ids.rejects(&rules, 4, &reqs(&[])));
        let blocked = vec![(0, IdRule::NoneOf(vec![ids.value(0, "b")]))];
        assert!(ids.rejects(&blocked, 1, &reqs(&["b"])));
        assert!(!ids.rejects(&blocked, 0, &reqs(&["a"])));
        // What was read is kept until forgotten: machine 1 now holds other requirements.
        assert!(ids.rejects(&blocked, 1, &reqs(&["a"])));
        ids.forget(1);
        assert!(!ids.rejects(&blocked, 1, &reqs(&["a"])));
    }
}
