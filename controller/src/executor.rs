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
use nodewright_adapters::control_loop::{Backlog, InboxSender, Input};
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

/// How a failed Kubernetes or EC2 call is tried again: jittered exponential backoff from
/// [`RETRY_FIRST`] up to [`RETRY_MAX`] between attempts, [`RETRIES`] times at most (about 15 to
/// 25 seconds in all). Then the lane says it cannot progress (a log line, a Warning Event on the
/// NodeClaim, `nodewright_command_failures_total`) and, for a termination, the core hears it
/// ([`EventKind::TerminationFailed`]) and asks again later. An answer that retrying cannot
/// change (forbidden, denied by a webhook, invalid) is not retried.
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(10);
const RETRIES: usize = 6;

/// How often a launch that failed for a reason other than capacity (throttled past the SDK's
/// retries, a 5xx, a timeout) is tried again before the core hears it failed.
const LAUNCH_RETRIES: usize = 2;

/// How long a launch waits for its node class to be resolved (after a start, or right after
/// the class was created) before it is reported as not ready.
const NODECLASS_WAIT: Duration = Duration::from_secs(60);

/// How many commands are carried out at once; the others wait their turn.
const MAX_IN_FLIGHT: usize = 256;

/// The driver's side: queues each command for the [`Executor`], counting it in the backlog
/// (the loop takes no observation while the backlog is full, so the queue is bounded by it).
pub struct Dispatch {
    queue: mpsc::UnboundedSender<Command>,
    backlog: Backlog,
}

impl CommandExecutor for Dispatch {
    fn execute(&mut self, command: &Command) {
        // The executor is gone only when the process is stopping; the command is in the log,
        // and the next start re-issues what has no result.
        // Counted in before it can be counted out.
        self.backlog.add();
        if self.queue.send(command.clone()).is_err() {
            self.backlog.done();
        }
    }
}

/// The two halves: the driver's [`Dispatch`] and the [`Executor`]'s queue.
pub fn dispatch(backlog: Backlog) -> (Dispatch, mpsc::UnboundedReceiver<Command>) {
    let (queue, commands) = mpsc::unbounded_channel();
    (Dispatch { queue, backlog }, commands)
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
    /// Counts the instances left alone as not this cluster's NodePools'
    /// (`nodewright_instances_not_owned_total`) and the commands that failed.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The term the commands were decided in: no side effect is made once it is over.
    pub fence: Arc<crate::leadership::Fence>,
}

