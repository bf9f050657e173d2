//! The executors: the core's commands carried out on Kubernetes and EC2, and their results
//! sent back to the control loop as events.
//!
//! The driver calls [`Dispatch::execute`] synchronously, after the commands are logged; it only
//! queues them. [`Executor::run`] takes them off the queue: the commands of one NodeClaim
//! (launch, cordon, uncordon, terminate) run one after another in that NodeClaim's lane, in the
//! order the core gave them. An eviction from a node enters that node's lane, so it starts only
//! once the node's `karpenter.sh/disrupted` taint is set (else the evicted pod's replacement can
//! land on the node being drained), and then runs beside the other evictions. The rest run
//! concurrently. Every command also gives its Kubernetes Events (Karpenter's reasons, the
//! decision's reason in the message).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodewright_adapters::control_loop::{InboxSender, Input};
use nodewright_adapters::driver::CommandExecutor;
use nodewright_api::Time;
use nodewright_aws::instances::Instances;
use nodewright_aws::launch::{LaunchOutcome, Launcher};
use nodewright_core::catalog::Catalog;
use nodewright_core::model::labels;
use nodewright_core::model::nodeclaim::{Instance, NodeClaimSpec};
use nodewright_core::model::pod::PodKey;
use nodewright_core::{Command, EventKind};
use nodewright_kubernetes::announce::{Announcer, announcements};
use nodewright_kubernetes::eviction::{Evicted, evict};
use nodewright_kubernetes::nodeclaims::{NodeClaims, set_condition};
use nodewright_kubernetes::nodes::Nodes;
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::launch_classes::LaunchClasses;

/// Labels Karpenter puts on a NodeClaim once its instance is known.
const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
const CAPACITY_TYPE_LABEL: &str = "karpenter.sh/capacity-type";

/// How long a failed Kubernetes or EC2 call waits before it is tried again (doubling up to
/// [`RETRY_MAX`]), for the calls that must succeed in the end (terminating an instance).
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// How long a launch waits for its node class to be resolved (after a start, or right after
/// the class was created) before it is reported as not ready.
const NODECLASS_WAIT: Duration = Duration::from_secs(60);

/// The driver's side: queues each command for the [`Executor`].
pub struct Dispatch {
    queue: mpsc::UnboundedSender<Command>,
}

impl CommandExecutor for Dispatch {
    fn execute(&mut self, command: &Command) {
        // The executor is gone only when the process is stopping; the command is in the log,
        // and the next start re-issues what has no result.
        let _ = self.queue.send(command.clone());
    }
}

/// The two halves: the driver's [`Dispatch`] and the [`Executor`]'s queue.
pub fn dispatch() -> (Dispatch, mpsc::UnboundedReceiver<Command>) {
    let (queue, commands) = mpsc::unbounded_channel();
    (Dispatch { queue }, commands)
}

/// What the commands are carried out with.
#[derive(Clone)]
pub struct Hands {
    /// A client that does not retry 429 answers (the Eviction API's refusals).
    pub eviction_client: kube::Client,
    pub claims: NodeClaims,
    pub nodes: Nodes,
    pub announcer: Announcer,
    pub launcher: Launcher,
    pub instances: Instances,
    pub classes: LaunchClasses,
    /// The latest catalog read from EC2: a launched NodeClaim gets its instance type's labels.
    pub catalog: tokio::sync::watch::Receiver<Option<Arc<Catalog>>>,
    /// Results go back to the control loop here.
    pub inbox: InboxSender,
    /// Counts the instances a command named that were left alone as not this cluster's
    /// NodePools' (`nodewright_instances_not_owned_total`).
    pub refusals: prometheus_client::metrics::counter::Counter,
}

/// Carries out the queued commands.
pub struct Executor {
    hands: Arc<Hands>,
    lanes: BTreeMap<String, mpsc::UnboundedSender<Command>>,
    /// The NodeClaim of each node a command named with its NodeClaim: evictions from the node
    /// run in that NodeClaim's lane.
    node_claims: BTreeMap<String, String>,
}

