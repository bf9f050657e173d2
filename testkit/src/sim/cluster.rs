//! The simulated Kubernetes cluster: nodes, pods, the Deployment and DaemonSet controllers, and
//! a binder that places pending pods the way kube-scheduler does (filter on resources, node
//! selectors, required node affinity and taints; score least-allocated; ties by name).

use std::collections::{BTreeMap, BTreeSet};

use nodewright_adapters::manifest::volumes::{self, Claim, Storage, Volume};
use nodewright_adapters::manifest::{DaemonSet, Deployment, ReplicatedKind};
use nodewright_core::model::affinity::{
    InclusionPolicy, LabelSelector, PodAffinityTerm, WhenUnsatisfiable,
};
use nodewright_core::model::labels;
use nodewright_core::model::node::Node;
use nodewright_core::model::pdb::PodDisruptionBudget;
use nodewright_core::model::pod::{Pod, PodKey};
use nodewright_core::model::resources::Resources;
use nodewright_core::model::taints::first_untolerated;
use nodewright_core::{Event, EventKind};

use super::jobs::Jobs;
use super::rng::SimRng;

#[derive(Debug, Clone)]
pub struct SimNode {
    pub node: Node,
    /// Set for machines nodewright launched.
    pub nodeclaim: Option<String>,
    /// What the pods bound to it request.
    pub used: Resources,
    /// How many of them are not DaemonSet pods.
    pub workload_pods: u32,
}

impl SimNode {
    /// A pod is bound to it.
    fn take(&mut self, pod: &Pod) {
        self.used.add(&pod.requests);
        if !pod.is_daemonset_pod() {
            self.workload_pods += 1;
        }
    }

    /// A pod bound to it is gone.
    fn give_back(&mut self, pod: &Pod) {
        self.used.sub(&pod.requests);
        if !pod.is_daemonset_pod() {
            self.workload_pods = self.workload_pods.saturating_sub(1);
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct SimCluster {
    pub nodes: BTreeMap<String, SimNode>,
    pub pods: BTreeMap<PodKey, Pod>,
    pub deployments: BTreeMap<(String, String), Deployment>,
    pub daemonsets: BTreeMap<(String, String), DaemonSet>,
    pub pdbs: BTreeMap<(String, String), PodDisruptionBudget>,
    /// Pods by the Deployment that owns them.
    pub deployment_pods: BTreeMap<(String, String), BTreeSet<PodKey>>,
    /// Graceful termination: each pod's `terminationGracePeriodSeconds` (ms), from its template.
    pub grace_ms: BTreeMap<PodKey, u64>,
    /// Pods shutting down: still on their node, using its resources, until they exit.
    pub terminating: BTreeMap<PodKey, Terminating>,
    /// Exits the world has yet to schedule: (time, pod).
    pub exits_to_schedule: Vec<(u64, PodKey)>,
    /// The Job and CronJob controllers' state.
    pub jobs: Jobs,
    /// PersistentVolumeClaims, PersistentVolumes and StorageClasses.
    pub storage: Storage,
    /// The claims each pod's volumes name.
    pub pod_claims: BTreeMap<PodKey, Vec<String>>,
    /// The pods no node runs, oldest first: what the binder looks at.
    pending: BTreeSet<(u64, PodKey)>,
    /// Something changed since the binder last found no node for any pending pod that may let
    /// it find one now (a node came or went, a pod left or was bound, a taint came off).
    placement_changed: bool,
}

/// A pod that was asked to stop and has not exited yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminating {
    pub exits_at_ms: u64,
    pub evicted: bool,
}

/// What happened to pods, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodChange {
    Created {
        pod: PodKey,
        at_ms: u64,
    },
    Bound {
        pod: PodKey,
        node: String,
        at_ms: u64,
    },
    Deleted {
        pod: PodKey,
        at_ms: u64,
        evicted: bool,
    },
}

impl SimCluster {
    /// Adds a node; the core hears of it.
    pub fn add_node(
        &mut self,
        node: Node,
        nodeclaim: Option<String>,
        now_ms: u64,
        out: &mut Vec<Event>,
    ) {
        out.push(Event::new(
            now_ms,
            EventKind::NodeApplied(std::sync::Arc::new(node.clone())),
        ));
        self.nodes.insert(
            node.name.clone(),
            SimNode {
                node,
                nodeclaim,
                used: Resources::default(),
                workload_pods: 0,
            },
        );
        self.placement_changed = true;
    }