/// Carries out the queued commands.
pub struct Executor {
    hands: Arc<Hands>,
    /// Counted out as each command is done.
    backlog: Backlog,
    /// [`MAX_IN_FLIGHT`] permits: one per command being carried out.
    in_flight: Arc<tokio::sync::Semaphore>,
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
    pub fn new(hands: Hands, backlog: Backlog) -> Self {
        Executor {
            hands: Arc::new(hands),
            backlog,
            in_flight: Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT)),
            lanes: BTreeMap::new(),
            node_claims: BTreeMap::new(),
        }
    }

    /// What carries out one command: a permit of [`MAX_IN_FLIGHT`], then the command, then
    /// the backlog counted down.
    fn turn(&self) -> Turn {
        Turn {
            hands: Arc::clone(&self.hands),
            backlog: self.backlog.clone(),
            in_flight: Arc::clone(&self.in_flight),
        }
    }

    /// Runs until the queue closes (the driver is gone).
    pub async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        while let Some(command) = commands.recv().await {
            self.hands.metrics.set_executor_backlog(self.backlog.len());
            self.announce(&command);
            match self.lane_of(&command) {
                Some(name) => self.queue_in_lane(name, command),
                None => {
                    let turn = self.turn();
                    tokio::spawn(async move { turn.take(command).await });
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
        // A lane's queue holds what the backlog counts: the loop bounds it.
        let (lane, mut queue) = mpsc::unbounded_channel::<Command>();
        let turn = self.turn();
        tokio::spawn(async move {
            while let Some(command) = queue.recv().await {
                match command {
                    // Ordered after the taint, concurrent with the other evictions.
                    Command::EvictPod { .. } => {
                        let turn = turn.clone();
                        tokio::spawn(async move { turn.take(command).await });
                    }
                    Command::TerminateNodeClaim { .. } => {
                        turn.take(command).await;
                        break;
                    }
                    command => turn.take(command).await,
                }
            }
            // Commands queued after the termination are not carried out: counted out.
            queue.close();
            while queue.try_recv().is_ok() {
                turn.backlog.done();
            }
        });
        // Invariant: the lane's receiver was just created and is alive.
        let _ = lane.send(command);
        self.lanes.insert(name, lane);
    }
}

/// What a command needs to be carried out in its turn.
#[derive(Clone)]
struct Turn {
    hands: Arc<Hands>,
    backlog: Backlog,
    in_flight: Arc<tokio::sync::Semaphore>,
}

impl Turn {
    async fn take(&self, command: Command) {
        // Invariant: the semaphore is never closed.
        let permit = self.in_flight.acquire().await;
        self.hands.carry_out(command).await;
        drop(permit);
        self.backlog.done();
        self.hands.metrics.set_executor_backlog(self.backlog.len());
    }
}

/// A failed call, as the retries take it.
pub trait Failure: std::fmt::Display {
    /// Whether trying again may succeed: throttled, unreachable, timed out, a conflict or a
    /// server error; not a refusal that stands (forbidden, denied by a webhook, invalid).
    fn retryable(&self) -> bool;
}

impl Failure for kube::Error {
    fn retryable(&self) -> bool {
        match self {
            kube::Error::Api(status) => {
                matches!(status.code, 408 | 409 | 429) || status.code >= 500
            }
            // Transport failures and timeouts.
            _ => true,
        }
    }
}

impl Failure for nodewright_aws::AwsError {
    fn retryable(&self) -> bool {
        use nodewright_aws::ErrorClass;
        matches!(self.class, ErrorClass::Transient | ErrorClass::Unreachable)
    }
}

/// Runs `call` until it succeeds, it fails in a way retrying cannot change, or [`RETRIES`]
/// retries (jittered exponential backoff) have failed; the last error then.
async fn retried<T, E: Failure, F, Fut>(what: &'static str, call: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    use backon::{ExponentialBuilder, Retryable};
    call.retry(
        ExponentialBuilder::default()
            .with_min_delay(RETRY_FIRST)
            .with_max_delay(RETRY_MAX)
            .with_max_times(RETRIES)
            .with_jitter(),
    )
    .sleep(tokio::time::sleep)
    .when(|e: &E| e.retryable())
    .notify(|e: &E, wait: Duration| {
        warn!(what, error = %e, retry_in_ms = wait.as_millis() as u64, "retrying");
    })
    .await
}

/// A command's step that failed past its retries: what it was doing, the error, and whether
/// trying again later may succeed.
#[derive(Debug, Clone)]
pub struct Failed {
    pub step: &'static str,
    pub error: String,
    pub retryable: bool,
}

impl Failed {
    fn new(step: &'static str, error: &impl Failure) -> Self {
        Failed {
            step,
            error: error.to_string(),
            retryable: error.retryable(),
        }
    }
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed: {}", self.step, self.error)?;
        if !self.retryable {
            write!(
                f,
                " (retrying cannot change this answer: a person must act)"
            )?;
        }
        Ok(())
    }
}

impl Hands {
    fn send(&self, event: EventKind) {
        // The loop is gone only when stopping; the next start asks again.
        let _ = self.inbox.send(Input::Observed(event));
    }

    /// Whether the term the commands were decided in is over: then the side effect about to
    /// be made (`what`) is not, with a log line and `nodewright_fenced_side_effects_total`.
    fn fenced(&self, what: &str) -> bool {
        match self.fence.check() {
            Ok(()) => false,
            Err(fenced) => {
                warn!(what, error = %fenced, "not carried out");
                self.metrics.fenced();
                true
            }
        }
    }

