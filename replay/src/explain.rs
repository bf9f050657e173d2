//! `nodewright explain`: the story of a pod, a node or a command, told from a log.
//!
//! The log is read once while the core is replayed over it, so every line can say what the core
//! knew at that moment: when a pod goes pending, the nodes and machines on their way are checked
//! for it one by one (what rules each out), and the NodePools are asked what they would launch for
//! it alone. Every line names its event or command index (`event #12`, `command #3`), the same
//! indexes `replay --verify` and `explain --command` use: events and commands are each counted
//! from 0 in log order.

use std::fmt::Write as _;
use std::path::Path;

use nodewright_adapters::eventlog::{LogError, LogHeader, LogRecord, NwlogReader};
use nodewright_core::model::nodeclaim::LaunchOption;
use nodewright_core::model::pod::{Pod, PodKey};
use nodewright_core::provisioning::scheduler;
use nodewright_core::{Command, Core, Event, EventKind};

use crate::replayer::{Replayer, Step};
use thiserror::Error;

/// What to explain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// `namespace/name`, or a name in namespace `default`.
    Pod(PodKey),
    /// A node's name or its NodeClaim's.
    Node(String),
    /// A command's index among the log's commands.
    Command(u64),
}

impl Subject {
    /// A pod as `namespace/name` (or `name`, in `default`).
    pub fn pod(raw: &str) -> Subject {
        match raw.split_once('/') {
            Some((namespace, name)) => Subject::Pod(PodKey::new(namespace, name)),
            None => Subject::Pod(PodKey::new("default", raw)),
        }
    }
}

#[derive(Debug, Error)]
pub enum ExplainError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Replay(#[from] crate::replayer::ReplayError),
    #[error("the log never mentions pod {0}; `nodewright log inspect` shows what it holds")]
    UnknownPod(PodKey),
    #[error(
        "the log never mentions a node or NodeClaim named {0:?}; give a node name or a NodeClaim name as the log's commands show them"
    )]
    UnknownNode(String),
    #[error(
        "the log holds {commands} commands (#0 to #{last}); there is no command #{index}",
        last = commands.saturating_sub(1)
    )]
    UnknownCommand { index: u64, commands: u64 },
}

/// One line of a story, at a moment of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub at_ms: u64,
    /// `event #12` or `command #3`.
    pub source: String,
    pub text: String,
    /// Further lines under it (the candidates a pending pod was checked against).
    pub details: Vec<String>,
}

/// What `explain` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Story {
    pub header: LogHeader,
    /// `pod default/web-1`, `node ip-10-0-0-1 (NodeClaim default-abcde)`, `command #3`.
    pub title: String,
    pub lines: Vec<Line>,
    /// A closing sentence (how long the pod waited, what the machine cost).
    pub summary: Option<String>,
}

impl Story {
    /// The story as text, one line per moment.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{} (log from {}, {})\n",
            self.title, self.header.source, self.header.producer
        );
        for line in &self.lines {
            let _ = writeln!(
                out,
                "  {:>10}  {:<13} {}",
                format_time(line.at_ms),
                line.source,
                line.text
            );
            for detail in &line.details {
                let _ = writeln!(out, "  {:>10}  {:<13}   {detail}", "", "");
            }
        }
        if let Some(summary) = &self.summary {
            let _ = writeln!(out, "{summary}");
        }
        out
    }
}

fn format_time(ms: u64) -> String {
    format!("{}.{:03}s", ms / 1000, ms % 1000)
}

/// Reads the log at `path` and tells the story of `subject`. A node's story reads the log
/// twice: once to learn the names it goes by (a node is named after its NodeClaim only once it
/// registers), then to tell it.
pub fn explain_file(path: &Path, subject: &Subject) -> Result<Story, ExplainError> {
    let open =
        || -> Result<NwlogReader<LogHeader, LogRecord, _>, LogError> { NwlogReader::open(path) };
    let mut teller = Teller::new(subject);
    if let Subject::Node(name) = subject {
        let (claim, node) = node_names(open()?, name)?;
        teller.claim = claim;
        teller.node = node;
    }
    tell(open()?, teller)
}

