//! A small harness to drive the core directly in tests: a catalog, node classes, NodePools,
//! pods, and time. It speaks the event contract only, as the driver does.

use nodewright_core::catalog::{self, CapacityType, Catalog};
use nodewright_core::model::affinity::LabelSelector;
use nodewright_core::model::duration::MaybeNever;
use nodewright_core::model::labels;
use nodewright_core::model::node::Node;
use nodewright_core::model::nodeclaim::{Instance, NodeClaimSpec, OfferingKey, TerminationReason};
use nodewright_core::model::nodeclass::NodeClass;
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::pdb::{IntOrPercent, PodDisruptionBudget};
use nodewright_core::model::pod::{OwnerRef, Pod, PodKey};
use nodewright_core::{Command, Config, Core, Event, EventKind};

/// A `TerminateNodeClaim` the core returned, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Termination {
    pub at_ms: u64,
    pub nodeclaim: String,
    pub reason: TerminationReason,
    pub detail: String,
}

/// A core, a clock, and every command it returned.
pub struct CoreHarness {
    pub core: Core,
    pub now_ms: u64,
    pub commands: Vec<(u64, Command)>,
    catalog: std::sync::Arc<Catalog>,
    next_instance: u64,
}

/// `pod` as a Deployment's: its ReplicaSet makes another when it is evicted, so it loses no
/// work (Karpenter treats every evicted pod so; nodewright lets a Job's finish where that
/// matters: `Config::count_lost_work`, `Config::expiration_waits_for_jobs`).
pub fn replicated(mut pod: Pod) -> Pod {
    pod.owner = Some(OwnerRef {
        kind: "ReplicaSet".to_string(),
        name: "web".to_string(),
    });
    pod
}

/// A PodDisruptionBudget named `app` in `default` over the pods labelled `app: <app>`.
pub fn pdb_of_app(
    app: &str,
    min_available: Option<i64>,
    max_unavailable: Option<i64>,
) -> PodDisruptionBudget {
    PodDisruptionBudget {
        namespace: "default".into(),
        name: app.into(),
        selector: LabelSelector {
            match_labels: [("app".to_string(), app.to_string())].into(),
            match_expressions: vec![],
        },
        min_available: min_available.map(IntOrPercent::Int),
        max_unavailable: max_unavailable.map(IntOrPercent::Int),
    }
}

/// NodePool `default` whose machines expire after 30 minutes and are never consolidated,
/// with `terminationGracePeriod` `grace_ms`: for the termination flow.
pub fn expiring_pool(grace_ms: Option<u64>) -> NodePool {
    let mut p = NodePool::new("default", "default");
    p.expire_after = MaybeNever::After(30 * 60_000);
    p.consolidate_after = MaybeNever::Never;
    p.termination_grace_period_ms = grace_ms;
    p
}

/// The commands a fresh core with the default configuration gives for each event, in order.
pub fn commands_per_event(events: &[Event]) -> Vec<Vec<Command>> {
    let mut core = Core::new(Config::default());
    events.iter().map(|e| core.handle(e)).collect()
}

impl CoreHarness {
    /// A core with the built-in us-east-1 catalog and an EC2NodeClass named `default`.
    pub fn new() -> Self {
        Self::with_config(Config::default())
    }

    pub fn with_config(config: Config) -> Self {
        let catalog = crate::us_east_1_catalog();
        let mut h = CoreHarness {
            core: Core::new(config),
            now_ms: 0,
            commands: Vec::new(),
            catalog: catalog.clone(),
            next_instance: 1,
        };
        h.send(EventKind::CatalogUpdated(catalog));
        h.send(EventKind::NodeClassApplied(Box::new(NodeClass::new(
            "default",
        ))));
        h
    }

