//! `log export --redact`: pod names, namespaces and label values replaced by tokens, in a log
//! that still replays exactly.
//!
//! Every name of a kind gets a token of that kind: namespaces `ns-0001`, object names (pods,
//! their owners, PodDisruptionBudgets, DaemonSets) `name-0001`, label and annotation values
//! `value-0001`. The same value always gets the same token, so selectors still select the same
//! pods, a NodePool's label still matches the pods that ask for it, and a pod is followed
//! through the log by its token. Tokens are numbered in the order of the values they replace:
//! the core breaks ties by name (which of two equal pods goes first), and with tokens in the
//! same order it decides exactly as it did, so the redacted log verifies. The numbering is over
//! every value of the whole store, so two exports of one store agree on their tokens.
//!
//! Kept as they are: the keys of labels and annotations; the values of label keys the core
//! reads against the cloud or Kubernetes (domains `kubernetes.io`, `k8s.io`, `karpenter.sh`,
//! `karpenter.k8s.aws`, `amazonaws.com`: zones, instance types, capacity types, hostnames); the
//! values of the annotations the core reads (Karpenter's domains, the pod deletion cost), and
//! no other annotation value (`kubectl.kubernetes.io/last-applied-configuration` holds the whole
//! object); integer values (`Gt` / `Lt` compare them as numbers); node, NodeClaim, NodePool and
//! EC2NodeClass names, instance ids, taint keys and effects. Taint and toleration values are
//! replaced as label values are. The text of an eviction refusal (it comes from the API server,
//! and may name the pod) is replaced, as is that of a failed termination (the service's answer
//! may name a role or an account).

use std::collections::{BTreeMap, BTreeSet};

use nodewright_core::model::affinity::{LabelSelector, PodAffinityTerm};
use nodewright_core::model::pod::{Pod, PodKey};
use nodewright_core::model::requirements::RequirementSpec;
use nodewright_core::model::taints::{Taint, Toleration};
use nodewright_core::{Command, EventKind};

/// The text an eviction refusal's reason becomes.
pub const REFUSAL_TEXT: &str = "(redacted)";

/// Label and annotation domains whose values the core reads against the cloud or Kubernetes.
const KEPT_DOMAINS: [&str; 5] = [
    "kubernetes.io",
    "k8s.io",
    "karpenter.sh",
    "karpenter.k8s.aws",
    "amazonaws.com",
];

fn in_domain(key: &str, domains: &[&str]) -> bool {
    key.split_once('/').is_some_and(|(domain, _)| {
        domains
            .iter()
            .any(|kept| domain == *kept || domain.ends_with(&format!(".{kept}")))
    })
}

/// Whether the value of annotation `key` is replaced: every value but those the core reads
/// (an annotation such as `kubectl.kubernetes.io/last-applied-configuration` holds the whole
/// object, names and labels included).
pub fn redacts_annotation(key: &str, value: &str) -> bool {
    !(value.is_empty()
        || value.parse::<i64>().is_ok()
        || nodewright_core::model::labels::is_read_annotation(key))
}

/// Whether the value of label `key` is replaced.
pub fn redacts_value(key: &str, value: &str) -> bool {
    if value.is_empty() || value.parse::<i64>().is_ok() {
        return false;
    }
    !in_domain(key, &KEPT_DOMAINS)
}

/// What a walk over an event does with each string it may replace.
trait Visitor {
    fn namespace(&mut self, namespace: &mut String);
    fn name(&mut self, name: &mut String);
    fn value(&mut self, key: &str, value: &mut String);
    fn annotation(&mut self, key: &str, value: &mut String);
    /// Free text from outside (an API server's message).
    fn text(&mut self, text: &mut String);
}

/// Gathers the values a walk meets.
#[derive(Default)]
struct Collector {
    namespaces: BTreeSet<String>,
    names: BTreeSet<String>,
    values: BTreeSet<String>,
}

fn gather(set: &mut BTreeSet<String>, value: &str) {
    if !value.is_empty() && !set.contains(value) {
        set.insert(value.to_string());
    }
}

impl Visitor for Collector {
    fn namespace(&mut self, namespace: &mut String) {
        gather(&mut self.namespaces, namespace);
    }
    fn name(&mut self, name: &mut String) {
        gather(&mut self.names, name);
    }
    fn value(&mut self, key: &str, value: &mut String) {
        if redacts_value(key, value) {
            gather(&mut self.values, value);
        }
    }
    fn annotation(&mut self, key: &str, value: &mut String) {
        if redacts_annotation(key, value) {
            gather(&mut self.values, value);
        }
    }
    fn text(&mut self, _text: &mut String) {}
}