/// The NodeClaim and node names of the machine called `name` (either of them).
fn node_names<S: std::io::Read>(
    mut reader: NwlogReader<LogHeader, LogRecord, S>,
    name: &str,
) -> Result<(Option<String>, Option<String>), ExplainError> {
    // The instance each NodeClaim launched, and the node each instance became.
    let mut claim_of_instance: Vec<(String, String)> = Vec::new();
    let mut found_claim: Option<String> = None;
    let mut found_node: Option<String> = None;
    while let Some(entry) = reader.next_entry() {
        match entry?.record {
            LogRecord::Commands(commands) => {
                for command in commands {
                    if let Command::LaunchNodeClaim { nodeclaim, .. } = command
                        && nodeclaim.name == name
                    {
                        found_claim = Some(nodeclaim.name.clone());
                    }
                }
            }
            LogRecord::Event(Event {
                kind:
                    EventKind::LaunchSucceeded {
                        nodeclaim,
                        instance,
                    },
                ..
            }) => claim_of_instance.push((instance.instance_id, nodeclaim)),
            // Adopted at a start: the NodeClaim and its instance as the cluster showed them.
            LogRecord::Event(Event {
                kind: EventKind::NodeClaimsObserved { nodeclaims },
                ..
            }) => {
                for claim in nodeclaims {
                    if claim.name == name {
                        found_claim = Some(claim.name.clone());
                    }
                    if let Some(instance) = claim.instance {
                        claim_of_instance.push((instance.instance_id, claim.name));
                    }
                }
            }
            LogRecord::Event(Event {
                kind: EventKind::NodeApplied(node),
                ..
            }) => {
                let claim = node.provider_id.as_deref().and_then(|p| {
                    claim_of_instance
                        .iter()
                        .find(|(id, _)| p.ends_with(&format!("/{id}")))
                        .map(|(_, claim)| claim.clone())
                });
                let named = node.name == name;
                let of_claim = claim.as_deref() == Some(name);
                if named || of_claim {
                    found_node = Some(node.name.clone());
                    if found_claim.is_none() {
                        found_claim = claim;
                    }
                }
            }
            _ => {}
        }
    }
    if found_claim.is_none() && found_node.is_none() {
        return Err(ExplainError::UnknownNode(name.to_string()));
    }
    Ok((found_claim, found_node))
}

fn tell<S: std::io::Read>(
    mut reader: NwlogReader<LogHeader, LogRecord, S>,
    mut teller: Teller,
) -> Result<Story, ExplainError> {
    // The pieces of split commands come in order: each is told as it comes.
    let mut replay = Replayer::new(reader.header().clone());
    let mut last_event: Option<(u64, Event)> = None;
    while let Some(entry) = reader.next_entry() {
        match replay.feed(entry?.record)? {
            Some(Step::Event { index, event, .. }) => {
                teller.before_event(index, &event);
                teller.after_event(replay.core(), index, &event);
                last_event = Some((index, event));
            }
            Some(Step::Recorded(recorded)) => {
                let first = replay.commands() - recorded.len() as u64;
                for (index, command) in (first..).zip(&recorded) {
                    teller.command(replay.core(), index, command, last_event.as_ref());
                }
            }
            // A snapshot only caches the events (one that starts a cut log is in the core).
            Some(Step::Snapshot { .. } | Step::Started { .. } | Step::Term { .. }) | None => {}
        }
    }
    teller.finish(replay.header().clone(), replay.commands())
}

