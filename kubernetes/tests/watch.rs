//! The watchers on a real control plane: what the cluster does reaches the control loop's
//! inbox as the core's events.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use nodewright_adapters::control_loop::{Inbox, Input, inbox};
use nodewright_controlplane::{ControlPlane, pause_pod};
use nodewright_core::EventKind;
use nodewright_kubernetes::watch::{self, Nodes, Pods};

/// The inbox as the test reads it: events arrive in the cluster's order, which is not the
/// order the test asks about them, so events not yet asked about are kept.
struct Arrivals {
    inbox: Inbox,
    kept: Vec<EventKind>,
}

impl Arrivals {
    /// The first event (kept or arriving) that `wanted` matches, failing after two minutes
    /// with what came.
    async fn until(&mut self, what: &str, wanted: impl Fn(&EventKind) -> bool) -> EventKind {
        if let Some(i) = self.kept.iter().position(&wanted) {
            return self.kept.remove(i);
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            match tokio::time::timeout_at(deadline, self.inbox.recv()).await {
                Ok(Some(Input::Observed(event))) if wanted(&event) => return event,
                Ok(Some(Input::Observed(event))) => self.kept.push(event),
                Ok(Some(_)) => {}
                Ok(None) => panic!("{what}: the inbox closed; saw {:#?}", self.kept),
                Err(_) => panic!("{what}: not seen in two minutes; saw {:#?}", self.kept),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_reaches_the_inbox_as_core_events() {
    let control_plane = ControlPlane::start()
        .await
        .expect("the control plane starts");
    let client = control_plane.client();
    let (sender, inbox) = inbox();
    let mut inbox = Arrivals {
        inbox,
        kept: Vec::new(),
    };
    let errors = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    for task in [
        tokio::spawn(watch::run::<Pods>(
            Api::all(client.clone()),
            Pods::default(),
            sender.clone(),
            Default::default(),
            {
                let errors = errors.clone();
                move |heard| {
                    if let watch::Heard::Trouble(e) = heard {
                        errors.lock().expect("not poisoned").push(e.to_string())
                    }
                }
            },
        )),
        tokio::spawn(watch::run::<Nodes>(
            Api::all(client.clone()),
            Nodes,
            sender.clone(),
            Default::default(),
            {
                let errors = errors.clone();
                move |heard| {
                    if let watch::Heard::Trouble(e) = heard {
                        errors.lock().expect("not poisoned").push(e.to_string())
                    }
                }
            },
        )),
    ] {
        drop(task); // detached: they end when the test's runtime does
    }

    control_plane
        .add_fake_node("node-a", "2", "8Gi", "110", BTreeMap::new())
        .await
        .expect("a node");
    inbox
        .until(
            "node-a Ready",
            |e| matches!(e, EventKind::NodeApplied(n) if n.name == "node-a" && n.ready),
        )
        .await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pause_pod("small", "100m", "64Mi"))
        .await
        .expect("created");
    pods.create(&PostParams::default(), &pause_pod("huge", "64", "64Mi"))
        .await
        .expect("created");
    inbox.until("small bound to node-a", |e| {
        matches!(e, EventKind::PodApplied(p) if p.key.name == "small" && p.node_name.as_deref() == Some("node-a"))
    })
    .await;
    let pending = inbox
        .until(
            "huge pending",
            |e| matches!(e, EventKind::PodApplied(p) if p.key.name == "huge"),
        )
        .await;
    let EventKind::PodApplied(huge) = pending else {
        unreachable!("matched above")
    };
    assert_eq!(huge.node_name, None);
    assert_eq!(huge.requests.get("cpu"), 64_000);

    pods.delete("huge", &DeleteParams::default())
        .await
        .expect("deleted");
    inbox
        .until(
            "huge deleted",
            |e| matches!(e, EventKind::PodDeleted { pod } if pod.name == "huge"),
        )
        .await;

    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .delete("node-a", &DeleteParams::default())
        .await
        .expect("deleted");
    inbox
        .until(
            "node-a deleted",
            |e| matches!(e, EventKind::NodeDeleted { name } if name == "node-a"),
        )
        .await;
    assert!(errors.lock().expect("not poisoned").is_empty());
}
