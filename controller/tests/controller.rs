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
use nodewright_controlplane::{eventually, pause_pod};
use nodewright_kubernetes::nodeclaims::condition_is;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_pods_get_machines_that_register_and_run_them() {
    let world = World::start(support::nodepool("default", "default")).await;
    let (client, c) = (world.client.clone(), &world.aws);
    let controller = world.controller().await;

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
    assert_eq!(live_instance_ids(c).await, claimed_instance_ids(&claims));

    // Each launch was announced on its NodeClaim, naming the pods it is for (Karpenter's
    // `Launching` Event). (`Nominated` on a pod is not asserted: as in Karpenter, it is given
    // only to a pod seen pending beside a machine it fits on, and kube-scheduler may bind the
    // pod first.)
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    let launching: Vec<String> = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Launching"))
        .filter_map(|e| e.note)
        .collect();
    assert_eq!(launching.len(), claims.len(), "{launching:?}");
    assert!(
        launching.iter().all(|note| note.contains("default/web-")),
        "{launching:?}"
    );

    // Prometheus sees it, in Karpenter's names (gauges refresh every few seconds).
    assert!(controller.ready().await, "/readyz");
    let text = eventually("the gauges show the three pods bound", || async {
        let text = controller.metrics().await;
        let bound = text
            .lines()
            .filter(|l| l.starts_with("karpenter_pods_state{") && l.contains("phase=\"Bound\""))
            .count();
        if bound == 3 { Ok(text) } else { Err(text) }
    })
    .await;
    let created: f64 = text
        .lines()
        .filter(|l| l.starts_with("karpenter_nodeclaims_created_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(created as usize, claims.len(), "{text}");
    for family in [
        "karpenter_nodes_allocatable{",
        "karpenter_cluster_state_node_count ",
        "nodewright_decision_duration_seconds_count ",
        "nodewright_log_append_duration_seconds_count ",
        "nodewright_log_bytes ",
        "nodewright_leader 1",
    ] {
        assert!(text.contains(family), "{family} missing from\n{text}");
    }

    assert_eq!(controller.stop().await, Stopped::Asked);
    // Every launch is a recorded command; a nomination is one too when a batch saw the pods
    // pending beside the machine launched for them, which depends on kube-scheduler's timing.
    let outcome = world.replay_verifies();
    assert!(outcome.commands >= claims.len() as u64, "{outcome:?}");
    assert!(outcome.events > 0, "{outcome:?}");
}

/// The process dies right after it created a NodeClaim, before (or while) its instance is
/// launched. The next process recovers from its store and the relist: the launch is asked
/// again with the same client token, so no instance is launched twice and none is orphaned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_between_create_and_launch_launches_once() {
    let world = World::start(support::nodepool("default", "default")).await;
    let (client, c) = (world.client.clone(), &world.aws);
    let first = world.controller().await;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    for i in 0..2 {
        pods_api
            .create(
                &PostParams::default(),
                &pause_pod(&format!("api-{i}"), "1", "2Gi"),
            )
            .await
            .expect("a pod");
    }
    eventually("a NodeClaim is created", || async {
        let claims = nodeclaims(&client).await;
        if claims.is_empty() {
            Err("none yet".to_string())
        } else {
            Ok(())
        }
    })
    .await;
    first.kill().await;
    let launched_before_restart = live_instances(c).await.len();

    let second = world.controller().await;
    eventually("every pod runs", || async {
        let pods = pods(&client).await;
        let on: Vec<Option<String>> = pods.iter().map(running_on).collect();
        if on.iter().all(Option::is_some) {
            Ok(())
        } else {
            Err(format!("{on:?}"))
        }
    })
    .await;
    let claims = nodeclaims(&client).await;
    let live = live_instances(c).await;
    assert!(launched_before_restart <= live.len());
    assert_eq!(
        live.len(),
        claims.len(),
        "one instance per NodeClaim: {live:?} for {:?}",
        claims
            .iter()
            .map(|c| c.metadata.name.clone())
            .collect::<Vec<_>>()
    );
    for instance in &live {
        let owner = instance
            .nodeclaim
            .as_deref()
            .expect("tagged with its NodeClaim");
        assert!(
            claims
                .iter()
                .any(|c| c.metadata.name.as_deref() == Some(owner)),
            "{} is orphaned",
            instance.instance_id
        );
    }
    assert_eq!(second.stop().await, Stopped::Asked);
    world.replay_verifies();
}

/// A node expires and is drained: its pod's PodDisruptionBudget allows no disruption, so the
/// pod stays (the core, which watches the budget, holds the eviction back; a refusal by the
/// API server of an eviction asked for comes back as `EvictionRefused`, see
/// `kubernetes/tests/writes.rs`); nothing is forced. Once the budget is gone the pod is
/// evicted, and the instance is terminated once, with its Node and NodeClaim. (The pod is one
/// no controller owns, which expiration evicts only as Karpenter does:
/// `expirationWaitsForJobs` off; with it on the pod is left to finish, the test below.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_waits_for_the_budget_and_terminates_once() {
    let world = World::start(support::nodepool_expiring("default", "default", "25s")).await;
    let (client, c) = (world.client.clone(), &world.aws);
    let controller = world
        .controller_with(|s| s.expiration_waits_for_jobs = false)
        .await;

    let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut db = pause_pod("db-0", "500m", "1Gi");
    db.metadata.labels = Some([("app".to_string(), "db".to_string())].into());
    pods_api
        .create(&PostParams::default(), &db)
        .await
        .expect("a pod");
    let budget: k8s_openapi::api::policy::v1::PodDisruptionBudget =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}
        }))
        .expect("a PDB");
    let budgets: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(client.clone(), "default");
    budgets
        .create(&PostParams::default(), &budget)
        .await
        .expect("created");

    let node = eventually("db-0 runs", || async {
        let pod = pods_api.get("db-0").await.map_err(|e| e.to_string())?;
        running_on(&pod).ok_or_else(|| format!("{:?}", pod.status))
    })
    .await;
    let instance = live_instances(c).await;
    assert_eq!(instance.len(), 1);
    let instance_id = instance[0].instance_id.clone();

    // Expired: tainted, drained, and the budget holds the pod.
    disrupted_taint_on(&client, &node).await;
    // Several drain rounds (every 5 s) later the pod is still there, unforced.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let pod = pods_api.get_opt("db-0").await.expect("read");
    assert!(
        pod.is_some_and(|p| p.metadata.deletion_timestamp.is_none()),
        "the budget's pod was removed"
    );
    assert_eq!(
        live_instances(c).await.len(),
        1,
        "terminated before the drain"
    );

    // The budget goes: the drain finishes and the machine goes, once.
    budgets
        .delete("db", &Default::default())
        .await
        .expect("deleted");
    world.machine_gone("db-0", &node, &instance_id).await;

    assert_eq!(controller.stop().await, Stopped::Asked);
    world.replay_verifies();
    // The log holds one eviction (after the budget went) and one termination.
    assert_eq!(world.logged("EvictPod").0, 1);
    assert_eq!(world.logged("TerminateNodeClaim").0, 1);
}

