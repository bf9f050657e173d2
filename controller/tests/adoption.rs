//! The cluster is the truth, on a real control plane and a real EC2 API (moto): every start
//! observes the NodeClaims and their instances and adopts them; a lost, damaged or poisoned
//! store costs its history, never a machine; only a NodePool's machine of this cluster whose
//! NodeClaim is gone is ever collected; Karpenter's machines are taken over as they stand.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use nodewright_adapters::control_loop::Stopped;
use nodewright_api::{NodeClaim, NodePool};
use nodewright_aws::Clients;
use nodewright_aws::aws_sdk_ec2::types::{InstanceType, ResourceType, Tag, TagSpecification};
use nodewright_controlplane::kubelet::node_name;
use nodewright_controlplane::{FAKE_NODE_ANNOTATION, FAKE_NODE_LABEL, eventually, pause_pod};
use nodewright_core::EventKind;
use support::*;

/// What an instance outside nodewright's care looks like: a node group's (the cluster's tag
/// only, as AWS requires of it) or one with no tag at all.
async fn run_instance(c: &Clients, ami: &str, tags: &[(&str, &str)]) -> String {
    let mut request = c
        .ec2
        .run_instances()
        .image_id(ami)
        .instance_type(InstanceType::M5Large)
        .min_count(1)
        .max_count(1);
    if !tags.is_empty() {
        let mut spec = TagSpecification::builder().resource_type(ResourceType::Instance);
        for (key, value) in tags {
            spec = spec.tags(Tag::builder().key(*key).value(*value).build());
        }
        request = request.tag_specifications(spec.build());
    }
    request
        .send()
        .await
        .expect("an instance")
        .instances()
        .first()
        .and_then(|i| i.instance_id())
        .expect("its id")
        .to_string()
}

/// Whether EC2 runs the instance (any tags).
async fn is_running(c: &Clients, id: &str) -> bool {
    nodewright_aws::instances::Instances::new(c.ec2.clone(), CLUSTER)
        .describe(id)
        .await
        .expect("described")
        .is_some_and(|d| d.is_live())
}

/// The AMI moto lists first (what the test network's node class uses).
async fn ami(c: &Clients) -> String {
    nodewright_aws::testing::some_ami(c).await.expect("an AMI")
}

/// A node group's node for `instance_id`: Ready (kwok), tainted so that no test pod lands on
/// it by chance.
async fn node_group_node(client: &kube::Client, instance_id: &str) -> String {
    let name = node_name(instance_id);
    let node: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                FAKE_NODE_LABEL.0: FAKE_NODE_LABEL.1,
                "eks.amazonaws.com/nodegroup": "system",
                "kubernetes.io/hostname": name,
            },
            "annotations": {FAKE_NODE_ANNOTATION.0: FAKE_NODE_ANNOTATION.1},
        },
        "spec": {
            "providerID": format!("aws:///us-east-1a/{instance_id}"),
            "taints": [{"key": "dedicated", "value": "system", "effect": "NoSchedule"}],
        },
        "status": {"allocatable": {"cpu": "2", "memory": "7Gi", "pods": "29"}, "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"}},
    }))
    .expect("a Node");
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .expect("the node group's node");
    name
}

/// Waits until the garbage collector has had its grace (30 s from each instance's launch) and
/// several listings after it.
async fn past_the_garbage_collectors_grace(since: Instant) {
    let wait = Duration::from_secs(40).saturating_sub(since.elapsed());
    tokio::time::sleep(wait).await;
}

fn with_fast_collection(settings: &mut nodewright_controller::Settings) {
    settings.instance_gc_period = Duration::from_secs(2);
}

