//! The controller on a real control plane (etcd, kube-apiserver, kube-scheduler,
//! kube-controller-manager, kwok) and a real EC2 API (moto): pending pods become NodeClaims,
//! instances, registered Nodes, and running pods; the recorded log replays.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, PostParams};
use nodewright_adapters::control_loop::Stopped;
use nodewright_api::EC2NodeClass;
use nodewright_controlplane::{ControlPlane, eventually, pause_pod};
use nodewright_kubernetes::nodeclaims::condition_is;
use nodewright_testkit::services::moto::Moto;
use support::*;

fn running_on(pod: &Pod) -> Option<String> {
    let running = pod.status.as_ref()?.phase.as_deref() == Some("Running");
    let node = pod.spec.as_ref()?.node_name.clone()?;
    running.then_some(node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_pods_get_machines_that_register_and_run_them() {
    let control_plane = ControlPlane::start_with_crds()
        .await
        .expect("a control plane");
    let moto = Moto::start();
    let c = clients(&moto).await;
    let ami = network(&c).await;
    let client = control_plane.client();
    create(&client, &nodeclass(&ami)).await;
    create(&client, &support::nodepool("default", "default")).await;

    let dir = tempfile::tempdir().expect("a folder");
    let store = dir.path().join("events.redb");
    let controller = Running::start(&control_plane, &moto, &store);
    let kubelet = kubelet(&control_plane, &c, Duration::from_secs(1));

    // The node class resolves: its status says Ready, with the subnets found.
    let classes: Api<EC2NodeClass> = Api::all(client.clone());
    eventually("the EC2NodeClass is Ready", || async {
        let class = classes.get("default").await.map_err(|e| e.to_string())?;
        let status = class.status.clone().unwrap_or_default();
        let ready = status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if ready && status.subnets.len() == 2 {
            Ok(())
        } else {
            Err(format!("{status:?}"))
        }
    })
    .await;

    let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    for i in 0..3 {
        pods_api
            .create(
                &PostParams::default(),
                &pause_pod(&format!("web-{i}"), "500m", "1Gi"),
            )
            .await
            .expect("a pod");
    }

    let nodes = eventually("every pod runs on a node nodewright launched", || async {
        let pods = pods(&client).await;
        let on: Vec<Option<String>> = pods.iter().map(running_on).collect();
        if pods.len() == 3
            && on
                .iter()
                .all(|n| n.as_deref().is_some_and(|n| n.ends_with(".ec2.internal")))
        {
            Ok(on
                .into_iter()
                .flatten()
                .collect::<std::collections::BTreeSet<_>>())
        } else {
            Err(format!("{on:?}"))
        }
    })
    .await;

    // Each NodeClaim launched, registered and initialized; its node carries its labels.
    let claims = eventually("the NodeClaims are initialized", || async {
        let claims = nodeclaims(&client).await;
        let done = !claims.is_empty()
            && claims.iter().all(|c| {
                ["Launched", "Registered", "Initialized"]
                    .iter()
                    .all(|t| condition_is(c, t))
            });
        if done {
            Ok(claims)
        } else {
            Err(format!("{claims:?}"))
        }
    })
    .await;
    assert_eq!(claims.len(), nodes.len(), "one NodeClaim per node used");
    let node_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    for claim in &claims {
        let status = claim.status.clone().expect("a status");
        let node_name = status.node_name.clone().expect("a node name");
        assert!(nodes.contains(&node_name), "{node_name} runs the pods");
        let node = node_api.get(&node_name).await.expect("the node");
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("karpenter.sh/nodepool").map(String::as_str),
            Some("default")
        );
        assert_eq!(
            labels.get("karpenter.sh/registered").map(String::as_str),
            Some("true")
        );
        assert_eq!(
            labels.get("karpenter.sh/initialized").map(String::as_str),
            Some("true")
        );
        assert!(
            node.metadata
                .finalizers
                .clone()
                .unwrap_or_default()
                .contains(&"karpenter.sh/termination".to_string())
        );
        assert_eq!(node.spec.and_then(|s| s.provider_id), status.provider_id);
    }

    // EC2 runs exactly the instances the NodeClaims name.
    let mut live: Vec<String> = live_instances(&c)
        .await
        .into_iter()
        .map(|i| i.instance_id)
        .collect();
    live.sort();
    let mut claimed: Vec<String> = claims
        .iter()
        .filter_map(|c| c.status.as_ref()?.provider_id.clone())
        .filter_map(|p| p.rsplit('/').next().map(str::to_string))
        .collect();
    claimed.sort();
    assert_eq!(live, claimed);

    // The pods were told where they would run (Karpenter's `Nominated` Event).
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    let nominated = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Nominated"))
        .count();
    assert!(nominated >= 1, "no Nominated Event");

    assert_eq!(controller.stop().await, Stopped::Asked);
    kubelet.abort();
    let outcome = replay_verifies(&store, dir.path());
    assert!(outcome.commands >= 2, "{outcome:?}");
}