    /// Sends one event at the current time; returns its commands. A `ReleaseNode` is carried
    /// out at once, as the controller does: the node, without the hold taint, is sent back.
    pub fn send(&mut self, kind: EventKind) -> Vec<Command> {
        let commands = self.core.handle(&Event::new(self.now_ms, kind));
        for c in &commands {
            self.commands.push((self.now_ms, c.clone()));
        }
        for c in &commands {
            if let Command::ReleaseNode { node, .. } = c
                && let Some(state) = self.core.state().nodes.get(node)
            {
                let mut released = Node::clone(&state.node);
                released
                    .taints
                    .retain(|t| t.key != labels::SIBLING_HOLD_TAINT);
                self.send(EventKind::NodeApplied(std::sync::Arc::new(released)));
            }
        }
        commands
    }

    pub fn nodepool(&mut self, pool: NodePool) -> Vec<Command> {
        self.send(EventKind::NodePoolApplied(Box::new(pool)))
    }

    pub fn nodeclass(&mut self, class: NodeClass) -> Vec<Command> {
        self.send(EventKind::NodeClassApplied(Box::new(class)))
    }

    /// A pending pod, created now.
    pub fn pod(&mut self, mut pod: Pod) -> Vec<Command> {
        pod.created_at_ms = self.now_ms;
        self.send(EventKind::PodApplied(Box::new(pod)))
    }

    pub fn delete_pod(&mut self, namespace: &str, name: &str) -> Vec<Command> {
        self.send(EventKind::PodDeleted {
            pod: PodKey::new(namespace, name),
        })
    }

    /// Advances the clock to `t_ms`, firing every timer the core asks for on the way.
    pub fn run_until(&mut self, t_ms: u64) -> Vec<Command> {
        let mut out = Vec::new();
        while let Some(timer) = self.core.next_timer_ms() {
            if timer > t_ms {
                break;
            }
            self.now_ms = timer;
            out.extend(self.send(EventKind::Tick));
        }
        self.now_ms = self.now_ms.max(t_ms);
        out
    }

    /// Advances by `ms`.
    pub fn advance(&mut self, ms: u64) -> Vec<Command> {
        self.run_until(self.now_ms + ms)
    }

    /// The launches among `commands`.
    pub fn launches(commands: &[Command]) -> Vec<NodeClaimSpec> {
        commands
            .iter()
            .filter_map(|c| match c {
                Command::LaunchNodeClaim { nodeclaim, .. } => Some(nodeclaim.as_ref().clone()),
                _ => None,
            })
            .collect()
    }

    /// Every launch so far.
    pub fn all_launches(&self) -> Vec<NodeClaimSpec> {
        let cmds: Vec<Command> = self.commands.iter().map(|(_, c)| c.clone()).collect();
        Self::launches(&cmds)
    }

    /// Launches the claim's cheapest option (as EC2 would), answers for it now, and returns the
    /// instance.
    pub fn launch_cheapest(&mut self, claim: &NodeClaimSpec) -> Instance {
        let option = claim.options.first().expect("a launch has options").clone();
        let instance = Instance {
            instance_id: format!("i-{:017x}", self.next_instance),
            instance_type: option.instance_type.to_string(),
            zone: option.zone.to_string(),
            capacity_type: option.capacity_type,
            price: option.price,
        };
        self.next_instance += 1;
        self.send(EventKind::LaunchSucceeded {
            nodeclaim: claim.name.clone(),
            instance: instance.clone(),
        });
        instance
    }

    /// Fails the claim's launch with insufficient capacity on the given offerings.
    pub fn fail_launch(
        &mut self,
        claim: &NodeClaimSpec,
        unavailable: Vec<OfferingKey>,
    ) -> Vec<Command> {
        self.send(EventKind::LaunchFailed {
            nodeclaim: claim.name.clone(),
            code: "InsufficientInstanceCapacity".to_string(),
            message: "no capacity".to_string(),
            unavailable,
        })
    }