/// kill -9 the leader, lose its store, start again: the new store begins from what the cluster
/// shows. The machine it launched is adopted, not terminated; a node group's instance (the
/// cluster's tag only) and an untagged instance survive every listing of the collector; and it
/// scales as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_store_adopts_every_machine_and_terminates_nothing() {
    let world = World::start(support::nodepool("default", "default")).await;
    let (client, c) = (world.client.clone(), &world.aws);
    let ami = ami(c).await;
    let started = Instant::now();
    let cluster_tag = format!("kubernetes.io/cluster/{CLUSTER}");
    let group = run_instance(
        c,
        &ami,
        &[(&cluster_tag, "owned"), ("eks:nodegroup-name", "system")],
    )
    .await;
    let foreign = run_instance(c, &ami, &[]).await;
    let group_node = node_group_node(&client, &group).await;

    let first = world.controller_with(with_fast_collection).await;
    let node = running_pod(&client, "web-0").await;
    let claims = nodeclaims(&client).await;
    assert_eq!(claims.len(), 1);
    let ours = live_instance_ids(c).await;
    assert_eq!(ours.len(), 1, "one machine of the NodePool: {ours:?}");
    first.kill().await;
    std::fs::remove_file(&world.store).expect("the store removed");

    let second = world.controller_with(with_fast_collection).await;
    past_the_garbage_collectors_grace(started).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    for (what, id) in [
        ("the adopted machine", &ours[0]),
        ("the node group's instance", &group),
        ("the untagged instance", &foreign),
    ] {
        assert!(is_running(c, id).await, "{what} {id} was terminated");
    }
    assert!(
        Api::<Node>::all(client.clone())
            .get_opt(&group_node)
            .await
            .expect("read")
            .is_some()
    );
    let after = nodeclaims(&client).await;
    assert_eq!(
        after
            .iter()
            .map(|c| c.metadata.name.clone())
            .collect::<Vec<_>>(),
        claims
            .iter()
            .map(|c| c.metadata.name.clone())
            .collect::<Vec<_>>(),
        "the NodeClaim is kept"
    );
    let pod = Api::<Pod>::namespaced(client.clone(), "default")
        .get("web-0")
        .await
        .expect("web-0");
    assert_eq!(
        pod.spec.and_then(|s| s.node_name),
        Some(node.clone()),
        "web-0 did not move"
    );

    // It scales as before: a pod that does not fit the adopted machine gets one of its own.
    let big = running_pod_sized(&client, "web-1", "1500m", "3Gi").await;
    assert_ne!(big, node);
    assert_eq!(nodeclaims(&client).await.len(), 2);
    assert_eq!(live_instance_ids(c).await.len(), 2);
    assert!(is_running(c, &group).await && is_running(c, &foreign).await);

    assert_eq!(second.stop().await, Stopped::Asked);
    world.replay_verifies();
    assert_eq!(world.logged("NodeClaimsObserved").1, 1);
    assert_eq!(world.logged("TerminateOrphanInstance").0, 0);
    assert_eq!(world.logged("TerminateNodeClaim").0, 0);
}

/// A pool that removes machines once they are empty (and never moves a running pod).
fn consolidating_pool() -> NodePool {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {"spec": {
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge", "m5.2xlarge"]},
                ],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "expireAfter": "720h",
            }},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5s"},
        }
    }))
    .expect("a NodePool")
}

