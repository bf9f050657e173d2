//! The Kubernetes Events a command gives, with Karpenter's reasons and the decision's reason in
//! the message, so that `kubectl describe` on a pod, node, NodeClaim or NodePool says what
//! nodewright did to it and why.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use nodewright_core::Command;
use nodewright_core::model::nodeclaim::TerminationReason;
use nodewright_core::model::pod::PodKey;

/// An Event's note may hold at most this many bytes.
const NOTE_LIMIT: usize = 1024;

/// The object an Event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Regarding {
    Pod(PodKey),
    Node(String),
    NodeClaim(String),
    NodePool(String),
    /// The Lease the replicas elect their leader on: Events about the controller itself (its
    /// event store set aside).
    Lease {
        namespace: String,
        name: String,
    },
}

impl Regarding {
    pub fn reference(&self) -> ObjectReference {
        let karpenter = format!(
            "{}/{}",
            nodewright_api::KARPENTER_GROUP,
            nodewright_api::VERSION
        );
        let (api_version, kind, namespace, name) = match self {
            Regarding::Pod(p) => (
                "v1".to_string(),
                "Pod",
                Some(p.namespace.clone()),
                p.name.clone(),
            ),
            Regarding::Node(n) => ("v1".to_string(), "Node", None, n.clone()),
            Regarding::NodeClaim(n) => (karpenter, "NodeClaim", None, n.clone()),
            Regarding::NodePool(n) => (karpenter, "NodePool", None, n.clone()),
            Regarding::Lease { namespace, name } => (
                "coordination.k8s.io/v1".to_string(),
                "Lease",
                Some(namespace.clone()),
                name.clone(),
            ),
        };
        ObjectReference {
            api_version: Some(api_version),
            kind: Some(kind.into()),
            namespace,
            name: Some(name),
            ..ObjectReference::default()
        }
    }
}

/// One Event to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    pub regarding: Regarding,
    pub warning: bool,
    /// Karpenter's reason (`Nominated`, `FailedScheduling`, `DisruptionTerminating`, ...).
    pub reason: &'static str,
    /// The action, for the Event's `action` field.
    pub action: &'static str,
    pub note: String,
}

fn normal(
    regarding: Regarding,
    reason: &'static str,
    action: &'static str,
    note: String,
) -> Announcement {
    Announcement {
        regarding,
        warning: false,
        reason,
        action,
        note,
    }
}

fn warning(
    regarding: Regarding,
    reason: &'static str,
    action: &'static str,
    note: String,
) -> Announcement {
    Announcement {
        warning: true,
        ..normal(regarding, reason, action, note)
    }
}

/// The Karpenter reason of a NodeClaim's termination.
fn termination_reason(reason: TerminationReason) -> (&'static str, bool) {
    match reason {
        TerminationReason::Empty
        | TerminationReason::Underutilized
        | TerminationReason::Drifted
        | TerminationReason::Expired => ("DisruptionTerminating", false),
        TerminationReason::Interrupted => ("InstanceTerminating", true),
        TerminationReason::LaunchFailed => ("InsufficientCapacityError", true),
        TerminationReason::LaunchTimeout | TerminationReason::RegistrationTimeout => {
            ("FailedLaunching", true)
        }
        TerminationReason::NodeDeleted | TerminationReason::InstanceGone => {
            ("InstanceTerminating", true)
        }
        // Karpenter's termination controller, on a NodeClaim deleted by hand or with its
        // NodePool.
        TerminationReason::Deleted | TerminationReason::NodePoolDeleted => {
            ("InstanceTerminating", false)
        }
        // Karpenter's static deprovisioning.
        TerminationReason::ScaledDown => ("DisruptionTerminating", false),
    }
}