    /// Creates a pod whose volumes name `claims`: where the claims' volumes can attach (or,
    /// unbound, where their StorageClass allows) joins its required node affinity, as
    /// Karpenter's volume topology does and as kube-scheduler's volume binding filters.
    pub fn create_pod_with_claims(
        &mut self,
        mut pod: Pod,
        claims: Vec<String>,
        now_ms: u64,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) {
        if !claims.is_empty() {
            // A claim that does not exist is refused at load; one deleted since adds nothing.
            let requirements = self
                .storage
                .requirements(&pod.key.namespace, &claims)
                .unwrap_or_default();
            volumes::inject(&mut pod, &requirements);
            self.pod_claims.insert(pod.key.clone(), claims);
        }
        let key = pod.key.clone();
        self.create_pod(pod, now_ms, out, changes);
        if let Some(node) = self.pods.get(&key).and_then(|p| p.node_name.clone()) {
            self.bind_claims(&key, &node);
        }
    }

    /// Adds a claim; an `Immediate` one whose class names zones is provisioned at once, in the
    /// first of them.
    pub fn apply_claim(&mut self, mut claim: Claim) {
        if claim.volume.is_none()
            && let Some(class) = claim
                .storage_class
                .as_ref()
                .and_then(|c| self.storage.classes.get(c))
            && !class.wait_for_first_consumer
            && let Some(term) = class.allowed_topologies.first()
        {
            let term: Vec<_> = term
                .iter()
                .map(|r| {
                    let mut r = r.clone();
                    r.values.truncate(1);
                    r
                })
                .collect();
            claim.volume = Some(self.provision(&claim, vec![term]));
        }
        self.storage
            .claims
            .insert((claim.namespace.clone(), claim.name.clone()), claim);
    }

    /// Binds the unbound `WaitForFirstConsumer` claims of a pod just placed on `node`: their
    /// volumes are provisioned in the node's zone.
    fn bind_claims(&mut self, pod: &PodKey, node: &str) {
        let Some(claims) = self.pod_claims.get(pod).cloned() else {
            return;
        };
        let Some(zone) = self
            .nodes
            .get(node)
            .and_then(|n| n.node.labels.get(labels::ZONE))
            .cloned()
        else {
            return;
        };
        for name in claims {
            let key = (pod.namespace.clone(), name);
            let Some(claim) = self.storage.claims.get(&key).cloned() else {
                continue;
            };
            let waits = claim
                .storage_class
                .as_ref()
                .and_then(|c| self.storage.classes.get(c))
                .is_some_and(|c| c.wait_for_first_consumer);
            if claim.volume.is_none() && waits {
                let term = vec![nodewright_core::model::requirements::RequirementSpec::new(
                    labels::ZONE,
                    nodewright_core::model::requirements::Operator::In,
                    &[zone.as_str()],
                )];
                let volume = self.provision(&claim, vec![term]);
                if let Some(c) = self.storage.claims.get_mut(&key) {
                    c.volume = Some(volume);
                }
            }
        }
    }

    /// A new volume for `claim`, as a CSI driver makes one: `pvc-NAMESPACE-NAME`.
    fn provision(
        &mut self,
        claim: &Claim,
        node_affinity: Vec<Vec<nodewright_core::model::requirements::RequirementSpec>>,
    ) -> String {
        let name = format!("pvc-{}-{}", claim.namespace, claim.name);
        self.storage.volumes.insert(
            name.clone(),
            Volume {
                name: name.clone(),
                node_affinity,
            },
        );
        name
    }