impl Executor {
    /// The NodeClaim whose lane a command runs in.
    fn lane_of(&mut self, command: &Command) -> Option<String> {
        match command {
            Command::LaunchNodeClaim { nodeclaim, .. } => Some(nodeclaim.name.clone()),
            Command::TerminateNodeClaim {
                nodeclaim, node, ..
            } => {
                if let Some(node) = node {
                    self.node_claims.remove(node);
                }
                Some(nodeclaim.clone())
            }
            Command::CordonNode {
                nodeclaim, node, ..
            }
            | Command::UncordonNode {
                nodeclaim, node, ..
            }
            | Command::ReleaseNode {
                nodeclaim, node, ..
            } => {
                self.node_claims.insert(node.clone(), nodeclaim.clone());
                Some(nodeclaim.clone())
            }
            Command::EvictPod { node, .. } => self.node_claims.get(node).cloned(),
            _ => None,
        }
    }
}

fn now() -> Time {
    Time(Timestamp::now())
}

impl Executor {
    pub fn new(hands: Hands) -> Self {
        Executor {
            hands: Arc::new(hands),
            lanes: BTreeMap::new(),
            node_claims: BTreeMap::new(),
        }
    }

    /// Runs until the queue closes (the driver is gone).
    pub async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        while let Some(command) = commands.recv().await {
            self.announce(&command);
            match self.lane_of(&command) {
                Some(name) => self.queue_in_lane(name, command),
                None => {
                    let hands = Arc::clone(&self.hands);
                    tokio::spawn(async move { hands.carry_out(command).await });
                }
            }
            // Lanes whose NodeClaim is terminated have ended.
            if self.lanes.len() > 64 {
                self.lanes.retain(|_, lane| !lane.is_closed());
                let lanes = &self.lanes;
                self.node_claims
                    .retain(|_, claim| lanes.contains_key(claim));
            }
        }
    }

    fn announce(&self, command: &Command) {
        let list = announcements(command);
        if list.is_empty() {
            return;
        }
        let announcer = self.hands.announcer.clone();
        tokio::spawn(async move {
            for a in list {
                if let Err(e) = announcer.publish(&a).await {
                    warn!(reason = a.reason, error = %e, "publishing a Kubernetes Event failed");
                }
            }
        });
    }

    fn queue_in_lane(&mut self, name: String, command: Command) {
        let command = match self.lanes.get(&name) {
            Some(lane) => match lane.send(command) {
                Ok(()) => return,
                // The lane ended (its NodeClaim was terminated): a new one takes the command.
                Err(mpsc::error::SendError(command)) => command,
            },
            None => command,
        };
        let (lane, mut queue) = mpsc::unbounded_channel::<Command>();
        let hands = Arc::clone(&self.hands);
        tokio::spawn(async move {
            while let Some(command) = queue.recv().await {
                match command {
                    // Ordered after the taint, concurrent with the other evictions.
                    Command::EvictPod { .. } => {
                        let hands = Arc::clone(&hands);
                        tokio::spawn(async move { hands.carry_out(command).await });
                    }
                    Command::TerminateNodeClaim { .. } => {
                        hands.carry_out(command).await;
                        break;
                    }
                    command => hands.carry_out(command).await,
                }
            }
        });
        // Invariant: the lane's receiver was just created and is alive.
        let _ = lane.send(command);
        self.lanes.insert(name, lane);
    }
}