/// Collects the lines of one story as the log goes by.
struct Teller {
    subject: Subject,
    lines: Vec<Line>,
    mentioned: bool,
    /// For a pod: since when it is pending, if it is.
    pending_since: Option<u64>,
    /// For a pod: every wait, pending to placed or gone.
    waits_ms: Vec<u64>,
    /// For a node: the NodeClaim and node names it goes by, once known.
    claim: Option<String>,
    node: Option<String>,
    instance_id: Option<String>,
    registered: bool,
    ready: bool,
    launched_at_ms: Option<u64>,
    price: Option<String>,
    /// For a command: the event that gave it, and the events before it that touched what it
    /// names (kept until the command is found).
    recent: Vec<(u64, Event)>,
}

/// Events kept to tell what led to a command.
const RECENT_EVENTS: usize = 20_000;
/// Events shown as leading to a command, latest first.
const CAUSES_SHOWN: usize = 30;

impl Teller {
    fn new(subject: &Subject) -> Self {
        Teller {
            subject: subject.clone(),
            lines: Vec::new(),
            mentioned: false,
            pending_since: None,
            waits_ms: Vec::new(),
            claim: None,
            node: None,
            instance_id: None,
            registered: false,
            ready: false,
            launched_at_ms: None,
            price: None,
            recent: Vec::new(),
        }
    }

    fn line(&mut self, at_ms: u64, source: String, text: String) {
        self.mentioned = true;
        self.lines.push(Line {
            at_ms,
            source,
            text,
            details: Vec::new(),
        });
    }

    fn before_event(&mut self, index: u64, event: &Event) {
        if let Subject::Command(_) = self.subject {
            self.recent.push((index, event.clone()));
            if self.recent.len() > RECENT_EVENTS {
                self.recent.drain(..RECENT_EVENTS / 2);
            }
        }
    }

    fn after_event(&mut self, core: &Core, index: u64, event: &Event) {
        match self.subject.clone() {
            Subject::Pod(key) => self.pod_event(core, index, event, &key),
            Subject::Node(_) => self.node_event(index, event),
            Subject::Command(_) => {}
        }
    }

    fn pod_event(&mut self, core: &Core, index: u64, event: &Event, key: &PodKey) {
        let source = format!("event #{index}");
        let at = event.at_ms;
        match &event.kind {
            EventKind::PodApplied(pod) if pod.key == *key => {
                let first = !self.mentioned;
                match (&pod.node_name, self.pending_since) {
                    (None, None) => {
                        let what = if first { "created" } else { "pending again" };
                        self.line(
                            at,
                            source,
                            format!("{what}, pending: asks {}", pod.requests),
                        );
                        self.pending_since = Some(at);
                        self.candidates(core, at, pod);
                    }
                    (Some(node), since) => {
                        let waited = since.map(|s| at - s);
                        self.placed(at, source, node, waited, first);
                    }
                    (None, Some(_)) => {}
                }
            }
            EventKind::PodBound { pod, node } if pod == key => {
                let waited = self.pending_since.map(|s| at - s);
                self.placed(at, source, node, waited, false);
            }
            EventKind::PodDeleted { pod } if pod == key => {
                let text = match self.pending_since.take() {
                    Some(since) => {
                        self.waits_ms.push(at - since);
                        format!("deleted while pending, after {}", format_time(at - since))
                    }
                    None => "deleted".to_string(),
                };
                self.line(at, source, text);
            }
            EventKind::EvictionRefused { pod, reason } if pod == key => {
                self.line(at, source, format!("eviction refused: {reason}"));
            }
            _ => {}
        }
    }

    fn placed(&mut self, at: u64, source: String, node: &str, waited: Option<u64>, first: bool) {
        self.pending_since = None;
        let text = match waited {
            Some(w) => {
                self.waits_ms.push(w);
                format!("bound to node {node}, after {} pending", format_time(w))
            }
            None if first => format!("seen running on node {node}"),
            None => format!("bound to node {node}"),
        };
        self.line(at, source, text);
    }

