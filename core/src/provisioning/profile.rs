//! A pending pod's scheduling constraints at its current relaxation level. Preferences start
//! as requirements (as Karpenter treats them) and are dropped one at a time when the pod fits
//! nowhere, in Karpenter's order.

use crate::config::PreferencePolicy;
use crate::model::affinity::{PodAffinityTerm, TopologySpreadConstraint, WhenUnsatisfiable};
use crate::model::pod::Pod;
use crate::model::requirements::{RequirementSpec, Requirements};
use crate::model::taints::{Taint, TaintEffect};

/// A pod's scheduling constraints as one solve reads them, with the preferences in force and
/// what was relaxed so far.
#[derive(Debug, Clone)]
pub struct PodProfile {
    /// Required node affinity terms not yet given up; the first is the one in force.
    required_terms: Vec<Vec<RequirementSpec>>,
    /// Preferred node affinity terms, heaviest first; the first is in force.
    preferred_terms: Vec<Vec<RequirementSpec>>,
    /// Pod affinity terms in force (required, then preferred ones not yet dropped).
    pub affinity: Vec<PodAffinityTerm>,
    /// Pod anti-affinity terms in force, likewise.
    pub anti_affinity: Vec<PodAffinityTerm>,
    /// Topology spread constraints in force (`ScheduleAnyway` ones until relaxed).
    pub spread: Vec<TopologySpreadConstraint>,
    /// Topology group of each entry of `affinity`, `anti_affinity`, `spread` (set when the
    /// profile is registered with the solve's topology).
    pub affinity_groups: Vec<usize>,
    /// Likewise for `anti_affinity`.
    pub anti_affinity_groups: Vec<usize>,
    /// Likewise for `spread`.
    pub spread_groups: Vec<usize>,
    /// Whether the pod matches each spread constraint's own selector (it counts itself).
    pub spread_self_match: Vec<bool>,
    /// Set by the last relaxation: `PreferNoSchedule` taints no longer keep the pod off.
    pub tolerate_prefer_no_schedule: bool,
    /// The node requirements in force (selector ∩ first required term ∩ first preferred term).
    pub requirements: Requirements,
    /// The same without the preferred term: what topology domains are counted against.
    pub strict_requirements: Requirements,
    /// What the last relaxation dropped (for explanations).
    pub relaxed: Vec<String>,
}