/// Waits until `node` carries the `karpenter.sh/disrupted` taint.
async fn disrupted_taint_on(client: &kube::Client, node: &str) {
    let nodes_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    eventually("the node is tainted karpenter.sh/disrupted", || async {
        let n = nodes_api.get(node).await.map_err(|e| e.to_string())?;
        let tainted = n
            .spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == "karpenter.sh/disrupted");
        if tainted {
            Ok(())
        } else {
            Err("not yet".into())
        }
    })
    .await;
}

/// A node expires while it runs a pod no controller owns (a Job's is treated alike; kwok's
/// stages complete a Job's pod at once, so a bare pod is the one that runs here until it is
/// deleted): the node is tainted, but the pod is left to finish (`expirationWaitsForJobs`, the
/// default), with no eviction asked; when it ends, the instance is terminated, with its Node
/// and NodeClaim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_node_leaves_its_unowned_pod_to_finish() {
    let world = World::start(support::nodepool_expiring("default", "default", "25s")).await;
    let (client, c) = (world.client.clone(), &world.aws);
    let controller = world.controller().await;

    let node = running_pod(&client, "train-0").await;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let instance = live_instances(c).await;
    assert_eq!(instance.len(), 1);
    let instance_id = instance[0].instance_id.clone();

    disrupted_taint_on(&client, &node).await;
    // Several drain rounds later the pod still runs there, and the instance with it.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let pod = pods_api.get_opt("train-0").await.expect("read");
    assert!(
        pod.is_some_and(|p| p.metadata.deletion_timestamp.is_none()),
        "the pod was evicted"
    );
    assert_eq!(live_instances(c).await.len(), 1, "terminated under its pod");

    // Its work done, the pod goes: so does the machine, once.
    pods_api
        .delete("train-0", &Default::default())
        .await
        .expect("deleted");
    world.machine_gone("train-0", &node, &instance_id).await;

    assert_eq!(controller.stop().await, Stopped::Asked);
    world.replay_verifies();
    assert_eq!(world.logged("EvictPod").0, 0);
    assert_eq!(world.logged("TerminateNodeClaim").0, 1);
}

