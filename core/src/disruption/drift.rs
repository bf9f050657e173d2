//! Drift: a machine no longer matches what its NodePool and EC2NodeClass ask for. It is
//! replaced (voluntary, within the `Drifted` budgets).
//!
//! A machine is drifted when
//! - its NodePool's template changed (the hash of everything but the requirements, written on
//!   the NodeClaim at launch as `karpenter.sh/nodepool-hash`);
//! - its labels no longer meet the NodePool's requirements;
//! - its EC2NodeClass's AMIs, subnets or security groups changed (`karpenter.k8s.aws/ec2nodeclass-hash`);
//! - its instance type is no longer in the catalog.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::model::nodeclass::{NodeClass, NodeStorage};
use crate::model::nodepool::NodePool;
use crate::model::requirements::Requirements;
use crate::state::ClusterState;

/// The annotation on a NodeClaim with the hash of its NodePool's template when it launched.
pub const NODEPOOL_HASH: &str = "karpenter.sh/nodepool-hash";
/// The annotation on a NodeClaim with the hash of its EC2NodeClass when it launched.
pub const NODECLASS_HASH: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
/// The annotation Karpenter writes beside its NodePool hash, with the version of its hashing:
/// a NodeClaim that carries it was hashed by Karpenter, whose hashes are not the core's.
pub const NODEPOOL_HASH_VERSION: &str = "karpenter.sh/nodepool-hash-version";
/// See [`NODEPOOL_HASH_VERSION`]; beside the EC2NodeClass hash.
pub const NODECLASS_HASH_VERSION: &str = "karpenter.k8s.aws/ec2nodeclass-hash-version";

/// FNV-1a of the JSON form: stable across runs and machines (ordered maps, no floats).
fn hash<T: Serialize>(value: &T) -> String {
    let text = serde_json::to_string(value).unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The NodePool template fields whose change drifts a machine (requirements are checked on
/// their own, against the machine's labels).
pub fn nodepool_hash(pool: &NodePool) -> String {
    hash(&(
        &pool.template_labels,
        &pool.template_annotations,
        &pool.taints,
        &pool.startup_taints,
        &pool.node_class_ref,
        &pool.expire_after,
        &pool.termination_grace_period_ms,
    ))
}

/// The EC2NodeClass fields whose change drifts a machine. The storage counts only when it is
/// not the default, so that a class without storage settings keeps the hash it had before
/// storage was modelled (the hash is recorded in launch commands' annotations).
pub fn nodeclass_hash(class: &NodeClass) -> String {
    let fields = (
        &class.ami_selector_terms,
        &class.subnet_selector_terms,
        &class.security_group_selector_terms,
        &class.ami_family,
        &class.role,
        &class.instance_profile,
        &class.tags,
        &class.kubelet,
    );
    // Fields added later join the hash only when set, so a class without them keeps the hash
    // its machines were launched with.
    match (
        class.storage == NodeStorage::default(),
        class.nested_virtualization,
    ) {
        (true, false) => hash(&fields),
        (false, false) => hash(&(fields, &class.storage)),
        (_, true) => hash(&(fields, &class.storage, "nested-virtualization")),
    }
}

/// What drift compares a machine with, computed from the NodePools and EC2NodeClasses alone:
/// kept between searches until one of them changes (the hashes are JSON encodings).
#[derive(Debug, Clone, Default)]
pub struct DriftInputs {
    /// Each NodePool's hash, by name.
    pool_hashes: BTreeMap<String, String>,
    /// Each EC2NodeClass's hash, by name.
    class_hashes: BTreeMap<String, String>,
    /// Each NodePool's template requirements, by name.
    pool_requirements: BTreeMap<String, Requirements>,
}

impl DriftInputs {
    /// The hashes and requirements of every NodePool and EC2NodeClass of the state.
    pub fn of(state: &ClusterState) -> Self {
        DriftInputs {
            pool_hashes: state
                .nodepools
                .iter()
                .map(|(name, pool)| (name.clone(), nodepool_hash(pool)))
                .collect(),
            class_hashes: state
                .nodeclasses
                .iter()
                .map(|(name, class)| (name.clone(), nodeclass_hash(class)))
                .collect(),
            pool_requirements: state
                .nodepools
                .iter()
                .map(|(name, pool)| (name.clone(), pool.template_requirements()))
                .collect(),
        }
    }

    /// The hash of the NodePool called `name`, as [`nodepool_hash`] gives it.
    pub fn pool_hash(&self, name: &str) -> Option<&str> {
        self.pool_hashes.get(name).map(String::as_str)
    }

    /// The hash of the EC2NodeClass called `name`, as [`nodeclass_hash`] gives it.
    pub fn class_hash(&self, name: &str) -> Option<&str> {
        self.class_hashes.get(name).map(String::as_str)
    }
}

/// What drifted on a machine: typed, said in words only where it is shown.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum DriftCause {
    /// Its NodePool's template changed (`karpenter.sh/nodepool-hash`).
    TemplateChanged {
        /// The NodePool.
        nodepool: String,
    },
    /// Its EC2NodeClass changed (`karpenter.k8s.aws/ec2nodeclass-hash`).
    NodeClassChanged {
        /// The EC2NodeClass.
        nodeclass: String,
    },
    /// Its instance type is no longer in the catalog.
    TypeGone {
        /// The instance type.
        instance_type: String,
    },
    /// Its labels no longer meet this requirement of its NodePool.
    RequirementUnmet(crate::model::requirements::Requirement),
}

impl std::fmt::Display for DriftCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriftCause::TemplateChanged { nodepool } => {
                write!(f, "NodePool {nodepool} changed its template")
            }
            DriftCause::NodeClassChanged { nodeclass } => write!(
                f,
                "EC2NodeClass {nodeclass} changed its AMIs, subnets, security groups or kubelet settings"
            ),
            DriftCause::TypeGone { instance_type } => {
                write!(f, "instance type {instance_type} is no longer offered")
            }
            DriftCause::RequirementUnmet(requirement) => write!(
                f,
                "its labels no longer meet the NodePool requirement {requirement}"
            ),
        }
    }
}