    /// What the pod, alone, could use at this moment.
    fn candidates(&mut self, core: &Core, at: u64, pod: &Pod) {
        let state = core.state();
        let config = core.config();
        let view = core.cluster_view(at);
        let mut details = Vec::new();
        for verdict in view.existing_verdicts(pod) {
            let what = if verdict.on_its_way {
                format!("machine {} (on its way)", verdict.name)
            } else {
                format!("node {}", verdict.name)
            };
            match verdict.ruled_out {
                Some(why) => details.push(format!("{what}: ruled out: {why}")),
                None => details.push(format!("{what}: fits")),
            }
        }
        let result = core.solve_alone(at, &[pod]);
        for planned in &result.new_claims {
            let options = scheduler::launch_options(state, planned, at, config.max_instance_types);
            let types = planned.types.len();
            match options.first() {
                Some(cheapest) => details.push(format!(
                    "nodepool {}: a new machine; {types} instance types fit, cheapest {}",
                    planned.nodepool,
                    describe_option(cheapest)
                )),
                None => details.push(format!(
                    "nodepool {}: {types} instance types fit, none has an offering available",
                    planned.nodepool
                )),
            }
        }
        for (_, why) in &result.unschedulable {
            for part in why.ruled_out() {
                details.push(format!("ruled out: {part}"));
            }
        }
        if details.is_empty() {
            details.push("no node, machine or NodePool is known yet".to_string());
        }
        if let Some(last) = self.lines.last_mut() {
            last.details.push(
                "considered now, for this pod alone (topology and the rest of its batch aside):"
                    .to_string(),
            );
            last.details
                .extend(details.into_iter().map(|d| format!("  {d}")));
        }
    }

    fn node_event(&mut self, index: u64, event: &Event) {
        let source = format!("event #{index}");
        let at = event.at_ms;
        match &event.kind {
            EventKind::LaunchSucceeded {
                nodeclaim,
                instance,
            } if self.is_claim(nodeclaim) => {
                self.instance_id = Some(instance.instance_id.clone());
                self.launched_at_ms = Some(at);
                self.price = Some(instance.price.to_string());
                self.line(
                    at,
                    source,
                    format!(
                        "launched: {} {} {} at {} (instance {})",
                        instance.instance_type,
                        instance.zone,
                        instance.capacity_type,
                        instance.price,
                        instance.instance_id
                    ),
                );
            }
            EventKind::NodeClaimsObserved { nodeclaims } => {
                if let Some(claim) = nodeclaims.iter().find(|c| self.is_claim(&c.name)) {
                    let instance = match &claim.instance {
                        Some(i) => {
                            self.instance_id = Some(i.instance_id.clone());
                            format!(
                                "{} {} {} (instance {}{})",
                                i.instance_type,
                                i.zone,
                                i.capacity_type,
                                i.instance_id,
                                if i.running { "" } else { ", not running" }
                            )
                        }
                        None => "no instance".to_string(),
                    };
                    self.line(
                        at,
                        source,
                        format!(
                            "adopted at a start, as the API server and EC2 showed it: NodeClaim {} of NodePool {}, {instance}{}",
                            claim.name,
                            claim.nodepool,
                            if claim.deleting { ", being deleted" } else { "" }
                        ),
                    );
                }
            }
            EventKind::LaunchFailed {
                nodeclaim,
                code,
                message,
                ..
            } if self.is_claim(nodeclaim) => {
                self.line(at, source, format!("launch failed: {code}: {message}"));
            }
            EventKind::TerminationFailed {
                nodeclaim,
                retryable,
                reason,
            } if self.is_claim(nodeclaim) => {
                self.line(
                    at,
                    source,
                    format!(
                        "its termination failed: {reason}; asked again {}",
                        if *retryable {
                            "after a wait that doubles with each failure (30s up to 10m)"
                        } else {
                            "in 10m (retrying cannot change this answer: a person must act)"
                        }
                    ),
                );
            }
            EventKind::NodeApplied(node) if self.node.as_deref() == Some(node.name.as_str()) => {
                if !self.registered {
                    self.registered = true;
                    self.line(
                        at,
                        source,
                        format!(
                            "node {} registered{}",
                            node.name,
                            if node.ready { ", ready" } else { "" }
                        ),
                    );
                }
                if node.ready && !self.ready {
                    self.ready = true;
                    if self.lines.last().is_none_or(|l| !l.text.ends_with("ready")) {
                        self.line(at, format!("event #{index}"), "node ready".to_string());
                    }
                }
            }
            EventKind::NodeDeleted { name } if self.node.as_deref() == Some(name.as_str()) => {
                self.line(at, source, format!("node {name} deleted"));
            }
            EventKind::NodeClaimTerminated { nodeclaim } if self.is_claim(nodeclaim) => {
                let cost = self
                    .launched_at_ms
                    .zip(self.price.as_ref())
                    .map(|(from, price)| {
                        format!(
                            " after {} running at {price}",
                            format_time(at.saturating_sub(from))
                        )
                    });
                self.line(
                    at,
                    source,
                    format!(
                        "instance terminated, NodeClaim {nodeclaim} gone{}",
                        cost.unwrap_or_default()
                    ),
                );
            }
            EventKind::InterruptionReceived {
                instance_id,
                interruption,
                ..
            } if self.instance_id.as_deref() == Some(instance_id.as_str()) => {
                self.line(
                    at,
                    source,
                    format!("interruption received: {interruption:?}"),
                );
            }
            _ => {}
        }
    }