/// A machine as Karpenter leaves it: an instance with Karpenter's tags, a NodeClaim with its
/// labels, annotations (its hashes of its own hashing), finalizer and status, and the Node the
/// kubelet registered. Returns the NodeClaim's name and the instance id.
async fn karpenters_machine(world: &World, ami: &str, name: &str) -> (String, String) {
    let c = &world.aws;
    let cluster_tag = format!("kubernetes.io/cluster/{CLUSTER}");
    let instance = run_instance(
        c,
        ami,
        &[
            (&cluster_tag, "owned"),
            ("karpenter.sh/nodepool", "default"),
            ("karpenter.sh/nodeclaim", name),
            ("karpenter.k8s.aws/ec2nodeclass", "default"),
            ("eks:eks-cluster-name", CLUSTER),
            ("Name", "default"),
        ],
    )
    .await;
    let described = nodewright_aws::instances::Instances::new(c.ec2.clone(), CLUSTER)
        .describe(&instance)
        .await
        .expect("described")
        .expect("it runs");
    let provider_id = format!("aws:///{}/{}", described.zone, instance);
    let labels: BTreeMap<&str, &str> = [
        ("karpenter.sh/nodepool", "default"),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ("karpenter.sh/capacity-type", "on-demand"),
        ("node.kubernetes.io/instance-type", "m5.large"),
        ("topology.kubernetes.io/zone", described.zone.as_str()),
        ("kubernetes.io/arch", "amd64"),
        ("kubernetes.io/os", "linux"),
        ("karpenter.k8s.aws/instance-category", "m"),
        ("karpenter.k8s.aws/instance-family", "m5"),
        ("karpenter.k8s.aws/instance-size", "large"),
    ]
    .into();
    let claim: NodeClaim = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "karpenter.sh/nodepool-hash": "6821555240594823241",
                "karpenter.sh/nodepool-hash-version": "v3",
                "karpenter.k8s.aws/ec2nodeclass-hash": "14279836716364133357",
                "karpenter.k8s.aws/ec2nodeclass-hash-version": "v4",
                "karpenter.k8s.aws/tagged": "true",
            },
            "finalizers": ["karpenter.sh/termination"],
        },
        "spec": {
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge", "m5.2xlarge"]},
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
            ],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "resources": {"requests": {"cpu": "650m", "memory": "1Gi", "pods": "2"}},
            "expireAfter": "720h",
        },
    }))
    .expect("Karpenter's NodeClaim");
    let api: Api<NodeClaim> = Api::all(world.client.clone());
    let mut created = api
        .create(&PostParams::default(), &claim)
        .await
        .expect("created");
    let node = node_name(&instance);
    let at = k8s_openapi::jiff::Timestamp::now().to_string();
    let condition = |type_: &str| serde_json::json!({"type": type_, "status": "True", "reason": type_, "message": "", "lastTransitionTime": at});
    created.status = Some(
        serde_json::from_value(serde_json::json!({
            "providerID": provider_id,
            "nodeName": node,
            "imageID": ami,
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
            "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
            "conditions": [condition("Launched"), condition("Registered"), condition("Initialized"), condition("Ready")],
        }))
        .expect("a status"),
    );
    api.replace_status(name, &PostParams::default(), &created)
        .await
        .expect("its status");
    // The kubelet stand-in registers the instance's Node (Karpenter's tags make it a
    // NodePool's machine).
    eventually("Karpenter's node is Ready", || async {
        let found = Api::<Node>::all(world.client.clone())
            .get_opt(&node)
            .await
            .map_err(|e| e.to_string())?;
        let ready = found
            .as_ref()
            .and_then(|n| n.status.as_ref()?.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        if ready {
            Ok(())
        } else {
            Err(format!("{found:?}"))
        }
    })
    .await;
    (name.to_string(), instance)
}

