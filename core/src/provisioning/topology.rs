//! Topology for one solve: pod (anti-)affinity and topology spread, counted per domain.
//!
//! A group is one constraint shape (kind, topology key, selector, namespaces). Its counts say
//! how many matching pods each domain holds: per label value for keys such as the zone, per
//! target (node or machine) for `kubernetes.io/hostname`. As in Karpenter, a pod placed on a
//! machine whose domain is not decided yet counts for spread and affinity only once it is one
//! value, and for anti-affinity in every domain the machine may still be in.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::affinity::{
    InclusionPolicy, LabelSelector, PodAffinityTerm, TopologySpreadConstraint,
};
use crate::model::labels::HOSTNAME;
use crate::model::pod::Pod;
use crate::model::requirements::{Requirement, Requirements};
use crate::model::taints::{Taint, first_untolerated};

use super::profile::PodProfile;

/// What a topology group counts pods for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupKind {
    /// A topology spread constraint.
    Spread {
        /// `maxSkew`.
        max_skew: u32,
        /// `minDomains`.
        min_domains: Option<u32>,
        /// `nodeAffinityPolicy: Honor`: only the domains the pod's node affinity allows count.
        honor_node_affinity: bool,
    },
    /// A pod affinity term.
    Affinity,
    /// A pod anti-affinity term.
    AntiAffinity,
    /// Counts the pods that *own* a required anti-affinity term: a pod matching the selector
    /// may not join their domains.
    InverseAntiAffinity,
}

/// What makes two pods' constraints one group: counted once for both.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct GroupKey {
    /// What it counts for.
    pub kind: GroupKind,
    /// The node label whose values are its domains.
    pub topology_key: String,
    /// The pods it counts.
    pub selector: LabelSelector,
    /// Sorted.
    pub namespaces: Vec<String>,
}

#[derive(Debug, Clone)]
struct Group {
    key: GroupKey,
    /// The topology key is `kubernetes.io/hostname` (each machine is its own domain).
    hostname: bool,
    counts: BTreeMap<String, u32>,
    target_counts: Vec<u32>,
    /// Targets with a non-zero count (hostname keys).
    occupied_targets: u32,
    total: u32,
}

impl Group {
    fn count(&self, domain: &str) -> u32 {
        self.counts.get(domain).copied().unwrap_or(0)
    }

    fn target_count(&self, target: usize) -> u32 {
        self.target_counts.get(target).copied().unwrap_or(0)
    }

    fn matches(&self, pod: &Pod) -> bool {
        self.key
            .namespaces
            .binary_search(&pod.key.namespace)
            .is_ok()
            && self.key.selector.matches(&pod.labels)
    }
}

/// Domains offered by one source (a NodePool, or an existing node), with its taints.
#[derive(Debug, Clone, Default)]
pub struct DomainSource {
    /// Its taints.
    pub taints: Vec<Taint>,
    /// The values each topology key can take there.
    pub domains: BTreeMap<String, BTreeSet<String>>,
}

/// A rule on the domain a pinned machine is in.
#[derive(Debug, Clone)]
pub enum DomainRule {
    /// One of these domains.
    OneOf(Vec<String>),
    /// None of these domains.
    NoneOf(Vec<String>),
}

/// What one pod's constraints allow right now (see [`Topology::scan`]).
#[derive(Debug, Clone, Default)]
pub struct Scan {
    impossible: bool,
    /// Hostname spread groups and the most matching pods a machine may already hold.
    host_max: Vec<(usize, u32)>,
    /// Hostname affinity groups the machine must already hold a pod of.
    host_min: Vec<usize>,
    /// Hostname anti-affinity groups the machine must hold no pod of.
    host_empty: Vec<usize>,
    /// Rules on the domains of other keys.
    domains: Vec<(String, DomainRule)>,
}

impl Scan {
    /// The rules on the domains of keys other than the hostname.
    pub fn domains(&self) -> &[(String, DomainRule)] {
        &self.domains
    }
}

/// The groups one pod counts for and is blocked by (see [`Topology::prepare`]).
#[derive(Debug, Clone, Default)]
pub struct PodGroups {
    /// Groups whose selector matches the pod.
    member: Vec<usize>,
    /// Inverse anti-affinity groups whose selector matches the pod.
    inverse: Vec<usize>,
    /// Inverse anti-affinity groups of the pod's own required terms.
    owned_inverse: Vec<usize>,
}