/// Two replicas on one store: one leads, the other waits connected and ready. The leader dies
/// in the middle of a scale-up; the standby takes the lease when it runs out, recovers from the
/// same store, and finishes the job: every pod runs, no instance is launched twice, none is
/// left without its NodeClaim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_takes_over_from_the_store_when_the_leader_dies() {
    let world = World::start(support::nodepool("default", "default")).await;
    let (client, c) = (world.client.clone(), &world.aws);
    let first = world.controller().await;
    eventually("the first replica leads", || async {
        if first.leads().await {
            Ok(())
        } else {
            Err("not yet".to_string())
        }
    })
    .await;
    let second = world.controller().await;
    eventually("the second replica stands by, ready", || async {
        if second.ready().await {
            Ok(())
        } else {
            Err("not ready".to_string())
        }
    })
    .await;
    assert!(!second.leads().await, "two leaders");

    // A scale-up: pods of several sizes, so that several machines are planned.
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    for i in 0..6 {
        pods_api
            .create(
                &PostParams::default(),
                &pause_pod(&format!("web-{i}"), "1500m", "3Gi"),
            )
            .await
            .expect("a pod");
    }
    // The leader dies as soon as the first NodeClaim exists, mid-way through its launches.
    eventually("a NodeClaim is created", || async {
        let n = nodeclaims(&client).await.len();
        if n > 0 {
            Ok(())
        } else {
            Err("none yet".to_string())
        }
    })
    .await;
    first.kill().await;

    eventually("the standby leads", || async {
        if second.leads().await {
            Ok(())
        } else {
            Err("not yet".to_string())
        }
    })
    .await;
    let on = eventually("every pod runs on a node nodewright launched", || async {
        let pods = pods(&client).await;
        let on: Vec<Option<String>> = pods.iter().map(running_on).collect();
        if pods.len() == 6 && on.iter().all(Option::is_some) {
            Ok(on)
        } else {
            Err(format!("{on:?}"))
        }
    })
    .await;
    assert!(on.iter().flatten().all(|n| n.ends_with(".ec2.internal")));

    // One instance per NodeClaim, and no other: no duplicate launch, no orphan. A machine the
    // dead leader launched registers from its instance on its own, so its pods can run before
    // the standby, recovering, finds that instance and writes it into the NodeClaim's status:
    // the status is waited for, not read once.
    eventually(
        "every NodeClaim has its instance, and EC2 runs exactly those",
        || async {
            let claims = nodeclaims(&client).await;
            let claimed = claimed_instance_ids(&claims);
            let live = live_instance_ids(c).await;
            if claimed.len() != claims.len() {
                Err(format!(
                    "{} of {} NodeClaims launched",
                    claimed.len(),
                    claims.len()
                ))
            } else if live != claimed {
                Err(format!(
                    "EC2 runs {live:?}, the NodeClaims name {claimed:?}"
                ))
            } else {
                Ok(())
            }
        },
    )
    .await;

    assert_eq!(second.stop().await, Stopped::Asked);
    world.replay_verifies();
}