/// Drifted machines (initialized, not already leaving), by name, with why. `inputs` are
/// [`DriftInputs::of`] the same NodePools and EC2NodeClasses.
pub fn drifted(state: &ClusterState, inputs: &DriftInputs) -> Vec<(String, DriftCause)> {
    drifted_except(state, inputs, &BTreeSet::new()).0
}

/// [`drifted`], but for the NodeClaims in `clean`, which a search found not drifted and of
/// which nothing drift reads has changed since (their spec and instance, the NodePools, classes
/// and catalog); also the NodeClaims found not drifted now, in name order.
pub fn drifted_except(
    state: &ClusterState,
    inputs: &DriftInputs,
    clean: &BTreeSet<String>,
) -> (Vec<(String, DriftCause)>, Vec<String>) {
    let mut out = Vec::new();
    let mut found_clean = Vec::new();
    // Both in name order: one walk finds which are clean.
    let mut clean = clean.iter().peekable();
    for (name, claim) in &state.nodeclaims {
        while clean.next_if(|c| *c < name).is_some() {}
        if clean.next_if(|c| *c == name).is_some()
            || claim.terminating.is_some()
            || !claim.is_initialized()
        {
            continue;
        }
        match drift_of(state, inputs, claim) {
            Some(reason) => out.push((name.clone(), reason)),
            None => found_clean.push(name.clone()),
        }
    }
    (out, found_clean)
}

/// Why an initialized NodeClaim that is not terminating drifted, if it did.
fn drift_of(
    state: &ClusterState,
    inputs: &DriftInputs,
    claim: &crate::state::NodeClaimState,
) -> Option<DriftCause> {
    let DriftInputs {
        pool_hashes,
        class_hashes,
        pool_requirements,
    } = inputs;
    let pool = state.nodepools.get(&claim.spec.nodepool)?;
    // Looked up once: whether it is still offered, and its labels.
    let it = state.instance_type_of(claim);
    if claim
        .spec
        .annotations
        .get(NODEPOOL_HASH)
        .is_some_and(|h| Some(h) != pool_hashes.get(claim.spec.nodepool.as_str()))
    {
        Some(DriftCause::TemplateChanged {
            nodepool: pool.name.clone(),
        })
    } else if let Some(class) = state.nodeclasses.get(&claim.spec.nodeclass)
        && claim
            .spec
            .annotations
            .get(NODECLASS_HASH)
            .is_some_and(|h| Some(h) != class_hashes.get(claim.spec.nodeclass.as_str()))
    {
        Some(DriftCause::NodeClassChanged {
            nodeclass: class.name.clone(),
        })
    } else if let Some(instance) = &claim.instance
        && state.catalog.is_some()
        && it.is_none()
    {
        Some(DriftCause::TypeGone {
            instance_type: instance.instance_type.clone(),
        })
    } else {
        pool_requirements
            .get(pool.name.as_str())
            .and_then(|reqs| reqs.first_unmet_with(state.nodeclaim_label_reader_of(claim, it)))
            .map(|r| DriftCause::RequirementUnmet(r.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::nodeclaim::NodeClaimSpec;
    use crate::state::NodeClaimState;

    /// An initialized NodeClaim of pool `default` stamped with `pool_hash`.
    fn claim(name: &str, pool_hash: &str) -> NodeClaimState {
        let mut spec = NodeClaimSpec {
            name: name.to_string(),
            nodepool: "default".to_string(),
            ..NodeClaimSpec::default()
        };
        spec.annotations
            .insert(NODEPOOL_HASH.to_string(), pool_hash.to_string());
        // What every machine of the pool is labelled with.
        spec.labels.insert(
            crate::model::labels::NODEPOOL.to_string(),
            "default".to_string(),
        );
        let mut claim = NodeClaimState::new(spec, 0);
        claim.initialized_at_ms = Some(1);
        claim
    }

    #[test]
    fn a_search_skips_the_nodeclaims_kept_clean_and_names_those_it_finds_clean() {
        let mut state = ClusterState::default();
        let pool = NodePool::new("default", "default");
        let current = nodepool_hash(&pool);
        state.nodepools.insert("default".to_string(), pool);
        state
            .nodeclaims
            .insert("a".to_string(), claim("a", &current));
        state.nodeclaims.insert("b".to_string(), claim("b", "old"));
        state
            .nodeclaims
            .insert("c".to_string(), claim("c", &current));
        let mut young = claim("d", "old");
        young.initialized_at_ms = None;
        state.nodeclaims.insert("d".to_string(), young);
        let inputs = DriftInputs::of(&state);

        let (drifted, clean) = drifted_except(&state, &inputs, &BTreeSet::new());
        let names: Vec<&str> = drifted.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["b"]);
        assert!(matches!(drifted[0].1, DriftCause::TemplateChanged { .. }));
        // A machine not yet initialized is neither drifted nor clean: it is looked at again.
        assert_eq!(clean, ["a", "c"]);
        assert_eq!(drifted, super::drifted(&state, &inputs));

        // What is kept clean is not read again: were "b" kept clean, it would not be found.
        let kept: BTreeSet<String> = ["a", "b"].map(String::from).into();
        let (drifted, clean) = drifted_except(&state, &inputs, &kept);
        assert!(drifted.is_empty());
        assert_eq!(clean, ["c"]);
    }
}