    fn is_claim(&self, name: &str) -> bool {
        self.claim.as_deref() == Some(name)
    }

    fn command(
        &mut self,
        core: &Core,
        index: u64,
        command: &Command,
        last_event: Option<&(u64, Event)>,
    ) {
        let at = core.now_ms();
        let source = format!("command #{index}");
        match self.subject.clone() {
            Subject::Pod(key) => {
                if let Some(text) = pod_command(command, &key) {
                    self.line(at, source, text);
                }
            }
            Subject::Node(_) => {
                if let Some(text) = self.node_command(command) {
                    self.line(at, source, text);
                }
            }
            Subject::Command(wanted) if wanted == index => {
                self.line(at, source, describe_command(command));
                if let Some((event_index, event)) = last_event {
                    self.line(
                        event.at_ms,
                        format!("event #{event_index}"),
                        format!("gave it: {}", describe_event(event)),
                    );
                }
                let named = named_objects(command);
                // Pods that ran on a named node: their comings and goings are the node's too.
                let mut wider = named.clone();
                for (_, e) in &self.recent {
                    let placed = match &e.kind {
                        EventKind::PodBound { pod, node } => Some((pod, node.as_str())),
                        EventKind::PodApplied(p) => p.node_name.as_deref().map(|n| (&p.key, n)),
                        _ => None,
                    };
                    if let Some((pod, node)) = placed
                        && named.iter().any(|n| n == node)
                    {
                        wider.push(pod.to_string());
                    }
                }
                let causes: Vec<(u64, Event)> = self
                    .recent
                    .iter()
                    .rev()
                    .skip(1)
                    .filter(|(_, e)| touches(e, &wider))
                    .cloned()
                    .collect();
                let left_out = causes.len().saturating_sub(CAUSES_SHOWN);
                if !causes.is_empty() {
                    self.line(
                        at,
                        String::new(),
                        format!(
                            "the events before it about {} (latest first):",
                            named.join(", ")
                        ),
                    );
                    for (i, e) in causes.into_iter().take(CAUSES_SHOWN) {
                        self.line(e.at_ms, format!("event #{i}"), describe_event(&e));
                    }
                    if left_out > 0 {
                        self.line(
                            at,
                            String::new(),
                            format!("and {left_out} earlier event(s) about them"),
                        );
                    }
                }
            }
            Subject::Command(_) => {}
        }
    }