/// `kubectl delete nodeclaim`: the termination finalizer holds the object while its pod is
/// evicted; then the instance is terminated, once, and the Node and NodeClaim go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeclaim_deleted_by_hand_is_drained_and_terminated_once() {
    let world = World::start(support::nodepool("default", "default")).await;
    let (client, c) = (world.client.clone(), &world.aws);
    let controller = world.controller().await;

    let node = running_pod(&client, "web-0").await;
    let claims = nodeclaims(&client).await;
    assert_eq!(claims.len(), 1);
    let claim = claims[0].metadata.name.clone().expect("a name");
    let instance_id = live_instances(c).await[0].instance_id.clone();

    let claims_api: Api<nodewright_api::NodeClaim> = Api::all(client.clone());
    claims_api
        .delete(&claim, &Default::default())
        .await
        .expect("deleted");
    world.machine_gone("web-0", &node, &instance_id).await;

    assert_eq!(controller.stop().await, Stopped::Asked);
    world.replay_verifies();
    assert!(world.logged("NodeClaimDeleted").1 >= 1);
    assert_eq!(world.logged("EvictPod").0, 1);
    assert_eq!(world.logged("TerminateNodeClaim").0, 1);
    assert_eq!(world.logged("TerminateOrphanInstance").0, 0);
}