    /// Carries out one command.
    pub async fn carry_out(&self, command: Command) {
        if self.fenced(command.name()) {
            return;
        }
        match command {
            Command::LaunchNodeClaim { nodeclaim, .. } => self.launch(&nodeclaim).await,
            Command::TerminateNodeClaim {
                nodeclaim,
                node,
                instance_id,
                ..
            } => {
                if let Err(failed) = self
                    .terminate(&nodeclaim, node.as_deref(), instance_id.as_deref())
                    .await
                {
                    self.failed(Some(&nodeclaim), "Terminate", &failed).await;
                    self.send(EventKind::TerminationFailed {
                        nodeclaim,
                        retryable: failed.retryable,
                        reason: failed.to_string(),
                    });
                }
            }
            Command::CordonNode {
                node, nodeclaim, ..
            } => {
                let tainted = retried("tainting a node karpenter.sh/disrupted", || {
                    self.nodes.cordon(&node)
                })
                .await;
                if let Err(e) = tainted {
                    let failed = Failed::new("tainting its node karpenter.sh/disrupted", &e);
                    self.failed(Some(&nodeclaim), "Cordon", &failed).await;
                }
            }
            Command::UncordonNode {
                node, nodeclaim, ..
            } => {
                if let Err(e) = retried("untainting a node", || self.nodes.uncordon(&node)).await {
                    let failed = Failed::new("untainting its node", &e);
                    self.failed(Some(&nodeclaim), "Uncordon", &failed).await;
                }
            }
            Command::ReleaseNode {
                node, nodeclaim, ..
            } => {
                let released = retried("releasing a held node", || {
                    self.nodes.untaint(&node, labels::SIBLING_HOLD_TAINT)
                })
                .await;
                if let Err(e) = released {
                    let failed = Failed::new("releasing its held node", &e);
                    self.failed(Some(&nodeclaim), "Release", &failed).await;
                }
            }
            Command::EvictPod { pod, forced, .. } => self.evict(&pod, forced).await,
            Command::TerminateOrphanInstance {
                instance_id,
                nodeclaim,
                ..
            } => {
                info!(instance_id, "terminating an instance no NodeClaim owns");
                // A failure is told; the next listing still shows the instance, and the
                // garbage collector asks again.
                match retried("terminating an orphan instance", || {
                    self.instances.terminate_ours(&instance_id)
                })
                .await
                {
                    Ok(Ok(())) => {}
                    Ok(Err(not_ours)) => {
                        self.refused_as_not_ours(nodeclaim.as_deref(), &not_ours)
                            .await
                    }
                    Err(e) => {
                        let failed = Failed::new("terminating an orphan instance", &e);
                        self.failed(nodeclaim.as_deref(), "TerminateOrphan", &failed)
                            .await;
                    }
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

    /// A command that cannot progress says so: a log line, a Warning Event on its NodeClaim
    /// (reason `CommandFailed`, the action the command's), and
    /// `nodewright_command_failures_total{command, retryable}`.
    async fn failed(&self, nodeclaim: Option<&str>, action: &'static str, failed: &Failed) {
        warn!(nodeclaim, action, retryable = failed.retryable, error = %failed, "a command could not be carried out");
        self.metrics.command_failed(action, failed.retryable);
        if let Some(nodeclaim) = nodeclaim {
            self.warn_on(nodeclaim, "CommandFailed", action, failed.to_string())
                .await;
        }
    }

    /// Publishes a Warning Event on NodeClaim `nodeclaim`; a failure to publish is a log line.
    async fn warn_on(
        &self,
        nodeclaim: &str,
        reason: &'static str,
        action: &'static str,
        note: String,
    ) {
        let announcement = nodewright_kubernetes::announce::Announcement {
            regarding: nodewright_kubernetes::announce::Regarding::NodeClaim(nodeclaim.to_string()),
            warning: true,
            reason,
            action,
            note,
        };
        if let Err(e) = self.announcer.publish(&announcement).await {
            warn!(error = %e, "publishing a Kubernetes Event failed");
        }
    }

    /// Creates the NodeClaim, launches its instance, and records the outcome on its status and
    /// for the core. A launch that fails for a reason other than capacity is tried again
    /// [`LAUNCH_RETRIES`] times when retrying may help, then the core hears it failed
    /// (`LaunchFailed` with no offering marked unavailable): it gives the NodeClaim up and
    /// plans its pods again, within seconds rather than at the launch timeout.
    async fn launch(&self, spec: &NodeClaimSpec) {
        if let Err(e) = retried("creating a NodeClaim", || self.claims.create(spec)).await {
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
            self.metrics.command_failed("Launch", false);
            self.send(EventKind::LaunchFailed {
                nodeclaim: spec.name.clone(),
                code: "NodeClassNotReady".into(),
                message,
                unavailable: Vec::new(),
            });
            return;
        };
        let mut attempt = 0;
        let error = loop {
            if self.fenced("launching an instance") {
                return;
            }
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
                    return;
                }
                LaunchOutcome::NoCapacity { event } => {
                    let message = match &event {
                        EventKind::LaunchFailed { message, .. } => message.clone(),
                        _ => String::new(),
                    };
                    self.send(event);
                    self.launch_status(&spec.name, None, "InsufficientCapacity", &message)
                        .await;
                    return;
                }
                LaunchOutcome::Failed { error }
                    if error.retryable() && attempt < LAUNCH_RETRIES =>
                {
                    attempt += 1;
                    let wait = RETRY_FIRST * 5 * attempt as u32;
                    warn!(nodeclaim = spec.name, error = %error, attempt, retry_in_ms = wait.as_millis() as u64, "launch failed; trying again");
                    tokio::time::sleep(wait).await;
                }
                LaunchOutcome::Failed { error } => break error,
            }
        };
        warn!(nodeclaim = spec.name, error = %error, "launch failed");
        self.metrics.command_failed("Launch", error.retryable());
        self.launch_status(&spec.name, None, "LaunchFailed", &error.to_string())
            .await;
        let code = error.code.clone().unwrap_or_else(|| {
            match error.class {
                nodewright_aws::ErrorClass::Unreachable => "Unreachable",
                nodewright_aws::ErrorClass::Auth => "Unauthorized",
                nodewright_aws::ErrorClass::Transient => "Transient",
                nodewright_aws::ErrorClass::Config | nodewright_aws::ErrorClass::Capacity => {
                    "LaunchError"
                }
            }
            .to_string()
        });
        self.send(EventKind::LaunchFailed {
            nodeclaim: spec.name.clone(),
            code,
            message: error.to_string(),
            unavailable: Vec::new(),
        });
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
    /// alone), deletes the node and releases the NodeClaim, then tells the core. A step that
    /// fails past its retries ends it: the core hears why and asks again later.
    async fn terminate(
        &self,
        nodeclaim: &str,
        node: Option<&str>,
        instance_id: Option<&str>,
    ) -> Result<(), Failed> {
        if let Some(node) = node {
            retried("tainting a node before termination", || {
                self.nodes.cordon(node)
            })
            .await
            .map_err(|e| Failed::new("tainting its node karpenter.sh/disrupted", &e))?;
        }
        let instance = match instance_id {
            Some(id) => retried("describing an instance", || self.instances.describe(id)).await,
            None => {
                retried("finding a NodeClaim's instance", || {
                    self.instances.of_nodeclaim(nodeclaim)
                })
                .await
            }
        }
        .map_err(|e| Failed::new("finding its instance", &e))?;
        if let Some(instance) = instance.filter(|i| i.is_live()) {
            if self.fenced("terminating an instance") {
                return Ok(());
            }
            info!(
                nodeclaim,
                instance_id = instance.instance_id,
                "terminating the instance"
            );
            let refused = retried("terminating an instance", || {
                self.instances.terminate_ours(&instance.instance_id)
            })
            .await
            .map_err(|e| Failed::new("terminating its instance", &e))?;
            if let Err(not_ours) = refused {
                // The NodeClaim names a machine that is not this cluster's NodePools' (its
                // provider id is another cluster's, or a node group's): the machine is left
                // running, the NodeClaim goes.
                self.refused_as_not_ours(Some(nodeclaim), &not_ours).await;
            }
        }
        if let Some(node) = node {
            retried("deleting a node", || self.nodes.delete(node))
                .await
                .map_err(|e| Failed::new("deleting its node", &e))?;
        }
        retried("releasing a NodeClaim", || self.claims.release(nodeclaim))
            .await
            .map_err(|e| Failed::new("releasing the NodeClaim", &e))?;
        self.send(EventKind::NodeClaimTerminated {
            nodeclaim: nodeclaim.to_string(),
        });
        Ok(())
    }

    /// An instance a command named is not a machine of this cluster's NodePools: it is left
    /// running, with a log line, a metric and a Warning Event on the NodeClaim that named it.
    async fn refused_as_not_ours(
        &self,
        nodeclaim: Option<&str>,
        not_ours: &nodewright_aws::instances::NotOurs,
    ) {
        warn!(nodeclaim, instance_id = not_ours.instance_id, error = %not_ours, "an instance that is not ours is left alone");
        self.metrics.instances_not_owned.inc();
        if let Some(nodeclaim) = nodeclaim {
            self.warn_on(
                nodeclaim,
                "InstanceNotOwned",
                "Terminate",
                not_ours.to_string(),
            )
            .await;
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