impl PodProfile {
    /// The pod's profile before any relaxation, its preferences read as `policy` says.
    pub fn new(pod: &Pod, policy: PreferencePolicy) -> Self {
        let respect = policy == PreferencePolicy::Respect;
        let mut preferred: Vec<(i32, Vec<RequirementSpec>)> = if respect {
            pod.preferred_node_affinity.clone()
        } else {
            Vec::new()
        };
        // Heaviest first; equal weights keep their order.
        preferred.sort_by_key(|t| std::cmp::Reverse(t.0));
        let keep = |terms: &[PodAffinityTerm]| -> Vec<PodAffinityTerm> {
            let mut required: Vec<PodAffinityTerm> = terms
                .iter()
                .filter(|t| t.weight.is_none())
                .cloned()
                .collect();
            if respect {
                let mut soft: Vec<PodAffinityTerm> = terms
                    .iter()
                    .filter(|t| t.weight.is_some())
                    .cloned()
                    .collect();
                soft.sort_by_key(|t| std::cmp::Reverse(t.weight));
                required.extend(soft);
            }
            required
        };
        let spread = pod
            .topology_spread
            .iter()
            .filter(|c| respect || c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
            .cloned()
            .map(|mut c| {
                // matchLabelKeys narrows the selector to the incoming pod's values.
                for key in c.match_label_keys.clone() {
                    if let Some(v) = pod.labels.get(&key) {
                        c.selector.match_labels.insert(key, v.clone());
                    }
                }
                c
            })
            .collect();
        let mut profile = PodProfile {
            required_terms: pod.required_node_affinity.clone(),
            preferred_terms: preferred.into_iter().map(|(_, t)| t).collect(),
            affinity: keep(&pod.pod_affinity),
            anti_affinity: keep(&pod.pod_anti_affinity),
            spread,
            affinity_groups: Vec::new(),
            anti_affinity_groups: Vec::new(),
            spread_groups: Vec::new(),
            spread_self_match: Vec::new(),
            tolerate_prefer_no_schedule: false,
            requirements: Requirements::new(),
            strict_requirements: Requirements::new(),
            relaxed: Vec::new(),
        };
        profile.rebuild(pod);
        profile
    }

    fn rebuild(&mut self, pod: &Pod) {
        let mut reqs = Requirements::from_labels(&pod.node_selector);
        if let Some(term) = self.required_terms.first() {
            reqs = reqs.intersect(&Requirements::from_specs(term));
        }
        self.strict_requirements = reqs.clone();
        if let Some(term) = self.preferred_terms.first() {
            reqs = reqs.intersect(&Requirements::from_specs(term));
        }
        self.requirements = reqs;
    }

    /// Whether every constraint has its topology group (see `Topology::register_pending`).
    pub fn is_registered(&self) -> bool {
        self.spread.len() == self.spread_groups.len()
            && self.spread.len() == self.spread_self_match.len()
            && self.affinity.len() == self.affinity_groups.len()
            && self.anti_affinity.len() == self.anti_affinity_groups.len()
    }

    /// Drops the next preference, in Karpenter's order: a required node-affinity alternative,
    /// a preferred pod affinity term, a preferred pod anti-affinity term, a preferred node
    /// affinity term, a ScheduleAnyway spread, then PreferNoSchedule taints are tolerated.
    /// Returns false when nothing is left to relax.
    pub fn relax(&mut self, pod: &Pod, any_prefer_no_schedule: bool) -> bool {
        let step = if self.required_terms.len() > 1 {
            self.required_terms.remove(0);
            "the first required node affinity term (trying the next)".to_string()
        } else if let Some(i) = heaviest_preferred(&self.affinity) {
            let t = self.affinity.remove(i);
            if i < self.affinity_groups.len() {
                self.affinity_groups.remove(i);
            }
            format!("preferred pod affinity on {}", t.topology_key)
        } else if let Some(i) = heaviest_preferred(&self.anti_affinity) {
            let t = self.anti_affinity.remove(i);
            if i < self.anti_affinity_groups.len() {
                self.anti_affinity_groups.remove(i);
            }
            format!("preferred pod anti-affinity on {}", t.topology_key)
        } else if !self.preferred_terms.is_empty() {
            self.preferred_terms.remove(0);
            "the heaviest preferred node affinity term".to_string()
        } else if let Some(i) = self
            .spread
            .iter()
            .position(|c| c.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway)
        {
            let c = self.spread.remove(i);
            if i < self.spread_groups.len() {
                self.spread_groups.remove(i);
            }
            if i < self.spread_self_match.len() {
                self.spread_self_match.remove(i);
            }
            format!("ScheduleAnyway topology spread on {}", c.topology_key)
        } else if !self.tolerate_prefer_no_schedule && any_prefer_no_schedule {
            self.tolerate_prefer_no_schedule = true;
            "PreferNoSchedule taints (now tolerated)".to_string()
        } else {
            return false;
        };
        self.relaxed.push(step);
        self.rebuild(pod);
        true
    }

    /// The first taint (in order) the pod does not tolerate at this level; PreferNoSchedule
    /// taints count until relaxed.
    pub fn untolerated<'a>(&self, pod: &Pod, taints: &'a [Taint]) -> Option<&'a Taint> {
        taints.iter().find(|taint| {
            (taint.effect != TaintEffect::PreferNoSchedule || !self.tolerate_prefer_no_schedule)
                && !pod.tolerations.iter().any(|t| t.tolerates(taint))
        })
    }
}

/// The index of the heaviest preferred term (the first of equal weights).
fn heaviest_preferred(terms: &[PodAffinityTerm]) -> Option<usize> {
    let mut best: Option<(usize, i32)> = None;
    for (i, t) in terms.iter().enumerate() {
        if let Some(w) = t.weight
            && best.is_none_or(|(_, bw)| w > bw)
        {
            best = Some((i, w));
        }
    }
    best.map(|(i, _)| i)
}