/// Runs `call` until it succeeds, waiting longer between attempts.
async fn until_done<T, E: std::fmt::Display, F, Fut>(what: &str, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let mut wait = RETRY_FIRST;
    loop {
        match call().await {
            Ok(done) => return done,
            Err(e) => {
                warn!(what, error = %e, retry_in_ms = wait.as_millis() as u64, "retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(RETRY_MAX);
            }
        }
    }
}

impl Hands {
    fn send(&self, event: EventKind) {
        // The loop is gone only when stopping; the next start asks again.
        let _ = self.inbox.send(Input::Observed(event));
    }

    /// Carries out one command.
    pub async fn carry_out(&self, command: Command) {
        match command {
            Command::LaunchNodeClaim { nodeclaim, .. } => self.launch(&nodeclaim).await,
            Command::TerminateNodeClaim {
                nodeclaim,
                node,
                instance_id,
                ..
            } => {
                self.terminate(&nodeclaim, node.as_deref(), instance_id.as_deref())
                    .await
            }
            Command::CordonNode { node, .. } => {
                until_done("tainting a node karpenter.sh/disrupted", || {
                    self.nodes.cordon(&node)
                })
                .await;
            }
            Command::UncordonNode { node, .. } => {
                until_done("untainting a node", || self.nodes.uncordon(&node)).await;
            }
            Command::ReleaseNode { node, .. } => {
                until_done("releasing a held node", || {
                    self.nodes.untaint(&node, labels::SIBLING_HOLD_TAINT)
                })
                .await;
            }
            Command::EvictPod { pod, forced, .. } => self.evict(&pod, forced).await,
            Command::TerminateOrphanInstance {
                instance_id,
                nodeclaim,
                ..
            } => {
                info!(instance_id, "terminating an instance no NodeClaim owns");
                let refused = until_done("terminating an orphan instance", || {
                    self.instances.terminate_ours(&instance_id)
                })
                .await;
                if let Err(not_ours) = refused {
                    self.refused_as_not_ours(nodeclaim.as_deref(), &not_ours)
                        .await;
                }
            }
            // Their Events are all they do.
            Command::NominatePod { .. }
            | Command::ReportUnschedulable { .. }
            | Command::WarnMissingRequests { .. }
            | Command::DisruptionBlocked { .. }
            | Command::WarnInvalidAnnotation { .. }
            | Command::ReportInterruption { .. } => {}
        }
    }

    /// Creates the NodeClaim, launches its instance, and records the outcome on its status and
    /// for the core.
    async fn launch(&self, spec: &NodeClaimSpec) {
        if let Err(e) = self.claims.create(spec).await {
            // The launch goes on: the instance is what the core waits for, and the status is
            // written when the object can be.
            warn!(nodeclaim = spec.name, error = %e, "creating the NodeClaim failed");
        }
        let Some(class) = self.classes.ready(&spec.nodeclass, NODECLASS_WAIT).await else {
            let message = format!(
                "EC2NodeClass {} is not resolved (missing, invalid, or its selectors match nothing): see its status",
                spec.nodeclass
            );
            warn!(nodeclaim = spec.name, "{message}");
            self.launch_status(&spec.name, None, "NodeClassNotReady", &message)
                .await;
            return;
        };
        match self.launcher.launch(spec, &class).await {
            LaunchOutcome::Launched { event, reused } => {
                let instance = match &event {
                    EventKind::LaunchSucceeded { instance, .. } => Some(instance.clone()),
                    _ => None,
                };
                info!(nodeclaim = spec.name, instance = ?instance.as_ref().map(|i| &i.instance_id), reused, "launched");
                self.send(event);
                if let Some(instance) = instance {
                    self.launch_status(&spec.name, Some(&instance), "Launched", "")
                        .await;
                }
            }
            LaunchOutcome::NoCapacity { event } => {
                let message = match &event {
                    EventKind::LaunchFailed { message, .. } => message.clone(),
                    _ => String::new(),
                };
                self.send(event);
                self.launch_status(&spec.name, None, "InsufficientCapacity", &message)
                    .await;
            }
            LaunchOutcome::Failed { error } => {
                warn!(nodeclaim = spec.name, error = %error, "launch failed");
                self.launch_status(&spec.name, None, "LaunchFailed", &error.to_string())
                    .await;
            }
        }
    }

    /// The NodeClaim's `Launched` condition, and with an instance its provider id and labels:
    /// as Karpenter's, its instance type's well-known labels (`karpenter.k8s.aws/instance-*`,
    /// `kubernetes.io/arch`, ...) with the type, zone and capacity type, which registration
    /// carries onto the Node for pods that select them.
    async fn launch_status(
        &self,
        name: &str,
        instance: Option<&Instance>,
        reason: &str,
        message: &str,
    ) {
        let at = now();
        let type_labels: BTreeMap<String, String> = instance
            .and_then(|i| {
                let catalog = self.catalog.borrow();
                Some(catalog.as_ref()?.get(&i.instance_type)?.labels.clone())
            })
            .unwrap_or_default();
        let result = self
            .claims
            .update(name, |claim| {
                if let Some(i) = instance {
                    let labels = claim.metadata.labels.get_or_insert_with(Default::default);
                    // The claim's own labels win: they come from requirements the type met,
                    // and a Windows class's OS labels are not its type's catalog labels.
                    for (key, value) in &type_labels {
                        labels.entry(key.clone()).or_insert_with(|| value.clone());
                    }
                    labels.insert(INSTANCE_TYPE_LABEL.into(), i.instance_type.clone());
                    labels.insert(ZONE_LABEL.into(), i.zone.clone());
                    labels.insert(CAPACITY_TYPE_LABEL.into(), i.capacity_type.as_str().into());
                }
                let status = claim.status.get_or_insert_with(Default::default);
                if let Some(i) = instance {
                    status.provider_id = Some(i.provider_id());
                }
                set_condition(
                    &mut status.conditions,
                    "Launched",
                    instance.is_some(),
                    reason,
                    message,
                    &at,
                );
            })
            .await;
        if let Err(e) = result {
            warn!(nodeclaim = name, error = %e, "writing the NodeClaim's status failed");
        }
    }

    /// Cordons the node, terminates the instance (once: one that is already going is left
    /// alone), deletes the node and releases the NodeClaim, then tells the core.
    async fn terminate(&self, nodeclaim: &str, node: Option<&str>, instance_id: Option<&str>) {
        if let Some(node) = node {
            until_done("tainting a node before termination", || {
                self.nodes.cordon(node)
            })
            .await;
        }
        let instance = match instance_id {
            Some(id) => until_done("describing an instance", || self.instances.describe(id)).await,
            None => {
                until_done("finding a NodeClaim's instance", || {
                    self.instances.of_nodeclaim(nodeclaim)
                })
                .await
            }
        };
        if let Some(instance) = instance.filter(|i| i.is_live()) {
            info!(
                nodeclaim,
                instance_id = instance.instance_id,
                "terminating the instance"
            );
            let refused = until_done("terminating an instance", || {
                self.instances.terminate_ours(&instance.instance_id)
            })
            .await;
            if let Err(not_ours) = refused {
                // The NodeClaim names a machine that is not this cluster's NodePools' (its
                // provider id is another cluster's, or a node group's): the machine is left
                // running, the NodeClaim goes.
                self.refused_as_not_ours(Some(nodeclaim), &not_ours).await;
            }
        }
        if let Some(node) = node {
            until_done("deleting a node", || self.nodes.delete(node)).await;
        }
        until_done("releasing a NodeClaim", || self.claims.release(nodeclaim)).await;
        self.send(EventKind::NodeClaimTerminated {
            nodeclaim: nodeclaim.to_string(),
        });
    }

    /// An instance a command named is not a machine of this cluster's NodePools: it is left
    /// running, with a log line, a metric and a Warning Event on the NodeClaim that named it.
    async fn refused_as_not_ours(
        &self,
        nodeclaim: Option<&str>,
        not_ours: &nodewright_aws::instances::NotOurs,
    ) {
        warn!(nodeclaim, instance_id = not_ours.instance_id, error = %not_ours, "an instance that is not ours is left alone");
        self.refusals.inc();
        if let Some(nodeclaim) = nodeclaim {
            let announcement = nodewright_kubernetes::announce::Announcement {
                regarding: nodewright_kubernetes::announce::Regarding::NodeClaim(
                    nodeclaim.to_string(),
                ),
                warning: true,
                reason: "InstanceNotOwned",
                action: "Terminate",
                note: not_ours.to_string(),
            };
            if let Err(e) = self.announcer.publish(&announcement).await {
                warn!(error = %e, "publishing a Kubernetes Event failed");
            }
        }
    }

    /// Evicts (or, forced, deletes) a pod; a refusal goes back to the core, which asks again
    /// later.
    async fn evict(&self, pod: &PodKey, forced: bool) {
        match evict(&self.eviction_client, pod, forced).await {
            Ok(Evicted::Yes) | Ok(Evicted::Gone) => {}
            Ok(Evicted::Refused(reason)) => {
                self.send(EventKind::EvictionRefused {
                    pod: pod.clone(),
                    reason,
                });
            }
            Err(e) => {
                warn!(pod = %pod, error = %e, "eviction failed");
                self.send(EventKind::EvictionRefused {
                    pod: pod.clone(),
                    reason: format!("the Eviction API failed: {e}"),
                });
            }
        }
    }
}