/// Values of one kind and their tokens, numbered in the values' order.
#[derive(Debug, Clone, Default)]
struct Table {
    tokens: BTreeMap<String, String>,
}

impl Table {
    fn new(prefix: &str, values: BTreeSet<String>) -> Self {
        // Fixed width: tokens sort as the values they replace.
        let width = values.len().max(1).to_string().len().max(4);
        let tokens = values
            .into_iter()
            .enumerate()
            .map(|(i, v)| (v, format!("{prefix}-{:0width$}", i + 1)))
            .collect();
        Table { tokens }
    }

    fn replace(&self, value: &mut String) {
        if let Some(token) = self.tokens.get(value.as_str()) {
            value.clone_from(token);
        }
    }

    fn len(&self) -> usize {
        self.tokens.len()
    }
}

/// The tokens of one store: build it with [`Redactor::learn`] over every event, then
/// [`Redactor::redact`] each.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    namespaces: Table,
    names: Table,
    values: Table,
}

/// How many distinct values a redaction replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedactionCounts {
    pub namespaces: usize,
    pub names: usize,
    pub values: usize,
}

/// Learns the values of events, one at a time.
#[derive(Default)]
pub struct Learner {
    seen: Collector,
}

impl Learner {
    /// Notes the event's values (the walk is the one that replaces; gathering changes nothing).
    pub fn learn(&mut self, event: &mut EventKind) {
        walk_event(event, &mut self.seen);
    }

    pub fn finish(self) -> Redactor {
        Redactor {
            namespaces: Table::new("ns", self.seen.namespaces),
            names: Table::new("name", self.seen.names),
            values: Table::new("value", self.seen.values),
        }
    }
}

struct Rewriter<'a>(&'a Redactor);

impl Visitor for Rewriter<'_> {
    fn namespace(&mut self, namespace: &mut String) {
        self.0.namespaces.replace(namespace);
    }
    fn name(&mut self, name: &mut String) {
        self.0.names.replace(name);
    }
    fn value(&mut self, key: &str, value: &mut String) {
        if redacts_value(key, value) {
            self.0.values.replace(value);
        }
    }
    fn annotation(&mut self, key: &str, value: &mut String) {
        if redacts_annotation(key, value) {
            self.0.values.replace(value);
        }
    }
    fn text(&mut self, text: &mut String) {
        *text = REFUSAL_TEXT.to_string();
    }
}

impl Redactor {
    /// The event with its names and values replaced.
    pub fn redact(&self, event: &mut EventKind) {
        walk_event(event, &mut Rewriter(self));
    }

    pub fn counts(&self) -> RedactionCounts {
        RedactionCounts {
            namespaces: self.namespaces.len(),
            names: self.names.len(),
            values: self.values.len(),
        }
    }

    fn pod_key(&self, key: &PodKey) -> PodKey {
        let mut key = key.clone();
        walk_key(&mut key, &mut Rewriter(self));
        key
    }

