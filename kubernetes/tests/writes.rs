//! What the controller writes, against a real API server: NodeClaims created and their status
//! written through 409 conflicts, the disrupted taint, evictions a PodDisruptionBudget refuses
//! (never turned into a deletion), and the termination finalizer released.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodewright_api::Time;
use nodewright_controlplane::{ControlPlane, eventually, pause_pod};
use nodewright_core::catalog::{CapacityType, Price};
use nodewright_core::model::nodeclaim::{LaunchOption, NodeClaimSpec};
use nodewright_core::model::pod::PodKey;
use nodewright_core::model::requirements::{Operator, RequirementSpec};
use nodewright_core::model::resources::Resources;
use nodewright_kubernetes::eviction::{Evicted, evict};
use nodewright_kubernetes::nodeclaims::{
    NodeClaims, TERMINATION_FINALIZER, condition_is, set_condition,
};
use nodewright_kubernetes::nodes::{DISRUPTED_TAINT, Nodes};

fn spec(name: &str) -> NodeClaimSpec {
    NodeClaimSpec {
        name: name.into(),
        nodepool: "default".into(),
        nodeclass: "default".into(),
        labels: BTreeMap::from([("team".to_string(), "web".to_string())]),
        annotations: BTreeMap::new(),
        taints: Vec::new(),
        startup_taints: Vec::new(),
        requirements: vec![RequirementSpec {
            key: "node.kubernetes.io/instance-type".into(),
            operator: Operator::In,
            values: vec!["m5.large".into()],
            min_values: None,
        }],
        requests: Resources::new(1500, 2 << 30, 2),
        options: vec![LaunchOption {
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::OnDemand,
            price: Price(96_000),
        }]
        .into(),
        expire_after_ms: Some(720 * 3_600_000),
    }
}

