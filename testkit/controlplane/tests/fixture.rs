//! The fixture works end to end: kwok's fake nodes become schedulable, Deployments get pods
//! that run on them, and pods that fit nowhere are reported Unschedulable.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Node, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Api, ListParams, PostParams};
use nodewright_controlplane::{ControlPlane, eventually, pause_pod_spec};

/// Waits until kwok has marked the node Ready and kube-controller-manager has removed its
/// not-ready taint.
async fn wait_schedulable(nodes: &Api<Node>, name: &str) {
    eventually(&format!("node {name} is Ready and untainted"), || async {
        let node = nodes.get(name).await.map_err(|e| e.to_string())?;
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        if ready && taints.is_empty() {
            Ok(())
        } else {
            Err(format!("ready: {ready}, taints: {taints:?}"))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_pods_run_on_a_fake_node() {
    let control_plane = ControlPlane::start()
        .await
        .expect("the control plane starts");
    let client = control_plane.client();

    let node = control_plane
        .add_fake_node(
            "fake-node-1",
            "4",
            "16Gi",
            "110",
            BTreeMap::from([("pool".to_owned(), "general".to_owned())]),
        )
        .await
        .expect("the fake node is created");
    let labels = node.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("type").map(String::as_str), Some("kwok"));
    assert_eq!(labels.get("pool").map(String::as_str), Some("general"));

    let app = BTreeMap::from([("app".to_owned(), "web".to_owned())]);
    let deployment = Deployment {
        metadata: ObjectMeta {
            name: Some("web".to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(3),
            selector: LabelSelector {
                match_labels: Some(app.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(app),
                    ..ObjectMeta::default()
                }),
                spec: Some(pause_pod_spec("100m", "64Mi")),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    };
    Api::<Deployment>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &deployment)
        .await
        .expect("the deployment is created");

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let running = eventually("3 pods of web run on fake-node-1", || async {
        let list = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .map_err(|e| e.to_string())?;
        let states: Vec<(Option<String>, Option<String>)> = list
            .items
            .iter()
            .map(|p| {
                (
                    p.spec.as_ref().and_then(|s| s.node_name.clone()),
                    p.status.as_ref().and_then(|s| s.phase.clone()),
                )
            })
            .collect();
        let all_running_on_node = states.iter().all(|(node, phase)| {
            node.as_deref() == Some("fake-node-1") && phase.as_deref() == Some("Running")
        });
        if states.len() == 3 && all_running_on_node {
            Ok(list.items)
        } else {
            Err(format!("(node, phase) of the pods: {states:?}"))
        }
    })
    .await;

    assert_eq!(running.len(), 3);
    for pod in &running {
        let spec = pod.spec.as_ref().expect("a listed pod has a spec");
        assert_eq!(spec.node_name.as_deref(), Some("fake-node-1"));
        let status = pod.status.as_ref().expect("a running pod has a status");
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert!(
            pod.metadata.deletion_timestamp.is_none(),
            "pod {:?} is being deleted",
            pod.metadata.name
        );
    }
    let node = Api::<Node>::all(client)
        .get("fake-node-1")
        .await
        .expect("the node can be read");
    let ready = node
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    assert!(ready, "kwok marked fake-node-1 Ready");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_too_big_for_every_node_is_unschedulable() {
    let control_plane = ControlPlane::start()
        .await
        .expect("the control plane starts");
    let client = control_plane.client();

    control_plane
        .add_fake_node("fake-node-1", "4", "16Gi", "110", BTreeMap::new())
        .await
        .expect("the fake node is created");
    wait_schedulable(&Api::all(client.clone()), "fake-node-1").await;

    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("huge".to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(pause_pod_spec("64", "1Gi")),
        status: None,
    };
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("the pod is created");

    let (pod, message) = eventually("pod huge is marked Unschedulable", || async {
        let pod = pods.get("huge").await.map_err(|e| e.to_string())?;
        let scheduled = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
            .cloned();
        match scheduled {
            Some(c) if c.status == "False" && c.reason.as_deref() == Some("Unschedulable") => {
                Ok((pod, c.message.unwrap_or_default()))
            }
            other => Err(format!("PodScheduled condition: {other:?}")),
        }
    })
    .await;

    let spec = pod.spec.expect("a pod read back has a spec");
    assert_eq!(spec.node_name, None, "the pod must not be bound");
    let phase = pod.status.and_then(|s| s.phase);
    assert_eq!(phase.as_deref(), Some("Pending"));
    assert!(
        message.contains("Insufficient cpu"),
        "the scheduler considered the node and found too little cpu: {message:?}"
    );
}