/// The topology groups of one solve and how many matching pods each domain holds.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    groups: Vec<Group>,
    index: BTreeMap<GroupKey, usize>,
    /// Every value each non-hostname key can take (zones of the offerings, label values).
    universe: BTreeMap<String, BTreeSet<String>>,
    /// Where the domains come from, with the taints of their source (a NodePool's taints, or an
    /// existing node's), for spreads with `nodeTaintsPolicy: Honor`.
    sources: Vec<DomainSource>,
    /// Group indices a pod with these (namespace, labels) counts for.
    membership: BTreeMap<(String, BTreeMap<String, String>), Vec<usize>>,
}

fn namespaces_of(term: &PodAffinityTerm, pod: &Pod) -> Vec<String> {
    let mut ns = if term.namespaces.is_empty() {
        vec![pod.key.namespace.clone()]
    } else {
        term.namespaces.clone()
    };
    ns.sort();
    ns.dedup();
    ns
}

impl Topology {
    /// No group yet, over the domains these sources offer.
    pub fn new(sources: Vec<DomainSource>) -> Self {
        let mut universe: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for source in &sources {
            for (key, values) in &source.domains {
                universe
                    .entry(key.clone())
                    .or_default()
                    .extend(values.iter().cloned());
            }
        }
        Topology {
            universe,
            sources,
            ..Topology::default()
        }
    }