/// A control plane with one kwok node, `node-a` (4 CPU, 16 GiB), and its client.
async fn with_a_node() -> (ControlPlane, kube::Client) {
    let control_plane = ControlPlane::start().await.expect("a control plane");
    let client = control_plane.client();
    control_plane
        .add_fake_node("node-a", "4", "16Gi", "110", BTreeMap::new())
        .await
        .expect("a node");
    (control_plane, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_write_that_conflicts_is_made_again_on_the_fresh_object() {
    let control_plane = ControlPlane::start_with_crds()
        .await
        .expect("a control plane");
    let claims = NodeClaims::new(control_plane.client());
    claims.create(&spec("web-1")).await.expect("created");
    // Asked again (after a restart): the existing one stays.
    claims.create(&spec("web-1")).await.expect("created again");
    let stored = claims.api().get("web-1").await.expect("stored");
    assert_eq!(stored.spec.requirements[0].operator, "In");
    assert_eq!(
        stored.metadata.finalizers,
        Some(vec![TERMINATION_FINALIZER.to_string()])
    );
    assert_eq!(
        stored
            .spec
            .resources
            .as_ref()
            .map(|r| r.requests["cpu"].0.clone()),
        Some("1500m".to_string())
    );

    // Someone else writes the object between our read and our write, once: the API server
    // answers 409, and the change is made again on what it has now.
    let calls = AtomicUsize::new(0);
    let other = claims.api().clone();
    let at = Time(Timestamp::now());
    let written = claims
        .update("web-1", |claim| {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                let other = other.clone();
                // A write by another client, made while our change is being prepared.
                std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("a runtime");
                    runtime.block_on(async {
                        let patch =
                            serde_json::json!({"metadata": {"labels": {"other": "writer"}}});
                        other
                            .patch("web-1", &PatchParams::default(), &Patch::Merge(&patch))
                            .await
                            .expect("the other write");
                    });
                })
                .join()
                .expect("the other writer");
            }
            let status = claim.status.get_or_insert_with(Default::default);
            status.provider_id = Some("aws:///us-east-1a/i-0123".into());
            set_condition(
                &mut status.conditions,
                "Launched",
                true,
                "Launched",
                "",
                &at,
            );
        })
        .await
        .expect("written")
        .expect("the NodeClaim exists");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "made twice: the first write conflicted"
    );
    assert!(condition_is(&written, "Launched"));
    let stored = claims.api().get("web-1").await.expect("stored");
    assert_eq!(
        stored.status.and_then(|s| s.provider_id).as_deref(),
        Some("aws:///us-east-1a/i-0123")
    );
    assert_eq!(
        stored
            .metadata
            .labels
            .unwrap_or_default()
            .get("other")
            .map(String::as_str),
        Some("writer"),
        "the other writer's change is kept"
    );

    // Released: deleted, and the finalizer taken off, so it is gone.
    claims.release("web-1").await.expect("released");
    assert!(claims.api().get_opt("web-1").await.expect("read").is_none());
    claims
        .release("web-1")
        .await
        .expect("released twice is fine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eviction_a_budget_refuses_is_reported_and_the_pod_stays() {
    let (control_plane, client) = with_a_node().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut guarded = pause_pod("db-0", "100m", "128Mi");
    guarded.metadata.labels = Some(BTreeMap::from([("app".to_string(), "db".to_string())]));
    pods.create(&PostParams::default(), &guarded)
        .await
        .expect("a pod");
    pods.create(
        &PostParams::default(),
        &pause_pod("free-0", "100m", "128Mi"),
    )
    .await
    .expect("a pod");
    let pdb: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "db"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}
    }))
    .expect("a PDB");
    Api::<PodDisruptionBudget>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &pdb)
        .await
        .expect("created");
    eventually(
        "both pods run and the budget counts db-0 healthy",
        || async {
            let running = pods
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count();
            let budget = Api::<PodDisruptionBudget>::namespaced(client.clone(), "default")
                .get("db")
                .await
                .map_err(|e| e.to_string())?;
            let healthy = budget.status.map(|s| s.current_healthy).unwrap_or(0);
            if running == 2 && healthy == 1 {
                Ok(())
            } else {
                Err(format!("{running} running, {healthy} healthy"))
            }
        },
    )
    .await;

    // A refusal is an answer: the client must not retry it (kube retries 429 by default).
    let mut no_retry = control_plane.config().await.expect("a configuration");
    no_retry.default_retry = false;
    let client = kube::Client::try_from(no_retry).expect("a client");
    let refused = evict(&client, &PodKey::new("default", "db-0"), false)
        .await
        .expect("answered");
    let Evicted::Refused(reason) = refused else {
        panic!("the budget lets db-0 go: {refused:?}");
    };
    assert!(
        reason.to_lowercase().contains("disruption budget"),
        "{reason}"
    );
    assert!(
        pods.get_opt("db-0").await.expect("read").is_some(),
        "refused, not deleted"
    );

    assert_eq!(
        evict(&client, &PodKey::new("default", "free-0"), false)
            .await
            .expect("answered"),
        Evicted::Yes
    );
    assert_eq!(
        evict(&client, &PodKey::new("default", "nobody"), false)
            .await
            .expect("answered"),
        Evicted::Gone
    );
    // Forced (terminationGracePeriod ran out): deleted, budget or not.
    assert_eq!(
        evict(&client, &PodKey::new("default", "db-0"), true)
            .await
            .expect("answered"),
        Evicted::Yes
    );
    eventually("db-0 is gone", || async {
        match pods.get_opt("db-0").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".into()),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_disrupted_taint_goes_on_once_and_comes_off() {
    let (_control_plane, client) = with_a_node().await;
    let nodes = Nodes::new(client.clone());
    let api: Api<Node> = Api::all(client);
    // Ours only: the node lifecycle controller has its own (not-ready until kwok reports).
    let taints = |node: Node| -> Vec<String> {
        node.spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t.key.starts_with("karpenter.sh/"))
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect()
    };
    assert!(nodes.cordon("node-a").await.expect("tainted"));
    assert!(nodes.cordon("node-a").await.expect("tainted again"));
    assert_eq!(
        taints(api.get("node-a").await.expect("node")),
        [format!("{DISRUPTED_TAINT}:NoSchedule")]
    );
    assert!(nodes.uncordon("node-a").await.expect("untainted"));
    assert!(taints(api.get("node-a").await.expect("node")).is_empty());
    assert!(
        !nodes.cordon("gone").await.expect("answered"),
        "a missing node is no error"
    );
}