/// Bad input stays with its owner: an EC2NodeClass whose subnet selector matches nothing says
/// so on its status (naming the field and the fix), nothing is launched for the NodePool that
/// uses it, its pod is told why it waits, and the rest of the cluster keeps being served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_node_class_stops_only_its_own_launches() {
    let world = World::start(support::nodepool("default", "default")).await;
    let client = world.client.clone();
    let mut broken = nodeclass("ami-00000000");
    broken.metadata.name = Some("broken".into());
    broken.spec.subnet_selector_terms[0].tags =
        [("karpenter.sh/discovery".to_string(), "nowhere".to_string())].into();
    create(&client, &broken).await;
    let pool: nodewright_api::NodePool = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "broken"},
        "spec": {"template": {
            "metadata": {"labels": {"pool": "broken"}},
            "spec": {
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "broken"},
            }
        }}
    }))
    .expect("a NodePool");
    create(&client, &pool).await;
    // A NodePool naming an EC2NodeClass that does not exist.
    let mut orphaned = pool.clone();
    orphaned.metadata.name = Some("orphaned".into());
    orphaned.spec.template.spec.node_class_ref.name = "missing".into();
    create(&client, &orphaned).await;
    let controller = world.controller().await;

    // Each NodePool's status says whether it can launch, and why not.
    let pools: Api<nodewright_api::NodePool> = Api::all(client.clone());
    let condition = |pool: &nodewright_api::NodePool, type_: &str| {
        pool.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_).cloned())
    };
    let missing = eventually(
        "the orphaned NodePool names its missing node class",
        || async {
            let pool = pools.get("orphaned").await.map_err(|e| e.to_string())?;
            match condition(&pool, "NodeClassReady") {
                Some(c) if c.status == "False" => Ok(c),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert_eq!(missing.reason, "NodeClassNotFound");
    assert!(
        missing
            .message
            .contains("spec.template.spec.nodeClassRef.name")
            && missing.message.contains("fix:"),
        "{}",
        missing.message
    );
    eventually(
        "the broken NodePool is not ready, the default one is",
        || async {
            let broken = pools.get("broken").await.map_err(|e| e.to_string())?;
            let default = pools.get("default").await.map_err(|e| e.to_string())?;
            let broken_ready = condition(&broken, "Ready").map(|c| c.status);
            let class = condition(&broken, "NodeClassReady").map(|c| c.reason);
            let default_ready = condition(&default, "Ready").map(|c| c.status);
            if broken_ready.as_deref() == Some("False")
                && class.as_deref() == Some("NodeClassNotReady")
                && default_ready.as_deref() == Some("True")
            {
                Ok(())
            } else {
                Err(format!("{broken_ready:?} {class:?} {default_ready:?}"))
            }
        },
    )
    .await;
    let all_events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    eventually("a Warning Event on the orphaned NodePool", || async {
        let list = all_events
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("NodePoolNotReady")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("orphaned")
            })
            .then_some(())
            .ok_or_else(|| "none yet".to_string())
    })
    .await;

    let classes: Api<EC2NodeClass> = Api::all(client.clone());
    let message = eventually(
        "the broken EC2NodeClass says why it is not Ready",
        || async {
            let class = classes.get("broken").await.map_err(|e| e.to_string())?;
            let status = class.status.unwrap_or_default();
            status
                .conditions
                .iter()
                .find(|c| c.type_ == "Ready" && c.status == "False")
                .map(|c| c.message.clone())
                .ok_or_else(|| format!("{:?}", status.conditions))
        },
    )
    .await;
    assert!(message.contains("spec.subnetSelectorTerms"), "{message}");
    assert!(message.contains("fix:"), "{message}");

    let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut stuck = pause_pod("stuck", "500m", "1Gi");
    stuck.spec.as_mut().expect("a spec").node_selector =
        Some([("pool".to_string(), "broken".to_string())].into());
    pods_api
        .create(&PostParams::default(), &stuck)
        .await
        .expect("a pod");
    pods_api
        .create(&PostParams::default(), &pause_pod("fine", "500m", "1Gi"))
        .await
        .expect("a pod");

    eventually("the pod of the working pool runs", || async {
        let pod = pods_api.get("fine").await.map_err(|e| e.to_string())?;
        running_on(&pod).ok_or_else(|| format!("{:?}", pod.status))
    })
    .await;
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    let why = eventually("the stuck pod is told why it waits", || async {
        let list = events
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        list.items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("FailedScheduling")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("stuck")
            })
            .and_then(|e| e.note)
            .ok_or_else(|| "no FailedScheduling Event for stuck".to_string())
    })
    .await;
    assert!(!why.is_empty());
    let stuck = pods_api.get("stuck").await.expect("the pod");
    assert!(running_on(&stuck).is_none(), "nothing was launched for it");
    for claim in nodeclaims(&client).await {
        let pool = claim
            .metadata
            .labels
            .unwrap_or_default()
            .get("karpenter.sh/nodepool")
            .cloned();
        assert_eq!(
            pool.as_deref(),
            Some("default"),
            "launched for the broken pool"
        );
    }

    // The working pool's status counts its node.
    eventually("the default NodePool counts its node", || async {
        let pool = pools.get("default").await.map_err(|e| e.to_string())?;
        let nodes = pool.status.as_ref().and_then(|s| s.nodes);
        if nodes.unwrap_or(0) >= 1 {
            Ok(())
        } else {
            Err(format!("{:?}", pool.status))
        }
    })
    .await;

    assert_eq!(controller.stop().await, Stopped::Asked);
    world.replay_verifies();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_volume_lives_in_one_zone_gets_its_machine_there() {
    let world = World::start(support::nodepool("default", "default")).await;
    let client = world.client.clone();
    // A volume in us-east-1b (the second of the world's two subnets: without the volume, the
    // cheapest offering is in us-east-1a), and a claim bound to it.
    let volume: k8s_openapi::api::core::v1::PersistentVolume =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "data-b"},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "hostPath": {"path": "/var/data-b"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]}
                ]}]}}
            }
        }))
        .expect("a PersistentVolume");
    create(&client, &volume).await;
    let claim: k8s_openapi::api::core::v1::PersistentVolumeClaim =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": "data-b",
                "resources": {"requests": {"storage": "10Gi"}}
            }
        }))
        .expect("a PersistentVolumeClaim");
    Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &claim)
        .await
        .expect("the claim");
    let controller = world.controller().await;

    let mut pod = pause_pod("db", "500m", "1Gi");
    if let Some(spec) = pod.spec.as_mut() {
        spec.volumes = Some(vec![
            serde_json::from_value(serde_json::json!({
                "name": "data", "persistentVolumeClaim": {"claimName": "data"}
            }))
            .expect("a volume"),
        ]);
    }
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods_api
        .create(&PostParams::default(), &pod)
        .await
        .expect("the pod");
    eventually("db runs", || async {
        let pod = pods_api.get("db").await.map_err(|e| e.to_string())?;
        running_on(&pod).ok_or_else(|| format!("{:?}", pod.status))
    })
    .await;
    let live = live_instances(&world.aws).await;
    assert_eq!(live.len(), 1, "one machine, in the volume's zone: {live:?}");
    assert_eq!(live[0].zone, "us-east-1b", "{live:?}");
    assert_eq!(controller.stop().await, Stopped::Asked);
    let verified = world.replay_verifies();
    assert!(verified.divergence.is_none());
}

