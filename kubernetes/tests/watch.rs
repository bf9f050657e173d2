//! The watchers on a real control plane: what the cluster does reaches the control loop's
//! inbox as the core's events.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use nodewright_adapters::control_loop::{Inbox, Input, inbox};
use nodewright_controlplane::ControlPlane;
use nodewright_core::EventKind;
use nodewright_kubernetes::watch::{self, Nodes, Pods};

fn pod(name: &str, cpu: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                image: Some("registry.k8s.io/pause:3.10".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(BTreeMap::from([("cpu".into(), Quantity(cpu.into()))])),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }],
            termination_grace_period_seconds: Some(0),
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// Reads the inbox until `wanted` matches an event, failing after two minutes with what came.
async fn until(inbox: &mut Inbox, what: &str, wanted: impl Fn(&EventKind) -> bool) -> EventKind {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        match tokio::time::timeout_at(deadline, inbox.recv()).await {
            Ok(Some(Input::Observed(event))) if wanted(&event) => return event,
            Ok(Some(Input::Observed(event))) => seen.push(format!("{event:?}")),
            Ok(Some(_)) => {}
            Ok(None) => panic!("{what}: the inbox closed; saw {seen:#?}"),
            Err(_) => panic!("{what}: not seen in two minutes; saw {seen:#?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_reaches_the_inbox_as_core_events() {
    let control_plane = ControlPlane::start()
        .await
        .expect("the control plane starts");
    let client = control_plane.client();
    let (sender, mut inbox) = inbox();
    let errors = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    for task in [
        tokio::spawn(watch::run::<Pods>(
            Api::all(client.clone()),
            sender.clone(),
            {
                let errors = errors.clone();
                move |e| errors.lock().expect("not poisoned").push(e.to_string())
            },
        )),
        tokio::spawn(watch::run::<Nodes>(
            Api::all(client.clone()),
            sender.clone(),
            {
                let errors = errors.clone();
                move |e| errors.lock().expect("not poisoned").push(e.to_string())
            },
        )),
    ] {
        drop(task); // detached: they end when the test's runtime does
    }

    control_plane
        .add_fake_node("node-a", "2", "8Gi", "110", BTreeMap::new())
        .await
        .expect("a node");
    until(
        &mut inbox,
        "node-a Ready",
        |e| matches!(e, EventKind::NodeApplied(n) if n.name == "node-a" && n.ready),
    )
    .await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("small", "100m"))
        .await
        .expect("created");
    pods.create(&PostParams::default(), &pod("huge", "64"))
        .await
        .expect("created");
    until(&mut inbox, "small bound to node-a", |e| {
        matches!(e, EventKind::PodApplied(p) if p.key.name == "small" && p.node_name.as_deref() == Some("node-a"))
    })
    .await;
    let pending = until(
        &mut inbox,
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
    until(
        &mut inbox,
        "huge deleted",
        |e| matches!(e, EventKind::PodDeleted { pod } if pod.name == "huge"),
    )
    .await;

    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .delete("node-a", &DeleteParams::default())
        .await
        .expect("deleted");
    until(
        &mut inbox,
        "node-a deleted",
        |e| matches!(e, EventKind::NodeDeleted { name } if name == "node-a"),
    )
    .await;
    assert!(errors.lock().expect("not poisoned").is_empty());
}