    /// What a command decides, with its free text left out (it names pods, and is rebuilt by
    /// the core from the redacted events): the commands of the redacted log must decide, one
    /// for one, what the recorded ones did. Pass the redactor for a recorded command, `None`
    /// for one the core gave over redacted events.
    pub fn decision(command: &Command, recorded: Option<&Redactor>) -> String {
        let key = |k: &PodKey| match recorded {
            Some(r) => r.pod_key(k).to_string(),
            None => k.to_string(),
        };
        match command {
            Command::LaunchNodeClaim { nodeclaim, reason } => {
                let mut labels = nodeclaim.labels.clone();
                if let Some(r) = recorded {
                    for (k, v) in labels.iter_mut() {
                        Rewriter(r).value(k, v);
                    }
                }
                format!(
                    "launch {} pool {} class {} labels {:?} options {:?} requests {:?} expire {:?} for {:?}",
                    nodeclaim.name,
                    nodeclaim.nodepool,
                    nodeclaim.nodeclass,
                    labels,
                    nodeclaim.options,
                    nodeclaim.requests,
                    nodeclaim.expire_after_ms,
                    reason.pods.iter().map(key).collect::<Vec<_>>()
                )
            }
            Command::NominatePod { pod, target, .. } => format!("nominate {} {target}", key(pod)),
            Command::ReportUnschedulable { pod, .. } => format!("unschedulable {}", key(pod)),
            Command::WarnMissingRequests { pod } => format!("missing requests {}", key(pod)),
            Command::TerminateNodeClaim {
                nodeclaim,
                node,
                instance_id,
                reason,
                ..
            } => format!("terminate {nodeclaim} {node:?} {instance_id:?} {reason:?}"),
            Command::DisruptionBlocked { nodepool, .. } => format!("blocked {nodepool}"),
            Command::CordonNode {
                node, nodeclaim, ..
            } => format!("cordon {node} {nodeclaim}"),
            Command::EvictPod {
                pod, node, forced, ..
            } => format!("evict {} {node} {forced}", key(pod)),
            Command::WarnInvalidAnnotation { object, .. } => {
                let object = match object.strip_prefix("pod ").and_then(|k| k.split_once('/')) {
                    Some((namespace, name)) => {
                        format!("pod {}", key(&PodKey::new(namespace, name)))
                    }
                    None => object.clone(),
                };
                format!("invalid annotation {object}")
            }
            Command::UncordonNode {
                node, nodeclaim, ..
            } => format!("uncordon {node} {nodeclaim}"),
            Command::ReleaseNode {
                node, nodeclaim, ..
            } => format!("release {node} {nodeclaim}"),
            Command::ReportInterruption {
                message_id,
                instance_id,
                nodeclaim,
                ..
            } => format!("interruption {message_id} {instance_id} {nodeclaim:?}"),
            Command::TerminateOrphanInstance {
                instance_id,
                nodeclaim,
                ..
            } => format!("orphan {instance_id} {nodeclaim:?}"),
        }
    }
}

fn walk_event(event: &mut EventKind, v: &mut impl Visitor) {
    match event {
        EventKind::NodePoolApplied(pool) => {
            walk_values(&mut pool.template_labels, v);
            walk_annotations(&mut pool.template_annotations, v);
            walk_requirements(&mut pool.requirements, v);
            walk_taints(&mut pool.taints, v);
            walk_taints(&mut pool.startup_taints, v);
        }
        EventKind::PodApplied(pod) => walk_pod(pod, v),
        EventKind::PodBound { pod, .. } | EventKind::PodDeleted { pod } => walk_key(pod, v),
        EventKind::NodeApplied(node) => {
            // A decoded event's node is its own: this copies nothing.
            let node = std::sync::Arc::make_mut(node);
            walk_values(&mut node.labels, v);
            walk_annotations(&mut node.annotations, v);
            walk_taints(&mut node.taints, v);
        }
        EventKind::DaemonSetApplied(ds) => {
            v.namespace(&mut ds.namespace);
            v.name(&mut ds.name);
            walk_pod(&mut ds.template, v);
        }
        EventKind::DaemonSetDeleted { namespace, name }
        | EventKind::PodDisruptionBudgetDeleted { namespace, name } => {
            v.namespace(namespace);
            v.name(name);
        }
        EventKind::PodDisruptionBudgetApplied(pdb) => {
            v.namespace(&mut pdb.namespace);
            v.name(&mut pdb.name);
            walk_selector(&mut pdb.selector, v);
        }
        EventKind::EvictionRefused { pod, reason } => {
            walk_key(pod, v);
            v.text(reason);
        }
        // The service's answer may name a role or an account.
        EventKind::TerminationFailed { reason, .. } => v.text(reason),
        _ => {}
    }
}

fn walk_key(key: &mut PodKey, v: &mut impl Visitor) {
    v.namespace(&mut key.namespace);
    v.name(&mut key.name);
}

fn walk_values(map: &mut BTreeMap<String, String>, v: &mut impl Visitor) {
    for (key, value) in map.iter_mut() {
        v.value(key, value);
    }
}

fn walk_annotations(map: &mut BTreeMap<String, String>, v: &mut impl Visitor) {
    for (key, value) in map.iter_mut() {
        v.annotation(key, value);
    }
}

/// Taint values match toleration values by equality: the same tokens keep them matching.
fn walk_taints(taints: &mut [Taint], v: &mut impl Visitor) {
    for taint in taints {
        let Taint { key, value, .. } = taint;
        if let Some(value) = value {
            v.value(key, value);
        }
    }
}

fn walk_requirements(specs: &mut [RequirementSpec], v: &mut impl Visitor) {
    for spec in specs {
        for value in &mut spec.values {
            v.value(&spec.key, value);
        }
    }
}

