//! Pods as the core sees them, and which of them are pending.
//!
//! Karpenter provisions only for pods kube-scheduler has given up on: not bound, with the
//! condition `PodScheduled=False` of reason `Unschedulable`, not waiting on a preemption, not
//! terminating, not owned by a DaemonSet or a Node (their pods follow nodes; they never call
//! for one). A pod the scheduler has not tried yet is not pending: it may well fit where it is.

use k8s_openapi::api::core::v1::Pod as KubePod;
use nodewright_adapters::manifest::Manifest;
use nodewright_adapters::manifest::volumes::{Storage, inject};
use nodewright_core::EventKind;
use nodewright_core::model::pod::{OwnerRef, Pod, PodKey};

use crate::ObserveError;
use crate::translate::manifest_of;

/// Where a pod stands, for the core.
#[derive(Debug, Clone, PartialEq)]
pub enum PodState {
    /// Bound to a node: it uses room there.
    Bound(Box<Pod>),
    /// kube-scheduler found no node for it: nodewright should provide one.
    Pending(Box<Pod>),
    /// Not the core's business yet or at all: not tried by the scheduler, preempting, owned by
    /// a DaemonSet or a Node, or terminating before it was bound.
    Ignored(IgnoredBecause),
    /// Finished (Succeeded or Failed): it uses no room any more.
    Finished(PodKey),
}

/// Why a pod is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IgnoredBecause {
    NotTriedByTheScheduler,
    Preempting,
    OwnedByDaemonSet,
    OwnedByNode,
    Terminating,
}

/// What a pod says, following Karpenter's rules for what is pending.
pub fn pod_state(pod: &KubePod, storage: &Storage) -> Result<PodState, ObserveError> {
    let key = key_of(pod);
    let status = pod.status.as_ref();
    if let Some(phase) = status.and_then(|s| s.phase.as_deref())
        && matches!(phase, "Succeeded" | "Failed")
    {
        return Ok(PodState::Finished(key));
    }
    let bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if bound {
        return Ok(PodState::Bound(Box::new(core_pod(pod, storage)?)));
    }
    let owner_kinds: Vec<&str> = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .map(|o| o.kind.as_str())
        .collect();
    let ignored = if pod.metadata.deletion_timestamp.is_some() {
        Some(IgnoredBecause::Terminating)
    } else if owner_kinds.contains(&"DaemonSet") {
        Some(IgnoredBecause::OwnedByDaemonSet)
    } else if owner_kinds.contains(&"Node") {
        Some(IgnoredBecause::OwnedByNode)
    } else if status
        .and_then(|s| s.nominated_node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
    {
        Some(IgnoredBecause::Preempting)
    } else if !unschedulable(pod) {
        Some(IgnoredBecause::NotTriedByTheScheduler)
    } else {
        None
    };
    match ignored {
        Some(why) => Ok(PodState::Ignored(why)),
        None => Ok(PodState::Pending(Box::new(core_pod(pod, storage)?))),
    }
}

/// The event a pod's state gives the core, if any.
pub fn pod_event(pod: &KubePod, storage: &Storage) -> Result<Option<EventKind>, ObserveError> {
    Ok(match pod_state(pod, storage)? {
        PodState::Bound(p) | PodState::Pending(p) => Some(EventKind::PodApplied(p)),
        PodState::Finished(key) => Some(EventKind::PodDeleted { pod: key }),
        PodState::Ignored(_) => None,
    })
}

/// `PodScheduled=False` with reason `Unschedulable`.
fn unschedulable(pod: &KubePod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            })
        })
}

