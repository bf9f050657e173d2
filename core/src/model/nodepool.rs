//! NodePools (`karpenter.sh/v1`): the template and policy for the machines nodewright launches.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::duration::MaybeNever;
use super::labels;
use super::requirements::{Requirement, RequirementSpec, Requirements};
use super::resources::Resources;
use super::taints::Taint;

/// Karpenter's default `expireAfter`.
pub const DEFAULT_EXPIRE_AFTER_MS: u64 = 720 * 3600 * 1000;

/// `spec.disruption.consolidationPolicy`: which machines consolidation may take away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConsolidationPolicy {
    /// Only machines that run no workload pod.
    WhenEmpty,
    /// Also machines whose pods fit elsewhere, or on a cheaper replacement (the default).
    WhenEmptyOrUnderutilized,
}

/// The reasons a budget may restrict (empty list = all of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DisruptionReason {
    /// A machine that runs no workload pod.
    Empty,
    /// A machine consolidation moves the pods off.
    Underutilized,
    /// A machine that no longer matches its NodePool or EC2NodeClass.
    Drifted,
}

impl fmt::Display for DisruptionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// `nodes: "10%"` or `nodes: "5"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BudgetNodes {
    /// At most this many nodes at once.
    Count(u32),
    /// At most this share of the pool's nodes at once, rounded up.
    Percent(u32),
}

impl BudgetNodes {
    /// How many nodes of a pool of `total` this budget allows; percentages round up.
    pub fn allowed_of(self, total: u32) -> u32 {
        match self {
            BudgetNodes::Count(n) => n,
            BudgetNodes::Percent(p) => (total as u64 * p as u64).div_ceil(100) as u32,
        }
    }
}

/// One of `spec.disruption.budgets`: how many of the pool's nodes may be disrupted at once,
/// when, and for which reasons.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DisruptionBudget {
    /// How many nodes.
    pub nodes: BudgetNodes,
    /// A cron schedule in UTC; with `duration_ms`, the budget is active only in those windows.
    pub schedule: Option<String>,
    /// How long each window of `schedule` lasts.
    pub duration_ms: Option<u64>,
    /// The reasons it restricts; empty: all of them.
    pub reasons: Vec<DisruptionReason>,
}

impl DisruptionBudget {
    /// Karpenter's default: `nodes: 10%`, always, for every reason.
    pub fn default_budget() -> Self {
        DisruptionBudget {
            nodes: BudgetNodes::Percent(10),
            schedule: None,
            duration_ms: None,
            reasons: Vec::new(),
        }
    }

    /// Whether it restricts disruptions for `reason`.
    pub fn applies_to(&self, reason: DisruptionReason) -> bool {
        self.reasons.is_empty() || self.reasons.contains(&reason)
    }
}

/// `nodeClassRef`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeClassRef {
    /// `karpenter.k8s.aws`.
    pub group: String,
    /// `EC2NodeClass`.
    pub kind: String,
    /// The EC2NodeClass's name.
    pub name: String,
}

/// A NodePool, as the decisions read it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodePool {
    /// `metadata.name`.
    pub name: String,
    /// 1..100, higher first; `None` sorts after every weighted pool.
    pub weight: Option<u32>,
    /// `spec.template.metadata.labels`: on every machine, and requirements of it.
    pub template_labels: BTreeMap<String, String>,
    /// `spec.template.metadata.annotations`.
    pub template_annotations: BTreeMap<String, String>,
    /// `spec.template.spec.requirements`, as written (with `minValues`).
    pub requirements: Vec<RequirementSpec>,
    /// `spec.template.spec.taints`.
    pub taints: Vec<Taint>,
    /// `spec.template.spec.startupTaints`: on a machine when it registers, taken off by
    /// whatever readies it.
    pub startup_taints: Vec<Taint>,
    /// `spec.template.spec.nodeClassRef`.
    pub node_class_ref: NodeClassRef,
    /// `spec.template.spec.expireAfter` (default 720h).
    pub expire_after: MaybeNever,
    /// `spec.template.spec.terminationGracePeriod`: how long a drain may wait on pods before
    /// it deletes them.
    pub termination_grace_period_ms: Option<u64>,
    /// `spec.disruption.consolidationPolicy`.
    pub consolidation_policy: ConsolidationPolicy,
    /// `spec.disruption.consolidateAfter` (default 0s).
    pub consolidate_after: MaybeNever,
    /// `spec.disruption.budgets` (default one: `nodes: 10%`).
    pub budgets: Vec<DisruptionBudget>,
    /// Limits by resource name (`cpu` in milli-cores, `memory` in bytes, `nodes`, extended).
    pub limits: BTreeMap<String, i64>,
    /// `spec.replicas`: a static pool keeps this many machines whatever the pods ask, and
    /// launches none for pending pods. Added after log format 2: see
    /// [`crate::model::trailing`].
    #[serde(default, deserialize_with = "crate::model::trailing")]
    pub replicas: Option<u32>,
}

impl NodePool {
    /// A pool with Karpenter's defaults, no requirements and no limits.
    pub fn new(name: &str, node_class: &str) -> Self {
        NodePool {
            name: name.to_string(),
            weight: None,
            template_labels: BTreeMap::new(),
            template_annotations: BTreeMap::new(),
            requirements: Vec::new(),
            taints: Vec::new(),
            startup_taints: Vec::new(),
            node_class_ref: NodeClassRef {
                group: "karpenter.k8s.aws".to_string(),
                kind: "EC2NodeClass".to_string(),
                name: node_class.to_string(),
            },
            expire_after: MaybeNever::After(DEFAULT_EXPIRE_AFTER_MS),
            termination_grace_period_ms: None,
            consolidation_policy: ConsolidationPolicy::WhenEmptyOrUnderutilized,
            consolidate_after: MaybeNever::After(0),
            budgets: vec![DisruptionBudget::default_budget()],
            limits: BTreeMap::new(),
            replicas: None,
        }
    }

    /// Whether it is a static pool (`spec.replicas` set).
    pub fn is_static(&self) -> bool {
        self.replicas.is_some()
    }

    /// The requirements every machine of this pool meets: its requirements, its template labels
    /// and its own name.
    pub fn template_requirements(&self) -> Requirements {
        let mut reqs = Requirements::from_specs(&self.requirements);
        for (k, v) in &self.template_labels {
            reqs.add(Requirement::single(k, v));
        }
        reqs.add(Requirement::single(labels::NODEPOOL, &self.name));
        reqs
    }

    /// Weight order: higher weight first, then name.
    pub fn priority_order(a: &NodePool, b: &NodePool) -> std::cmp::Ordering {
        b.weight
            .unwrap_or(0)
            .cmp(&a.weight.unwrap_or(0))
            .then_with(|| a.name.cmp(&b.name))
    }

    /// How much more of each limited resource this pool may take given what it uses now.
    /// `None` when there is no limit.
    pub fn remaining(&self, usage: &Resources, nodes: i64) -> Option<BTreeMap<String, i64>> {
        if self.limits.is_empty() {
            return None;
        }
        Some(
            self.limits
                .iter()
                .map(|(name, limit)| {
                    let used = if name == "nodes" {
                        nodes
                    } else {
                        usage.get(name)
                    };
                    (name.clone(), limit - used)
                })
                .collect(),
        )
    }
}