fn walk_selector(selector: &mut LabelSelector, v: &mut impl Visitor) {
    walk_values(&mut selector.match_labels, v);
    walk_requirements(&mut selector.match_expressions, v);
}

fn walk_terms(terms: &mut [PodAffinityTerm], v: &mut impl Visitor) {
    for term in terms {
        walk_selector(&mut term.selector, v);
        for namespace in &mut term.namespaces {
            v.namespace(namespace);
        }
    }
}

fn walk_pod(pod: &mut Pod, v: &mut impl Visitor) {
    walk_key(&mut pod.key, v);
    walk_values(&mut pod.labels, v);
    walk_annotations(&mut pod.annotations, v);
    walk_values(&mut pod.node_selector, v);
    for alternative in &mut pod.required_node_affinity {
        walk_requirements(alternative, v);
    }
    for (_, term) in &mut pod.preferred_node_affinity {
        walk_requirements(term, v);
    }
    walk_terms(&mut pod.pod_affinity, v);
    walk_terms(&mut pod.pod_anti_affinity, v);
    for spread in &mut pod.topology_spread {
        walk_selector(&mut spread.selector, v);
    }
    for toleration in &mut pod.tolerations {
        let Toleration { key, value, .. } = toleration;
        if let Some(value) = value {
            v.value(key.as_deref().unwrap_or_default(), value);
        }
    }
    if let Some(owner) = &mut pod.owner {
        v.name(&mut owner.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_and_numeric_values_are_kept() {
        assert!(!redacts_value("topology.kubernetes.io/zone", "us-east-1a"));
        assert!(!redacts_value("karpenter.sh/capacity-type", "spot"));
        assert!(!redacts_value("karpenter.k8s.aws/instance-family", "c6a"));
        assert!(!redacts_value("team", "42"));
        assert!(!redacts_value("team", ""));
        assert!(redacts_value("team", "payments"));
        assert!(redacts_value("example.com/owner", "alice"));
        // A domain that only ends like a kept one is not kept.
        assert!(redacts_value("notkubernetes.io/x", "y"));
    }

    #[test]
    fn only_the_annotations_the_core_reads_are_kept() {
        assert!(!redacts_annotation("karpenter.sh/do-not-disrupt", "true"));
        assert!(!redacts_annotation("karpenter.sh/nodepool-hash", "abc123"));
        assert!(!redacts_annotation(
            "controller.kubernetes.io/pod-deletion-cost",
            "-5"
        ));
        // The whole object, names and labels included: replaced.
        assert!(redacts_annotation(
            "kubectl.kubernetes.io/last-applied-configuration",
            "{\"metadata\":{\"name\":\"web-1\"}}"
        ));
        assert!(redacts_annotation("example.com/owner", "alice"));
    }

    #[test]
    fn tokens_keep_the_order_and_the_equality_of_values() {
        let mut learner = Learner::default();
        let mut pods = Vec::new();
        for (ns, name, app) in [
            ("shop", "web-b", "checkout"),
            ("billing", "web-a", "invoices"),
            ("shop", "web-c", "checkout"),
        ] {
            let mut pod = Pod::new(ns, name, 100, 1 << 20);
            pod.labels.insert("app".into(), app.into());
            pod.labels
                .insert("topology.kubernetes.io/zone".into(), "us-east-1a".into());
            let mut event = EventKind::PodApplied(Box::new(pod));
            learner.learn(&mut event);
            pods.push(event);
        }
        let redactor = learner.finish();
        assert_eq!(
            redactor.counts(),
            RedactionCounts {
                namespaces: 2,
                names: 3,
                values: 2
            }
        );
        let redacted: Vec<Pod> = pods
            .into_iter()
            .map(|mut e| {
                redactor.redact(&mut e);
                match e {
                    EventKind::PodApplied(p) => *p,
                    _ => unreachable!("a pod event stays one"),
                }
            })
            .collect();
        assert_eq!(redacted[0].key, PodKey::new("ns-0002", "name-0002"));
        assert_eq!(redacted[1].key, PodKey::new("ns-0001", "name-0001"));
        assert_eq!(redacted[0].labels["app"], redacted[2].labels["app"]);
        assert_ne!(redacted[0].labels["app"], redacted[1].labels["app"]);
        assert_eq!(
            redacted[0].labels["topology.kubernetes.io/zone"],
            "us-east-1a"
        );
        // The order of keys is the order of the originals.
        assert!(redacted[1].key < redacted[0].key && redacted[0].key < redacted[2].key);
    }
}