fn key_of(pod: &KubePod) -> PodKey {
    PodKey::new(
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// The pod in the core's terms, through the scenario loader's translation; its
/// PersistentVolumeClaims add where their volumes can attach to its required node affinity,
/// as Karpenter's volume topology does. A claim not known yet (its watch is behind) adds
/// nothing: kube-scheduler does not bind the pod before it exists either.
fn core_pod(pod: &KubePod, storage: &Storage) -> Result<Pod, ObserveError> {
    let name = key_of(pod).to_string();
    let Manifest::Pod(template) = manifest_of("Pod", &name, pod)? else {
        // Invariant: a JSON object of kind Pod, apiVersion v1, reads as a Pod.
        unreachable!("a Pod reads as a Pod");
    };
    let mut core = template.pod;
    core.owner = controller_of(pod);
    if !template.volume_claims.is_empty() {
        let requirements = storage
            .requirements(&core.key.namespace, &template.volume_claims)
            .unwrap_or_default();
        inject(&mut core, &requirements);
    }
    core.created_at_ms = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| u64::try_from(t.0.as_millisecond()).unwrap_or(0))
        .unwrap_or(0);
    Ok(core)
}

/// The pod's controller: the owner reference marked `controller: true` (Kubernetes'
/// `GetControllerOf`), which makes the pod again when it is evicted — a ReplicaSet, a
/// StatefulSet, a Job, a DaemonSet. A pod without one is unowned: nothing makes it again.
fn controller_of(pod: &KubePod) -> Option<OwnerRef> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| OwnerRef {
            kind: o.kind.clone(),
            name: o.name.clone(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    fn pod(owner: Option<&str>, condition: Option<(&str, &str)>) -> KubePod {
        KubePod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("apps".into()),
                owner_references: owner.map(|kind| {
                    vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: kind.into(),
                        name: "o".into(),
                        uid: "u".into(),
                        ..OwnerReference::default()
                    }]
                }),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec::default()),
            status: Some(PodStatus {
                conditions: condition.map(|(status, reason)| {
                    vec![PodCondition {
                        type_: "PodScheduled".into(),
                        status: status.into(),
                        reason: Some(reason.into()),
                        ..PodCondition::default()
                    }]
                }),
                ..PodStatus::default()
            }),
        }
    }

    #[test]
    fn pending_is_what_the_scheduler_gave_up_on() {
        let unschedulable = Some(("False", "Unschedulable"));
        assert!(matches!(
            pod_state(&pod(None, unschedulable), &Storage::default()).unwrap(),
            PodState::Pending(_)
        ));
        assert!(matches!(
            pod_state(&pod(Some("ReplicaSet"), unschedulable), &Storage::default()).unwrap(),
            PodState::Pending(_)
        ));
        assert_eq!(
            pod_state(&pod(None, None), &Storage::default()).unwrap(),
            PodState::Ignored(IgnoredBecause::NotTriedByTheScheduler)
        );
        assert_eq!(
            pod_state(
                &pod(None, Some(("False", "SchedulingGated"))),
                &Storage::default()
            )
            .unwrap(),
            PodState::Ignored(IgnoredBecause::NotTriedByTheScheduler)
        );
        assert_eq!(
            pod_state(&pod(Some("DaemonSet"), unschedulable), &Storage::default()).unwrap(),
            PodState::Ignored(IgnoredBecause::OwnedByDaemonSet)
        );
        assert_eq!(
            pod_state(&pod(Some("Node"), unschedulable), &Storage::default()).unwrap(),
            PodState::Ignored(IgnoredBecause::OwnedByNode)
        );
        let mut preempting = pod(None, unschedulable);
        preempting.status.as_mut().unwrap().nominated_node_name = Some("n".into());
        assert_eq!(
            pod_state(&preempting, &Storage::default()).unwrap(),
            PodState::Ignored(IgnoredBecause::Preempting)
        );
        let mut finished = pod(None, unschedulable);
        finished.status.as_mut().unwrap().phase = Some("Succeeded".into());
        assert_eq!(
            pod_state(&finished, &Storage::default()).unwrap(),
            PodState::Finished(PodKey::new("apps", "p"))
        );
        let mut bound = pod(Some("DaemonSet"), None);
        bound.spec.as_mut().unwrap().node_name = Some("n1".into());
        let PodState::Bound(core) = pod_state(&bound, &Storage::default()).unwrap() else {
            panic!("bound");
        };
        assert_eq!(core.node_name.as_deref(), Some("n1"));
    }

    /// The core's owner of a bound pod with these owner references (kind, controller).
    fn owner_of(references: &[(&str, Option<bool>)]) -> Option<(String, String)> {
        let mut bound = pod(None, None);
        bound.spec.as_mut().unwrap().node_name = Some("n1".into());
        bound.metadata.owner_references = Some(
            references
                .iter()
                .map(|(kind, controller)| OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: (*kind).into(),
                    name: format!("{}-o", kind.to_lowercase()),
                    uid: "u".into(),
                    controller: *controller,
                    ..OwnerReference::default()
                })
                .collect(),
        );
        let PodState::Bound(core) = pod_state(&bound, &Storage::default()).unwrap() else {
            panic!("bound");
        };
        core.owner.map(|o| (o.kind, o.name))
    }

    #[test]
    fn a_pods_owner_is_its_controller() {
        // A Job's pod is known as one (its work counts when evicted), a DaemonSet's as one
        // (it is no workload on its node), a ReplicaSet's serves on.
        for kind in ["Job", "DaemonSet", "ReplicaSet", "StatefulSet"] {
            assert_eq!(
                owner_of(&[(kind, Some(true))]),
                Some((kind.to_string(), format!("{}-o", kind.to_lowercase())))
            );
        }
        assert_eq!(
            owner_of(&[("ConfigMap", None), ("Job", Some(true))]),
            Some(("Job".to_string(), "job-o".to_string()))
        );
        // Owners that are not its controller make nothing again: the pod is unowned.
        assert_eq!(owner_of(&[]), None);
        assert_eq!(owner_of(&[("Workflow", None), ("Job", Some(false))]), None);
    }

    /// Only the annotations the core reads are kept: a megabyte of
    /// `last-applied-configuration` (with env values) goes no further than the watch.
    #[test]
    fn only_the_annotations_the_core_reads_are_kept() {
        let mut kube = pod(None, Some(("False", "Unschedulable")));
        kube.metadata.annotations = Some(
            [
                (
                    "kubectl.kubernetes.io/last-applied-configuration".to_string(),
                    "x".repeat(1 << 20),
                ),
                (
                    "karpenter.sh/do-not-disrupt".to_string(),
                    "true".to_string(),
                ),
                (
                    "controller.kubernetes.io/pod-deletion-cost".to_string(),
                    "100".to_string(),
                ),
                ("example.com/team".to_string(), "payments".to_string()),
            ]
            .into(),
        );
        let PodState::Pending(core) = pod_state(&kube, &Storage::default()).unwrap() else {
            panic!("a pending pod");
        };
        assert_eq!(
            core.annotations
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            [
                "controller.kubernetes.io/pod-deletion-cost",
                "karpenter.sh/do-not-disrupt"
            ]
        );
    }
}
