//! What the controller reads from a real cluster, in the core's terms: kwok's Nodes, pods as
//! kube-scheduler leaves them (bound, or given up on), and NodePools and EC2NodeClasses
//! stored by the API server.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodewright_adapters::manifest::volumes::Storage;
use nodewright_adapters::manifest::{nodeclass_from_api, nodepool_from_api};
use nodewright_controlplane::{ControlPlane, eventually, pause_pod};
use nodewright_kubernetes::node::core_node;
use nodewright_kubernetes::pod::{IgnoredBecause, PodState, pod_state};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_and_pods_read_as_the_core_needs_them() {
    let control_plane = ControlPlane::start()
        .await
        .expect("the control plane starts");
    let client = control_plane.client();
    control_plane
        .add_fake_node(
            "node-a",
            "4",
            "16Gi",
            "110",
            BTreeMap::from([("topology.kubernetes.io/zone".into(), "us-east-1a".into())]),
        )
        .await
        .expect("a node");

    let nodes: Api<Node> = Api::all(client.clone());
    let node = eventually("node-a is Ready", || async {
        let node = core_node(&nodes.get("node-a").await.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        if node.ready {
            Ok(node)
        } else {
            Err(format!("{node:?}"))
        }
    })
    .await;
    assert_eq!(node.allocatable.get("cpu"), 4_000);
    assert_eq!(node.allocatable.get("memory"), 16 * 1024 * 1024 * 1024);
    assert_eq!(node.allocatable.get("pods"), 110);
    assert_eq!(node.labels["topology.kubernetes.io/zone"], "us-east-1a");

    // Cordoned: the core sees it.
    nodes
        .patch(
            "node-a",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"unschedulable": true}})),
        )
        .await
        .expect("cordoned");
    let cordoned = core_node(&nodes.get("node-a").await.expect("node")).expect("reads");
    assert!(cordoned.unschedulable);
    // kube-controller-manager then taints it, and the core sees the taint.
    eventually("node-a carries the unschedulable taint", || async {
        let node = core_node(&nodes.get("node-a").await.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        if node
            .taints
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unschedulable")
        {
            Ok(())
        } else {
            Err(format!("{:?}", node.taints))
        }
    })
    .await;
    nodes
        .patch(
            "node-a",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"unschedulable": false}})),
        )
        .await
        .expect("uncordoned");

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    // A pod the scheduler has not looked at yet is not pending.
    let fresh = pause_pod("fresh", "100m", "64Mi");
    let created = pods
        .create(&PostParams::default(), &fresh)
        .await
        .expect("created");
    assert!(
        matches!(
            pod_state(&created, &Storage::default()).expect("reads"),
            PodState::Ignored(IgnoredBecause::NotTriedByTheScheduler)
        ),
        "a pod just created waits for the scheduler"
    );
    // It fits: the scheduler binds it, and the core sees it on the node.
    let bound = eventually("fresh is bound", || async {
        match pod_state(
            &pods.get("fresh").await.map_err(|e| e.to_string())?,
            &Storage::default(),
        ) {
            Ok(PodState::Bound(p)) => Ok(p),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(bound.node_name.as_deref(), Some("node-a"));
    assert_eq!(bound.requests.get("cpu"), 100);

    // Too big for every node: pending, with its request, once the scheduler gives up.
    pods.create(&PostParams::default(), &pause_pod("huge", "64", "64Mi"))
        .await
        .expect("created");
    let pending = eventually("huge is pending", || async {
        match pod_state(
            &pods.get("huge").await.map_err(|e| e.to_string())?,
            &Storage::default(),
        ) {
            Ok(PodState::Pending(p)) => Ok(p),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(pending.requests.get("cpu"), 64_000);
    assert_eq!(pending.node_name, None);
    assert!(pending.created_at_ms > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodepools_and_node_classes_read_from_the_api_server_translate_like_the_loader() {
    let control_plane = ControlPlane::start()
        .await
        .expect("the control plane starts");
    control_plane
        .install_crds()
        .await
        .expect("the CRDs are served");
    let client = control_plane.client();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/tutorial");
    for (file, kind) in [
        ("nodepool.yaml", "NodePool"),
        ("ec2nodeclass.yaml", "EC2NodeClass"),
    ] {
        let text = std::fs::read_to_string(format!("{dir}/{file}")).expect("the tutorial");
        let value: serde_json::Value = serde_saphyr::from_str(&text).expect("YAML");
        let name = value["metadata"]["name"]
            .as_str()
            .expect("named")
            .to_string();
        let resource = match kind {
            "NodePool" => kube::api::ApiResource::erase::<nodewright_api::NodePool>(&()),
            _ => kube::api::ApiResource::erase::<nodewright_api::EC2NodeClass>(&()),
        };
        let api: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &resource);
        api.patch(
            &name,
            &PatchParams::apply("nodewright-tests"),
            &Patch::Apply(&value),
        )
        .await
        .expect("applied");
    }

    let stored_pool = Api::<nodewright_api::NodePool>::all(client.clone())
        .get("default")
        .await
        .expect("stored");
    let from_cluster = nodepool_from_api(stored_pool, "cluster").expect("translates");
    let loaded = nodewright_adapters::manifest::parse_manifests(
        &std::fs::read_to_string(format!("{dir}/nodepool.yaml")).expect("the tutorial"),
        "nodepool.yaml",
    )
    .expect("loads");
    let nodewright_adapters::manifest::Manifest::NodePool(from_file) = &loaded[0] else {
        panic!("a NodePool");
    };
    assert_eq!(
        &from_cluster, from_file,
        "the cluster and the file mean the same pool"
    );

    let stored_class = Api::<nodewright_api::EC2NodeClass>::all(client.clone())
        .get("default")
        .await
        .expect("stored");
    let (class, settings) = nodeclass_from_api(stored_class, "cluster").expect("translates");
    assert_eq!(class.name, "default");
    assert!(!class.subnet_selector_terms.is_empty());
    assert_eq!(settings.metadata_options.http_tokens, "required");
}
