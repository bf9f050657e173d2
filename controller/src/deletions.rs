//! NodeClaims deleted from outside nodewright (`kubectl delete nodeclaim`): the
//! `karpenter.sh/termination` finalizer holds the object while the core drains the machine
//! and terminates its instance, as Karpenter's termination controller does. Each deletion is
//! told to the core once, as `NodeClaimDeleted`; a NodeClaim the core is already terminating
//! (its own deletion, seen here too) changes nothing there.

use std::collections::BTreeSet;

use futures::StreamExt;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use nodewright_adapters::control_loop::InboxSender;
use nodewright_api::NodeClaim;
use nodewright_core::EventKind;
use nodewright_kubernetes::nodeclaims::TERMINATION_FINALIZER;
use tracing::{info, warn};

/// Whether the object is being deleted and nodewright's finalizer still holds it.
fn held_for_termination(claim: &NodeClaim) -> bool {
    claim.metadata.deletion_timestamp.is_some()
        && claim
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == TERMINATION_FINALIZER))
}

/// What was told, so that each deletion is told once while its object lasts.
#[derive(Debug, Default)]
pub struct Deletions {
    told: BTreeSet<String>,
}

impl Deletions {
    /// The events one watch event gives.
    pub fn on_event(&mut self, event: Event<NodeClaim>) -> Vec<EventKind> {
        let mut out = Vec::new();
        let mut look = |claim: &NodeClaim, told: &mut BTreeSet<String>| {
            let Some(name) = claim.metadata.name.clone() else {
                return;
            };
            if held_for_termination(claim) {
                if told.insert(name.clone()) {
                    out.push(EventKind::NodeClaimDeleted { nodeclaim: name });
                }
            } else {
                told.remove(&name);
            }
        };
        match event {
            Event::Apply(claim) | Event::InitApply(claim) => look(&claim, &mut self.told),
            Event::Delete(claim) => {
                if let Some(name) = &claim.metadata.name {
                    self.told.remove(name);
                }
            }
            Event::Init | Event::InitDone => {}
        }
        out
    }
}

/// Watches NodeClaims until the inbox closes.
pub async fn run(api: Api<NodeClaim>, inbox: InboxSender) {
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let mut deletions = Deletions::default();
    while let Some(item) = stream.next().await {
        let event = match item {
            Ok(event) => event,
            Err(e) => {
                warn!(error = %e, "watching NodeClaims failed; it is retried");
                continue;
            }
        };
        for kind in deletions.on_event(event) {
            if let EventKind::NodeClaimDeleted { nodeclaim } = &kind {
                info!(
                    nodeclaim,
                    "NodeClaim deleted; its machine is drained and terminated"
                );
            }
            if inbox.observe(kind).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn claim(name: &str, deleting: bool, finalizer: bool) -> NodeClaim {
        let spec = serde_json::from_value(serde_json::json!({
            "requirements": [],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        }))
        .expect("a spec");
        let mut claim = NodeClaim::new(name, spec);
        claim.metadata = ObjectMeta {
            name: Some(name.into()),
            deletion_timestamp: deleting.then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            finalizers: finalizer.then(|| vec![TERMINATION_FINALIZER.to_string()]),
            ..ObjectMeta::default()
        };
        claim
    }

    #[test]
    fn a_deletion_is_told_once_while_its_object_lasts() {
        let mut d = Deletions::default();
        assert!(d.on_event(Event::Apply(claim("a", false, true))).is_empty());
        let told = d.on_event(Event::Apply(claim("a", true, true)));
        assert_eq!(
            told,
            [EventKind::NodeClaimDeleted {
                nodeclaim: "a".into()
            }]
        );
        // Changed again while held (a status write), or listed again after a watch restart.
        assert!(d.on_event(Event::Apply(claim("a", true, true))).is_empty());
        assert!(
            d.on_event(Event::InitApply(claim("a", true, true)))
                .is_empty()
        );
        // Gone, and a new object of the same name deleted later: told again.
        assert!(
            d.on_event(Event::Delete(claim("a", true, false)))
                .is_empty()
        );
        assert_eq!(d.on_event(Event::Apply(claim("a", true, true))).len(), 1);
        // Being deleted without nodewright's finalizer: not nodewright's to drain.
        assert!(d.on_event(Event::Apply(claim("b", true, false))).is_empty());
    }
}