    /// Whether no pod of the solve has a topology constraint.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    fn group_index(&mut self, key: GroupKey) -> usize {
        if let Some(i) = self.index.get(&key) {
            return *i;
        }
        let i = self.groups.len();
        self.index.insert(key.clone(), i);
        self.groups.push(Group {
            hostname: key.topology_key == HOSTNAME,
            key,
            counts: BTreeMap::new(),
            target_counts: Vec::new(),
            occupied_targets: 0,
            total: 0,
        });
        self.membership.clear();
        i
    }

    fn spread_key(pod: &Pod, c: &crate::model::affinity::TopologySpreadConstraint) -> GroupKey {
        GroupKey {
            kind: GroupKind::Spread {
                max_skew: c.max_skew,
                min_domains: c.min_domains,
                honor_node_affinity: c.node_affinity_policy == InclusionPolicy::Honor,
            },
            topology_key: c.topology_key.clone(),
            selector: c.selector.clone(),
            namespaces: vec![pod.key.namespace.clone()],
        }
    }

    fn term_key(kind: GroupKind, pod: &Pod, t: &PodAffinityTerm) -> GroupKey {
        GroupKey {
            kind,
            topology_key: t.topology_key.clone(),
            selector: t.selector.clone(),
            namespaces: namespaces_of(t, pod),
        }
    }

    /// Registers the groups a pending pod's constraints need (at every relaxation level) and
    /// notes their indices in its profile.
    pub fn register_pending(&mut self, pod: &Pod, profile: &mut PodProfile) {
        profile.spread_groups = profile
            .spread
            .iter()
            .map(|c| self.group_index(Self::spread_key(pod, c)))
            .collect();
        profile.spread_self_match = profile
            .spread
            .iter()
            .map(|c| c.selector.matches(&pod.labels))
            .collect();
        profile.affinity_groups = profile
            .affinity
            .iter()
            .map(|t| self.group_index(Self::term_key(GroupKind::Affinity, pod, t)))
            .collect();
        profile.anti_affinity_groups = profile
            .anti_affinity
            .iter()
            .map(|t| self.group_index(Self::term_key(GroupKind::AntiAffinity, pod, t)))
            .collect();
        for t in profile.anti_affinity.iter().filter(|t| t.weight.is_none()) {
            self.group_index(Self::term_key(GroupKind::InverseAntiAffinity, pod, t));
        }
    }

    /// Resolves the groups a pod counts for and the inverse groups that may block it, once per
    /// solve, so the placement loop only reads them.
    pub fn prepare(&mut self, pod: &Pod) -> PodGroups {
        let member = self.member_groups(pod);
        let inverse = self
            .groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.key.kind == GroupKind::InverseAntiAffinity && g.matches(pod))
            .map(|(i, _)| i)
            .collect();
        let owned_inverse = pod
            .pod_anti_affinity
            .iter()
            .filter(|t| t.weight.is_none())
            .filter_map(|t| {
                self.index
                    .get(&Self::term_key(GroupKind::InverseAntiAffinity, pod, t))
                    .copied()
            })
            .collect();
        PodGroups {
            member,
            inverse,
            owned_inverse,
        }
    }

    /// The domains a spread counts for this pod: its node affinity (`nodeAffinityPolicy:
    /// Honor`, the default) and the taints of their source (`nodeTaintsPolicy: Honor`) decide.
    fn eligible_domains(
        &self,
        pod: &Pod,
        profile: &PodProfile,
        c: &TopologySpreadConstraint,
    ) -> Vec<&String> {
        let honor_affinity = c.node_affinity_policy == InclusionPolicy::Honor;
        let honor_taints = c.node_taints_policy == InclusionPolicy::Honor;
        let pod_domains = profile.strict_requirements.get(&c.topology_key);
        let tolerated: Option<BTreeSet<&String>> = honor_taints.then(|| {
            self.sources
                .iter()
                .filter(|s| first_untolerated(&s.taints, &pod.tolerations).is_none())
                .filter_map(|s| s.domains.get(&c.topology_key))
                .flatten()
                .collect()
        });
        self.universe
            .get(&c.topology_key)
            .map(|u| {
                u.iter()
                    .filter(|d| !honor_affinity || pod_domains.is_none_or(|r| r.has(d)))
                    .filter(|d| tolerated.as_ref().is_none_or(|t| t.contains(d)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// What a pod's constraints allow, computed once before it is tried against every
    /// machine (nothing is recorded while one pod is being placed).
    pub fn scan(&self, pod: &Pod, profile: &PodProfile, groups: &PodGroups) -> Scan {
        let mut scan = Scan::default();
        if !profile.is_registered() {
            scan.impossible = true;
            return scan;
        }
        for ((c, &gi), &matches) in profile
            .spread
            .iter()
            .zip(&profile.spread_groups)
            .zip(&profile.spread_self_match)
        {
            let g = &self.groups[gi];
            let self_match = u32::from(matches);
            if g.hostname {
                scan.host_max
                    .push((gi, c.max_skew.saturating_sub(self_match)));
                continue;
            }
            let eligible = self.eligible_domains(pod, profile, c);
            let mut min = eligible.iter().map(|d| g.count(d)).min().unwrap_or(0);
            if c.min_domains.is_some_and(|m| (eligible.len() as u32) < m) {
                min = 0;
            }
            let allowed = self
                .universe
                .get(&c.topology_key)
                .map(|u| {
                    u.iter()
                        .filter(|d| {
                            g.count(d).saturating_add(self_match) <= c.max_skew.saturating_add(min)
                        })
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            scan.domains
                .push((c.topology_key.clone(), DomainRule::OneOf(allowed)));
        }
        for &gi in &profile.affinity_groups {
            let g = &self.groups[gi];
            if g.total == 0 {
                continue;
            }
            if g.hostname {
                scan.host_min.push(gi);
            } else {
                // As `admit` does: only domains the pod allows; none left means the pod may
                // start the group anywhere (if it matches itself), so no rule here.
                let pod_domains = profile.strict_requirements.get(&g.key.topology_key);
                let present: Vec<String> = g
                    .counts
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(d, _)| d.clone())
                    .filter(|d| pod_domains.is_none_or(|r| r.has(d)))
                    .collect();
                if !present.is_empty() {
                    scan.domains
                        .push((g.key.topology_key.clone(), DomainRule::OneOf(present)));
                }
            }
        }
        for gi in profile
            .anti_affinity_groups
            .iter()
            .copied()
            .chain(groups.inverse.iter().copied())
        {
            let g = &self.groups[gi];
            if g.total == 0 {
                continue;
            }
            if g.hostname {
                scan.host_empty.push(gi);
            } else {
                let blocked: Vec<String> = g
                    .counts
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(d, _)| d.clone())
                    .collect();
                if !blocked.is_empty() {
                    scan.domains
                        .push((g.key.topology_key.clone(), DomainRule::NoneOf(blocked)));
                }
            }
        }
        scan
    }

    /// A cheap check before [`Topology::admit`]: true when the target certainly cannot take
    /// the pod by its hostname counts. (The domain a planned machine is already pinned to is
    /// checked by the walk over them, on interned ids: `provisioning::domain_pins`.)
    pub fn hosts_reject(&self, scan: &Scan, target: usize) -> bool {
        if scan.impossible {
            return true;
        }
        scan.host_max
            .iter()
            .any(|(gi, max)| self.groups[*gi].target_count(target) > *max)
            || scan
                .host_min
                .iter()
                .any(|gi| self.groups[*gi].target_count(target) == 0)
            || scan
                .host_empty
                .iter()
                .any(|gi| self.groups[*gi].target_count(target) > 0)
    }

    /// Registers the inverse anti-affinity group of a pod that is already running.
    pub fn register_running(&mut self, pod: &Pod) {
        for t in pod.pod_anti_affinity.iter().filter(|t| t.weight.is_none()) {
            self.group_index(Self::term_key(GroupKind::InverseAntiAffinity, pod, t));
        }
    }

    fn member_groups(&mut self, pod: &Pod) -> Vec<usize> {
        let key = (pod.key.namespace.clone(), pod.labels.clone());
        if let Some(groups) = self.membership.get(&key) {
            return groups.clone();
        }
        let groups: Vec<usize> = self
            .groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.key.kind != GroupKind::InverseAntiAffinity && g.matches(pod))
            .map(|(i, _)| i)
            .collect();
        self.membership.insert(key, groups.clone());
        groups
    }

    /// Checks `pod` (at `profile`'s level) against a target and narrows `reqs` (the target's
    /// requirements: a planned machine's, or an existing node's labels) to the domains the
    /// constraints allow, as Karpenter does. `Err` says why not.
    pub fn admit(
        &self,
        pod: &Pod,
        profile: &PodProfile,
        groups: &PodGroups,
        target: usize,
        reqs: &mut Requirements,
    ) -> Result<(), String> {
        // Invariant: the profile was registered (`register_pending`), so every constraint has
        // its group. A profile that was not is refused rather than checked partially.
        if !profile.is_registered() {
            return Err("the pod's topology constraints were not registered".to_string());
        }
        // Topology spread.
        for (c, &gi) in profile.spread.iter().zip(&profile.spread_groups) {
            let g = &self.groups[gi];
            let self_match = u32::from(c.selector.matches(&pod.labels));
            let key = c.topology_key.as_str();
            if key == HOSTNAME {
                let n = g.target_count(target);
                if n + self_match > c.max_skew {
                    return Err(format!(
                        "topology spread on {HOSTNAME} (maxSkew {}): the machine already has {n} matching pods",
                        c.max_skew
                    ));
                }
                continue;
            }
            let pod_domains = profile.strict_requirements.get(key);
            let universe = self.universe.get(key);
            let eligible = self.eligible_domains(pod, profile, c);
            let mut min = eligible.iter().map(|d| g.count(d)).min().unwrap_or(0);
            if c.min_domains.is_some_and(|m| (eligible.len() as u32) < m) {
                min = 0;
            }
            let best = universe
                .into_iter()
                .flatten()
                .filter(|d| reqs.get(key).is_none_or(|r| r.has(d)))
                .filter(|d| pod_domains.is_none_or(|r| r.has(d)))
                .filter(|d| g.count(d).saturating_add(self_match) <= c.max_skew.saturating_add(min))
                .min_by(|a, b| g.count(a).cmp(&g.count(b)).then_with(|| a.cmp(b)));
            match best {
                Some(d) => reqs.add(Requirement::single(key, d)),
                None => {
                    return Err(format!(
                        "topology spread on {key} (maxSkew {}): no domain this machine can be in stays within the skew",
                        c.max_skew
                    ));
                }
            }
        }
        // Pod affinity.
        for (t, &gi) in profile.affinity.iter().zip(&profile.affinity_groups) {
            let g = &self.groups[gi];
            let key = t.topology_key.as_str();
            let self_match = t.selector.matches(&pod.labels)
                && namespaces_of(t, pod).contains(&pod.key.namespace);
            if key == HOSTNAME {
                if g.target_count(target) > 0 || (g.total == 0 && self_match) {
                    continue;
                }
                return Err(format!(
                    "pod affinity on {HOSTNAME}: no matching pod on this machine"
                ));
            }
            let pod_domains = profile.strict_requirements.get(key);
            let open = |d: &&String| {
                reqs.get(key).is_none_or(|r| r.has(d)) && pod_domains.is_none_or(|r| r.has(d))
            };
            let present: Vec<&String> = g
                .counts
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(d, _)| d)
                .filter(|d| pod_domains.is_none_or(|r| r.has(d)))
                .collect();
            let choice = if present.is_empty() {
                if !self_match {
                    return Err(format!(
                        "pod affinity on {key}: no pod matches the selector in any domain the pod allows"
                    ));
                }
                // The first pod of a self-affine group chooses the domain for the group.
                self.universe
                    .get(key)
                    .and_then(|u| u.iter().find(|d| open(d)))
            } else {
                present
                    .into_iter()
                    .filter(|d| open(d))
                    .max_by(|a, b| g.count(a).cmp(&g.count(b)).then_with(|| b.cmp(a)))
            };
            match choice {
                Some(d) => reqs.add(Requirement::single(key, d)),
                None => {
                    return Err(format!(
                        "pod affinity on {key}: this machine cannot be where the matching pods are"
                    ));
                }
            }
        }
        // Pod anti-affinity: the pod's own terms, and the required terms of pods placed before.
        let mut blocking: Vec<usize> = profile.anti_affinity_groups.clone();
        blocking.extend(
            groups
                .inverse
                .iter()
                .copied()
                .filter(|i| self.groups[*i].total > 0),
        );
        for gi in blocking {
            let g = &self.groups[gi];
            let key = g.key.topology_key.as_str();
            if key == HOSTNAME {
                if g.target_count(target) > 0 {
                    return Err(format!(
                        "pod anti-affinity on {HOSTNAME}: a conflicting pod is on this machine"
                    ));
                }
                continue;
            }
            let blocked: Vec<String> = g
                .counts
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(d, _)| d.clone())
                .collect();
            if blocked.is_empty() {
                continue;
            }
            reqs.add(Requirement::values_not_in(key, blocked));
            if reqs.get(key).is_some_and(|r| r.is_empty_set()) {
                return Err(format!(
                    "pod anti-affinity on {key}: every domain this machine can be in holds a conflicting pod"
                ));
            }
        }
        // A pod with its own anti-affinity on a key pins the machine to one domain of it, so the
        // next pod of the group can use the others in the same batch. (Karpenter leaves the
        // machine open and counts the pod in every domain, which places one pod per batch.)
        for &gi in &profile.anti_affinity_groups {
            let g = &self.groups[gi];
            if g.hostname {
                continue;
            }
            let key = g.key.topology_key.as_str();
            let pinned = reqs
                .get(key)
                .is_some_and(|r| !r.complement && r.values.len() <= 1);
            if pinned {
                continue;
            }
            let choice = self.universe.get(key).and_then(|u| {
                u.iter()
                    .find(|d| reqs.get(key).is_none_or(|r| r.has(d)))
                    .cloned()
            });
            match choice {
                Some(d) => reqs.add(Requirement::single(key, &d)),
                None => {
                    return Err(format!(
                        "pod anti-affinity on {key}: no domain is open to this machine"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Counts a placed pod in every group it matches (spread and affinity only when the
    /// machine's domain is a single value; anti-affinity in every domain it may be in), and in
    /// the inverse group of its own required anti-affinity terms.
    pub fn record(&mut self, groups: &PodGroups, target: usize, reqs: &Requirements) {
        if self.groups.is_empty() {
            return;
        }
        for (gi, all_domains) in groups
            .member
            .iter()
            .map(|g| (*g, false))
            .chain(groups.owned_inverse.iter().map(|g| (*g, true)))
        {
            let g = &mut self.groups[gi];
            if g.hostname {
                if g.target_counts.len() <= target {
                    g.target_counts.resize(target + 1, 0);
                }
                if g.target_counts[target] == 0 {
                    g.occupied_targets += 1;
                }
                g.target_counts[target] += 1;
                g.total += 1;
                continue;
            }
            let Some(r) = reqs.get(&g.key.topology_key) else {
                continue;
            };
            let pessimistic = all_domains || g.key.kind == GroupKind::AntiAffinity;
            let values: Vec<String> = if !r.complement && r.values.len() == 1 {
                r.values.iter().cloned().collect()
            } else if pessimistic {
                self.universe
                    .get(&g.key.topology_key)
                    .map(|u| u.iter().filter(|d| r.has(d)).cloned().collect())
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            for d in values {
                *g.counts.entry(d).or_insert(0) += 1;
                g.total += 1;
            }
        }
    }

    /// True when every one of `targets` already holds a pod that `pod`'s required hostname
    /// anti-affinity forbids: no existing or planned target can take it.
    pub fn hostname_blocked_everywhere(&self, profile: &PodProfile, targets: u32) -> bool {
        profile
            .anti_affinity
            .iter()
            .zip(&profile.anti_affinity_groups)
            .any(|(_, &gi)| self.groups[gi].hostname && self.groups[gi].occupied_targets >= targets)
    }
}