    /// Creates a pod; bound at once if the scheduler finds a node, else reported pending.
    pub fn create_pod(
        &mut self,
        mut pod: Pod,
        now_ms: u64,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) {
        // Re-applying a pod replaces it: its old requests leave its node.
        if let Some(old) = self.pods.remove(&pod.key) {
            self.placement_changed = true;
            self.pending.remove(&(old.created_at_ms, old.key.clone()));
            if let Some(node) = &old.node_name
                && let Some(n) = self.nodes.get_mut(node)
            {
                n.give_back(&old);
            }
        }
        pod.created_at_ms = now_ms;
        changes.push(PodChange::Created {
            pod: pod.key.clone(),
            at_ms: now_ms,
        });
        if let Some(node) = &pod.node_name {
            // Created bound (a DaemonSet pod, a pod with spec.nodeName).
            changes.push(PodChange::Bound {
                pod: pod.key.clone(),
                node: node.clone(),
                at_ms: now_ms,
            });
        }
        if pod.node_name.is_none()
            && let Some(node) = self.pick_node(&pod)
        {
            pod.node_name = Some(node.clone());
            changes.push(PodChange::Bound {
                pod: pod.key.clone(),
                node,
                at_ms: now_ms,
            });
        }
        if pod.node_name.is_some() {
            self.jobs.note_bound(&pod.key, now_ms);
        }
        if let Some(node) = pod.node_name.clone()
            && let Some(n) = self.nodes.get_mut(&node)
        {
            n.take(&pod);
        }
        out.push(Event::new(
            now_ms,
            EventKind::PodApplied(Box::new(pod.clone())),
        ));
        match pod.node_name {
            // A pod the scheduler could not place just now: it is tried again once something
            // changes.
            None => {
                self.pending.insert((pod.created_at_ms, pod.key.clone()));
            }
            // A pod running somewhere may be what another's pod affinity waits for.
            Some(_) => self.placement_changed = true,
        }
        self.pods.insert(pod.key.clone(), pod);
    }

    /// Asks a pod to stop, as the API server does on a delete or an eviction: a bound pod
    /// with a grace period leaves its Deployment at once (which replaces it) and keeps its
    /// node and resources until it exits, at the end of its `terminationGracePeriodSeconds`
    /// (the longest Kubernetes lets it run). Others are gone at once.
    pub fn terminate_pod(
        &mut self,
        key: &PodKey,
        evicted: bool,
        now_ms: u64,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) {
        if self.terminating.contains_key(key) {
            return;
        }
        let grace = self.grace_ms.get(key).copied().unwrap_or(0);
        let bound = self.pods.get(key).is_some_and(|p| p.node_name.is_some());
        if grace == 0 || !bound {
            self.delete_pod(key, evicted, now_ms, out, changes);
            return;
        }
        for pods in self.deployment_pods.values_mut() {
            pods.remove(key);
        }
        self.jobs.note_gone(key);
        let exits_at_ms = now_ms.saturating_add(grace);
        self.terminating.insert(
            key.clone(),
            Terminating {
                exits_at_ms,
                evicted,
            },
        );
        self.exits_to_schedule.push((exits_at_ms, key.clone()));
    }

    /// A terminating pod's process has exited: the pod is deleted.
    pub fn pod_exited(
        &mut self,
        key: &PodKey,
        now_ms: u64,
        rng: &mut SimRng,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) {
        if let Some(t) = self.terminating.get(key).cloned() {
            self.delete_pod(key, t.evicted, now_ms, out, changes);
            // The StatefulSet whose ordinal it held makes its successor now.
            let owner = self
                .deployments
                .iter()
                .find(|((namespace, name), d)| {
                    d.kind == ReplicatedKind::StatefulSet
                        && *namespace == key.namespace
                        && key
                            .name
                            .strip_prefix(name.as_str())
                            .and_then(|rest| rest.strip_prefix('-'))
                            .is_some_and(|o| o.parse::<u32>().is_ok())
                })
                .map(|(k, _)| k.clone());
            if let Some(owner) = owner {
                self.reconcile_deployment(&owner, now_ms, rng, out, changes);
            }
        }
    }

    /// Deletes a pod at once (a forced deletion, or its node is gone).
    pub fn delete_pod(
        &mut self,
        key: &PodKey,
        evicted: bool,
        now_ms: u64,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) {
        self.terminating.remove(key);
        self.grace_ms.remove(key);
        // Its claims stay (their volumes keep their zone); the pod's list of them goes.
        self.pod_claims.remove(key);
        if let Some(pod) = self.pods.remove(key) {
            self.placement_changed = true;
            self.pending.remove(&(pod.created_at_ms, pod.key.clone()));
            if let Some(node) = &pod.node_name
                && let Some(n) = self.nodes.get_mut(node)
            {
                n.give_back(&pod);
            }
            for pods in self.deployment_pods.values_mut() {
                pods.remove(key);
            }
            self.jobs.note_gone(key);
            changes.push(PodChange::Deleted {
                pod: key.clone(),
                at_ms: now_ms,
                evicted,
            });
            out.push(Event::new(
                now_ms,
                EventKind::PodDeleted { pod: key.clone() },
            ));
        }
    }