/// Karpenter stops; its machines stay (an instance with its tags, the NodeClaim, the Node, a
/// running pod). nodewright starts on an empty store: it adopts them, moves no pod, launches
/// only for a new pending pod, and removes Karpenter's machine by consolidation once its
/// workload is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karpenters_machines_are_adopted_and_consolidated_once_their_work_is_gone() {
    let world = World::start(consolidating_pool()).await;
    let (client, c) = (world.client.clone(), &world.aws);
    let ami = ami(c).await;
    let (claim, instance) = karpenters_machine(&world, &ami, "default-k8s4t").await;
    let karpenters_node = node_name(&instance);
    let node = running_pod(&client, "web-0").await;
    assert_eq!(node, karpenters_node, "the pod runs on Karpenter's machine");
    let uid = Api::<Pod>::namespaced(client.clone(), "default")
        .get("web-0")
        .await
        .expect("web-0")
        .metadata
        .uid;

    let controller = world.controller_with(with_fast_collection).await;
    // Well past the collector's grace and several disruption passes: nothing moves.
    tokio::time::sleep(Duration::from_secs(40)).await;
    assert!(
        is_running(c, &instance).await,
        "Karpenter's instance was terminated"
    );
    let claims = nodeclaims(&client).await;
    assert_eq!(claims.len(), 1, "{claims:?}");
    assert_eq!(claims[0].metadata.name.as_deref(), Some(claim.as_str()));
    assert!(claims[0].metadata.deletion_timestamp.is_none());
    let pod = Api::<Pod>::namespaced(client.clone(), "default")
        .get("web-0")
        .await
        .expect("web-0");
    assert_eq!(pod.metadata.uid, uid, "web-0 was not evicted");
    assert_eq!(
        pod.spec.and_then(|s| s.node_name),
        Some(karpenters_node.clone())
    );

    // A pod that does not fit Karpenter's machine gets exactly one new one.
    let big = running_pod_sized(&client, "big", "3", "4Gi").await;
    assert_ne!(big, karpenters_node);
    assert_eq!(nodeclaims(&client).await.len(), 2);

    // Its workload gone, Karpenter's machine is consolidated as any of nodewright's.
    Api::<Pod>::namespaced(client.clone(), "default")
        .delete("web-0", &DeleteParams::default())
        .await
        .expect("deleted");
    eventually("Karpenter's machine is consolidated", || async {
        let claims = nodeclaims(&client).await;
        let names: Vec<String> = claims
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        let live = is_running(c, &instance).await;
        if !names.contains(&claim) && !live {
            Ok(())
        } else {
            Err(format!("NodeClaims {names:?}, instance live {live}"))
        }
    })
    .await;
    assert_eq!(nodeclaims(&client).await.len(), 1, "the new machine stays");

    assert_eq!(controller.stop().await, Stopped::Asked);
    world.replay_verifies();
    let (terminations, _) = world.logged("TerminateNodeClaim");
    assert_eq!(terminations, 1, "only Karpenter's empty machine");
    assert_eq!(world.logged("TerminateOrphanInstance").0, 0);

    // Its story, from the log: adopted as the cluster showed it, removed once empty.
    let story = nodewright_replay::explain_file(
        &world.dir.path().join("controller.nwlog"),
        &nodewright_replay::Subject::Node(claim.clone()),
    )
    .expect("its story");
    let lines: Vec<&str> = story.lines.iter().map(|l| l.text.as_str()).collect();
    let adopted = lines
        .iter()
        .position(|l| l.starts_with("adopted at a start") && l.contains(&instance))
        .unwrap_or_else(|| panic!("no adoption in {lines:#?}"));
    assert!(
        lines[adopted..]
            .iter()
            .any(|l| l.starts_with("removal decided (Empty)")),
        "{lines:#?}"
    );
}