/// The Events a command gives (none for a command no object shows).
pub fn announcements(command: &Command) -> Vec<Announcement> {
    match command {
        Command::LaunchNodeClaim { nodeclaim, reason } => vec![normal(
            Regarding::NodeClaim(nodeclaim.name.clone()),
            "Launching",
            "Launch",
            format!("Launching for {} pod(s): {}", reason.pods.len(), reason.summary),
        )],
        Command::NominatePod { pod, target, reason } => vec![normal(
            Regarding::Pod(pod.clone()),
            "Nominated",
            "Nominate",
            format!("Pod should schedule on: {target} ({reason})"),
        )],
        Command::ReportUnschedulable { pod, reason } => vec![warning(
            Regarding::Pod(pod.clone()),
            "FailedScheduling",
            "Schedule",
            format!("Failed to schedule pod: {reason}"),
        )],
        Command::WarnMissingRequests { pod } => vec![warning(
            Regarding::Pod(pod.clone()),
            "MissingResourceRequests",
            "Schedule",
            "The pod requests no CPU or memory: it is packed as if it used none; set resources.requests".into(),
        )],
        Command::TerminateNodeClaim {
            nodeclaim,
            node,
            reason,
            detail,
            ..
        } => {
            let (karpenter_reason, is_warning) = termination_reason(*reason);
            let note = format!("Disrupting NodeClaim: {reason}: {detail}");
            let make = if is_warning { warning } else { normal };
            let mut out = vec![make(
                Regarding::NodeClaim(nodeclaim.clone()),
                karpenter_reason,
                "Terminate",
                note.clone(),
            )];
            if let Some(node) = node {
                out.push(make(Regarding::Node(node.clone()), karpenter_reason, "Terminate", note));
            }
            out
        }
        Command::DisruptionBlocked { nodepool, reason } => vec![normal(
            Regarding::NodePool(nodepool.clone()),
            "DisruptionBlocked",
            "Disrupt",
            reason.clone(),
        )],
        Command::CordonNode { node, reason, .. } => vec![normal(
            Regarding::Node(node.clone()),
            "Disrupted",
            "Taint",
            format!("Tainted karpenter.sh/disrupted:NoSchedule: {reason}"),
        )],
        Command::UncordonNode { node, reason, .. } => vec![normal(
            Regarding::Node(node.clone()),
            "DisruptionCancelled",
            "Untaint",
            format!("Removed karpenter.sh/disrupted: {reason}"),
        )],
        Command::ReleaseNode { node, reason, .. } => vec![normal(
            Regarding::Node(node.clone()),
            "Released",
            "Untaint",
            format!(
                "Removed {}: {reason}",
                nodewright_core::model::labels::SIBLING_HOLD_TAINT
            ),
        )],
        Command::EvictPod {
            pod, forced, reason, ..
        } => vec![if *forced {
            warning(
                Regarding::Pod(pod.clone()),
                "Evicted",
                "Delete",
                format!("Deleted pod, its node's terminationGracePeriod ran out: {reason}"),
            )
        } else {
            normal(
                Regarding::Pod(pod.clone()),
                "Evicted",
                "Evict",
                format!("Evicted pod: {reason}"),
            )
        }],
        Command::WarnInvalidAnnotation { object, reason } => {
            let regarding = match object.split_once(' ') {
                Some(("pod", key)) => match key.split_once('/') {
                    Some((ns, name)) => Regarding::Pod(PodKey::new(ns, name)),
                    None => Regarding::Pod(PodKey::new("default", key)),
                },
                Some(("node", name)) => Regarding::Node(name.to_string()),
                _ => return Vec::new(),
            };
            vec![warning(regarding, "InvalidAnnotation", "Read", reason.clone())]
        }
        Command::ReportInterruption {
            nodeclaim: Some(nodeclaim),
            instance_id,
            interruption,
            action,
            ..
        } => vec![warning(
            Regarding::NodeClaim(nodeclaim.clone()),
            if interruption.to_lowercase().contains("spot") {
                "SpotInterrupted"
            } else {
                "InstanceInterrupted"
            },
            "Interrupt",
            format!("{interruption} for {instance_id}: {action}"),
        )],
        Command::ReportInterruption { nodeclaim: None, .. }
        | Command::TerminateOrphanInstance { .. } => Vec::new(),
    }
}

/// A note cut to what an Event holds, at a character boundary.
fn bounded(note: &str) -> String {
    if note.len() <= NOTE_LIMIT {
        return note.to_string();
    }
    let mut end = NOTE_LIMIT - 3;
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &note[..end])
}

/// Publishes Events as `nodewright` (the reporting controller).
#[derive(Clone)]
pub struct Announcer {
    recorder: Recorder,
}

impl Announcer {
    pub fn new(client: kube::Client, instance: Option<String>) -> Self {
        Announcer {
            recorder: Recorder::new(
                client,
                Reporter {
                    controller: "nodewright".into(),
                    instance,
                },
            ),
        }
    }

    pub async fn publish(&self, a: &Announcement) -> Result<(), kube::Error> {
        let event = Event {
            type_: if a.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: a.reason.into(),
            note: Some(bounded(&a.note)),
            action: a.action.into(),
            secondary: None,
        };
        self.recorder
            .publish(&event, &a.regarding.reference())
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_note_is_cut_at_a_character_boundary() {
        let note = "é".repeat(1000);
        let cut = bounded(&note);
        assert!(cut.len() <= NOTE_LIMIT);
        assert!(cut.ends_with("..."));
        assert_eq!(bounded("short"), "short");
    }

    #[test]
    fn a_refused_pod_gets_failed_scheduling_with_the_reason() {
        let a = announcements(&Command::ReportUnschedulable {
            pod: PodKey::new("apps", "web-0"),
            reason: "no instance type has 900 CPUs".into(),
        });
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].reason, "FailedScheduling");
        assert!(a[0].warning);
        assert!(a[0].note.contains("900 CPUs"));
        assert_eq!(a[0].regarding, Regarding::Pod(PodKey::new("apps", "web-0")));
    }
}