/// Three pods spread over hosts (`maxSkew: 1`, `DoNotSchedule`) on machines that register 12 s
/// apart (more than kube-scheduler's longest retry backoff, 10 s, so every pending pod is tried
/// while only the first machine is up), under the real kube-scheduler: the pods per node once
/// all three run, and the log.
async fn spread_over_staggered_machines(hold: bool) -> (Vec<usize>, World) {
    let world = World::start_staggered(
        support::nodepool("default", "default"),
        Duration::from_secs(12),
    )
    .await;
    let client = world.client.clone();
    let controller = world
        .controller_with(|s| {
            if !hold {
                s.sibling_hold = Duration::ZERO;
            }
        })
        .await;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    for i in 0..3 {
        let mut pod = pause_pod(&format!("web-{i}"), "500m", "1Gi");
        pod.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("app".into(), "web".into());
        if let Some(spec) = pod.spec.as_mut() {
            spec.topology_spread_constraints = Some(vec![
                serde_json::from_value(serde_json::json!({
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}}
                }))
                .expect("a spread constraint"),
            ]);
        }
        pods_api
            .create(&PostParams::default(), &pod)
            .await
            .expect("a pod");
    }
    let nodes = eventually("the three web pods run", || async {
        let mut nodes = std::collections::BTreeMap::<String, usize>::new();
        for i in 0..3 {
            let pod = pods_api
                .get(&format!("web-{i}"))
                .await
                .map_err(|e| e.to_string())?;
            let node = running_on(&pod).ok_or_else(|| format!("web-{i}: {:?}", pod.status))?;
            *nodes.entry(node).or_default() += 1;
        }
        Ok::<_, String>(nodes)
    })
    .await;
    // Every machine of the decision has registered by now (the pods waited for the last).
    eventually("three machines run", || async {
        let live = live_instances(&world.aws).await;
        (live.len() == 3).then_some(()).ok_or(format!("{live:?}"))
    })
    .await;
    assert_eq!(controller.stop().await, Stopped::Asked);
    let mut counts: Vec<usize> = nodes.into_values().collect();
    counts.sort_unstable();
    (counts, world)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spread_pods_land_one_per_machine_when_the_machines_are_held_for_each_other() {
    let (counts, world) = spread_over_staggered_machines(true).await;
    assert_eq!(counts, [1, 1, 1], "one web pod per machine");
    let verified = world.replay_verifies();
    assert!(verified.divergence.is_none());
    let (released, _) = world.logged("ReleaseNode");
    assert_eq!(released, 3, "each held machine released once");
}

/// The race the hold closes, under the real kube-scheduler: unheld, the machine that registers
/// first takes the pods (its host is the only domain kube-scheduler counts), and once all three
/// machines are up the spread is broken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unheld_the_first_machine_up_takes_the_spread_pods() {
    let (counts, world) = spread_over_staggered_machines(false).await;
    assert!(
        counts.iter().max().is_some_and(|m| *m >= 2),
        "two or more web pods on one machine, none on another: {counts:?}"
    );
    assert!(world.replay_verifies().divergence.is_none());
    assert_eq!(world.logged("ReleaseNode").0, 0);
}

/// A static NodePool (`spec.replicas`) on the real control plane: its machines are launched with
/// no pod asking and register, and scaling it (a patch of `spec.replicas`, as `kubectl scale
/// nodepool` does through the scale subresource) terminates the extra one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_nodepool_keeps_its_replicas_and_scales_down() {
    let mut pool = support::nodepool("static", "default");
    pool.spec.replicas = Some(2);
    let world = World::start(pool).await;
    let client = world.client.clone();
    let controller = world.controller().await;
    let nodes_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    eventually("two static machines registered", || async {
        let nodes = nodes_api
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let live = live_instances(&world.aws).await;
        if nodes.items.len() == 2 && live.len() == 2 {
            Ok(())
        } else {
            Err(format!(
                "{} nodes, {} instances",
                nodes.items.len(),
                live.len()
            ))
        }
    })
    .await;
    let pools: Api<nodewright_api::NodePool> = Api::all(client.clone());
    pools
        .patch(
            "static",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scaled");
    eventually("one static machine left", || async {
        let live = live_instances(&world.aws).await;
        let claims = nodeclaims(&client).await;
        if live.len() == 1 && claims.len() == 1 {
            Ok(())
        } else {
            Err(format!(
                "{} instances, {} NodeClaims",
                live.len(),
                claims.len()
            ))
        }
    })
    .await;
    assert_eq!(controller.stop().await, Stopped::Asked);
    let verified = world.replay_verifies();
    assert!(verified.divergence.is_none());
    assert_eq!(world.logged("LaunchNodeClaim").0, 2);
    assert_eq!(world.logged("TerminateNodeClaim").0, 1);
}