/// A store whose last record is damaged is set aside (kept, named, counted) and a new one is
/// begun from observation: the controller serves, its machine is adopted, nothing is
/// terminated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_whose_last_record_is_damaged_is_set_aside_and_nothing_is_lost() {
    let world = World::start(support::nodepool("default", "default")).await;
    let (client, c) = (world.client.clone(), &world.aws);
    let first = world.controller().await;
    let node = running_pod(&client, "web-0").await;
    assert_eq!(first.stop().await, Stopped::Asked);
    let ours = live_instance_ids(c).await;

    // The last record's bytes flipped.
    {
        use redb::ReadableTable;
        const RECORDS: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("records");
        let db = redb::Database::open(&world.store).expect("the store");
        let txn = db.begin_write().expect("a write");
        {
            let mut table = txn.open_table(RECORDS).expect("the records");
            let (last, mut value) = {
                let (key, value) = table.last().expect("read").expect("a last record");
                (key.value(), value.value().to_vec())
            };
            let end = value.len() - 1;
            value[end] ^= 0xff;
            table.insert(last, value.as_slice()).expect("written");
        }
        txn.commit().expect("committed");
    }

    let second = world.controller().await;
    eventually("the damaged store is set aside and counted", || async {
        let text = second.metrics().await;
        if text.contains("nodewright_log_set_aside_total{kind=\"unreadable\"} 1") {
            Ok(())
        } else {
            Err(text)
        }
    })
    .await;
    let kept: Vec<String> = std::fs::read_dir(world.dir.path())
        .expect("the folder")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.contains(".set-aside-") && name.ends_with("-unreadable.redb"))
        .collect();
    assert_eq!(
        kept.len(),
        1,
        "the damaged store is kept beside the new one"
    );
    let big = running_pod_sized(&client, "web-1", "1500m", "3Gi").await;
    assert_ne!(big, node);
    assert!(is_running(c, &ours[0]).await, "the adopted machine runs on");
    assert_eq!(nodeclaims(&client).await.len(), 2);
    assert_eq!(second.stop().await, Stopped::Asked);
    world.replay_verifies();
    assert_eq!(world.logged("TerminateNodeClaim").0, 0);
}

/// The core panics on an event (a fault injected for the test): the controller sets the store
/// aside, quarantines the pod the event was about, begins a new store from observation and
/// keeps scaling; nothing is terminated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_that_panics_the_core_costs_its_object_not_the_controller() {
    fn poison(event: &nodewright_core::Event) -> bool {
        matches!(&event.kind, EventKind::PodApplied(pod) if pod.key.name == "poison")
    }
    let world = World::start(support::nodepool("default", "default")).await;
    let (client, c) = (world.client.clone(), &world.aws);
    let controller = world.controller_with(|s| s.fault = Some(poison)).await;
    let node = running_pod(&client, "web-0").await;
    Api::<Pod>::namespaced(client.clone(), "default")
        .create(
            &PostParams::default(),
            &pause_pod("poison", "100m", "128Mi"),
        )
        .await
        .expect("the poison pod");
    eventually("the store is set aside after the panic", || async {
        let text = controller.metrics().await;
        if text.contains("nodewright_log_set_aside_total{kind=\"panicked\"} 1") {
            Ok(())
        } else {
            Err(text)
        }
    })
    .await;
    // It keeps serving: a pod that needs a machine gets one.
    let big = running_pod_sized(&client, "web-1", "1500m", "3Gi").await;
    assert_ne!(big, node);
    assert_eq!(live_instance_ids(c).await.len(), 2);
    assert!(controller.leads().await);
    assert_eq!(controller.stop().await, Stopped::Asked);
    world.replay_verifies();
    assert_eq!(world.logged("TerminateNodeClaim").0, 0);
    assert_eq!(world.logged("TerminateOrphanInstance").0, 0);
}

/// `kubectl delete node` on a machine of nodewright's: Karpenter's termination finalizer holds
/// the Node while its pod is evicted; then the instance is terminated and the Node and
/// NodeClaim go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_deleted_by_hand_is_drained_and_its_machine_terminated() {
    let world = World::start(support::nodepool("default", "default")).await;
    let (client, c) = (world.client.clone(), &world.aws);
    let controller = world.controller().await;
    let node = running_pod(&client, "web-0").await;
    let instance_id = live_instances(c).await[0].instance_id.clone();
    Api::<Node>::all(client.clone())
        .delete(&node, &DeleteParams::default())
        .await
        .expect("deleted");
    world.machine_gone("web-0", &node, &instance_id).await;
    assert_eq!(controller.stop().await, Stopped::Asked);
    world.replay_verifies();
    assert!(world.logged("NodeDeleting").1 >= 1);
    assert_eq!(world.logged("EvictPod").0, 1);
    assert_eq!(world.logged("TerminateNodeClaim").0, 1);
}