    fn node_command(&self, command: &Command) -> Option<String> {
        let ours_claim = |c: &str| self.claim.as_deref() == Some(c);
        let ours_node = |n: &str| self.node.as_deref() == Some(n);
        match command {
            Command::LaunchNodeClaim { nodeclaim, reason } if ours_claim(&nodeclaim.name) => {
                let cheapest = nodeclaim
                    .options
                    .first()
                    .map(describe_option)
                    .unwrap_or_default();
                Some(format!(
                    "NodeClaim {} decided, for {} pod(s), {} launch options, cheapest {cheapest}. Why: {}",
                    nodeclaim.name,
                    reason.pods.len(),
                    nodeclaim.options.len(),
                    reason.summary
                ))
            }
            Command::NominatePod { pod, target, .. } if ours_claim(target) || ours_node(target) => {
                Some(format!("pod {pod} nominated to it"))
            }
            Command::CordonNode {
                nodeclaim, reason, ..
            } if ours_claim(nodeclaim) => Some(format!("cordoned: {reason}")),
            Command::UncordonNode {
                nodeclaim, reason, ..
            } if ours_claim(nodeclaim) => Some(format!("uncordoned: {reason}")),
            Command::TerminateNodeClaim {
                nodeclaim,
                reason,
                detail,
                ..
            } if ours_claim(nodeclaim) => Some(format!("removal decided ({reason}): {detail}")),
            Command::EvictPod {
                pod,
                node,
                forced,
                reason,
            } if ours_node(node) => Some(format!(
                "pod {pod} {}: {reason}",
                if *forced { "deleted" } else { "evicted" }
            )),
            Command::ReportInterruption {
                nodeclaim: Some(c),
                interruption,
                action,
                ..
            } if ours_claim(c) => Some(format!("interruption {interruption}: {action}")),
            _ => None,
        }
    }

    fn finish(self, header: LogHeader, commands: u64) -> Result<Story, ExplainError> {
        let (title, summary) = match &self.subject {
            Subject::Pod(key) => {
                if !self.mentioned {
                    return Err(ExplainError::UnknownPod(key.clone()));
                }
                let summary = match (self.pending_since, self.waits_ms.as_slice()) {
                    (Some(since), _) => Some(format!(
                        "still pending at the end of the log, since {}",
                        format_time(since)
                    )),
                    (None, []) => None,
                    (None, waits) => Some(format!(
                        "pending {} time(s), {} in all",
                        waits.len(),
                        format_time(waits.iter().sum())
                    )),
                };
                (format!("pod {key}"), summary)
            }
            Subject::Node(name) => {
                if !self.mentioned {
                    return Err(ExplainError::UnknownNode(name.clone()));
                }
                let title = match (&self.node, &self.claim) {
                    (Some(node), Some(claim)) if node != claim => {
                        format!("node {node} (NodeClaim {claim})")
                    }
                    (_, Some(claim)) => format!("NodeClaim {claim}"),
                    (Some(node), None) => format!("node {node}"),
                    (None, None) => format!("node {name}"),
                };
                (title, None)
            }
            Subject::Command(index) => {
                if !self.mentioned {
                    return Err(ExplainError::UnknownCommand {
                        index: *index,
                        commands,
                    });
                }
                (format!("command #{index}"), None)
            }
        };
        Ok(Story {
            header,
            title,
            lines: self.lines,
            summary,
        })
    }
}

fn describe_option(option: &LaunchOption) -> String {
    format!(
        "{} {} {} at {}",
        option.instance_type, option.zone, option.capacity_type, option.price
    )
}