    /// The node of a launched claim joins, ready, with the claim's taints and startup taints
    /// (the kubelet registers with both); returns its name.
    pub fn join(&mut self, claim: &NodeClaimSpec, instance: &Instance) -> String {
        let it = self
            .catalog
            .get(&instance.instance_type)
            .expect("the instance type is in the catalog");
        let resources = catalog::capacity(it, &Default::default());
        let name = format!("node-{}", instance.instance_id);
        let mut node_labels = it.labels.clone();
        node_labels.extend(claim.labels.clone());
        node_labels.insert(labels::ZONE.into(), instance.zone.clone());
        node_labels.insert(
            labels::CAPACITY_TYPE.into(),
            instance.capacity_type.as_str().into(),
        );
        node_labels.insert(labels::HOSTNAME.into(), name.clone());
        let node = Node {
            name: name.clone(),
            provider_id: Some(instance.provider_id()),
            labels: node_labels,
            annotations: Default::default(),
            taints: claim
                .taints
                .iter()
                .chain(&claim.startup_taints)
                .cloned()
                .collect(),
            allocatable: resources.allocatable,
            ready: true,
            unschedulable: false,
        };
        self.send(EventKind::NodeApplied(std::sync::Arc::new(node)));
        name
    }

    /// A node nodewright does not manage (a managed node group), ready.
    pub fn existing_node(&mut self, name: &str, instance_type: &str, zone: &str) {
        let it = self
            .catalog
            .get(instance_type)
            .expect("known instance type");
        let resources = catalog::capacity(it, &Default::default());
        let mut node_labels = it.labels.clone();
        node_labels.insert(labels::ZONE.into(), zone.into());
        node_labels.insert(
            labels::CAPACITY_TYPE.into(),
            CapacityType::OnDemand.as_str().into(),
        );
        node_labels.insert(labels::HOSTNAME.into(), name.into());
        self.send(EventKind::NodeApplied(std::sync::Arc::new(Node {
            name: name.to_string(),
            provider_id: None,
            labels: node_labels,
            annotations: Default::default(),
            taints: Vec::new(),
            allocatable: resources.allocatable,
            ready: true,
            unschedulable: false,
        })));
    }

    pub fn bind(&mut self, namespace: &str, pod: &str, node: &str) -> Vec<Command> {
        self.send(EventKind::PodBound {
            pod: PodKey::new(namespace, pod),
            node: node.to_string(),
        })
    }

    /// Answers every eviction asked so far as the Eviction API would when nothing blocks it:
    /// the pods are deleted. Returns the commands that follow.
    pub fn complete_evictions(&mut self) -> Vec<Command> {
        let mut out = Vec::new();
        let mut done = std::collections::BTreeSet::new();
        loop {
            let asked: Vec<PodKey> = self
                .commands
                .iter()
                .filter_map(|(_, c)| match c {
                    Command::EvictPod { pod, .. } => Some(pod.clone()),
                    _ => None,
                })
                .filter(|p| !done.contains(p))
                .collect();
            if asked.is_empty() {
                return out;
            }
            for pod in asked {
                done.insert(pod.clone());
                out.extend(self.send(EventKind::PodDeleted { pod }));
            }
        }
    }

    /// Provisions one machine for `pods` (one batch), launches it with its cheapest option,
    /// joins its node and binds the pods to it.
    pub fn running_machine(&mut self, pods: Vec<Pod>) -> (NodeClaimSpec, Instance, String) {
        let names: Vec<PodKey> = pods.iter().map(|p| p.key.clone()).collect();
        for p in pods {
            self.pod(p);
        }
        let claim = Self::launches(&self.advance(2_000))
            .into_iter()
            .next()
            .expect("the pods get a machine");
        let instance = self.launch_cheapest(&claim);
        let node = self.join(&claim, &instance);
        for key in names {
            self.bind(&key.namespace, &key.name, &node);
        }
        (claim, instance, node)
    }

    /// Every termination the core asked for so far.
    pub fn terminations(&self) -> Vec<Termination> {
        self.commands
            .iter()
            .filter_map(|(t, c)| match c {
                Command::TerminateNodeClaim {
                    nodeclaim,
                    reason,
                    detail,
                    ..
                } => Some(Termination {
                    at_ms: *t,
                    nodeclaim: nodeclaim.clone(),
                    reason: *reason,
                    detail: detail.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }
}

impl Default for CoreHarness {
    fn default() -> Self {
        Self::new()
    }
}