/// One store per replica, and the log outlives both: each leader seals its store every two
/// seconds and when its term ends, and ships the segments to S3 (moto's); the range across the
/// two terms, assembled from the bucket, replays with `replay --verify` — each term from its
/// own store's start, each seam between one store's segments checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segments_of_two_leader_terms_reach_s3_and_assemble_into_a_log_that_verifies() {
    use nodewright_aws::log_bucket::LogBucket;
    use nodewright_controller::settings::LogSegments;
    use nodewright_replay::segments::{SegmentName, assemble, select};

    let world = World::start(support::nodepool("default", "default")).await;
    world
        .aws
        .s3
        .create_bucket()
        .bucket("incident-logs")
        .send()
        .await
        .expect("a bucket");
    let shipping = |s: &mut nodewright_controller::Settings| {
        s.log_segments = Some(LogSegments {
            bucket: "incident-logs".into(),
            prefix: "clusters".into(),
            every: Duration::from_secs(2),
        })
    };
    let bucket = LogBucket::new(world.aws.s3.clone(), "incident-logs", "clusters/demo");
    let names = || async {
        bucket
            .list("")
            .await
            .expect("listed")
            .iter()
            .filter_map(|n| SegmentName::parse(n))
            .collect::<Vec<_>>()
    };

    // The first term: a machine for a pod; a segment is shipped while it leads.
    let first = world.controller_with(shipping).await;
    running_pod(&world.client, "web-0").await;
    eventually("a segment is shipped while the leader runs", || async {
        let shipped = names().await;
        if shipped.is_empty() {
            Err("none yet".to_string())
        } else {
            Ok(())
        }
    })
    .await;
    assert_eq!(first.stop().await, Stopped::Asked);

    // The second term, on another replica's store: it adopts the machine, and launches for a
    // pod too large for it.
    let second_store = world.dir.path().join("second-replica.redb");
    let second = world
        .controller_with(|s| {
            shipping(s);
            s.store = second_store.clone();
        })
        .await;
    running_pod_sized(&world.client, "big-0", "3", "4Gi").await;
    assert_eq!(second.stop().await, Stopped::Asked);

    let shipped = names().await;
    let stores: std::collections::BTreeSet<&str> =
        shipped.iter().map(|n| n.store.as_str()).collect();
    assert_eq!(stores.len(), 2, "both stores shipped: {shipped:?}");
    // Each store's segments follow one another without a gap.
    for store in &stores {
        let mut own: Vec<&SegmentName> = shipped.iter().filter(|n| n.store == *store).collect();
        own.sort_by_key(|n| n.from);
        assert_eq!(own[0].from, 0, "{own:?}");
        assert!(own.windows(2).all(|w| w[0].to == w[1].from), "{own:?}");
    }

    let chosen = select(shipped, None, None);
    let mut segments = Vec::new();
    for name in chosen {
        let key = name.path();
        segments.push((name, bucket.get(&key).await.expect("read back")));
    }
    let out = world.dir.path().join("two-terms.nwlog");
    let assembled = assemble(&segments, None, None, &out).expect("assembled");
    assert_eq!(assembled.pieces, 2, "{assembled:?}");
    let outcome = nodewright_replay::verify_file(&out).expect("reads");
    assert_eq!(outcome.divergence, None);
    assert_eq!(outcome.snapshot_divergence, None);

    // Nothing of either term is missing: the two stores, exported whole, hold the same events
    // and commands.
    let whole_first = world.replay_verifies();
    let whole_second = replay_verifies(&second_store, world.dir.path());
    assert_eq!(
        outcome.events,
        whole_first.events + whole_second.events,
        "{outcome:?}"
    );
    assert_eq!(
        outcome.commands,
        whole_first.commands + whole_second.commands
    );
    assert!(world.logged("NodeClaimsObserved").1 >= 1);
}