/// A command's line in a pod's story, when it is about the pod.
fn pod_command(command: &Command, key: &PodKey) -> Option<String> {
    match command {
        Command::LaunchNodeClaim { nodeclaim, reason } if reason.pods.contains(key) => {
            Some(format!(
                "NodeClaim {} decided for it and {} other pod(s): {}",
                nodeclaim.name,
                reason.pods.len() - 1,
                reason.summary
            ))
        }
        Command::NominatePod {
            pod,
            target,
            reason,
        } if pod == key => Some(format!("nominated to {target}: {reason}")),
        Command::ReportUnschedulable { pod, reason } if pod == key => {
            Some(format!("unschedulable: {reason}"))
        }
        Command::WarnMissingRequests { pod } if pod == key => {
            Some("it sets no CPU or memory request: scheduled as zero, it packs badly".to_string())
        }
        Command::EvictPod {
            pod,
            node,
            forced,
            reason,
        } if pod == key => Some(format!(
            "{} from node {node}: {reason}",
            if *forced { "deleted" } else { "evicted" }
        )),
        Command::WarnInvalidAnnotation { object, reason } if *object == format!("pod {key}") => {
            Some(format!("invalid annotation: {reason}"))
        }
        _ => None,
    }
}

/// One line for a command, whatever it is.
pub fn describe_command(command: &Command) -> String {
    match command {
        Command::LaunchNodeClaim { nodeclaim, reason } => format!(
            "LaunchNodeClaim {} ({} launch options): {}",
            nodeclaim.name,
            nodeclaim.options.len(),
            reason.summary
        ),
        Command::NominatePod {
            pod,
            target,
            reason,
        } => format!("NominatePod {pod} to {target}: {reason}"),
        Command::ReportUnschedulable { pod, reason } => {
            format!("ReportUnschedulable {pod}: {reason}")
        }
        Command::WarnMissingRequests { pod } => format!("WarnMissingRequests {pod}"),
        Command::TerminateNodeClaim {
            nodeclaim,
            reason,
            detail,
            ..
        } => format!("TerminateNodeClaim {nodeclaim} ({reason}): {detail}"),
        Command::DisruptionBlocked { nodepool, reason } => {
            format!("DisruptionBlocked nodepool {nodepool}: {reason}")
        }
        Command::CordonNode { node, reason, .. } => format!("CordonNode {node}: {reason}"),
        Command::EvictPod {
            pod,
            node,
            forced,
            reason,
        } => format!(
            "EvictPod {pod} from {node}{}: {reason}",
            if *forced { " (forced)" } else { "" }
        ),
        Command::WarnInvalidAnnotation { object, reason } => {
            format!("WarnInvalidAnnotation {object}: {reason}")
        }
        Command::UncordonNode { node, reason, .. } => format!("UncordonNode {node}: {reason}"),
        Command::ReleaseNode { node, reason, .. } => format!("ReleaseNode {node}: {reason}"),
        Command::ReportInterruption {
            instance_id,
            interruption,
            action,
            ..
        } => format!("ReportInterruption {instance_id} {interruption}: {action}"),
        Command::TerminateOrphanInstance {
            instance_id,
            detail,
            ..
        } => format!("TerminateOrphanInstance {instance_id}: {detail}"),
    }
}

/// One line for an event.
fn describe_event(event: &Event) -> String {
    match &event.kind {
        EventKind::PodApplied(p) => match &p.node_name {
            Some(node) => format!("PodApplied {} on node {node}", p.key),
            None => format!("PodApplied {} pending, asks {}", p.key, p.requests),
        },
        EventKind::PodBound { pod, node } => format!("PodBound {pod} to {node}"),
        EventKind::PodDeleted { pod } => format!("PodDeleted {pod}"),
        EventKind::NodeApplied(n) => format!("NodeApplied {}", n.name),
        EventKind::NodeDeleted { name } => format!("NodeDeleted {name}"),
        EventKind::LaunchSucceeded {
            nodeclaim,
            instance,
        } => format!(
            "LaunchSucceeded {nodeclaim}: {} {} {}",
            instance.instance_type, instance.zone, instance.capacity_type
        ),
        EventKind::LaunchFailed {
            nodeclaim, code, ..
        } => format!("LaunchFailed {nodeclaim}: {code}"),
        EventKind::NodeClaimTerminated { nodeclaim } => {
            format!("NodeClaimTerminated {nodeclaim}")
        }
        EventKind::TerminationFailed {
            nodeclaim,
            retryable,
            reason,
        } => format!(
            "TerminationFailed {nodeclaim}: {reason}{}",
            if *retryable {
                ""
            } else {
                " (retrying cannot change this answer)"
            }
        ),
        EventKind::NodePoolApplied(p) => format!("NodePoolApplied {}", p.name),
        EventKind::EvictionRefused { pod, reason } => format!("EvictionRefused {pod}: {reason}"),
        EventKind::InterruptionReceived {
            instance_id,
            interruption,
            ..
        } => format!("InterruptionReceived {instance_id}: {interruption:?}"),
        EventKind::NodeClaimsObserved { nodeclaims } => format!(
            "NodeClaimsObserved: {} NodeClaim(s), {} with a running instance",
            nodeclaims.len(),
            nodeclaims
                .iter()
                .filter(|c| c.instance.as_ref().is_some_and(|i| i.running))
                .count()
        ),
        EventKind::NodeDeleting { name } => format!("NodeDeleting {name}"),
        other => other.name().to_string(),
    }
}