    /// The scheduler's choice for a pod: feasible nodes, least allocated first, then by name.
    fn pick_node(&self, pod: &Pod) -> Option<String> {
        let alternatives = pod.requirement_alternatives();
        let mut best: Option<(i64, &String)> = None;
        for (name, n) in &self.nodes {
            if !n.node.ready || n.node.unschedulable {
                continue;
            }
            if first_untolerated(&n.node.taints, &pod.tolerations).is_some() {
                continue;
            }
            if !alternatives
                .iter()
                .any(|a| a.matches_labels(&n.node.labels))
            {
                continue;
            }
            let free = n.node.allocatable.minus(&n.used);
            if !pod.requests.fits_in(&free) {
                continue;
            }
            if !self.constraints_allow(pod, name) {
                continue;
            }
            let cpu = n.node.allocatable.cpu_milli.max(1);
            let mem = n.node.allocatable.memory_bytes.max(1);
            let score = (free.cpu_milli - pod.requests.cpu_milli) * 1000 / cpu
                + (free.memory_bytes - pod.requests.memory_bytes) * 1000 / mem;
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, name));
            }
        }
        best.map(|(_, name)| name.clone())
    }

    /// The label value of a node for a topology key (a node is its own hostname domain).
    fn domain<'a>(&'a self, node: &'a str, key: &str) -> Option<&'a str> {
        if key == labels::HOSTNAME {
            return Some(node);
        }
        self.nodes
            .get(node)
            .and_then(|n| n.node.labels.get(key))
            .map(String::as_str)
    }

    /// Bound pods matching `selector` in `namespaces`, with the node each runs on.
    /// `apart` (the pod being judged) is left out.
    fn matching<'a>(
        &'a self,
        selector: &'a LabelSelector,
        namespaces: &'a [String],
        apart: &'a PodKey,
    ) -> impl Iterator<Item = (&'a Pod, &'a str)> + 'a {
        self.pods.values().filter_map(move |p| {
            let node = p.node_name.as_deref()?;
            (&p.key != apart
                && namespaces.contains(&p.key.namespace)
                && selector.matches(&p.labels))
            .then_some((p, node))
        })
    }

    /// kube-scheduler's inter-pod affinity, anti-affinity, topology spread (DoNotSchedule)
    /// and host-port filters, for the pod on `node` among every other pod bound (the pod
    /// itself, bound or not, left out).
    fn constraints_allow(&self, pod: &Pod, node: &str) -> bool {
        let on_node: Vec<&Pod> = self
            .pods
            .values()
            .filter(|p| p.key != pod.key && p.node_name.as_deref() == Some(node))
            .collect();
        if pod.host_ports.iter().any(|hp| {
            on_node
                .iter()
                .any(|p| p.host_ports.iter().any(|o| o.conflicts_with(hp)))
        }) {
            return false;
        }
        let namespaces = |t: &PodAffinityTerm| -> Vec<String> {
            if t.namespaces.is_empty() {
                vec![pod.key.namespace.clone()]
            } else {
                t.namespaces.clone()
            }
        };
        for t in pod.pod_anti_affinity.iter().filter(|t| t.weight.is_none()) {
            let ns = namespaces(t);
            let here = self.domain(node, &t.topology_key);
            if here.is_some()
                && self
                    .matching(&t.selector, &ns, &pod.key)
                    .any(|(_, n)| self.domain(n, &t.topology_key) == here)
            {
                return false;
            }
        }
        // Running pods whose anti-affinity the pod would break.
        for other in self.pods.values().filter(|o| o.key != pod.key) {
            let Some(other_node) = other.node_name.as_deref() else {
                continue;
            };
            for t in other
                .pod_anti_affinity
                .iter()
                .filter(|t| t.weight.is_none())
            {
                let ns = if t.namespaces.is_empty() {
                    vec![other.key.namespace.clone()]
                } else {
                    t.namespaces.clone()
                };
                if ns.contains(&pod.key.namespace)
                    && t.selector.matches(&pod.labels)
                    && self.domain(node, &t.topology_key).is_some()
                    && self.domain(node, &t.topology_key)
                        == self.domain(other_node, &t.topology_key)
                {
                    return false;
                }
            }
        }
        for t in pod.pod_affinity.iter().filter(|t| t.weight.is_none()) {
            let ns = namespaces(t);
            let mut any = false;
            let mut here_ok = false;
            let here = self.domain(node, &t.topology_key);
            for (_, n) in self.matching(&t.selector, &ns, &pod.key) {
                any = true;
                if here.is_some() && self.domain(n, &t.topology_key) == here {
                    here_ok = true;
                    break;
                }
            }
            let self_match = ns.contains(&pod.key.namespace) && t.selector.matches(&pod.labels);
            if !(here_ok || (!any && self_match)) {
                return false;
            }
        }
        for c in pod
            .topology_spread
            .iter()
            .filter(|c| c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
        {
            let Some(here) = self.domain(node, &c.topology_key) else {
                return false;
            };
            let alternatives = pod.requirement_alternatives();
            let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
            for (name, n) in &self.nodes {
                let eligible = c.node_affinity_policy == InclusionPolicy::Ignore
                    || alternatives
                        .iter()
                        .any(|a| a.matches_labels(&n.node.labels));
                if let (true, Some(d)) = (eligible, self.domain(name, &c.topology_key)) {
                    counts.entry(d).or_insert(0);
                }
            }
            let mut selector = c.selector.clone();
            for key in &c.match_label_keys {
                if let Some(v) = pod.labels.get(key) {
                    selector.match_labels.insert(key.clone(), v.clone());
                }
            }
            let ns = vec![pod.key.namespace.clone()];
            for (_, n) in self.matching(&selector, &ns, &pod.key) {
                if let Some(d) = self.domain(n, &c.topology_key)
                    && let Some(count) = counts.get_mut(d)
                {
                    *count += 1;
                }
            }
            let mut min = counts.values().copied().min().unwrap_or(0);
            if c.min_domains.is_some_and(|m| (counts.len() as u32) < m) {
                min = 0;
            }
            let self_match = u32::from(selector.matches(&pod.labels));
            let here_count = counts.get(here).copied().unwrap_or(0);
            if here_count + self_match > c.max_skew.saturating_add(min) {
                return false;
            }
        }
        true
    }

    /// Bound pods whose placement kube-scheduler's filters would refuse now, among the pods
    /// bound with them: a `DoNotSchedule` topology spread over its skew, a required
    /// (anti-)affinity broken. What the plan honoured and the landing must too.
    pub fn placement_breaches(&self) -> Vec<String> {
        self.pods
            .values()
            .filter(|p| nodewright_core::provisioning::sibling_hold::constrains(p))
            .filter_map(|p| {
                let node = p.node_name.as_deref()?;
                (!self.constraints_allow(p, node)).then(|| format!("{} on {node}", p.key))
            })
            .collect()
    }

    /// Binds every pending pod that fits somewhere now (oldest first).
    pub fn bind_pending(
        &mut self,
        now_ms: u64,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) {
        if !self.placement_changed {
            // Every pending pod found no node, and nothing that could change that has changed.
            return;
        }
        self.placement_changed = false;
        let pending: Vec<PodKey> = self.pending.iter().map(|(_, key)| key.clone()).collect();
        // Pods that found no node, as far as finding one goes: a pod placed like one of them
        // finds none either, since binding others only takes room and adds anti-affinity. (Not
        // so for pod affinity and topology spread, which binding others can satisfy: such pods
        // are always tried.)
        let mut unplaced: Vec<Pod> = Vec::new();
        for key in pending {
            let Some(pod) = self.pods.get(&key) else {
                continue;
            };
            if unplaced.iter().any(|u| same_placement(u, pod)) {
                continue;
            }
            let Some(node) = self.pick_node(pod) else {
                if pod.pod_affinity.is_empty() && pod.topology_spread.is_empty() {
                    unplaced.push(pod.clone());
                }
                continue;
            };
            if let Some(p) = self.pods.get_mut(&key) {
                p.node_name = Some(node.clone());
                self.pending.remove(&(p.created_at_ms, key.clone()));
                // It may be what a pod passed over earlier in this round waits for.
                self.placement_changed = true;
                if let Some(n) = self.nodes.get_mut(&node) {
                    n.take(p);
                }
            }
            changes.push(PodChange::Bound {
                pod: key.clone(),
                node: node.clone(),
                at_ms: now_ms,
            });
            self.bind_claims(&key, &node);
            self.jobs.note_bound(&key, now_ms);
            out.push(Event::new(now_ms, EventKind::PodBound { pod: key, node }));
        }
    }

    /// Applies a Deployment (create or update) and reconciles its replicas.
    pub fn apply_deployment(
        &mut self,
        d: Deployment,
        now_ms: u64,
        rng: &mut SimRng,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) {
        let key = (d.namespace.clone(), d.name.clone());
        self.deployments.insert(key.clone(), d);
        self.reconcile_deployment(&key, now_ms, rng, out, changes);
    }

    pub fn scale_deployment(
        &mut self,
        key: &(String, String),
        replicas: u32,
        now_ms: u64,
        rng: &mut SimRng,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) -> bool {
        match self.deployments.get_mut(key) {
            Some(d) => {
                d.replicas = replicas;
                self.reconcile_deployment(key, now_ms, rng, out, changes);
                true
            }
            None => false,
        }
    }

    pub fn delete_deployment(
        &mut self,
        key: &(String, String),
        now_ms: u64,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) -> bool {
        if self.deployments.remove(key).is_none() {
            return false;
        }
        let pods: Vec<PodKey> = self
            .deployment_pods
            .remove(key)
            .unwrap_or_default()
            .into_iter()
            .collect();
        for pod in pods {
            self.terminate_pod(&pod, false, now_ms, out, changes);
        }
        true
    }

    /// Reconciles every Deployment (after pods left: the controller recreates them).
    pub fn reconcile_all(
        &mut self,
        now_ms: u64,
        rng: &mut SimRng,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) {
        let owners: Vec<(String, String)> = self.deployments.keys().cloned().collect();
        for key in owners {
            self.reconcile_deployment(&key, now_ms, rng, out, changes);
        }
        // A Job's pods made change no other Job's wants: those that want pods are found first.
        for key in self.jobs.wanting_pods() {
            self.reconcile_job(&key, now_ms, rng, out, changes);
        }
    }

    /// Creates or deletes pods until the Deployment has its replicas. Scale-down removes
    /// pending pods first, then the newest.
    pub fn reconcile_deployment(
        &mut self,
        key: &(String, String),
        now_ms: u64,
        rng: &mut SimRng,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) {
        let Some(d) = self.deployments.get(key).cloned() else {
            return;
        };
        let current: Vec<PodKey> = self
            .deployment_pods
            .get(key)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        let want = d.replicas as usize;
        if current.len() < want {
            let hash = template_hash(&d.name);
            // A StatefulSet's pods are NAME-0 .. NAME-(replicas-1); one whose predecessor of
            // the same name is still shutting down waits for it to exit (`pod_exited`).
            let missing_ordinals: Vec<String> = match d.kind {
                ReplicatedKind::StatefulSet => (0..want)
                    .map(|i| format!("{}-{i}", d.name))
                    .filter(|n| !self.pods.contains_key(&PodKey::new(&d.namespace, n)))
                    .collect(),
                _ => Vec::new(),
            };
            let names: Vec<Option<String>> = match d.kind {
                ReplicatedKind::StatefulSet => missing_ordinals.into_iter().map(Some).collect(),
                _ => vec![None; want - current.len()],
            };
            for ordinal_name in names {
                let name = match ordinal_name {
                    Some(name) => name,
                    None => loop {
                        let candidate = match d.kind {
                            ReplicatedKind::ReplicaSet => {
                                format!("{}-{}", d.name, rng.name_suffix())
                            }
                            _ => format!("{}-{}-{}", d.name, hash, rng.name_suffix()),
                        };
                        if !self
                            .pods
                            .contains_key(&PodKey::new(&d.namespace, &candidate))
                        {
                            break candidate;
                        }
                    },
                };
                let pod = d.template.instantiate(&d.namespace, &name, now_ms);
                self.deployment_pods
                    .entry(key.clone())
                    .or_default()
                    .insert(pod.key.clone());
                let grace_s = d.template.termination_grace_period_seconds.max(0) as u64;
                self.grace_ms
                    .insert(pod.key.clone(), grace_s.saturating_mul(1000));
                // A StatefulSet's pod `NAME-i` has claim `TEMPLATE-NAME-i` of each claim
                // template, made the first time and kept after the pod (its data stays).
                let mut claims = d.template.volume_claims.clone();
                for template in &d.claim_templates {
                    let claim = format!("{}-{name}", template.name);
                    if !self
                        .storage
                        .claims
                        .contains_key(&(d.namespace.clone(), claim.clone()))
                    {
                        self.apply_claim(Claim {
                            namespace: d.namespace.clone(),
                            name: claim.clone(),
                            storage_class: template.storage_class.clone(),
                            volume: None,
                        });
                    }
                    claims.push(claim);
                }
                self.create_pod_with_claims(pod, claims, now_ms, out, changes);
            }
        } else if current.len() > want {
            // A StatefulSet removes its highest ordinals; the others pending pods first, then
            // the newest.
            let mut ranked: Vec<(bool, u64, PodKey)> = current
                .iter()
                .filter_map(|k| self.pods.get(k))
                .map(|p| match d.kind {
                    ReplicatedKind::StatefulSet => {
                        let ordinal = p
                            .key
                            .name
                            .rsplit('-')
                            .next()
                            .and_then(|o| o.parse::<u64>().ok())
                            .unwrap_or(0);
                        (false, u64::MAX - ordinal, p.key.clone())
                    }
                    _ => (
                        p.node_name.is_some(),
                        u64::MAX - p.created_at_ms,
                        p.key.clone(),
                    ),
                })
                .collect();
            ranked.sort();
            for (_, _, pod) in ranked.into_iter().take(current.len() - want) {
                self.terminate_pod(&pod, false, now_ms, out, changes);
            }
        }
    }

    /// Creates the DaemonSet's pod on every node it may run on.
    pub fn apply_daemonset(
        &mut self,
        ds: DaemonSet,
        now_ms: u64,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) {
        let key = (ds.namespace.clone(), ds.name.clone());
        self.daemonsets.insert(key, ds.clone());
        // The DaemonSet informer: the core counts its pods on machines it plans.
        out.push(Event::new(
            now_ms,
            EventKind::DaemonSetApplied(Box::new(Self::daemonset_object(&ds))),
        ));
        let nodes: Vec<String> = self.nodes.keys().cloned().collect();
        for node in nodes {
            self.place_daemon_pod(&ds, &node, now_ms, out, changes);
        }
    }

    /// A DaemonSet as the API server shows it.
    pub fn daemonset_object(ds: &DaemonSet) -> nodewright_core::event::DaemonSet {
        nodewright_core::event::DaemonSet {
            namespace: ds.namespace.clone(),
            name: ds.name.clone(),
            template: ds.template.pod.clone(),
        }
    }

    /// Runs every DaemonSet on a node that just became ready.
    pub fn start_daemons(
        &mut self,
        node: &str,
        now_ms: u64,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) {
        let sets: Vec<DaemonSet> = self.daemonsets.values().cloned().collect();
        for ds in sets {
            self.place_daemon_pod(&ds, node, now_ms, out, changes);
        }
    }

    fn place_daemon_pod(
        &mut self,
        ds: &DaemonSet,
        node: &str,
        now_ms: u64,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) {
        let Some(n) = self.nodes.get(node) else {
            return;
        };
        let template = &ds.template.pod;
        let fits_labels = template
            .requirement_alternatives()
            .iter()
            .any(|a| a.matches_labels(&n.node.labels));
        if !fits_labels || first_untolerated(&n.node.taints, &template.tolerations).is_some() {
            return;
        }
        let name = format!("{}-{}", ds.name, node);
        let key = PodKey::new(&ds.namespace, &name);
        if self.pods.contains_key(&key) {
            return;
        }
        let mut pod = ds.template.instantiate(&ds.namespace, &name, now_ms);
        pod.node_name = Some(node.to_string());
        self.create_pod(pod, now_ms, out, changes);
    }

    /// Taints the node `karpenter.sh/disrupted:NoSchedule`; the core hears of it.
    pub fn cordon(&mut self, node: &str, now_ms: u64, out: &mut Vec<Event>) {
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        if !n.node.has_taint(labels::DISRUPTED_TAINT) {
            n.node
                .taints
                .push(nodewright_core::model::taints::Taint::new(
                    labels::DISRUPTED_TAINT,
                    None,
                    nodewright_core::model::taints::TaintEffect::NoSchedule,
                ));
            out.push(Event::new(
                now_ms,
                EventKind::NodeApplied(std::sync::Arc::new(n.node.clone())),
            ));
        }
    }

    /// Removes the taint `key` (`karpenter.sh/disrupted`, or the sibling hold); the core hears
    /// of it.
    pub fn untaint(&mut self, node: &str, key: &str, now_ms: u64, out: &mut Vec<Event>) {
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        let before = n.node.taints.len();
        n.node.taints.retain(|t| t.key != key);
        if n.node.taints.len() != before {
            self.placement_changed = true;
            out.push(Event::new(
                now_ms,
                EventKind::NodeApplied(std::sync::Arc::new(n.node.clone())),
            ));
        }
    }

    /// The Eviction API: refused when a PodDisruptionBudget selecting the pod allows no
    /// disruption (pods that run count as healthy).
    pub fn eviction_refused_by(&self, pod: &PodKey) -> Option<String> {
        let p = self.pods.get(pod)?;
        self.pdbs.values().find_map(|pdb| {
            if !pdb.selects(p) {
                return None;
            }
            // A pod shutting down is no longer healthy.
            let allowed = pdb.allowed_among(self.pods.values(), |q| {
                self.terminating.contains_key(&q.key)
            });
            (allowed <= 0).then(|| {
                format!(
                    "Cannot evict pod as it would violate the pod's disruption budget {}/{}",
                    pdb.namespace, pdb.name
                )
            })
        })
    }

    /// Taints the node as disrupted and evicts its pods (Deployments recreate theirs).
    pub fn drain_node(
        &mut self,
        node: &str,
        now_ms: u64,
        rng: &mut SimRng,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) -> usize {
        if !self.nodes.contains_key(node) {
            return 0;
        }
        self.cordon(node, now_ms, out);
        let pods: Vec<PodKey> = self
            .pods
            .values()
            .filter(|p| p.node_name.as_deref() == Some(node) && !p.is_daemonset_pod())
            .map(|p| p.key.clone())
            .collect();
        let evicted = pods.len();
        for pod in &pods {
            self.delete_pod(pod, true, now_ms, out, changes);
        }
        self.reconcile_all(now_ms, rng, out, changes);
        evicted
    }

    /// Removes a node and whatever still runs on it.
    pub fn remove_node(
        &mut self,
        node: &str,
        now_ms: u64,
        rng: &mut SimRng,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) {
        let pods: Vec<PodKey> = self
            .pods
            .values()
            .filter(|p| p.node_name.as_deref() == Some(node))
            .map(|p| p.key.clone())
            .collect();
        for pod in &pods {
            self.delete_pod(pod, false, now_ms, out, changes);
        }
        if self.nodes.remove(node).is_some() {
            // One topology domain fewer can lower a spread constraint's skew.
            self.placement_changed = true;
            out.push(Event::new(
                now_ms,
                EventKind::NodeDeleted {
                    name: node.to_string(),
                },
            ));
        }
        self.reconcile_all(now_ms, rng, out, changes);
    }
}

/// Whether the binder places `a` and `b` alike: the same namespace, labels, requests and
/// constraints (names and times aside).
fn same_placement(a: &Pod, b: &Pod) -> bool {
    a.key.namespace == b.key.namespace
        && a.requests == b.requests
        && a.labels == b.labels
        && a.node_selector == b.node_selector
        && a.required_node_affinity == b.required_node_affinity
        && a.pod_affinity == b.pod_affinity
        && a.pod_anti_affinity == b.pod_anti_affinity
        && a.topology_spread == b.topology_spread
        && a.host_ports == b.host_ports
        && a.tolerations == b.tolerations
}

/// A stable stand-in for the pod-template hash of a ReplicaSet name.
fn template_hash(name: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..9)
        .map(|_| {
            let c = ALPHABET[(h % ALPHABET.len() as u64) as usize] as char;
            h /= ALPHABET.len() as u64;
            c
        })
        .collect()
}
