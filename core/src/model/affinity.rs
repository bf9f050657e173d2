//! Pod affinity, anti-affinity and topology spread, as read from a pod spec.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::requirements::{Operator, RequirementSpec};

/// A Kubernetes label selector: `matchLabels` AND every `matchExpressions` term. An empty
/// selector matches every pod; `None` where Kubernetes says "no selector" matches none.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LabelSelector {
    /// `matchLabels`: every one must be on the pod.
    pub match_labels: BTreeMap<String, String>,
    /// Operators In, NotIn, Exists, DoesNotExist.
    pub match_expressions: Vec<RequirementSpec>,
}

impl LabelSelector {
    /// The selector of a term that has none: it selects no pod. (Label keys are never empty,
    /// so `"" Exists` never holds.)
    pub fn nothing() -> Self {
        LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: vec![RequirementSpec::new("", Operator::Exists, &[])],
        }
    }

    /// Whether a pod with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|e| {
                let value = labels.get(&e.key);
                match e.operator {
                    Operator::In => value.is_some_and(|v| e.values.contains(v)),
                    Operator::NotIn => value.is_none_or(|v| !e.values.contains(v)),
                    Operator::Exists => value.is_some(),
                    Operator::DoesNotExist => value.is_none(),
                    // Not valid in a label selector; the translation refuses them.
                    _ => false,
                }
            })
    }
}

/// One pod (anti-)affinity term: pods matching `selector` in `namespaces`, counted per domain
/// of `topology_key`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodAffinityTerm {
    /// `labelSelector`: the pods it counts.
    pub selector: LabelSelector,
    /// Empty = the pod's own namespace.
    pub namespaces: Vec<String>,
    /// `topologyKey`: the node label whose values are the domains.
    pub topology_key: String,
    /// `None` for a required term; the weight (1..100) of a preferred one.
    pub weight: Option<i32>,
}

/// `whenUnsatisfiable` of a topology spread constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum WhenUnsatisfiable {
    /// A placement that breaks the skew is not made (a requirement).
    DoNotSchedule,
    /// The skew is a preference.
    ScheduleAnyway,
}

/// `Honor` or `Ignore` (nodeAffinityPolicy, nodeTaintsPolicy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum InclusionPolicy {
    /// Only the domains the policy's rule allows count.
    Honor,
    /// Every domain counts.
    Ignore,
}

/// One of a pod's `topologySpreadConstraints`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TopologySpreadConstraint {
    /// `maxSkew`: how many more matching pods one domain may have than the emptiest.
    pub max_skew: u32,
    /// `topologyKey`: the node label whose values are the domains.
    pub topology_key: String,
    /// `whenUnsatisfiable`.
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// `labelSelector`: the pods counted.
    pub selector: LabelSelector,
    /// `minDomains`: with fewer domains than this, the emptiest counts as holding none.
    pub min_domains: Option<u32>,
    /// Default Honor: only domains the pod's node affinity allows count.
    pub node_affinity_policy: InclusionPolicy,
    /// Default Ignore: tainted domains count too.
    pub node_taints_policy: InclusionPolicy,
    /// Label keys whose values, taken from the incoming pod, narrow the selector.
    pub match_label_keys: Vec<String>,
}

/// A host port a container binds on its node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct HostPort {
    /// The port.
    pub port: u16,
    /// TCP, UDP or SCTP.
    pub protocol: String,
    /// Empty or 0.0.0.0 = every address.
    pub host_ip: String,
}

impl HostPort {
    /// Kubernetes' rule: the same port and protocol conflict when either binds every address or
    /// both bind the same one.
    pub fn conflicts_with(&self, other: &HostPort) -> bool {
        let wildcard = |ip: &str| ip.is_empty() || ip == "0.0.0.0";
        self.port == other.port
            && self.protocol == other.protocol
            && (wildcard(&self.host_ip)
                || wildcard(&other.host_ip)
                || self.host_ip == other.host_ip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_match_labels_and_expressions() {
        let labels: BTreeMap<String, String> = [
            ("app".to_string(), "nginx".to_string()),
            ("tier".to_string(), "web".to_string()),
        ]
        .into();
        let mut s = LabelSelector::default();
        assert!(s.matches(&labels));
        s.match_labels.insert("app".into(), "nginx".into());
        assert!(s.matches(&labels));
        s.match_expressions
            .push(RequirementSpec::new("tier", Operator::In, &["web", "api"]));
        assert!(s.matches(&labels));
        s.match_expressions
            .push(RequirementSpec::new("canary", Operator::DoesNotExist, &[]));
        assert!(s.matches(&labels));
        s.match_expressions
            .push(RequirementSpec::new("tier", Operator::NotIn, &["web"]));
        assert!(!s.matches(&labels));
    }

    #[test]
    fn host_port_conflicts() {
        let any = HostPort {
            port: 80,
            protocol: "TCP".into(),
            host_ip: String::new(),
        };
        let one = HostPort {
            port: 80,
            protocol: "TCP".into(),
            host_ip: "10.0.0.1".into(),
        };
        let two = HostPort {
            port: 80,
            protocol: "TCP".into(),
            host_ip: "10.0.0.2".into(),
        };
        let udp = HostPort {
            port: 80,
            protocol: "UDP".into(),
            host_ip: String::new(),
        };
        assert!(any.conflicts_with(&one));
        assert!(!one.conflicts_with(&two));
        assert!(!any.conflicts_with(&udp));
    }
}