/// The names a command acts on: pods, nodes, NodeClaims, NodePools.
fn named_objects(command: &Command) -> Vec<String> {
    match command {
        Command::LaunchNodeClaim { nodeclaim, reason } => {
            let mut names: Vec<String> = reason.pods.iter().map(|p| p.to_string()).collect();
            names.push(nodeclaim.nodepool.clone());
            names
        }
        Command::NominatePod { pod, target, .. } => vec![pod.to_string(), target.clone()],
        Command::ReportUnschedulable { pod, .. } | Command::WarnMissingRequests { pod } => {
            vec![pod.to_string()]
        }
        Command::TerminateNodeClaim {
            nodeclaim, node, ..
        } => std::iter::once(nodeclaim.clone())
            .chain(node.clone())
            .collect(),
        Command::DisruptionBlocked { nodepool, .. } => vec![nodepool.clone()],
        Command::CordonNode {
            node, nodeclaim, ..
        }
        | Command::UncordonNode {
            node, nodeclaim, ..
        }
        | Command::ReleaseNode {
            node, nodeclaim, ..
        } => vec![node.clone(), nodeclaim.clone()],
        Command::EvictPod { pod, node, .. } => vec![pod.to_string(), node.clone()],
        Command::WarnInvalidAnnotation { object, .. } => vec![object.clone()],
        Command::ReportInterruption {
            instance_id,
            nodeclaim,
            ..
        } => std::iter::once(instance_id.clone())
            .chain(nodeclaim.clone())
            .collect(),
        Command::TerminateOrphanInstance {
            instance_id,
            nodeclaim,
            ..
        } => std::iter::once(instance_id.clone())
            .chain(nodeclaim.clone())
            .collect(),
    }
}

/// Whether an event is about one of `names`.
fn touches(event: &Event, names: &[String]) -> bool {
    let has = |s: &str| names.iter().any(|n| n == s);
    match &event.kind {
        EventKind::PodApplied(p) => {
            has(&p.key.to_string()) || p.node_name.as_deref().is_some_and(has)
        }
        EventKind::PodBound { pod, node } => has(&pod.to_string()) || has(node),
        EventKind::PodDeleted { pod } | EventKind::EvictionRefused { pod, .. } => {
            has(&pod.to_string())
        }
        EventKind::NodeApplied(n) => has(&n.name),
        EventKind::NodeDeleted { name } => has(name),
        EventKind::LaunchSucceeded { nodeclaim, .. }
        | EventKind::LaunchFailed { nodeclaim, .. }
        | EventKind::NodeClaimTerminated { nodeclaim }
        | EventKind::TerminationFailed { nodeclaim, .. } => has(nodeclaim),
        EventKind::NodePoolApplied(p) => has(&p.name),
        EventKind::InterruptionReceived { instance_id, .. } => has(instance_id),
        _ => false,
    }
}
