//! nodewright as a user runs it: installed by `helm install` into a real control plane (etcd,
//! kube-apiserver, kube-controller-manager, kube-scheduler, kwok) with moto as EC2 and SQS;
//! the guide's NodePool, EC2NodeClass and `inflate`; the chart's pods run as `nodewright`
//! processes with the chart's environment and ServiceAccount. Every test ends by replaying
//! the recorded log with `--verify`.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use nodewright_adapters::eventlog::LogRecord;
use nodewright_api::{EC2NodeClass, NodeClaim};
use nodewright_aws::aws_sdk_sqs::types::QueueAttributeName;
use nodewright_controlplane::eventually;
use nodewright_core::catalog::CapacityType;
use nodewright_core::model::nodeclaim::TerminationReason;
use nodewright_core::{Command, EventKind};
use support::installation::{ChartPod, Installation, NAMESPACE, recorded};
use support::*;

/// The pods of `inflate` that run, and the nodes they run on.
async fn inflate_running(client: &kube::Client) -> (usize, BTreeSet<String>) {
    let pods = Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels("app=inflate"))
        .await
        .expect("pods");
    let running: Vec<String> = pods
        .items
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    (running.len(), running.into_iter().collect())
}

/// The sum and count of a histogram in Prometheus' text format.
fn histogram(metrics: &str, name: &str) -> (f64, f64) {
    let value = |suffix: &str| {
        metrics
            .lines()
            .filter(|l| l.starts_with(&format!("{name}_{suffix}")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    (value("sum"), value("count"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guides_tutorial_runs_from_the_chart() {
    let cluster = Installation::new(&[]).await;
    let client = cluster.client.clone();

    // What helm made: the chart's two replicas wait for a node nodewright does not manage
    // (required affinity `karpenter.sh/nodepool DoesNotExist`); none exists in this cluster.
    let chart_pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    eventually("the chart's two pods exist", || async {
        let pods = chart_pods
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        (pods.items.len() == 2)
            .then_some(())
            .ok_or(format!("{} pods", pods.items.len()))
    })
    .await;

    cluster.apply_tutorial(|_| {}).await;
    cluster.create_inflate().await;
    let pod = leader(&cluster, "nodewright-6d4b7c9f8-x2x7q").await;

    // kubectl scale deployment inflate --replicas 5
    let scaled = Instant::now();
    cluster.scale_inflate(5).await;
    let nodes = inflate_runs(&client, 5).await;
    let to_running = scaled.elapsed();

    // The guide's pool: on-demand amd64 c, m or r instances, launched in moto.
    let claims = nodeclaims(&client).await;
    assert_eq!(claims.len(), nodes.len(), "one NodeClaim per node");
    let live = cluster.live_instances().await;
    assert_eq!(live.len(), claims.len(), "one instance per NodeClaim");
    for claim in &claims {
        let labels = claim.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels["karpenter.sh/capacity-type"], "on-demand");
        assert_eq!(labels["kubernetes.io/arch"], "amd64");
        let category = &labels["karpenter.k8s.aws/instance-category"];
        assert!(["c", "m", "r"].contains(&category.as_str()), "{category}");
    }
    // Its own replicas are not nodewright's to place.
    let unbound = chart_pods
        .list(&ListParams::default())
        .await
        .expect("the chart's pods")
        .items
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none())
        .count();
    assert_eq!(
        unbound, 2,
        "the chart's pods were placed on nodewright's nodes"
    );

    // A second scale-up, with the catalog read and a node running: what a user waits for in
    // steady state (the first waited for the controller's start, EC2's catalog included).
    let scaled_again = Instant::now();
    cluster.scale_inflate(10).await;
    let nodes = inflate_runs(&client, 10).await;
    let to_running_again = scaled_again.elapsed();
    assert_eq!(nodeclaims(&client).await.len(), nodes.len());

    let metrics = pod.metrics().await;
    let (startup_sum, startup_count) =
        histogram(&metrics, "karpenter_pods_startup_duration_seconds");
    eprintln!(
        "pending to Running: {:.2} s from the first scale (5 pods, the controller just started) \
         and {:.2} s from the second (5 more) to the last pod Running; mean pod start-up {:.2} s \
         over {startup_count} pods (batch idle window 1 s; the kubelet stand-in registers a \
         node 1 s after its launch)",
        to_running.as_secs_f64(),
        to_running_again.as_secs_f64(),
        startup_sum / startup_count.max(1.0)
    );
    assert!(startup_count >= 10.0, "{metrics}");

    // A DaemonSet on every node, as clusters have (a log shipper): its pods follow the nodes,
    // so a node running only them is still empty.
    let shippers: DaemonSet = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "log-shipper", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "log-shipper"}},
            "template": {
                "metadata": {"labels": {"app": "log-shipper"}},
                "spec": {
                    "tolerations": [{"operator": "Exists"}],
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{
                        "name": "shipper",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                    }],
                },
            },
        },
    }))
    .expect("a DaemonSet");
    Api::<DaemonSet>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &shippers)
        .await
        .expect("created");
    eventually("a log-shipper pod runs on each node", || async {
        let on: BTreeSet<String> = Api::<Pod>::namespaced(client.clone(), "default")
            .list(&ListParams::default().labels("app=log-shipper"))
            .await
            .map_err(|e| e.to_string())?
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        (on == nodes)
            .then_some(())
            .ok_or(format!("on {on:?} of {nodes:?}"))
    })
    .await;

    // kubectl delete deployment inflate: the empty machines go after consolidateAfter (1m),
    // their log shippers with them.
    Api::<Deployment>::namespaced(client.clone(), "default")
        .delete("inflate", &DeleteParams::default())
        .await
        .expect("deleted");
    let until = Instant::now() + Duration::from_secs(150);
    loop {
        let claims = nodeclaims(&client).await;
        let live = cluster.live_instances().await;
        if claims.is_empty() && live.is_empty() {
            break;
        }
        assert!(
            Instant::now() < until,
            "still {} NodeClaims and {} instances:\n{}",
            claims.len(),
            live.len(),
            pod.log_tail()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let metrics = pod.metrics().await;
    assert!(
        metrics.contains("karpenter_nodeclaims_disrupted_total{")
            && metrics.contains("reason=\"empty\""),
        "{metrics}"
    );

    // The incident log, taken from the running leader (kubectl port-forward to its health
    // port) with names replaced by tokens, replays on its own.
    let (status, body) = pod.log("redact=true").await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let taken = cluster.dir.path().join("taken.nwlog");
    std::fs::write(&taken, &body).expect("written");
    let replayed = nodewright_replay::verify_file(&taken).expect("the log reads");
    assert!(replayed.divergence.is_none(), "{:?}", replayed.divergence);
    assert!(replayed.commands > 0);
    let (status, body) = pod.log("from=last-tuesday").await;
    assert_eq!(status, 400);
    assert!(String::from_utf8_lossy(&body).contains("fix: from="));
    // Only callers the API server allows: no token, a token of an account bound to nothing.
    let (status, body) = pod.log_as(None, "").await;
    assert_eq!(status, 401, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("Authorization: Bearer"));
    let (status, body) = pod.log_as(Some(&cluster.stranger), "").await;
    assert_eq!(status, 403, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("log-reader"));
    // The whole log names the guide's pods; a reader of the redacted log gets it redacted
    // whatever it asks.
    let names = |body: &[u8]| body.windows(b"inflate".len()).any(|w| w == b"inflate");
    let (status, whole) = pod.log("").await;
    assert_eq!(status, 200);
    assert!(names(&whole), "the whole log names the pods");
    let (status, redacted) = pod.log_as(Some(&cluster.redacted_log_reader), "").await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&redacted));
    assert!(!names(&redacted), "a redacted reader gets the redacted log");
    // The probes' and the metrics' ports serve no log.
    let (status, _) = Running::get_bytes(pod.health, "/log")
        .await
        .expect("answers");
    assert_eq!(status, 404);

    let name = pod.name.clone();
    assert_eq!(pod.stop().await, Some(0), "a clean stop on SIGTERM");
    let outcome = cluster.replay_verifies(&name);
    assert!(outcome.commands >= replayed.commands);
}

/// Waits until `n` pods of `inflate` run on nodes nodewright launched; the nodes.
async fn inflate_runs(client: &kube::Client, n: usize) -> BTreeSet<String> {
    eventually(&format!("{n} inflate pods run"), || async {
        let (running, nodes) = inflate_running(client).await;
        if running == n && nodes.iter().all(|node| node.ends_with(".ec2.internal")) {
            Ok(nodes)
        } else {
            Err(format!("{running} running on {nodes:?}"))
        }
    })
    .await
}

/// Waits until the chart's pod `pod` leads.
async fn until_it_leads(pod: &ChartPod) {
    eventually(&format!("{} leads", pod.name), || async {
        if pod.leads().await {
            Ok(())
        } else {
            Err(pod.log_tail())
        }
    })
    .await;
}

/// Starts the chart's pod `name` and waits until it leads.
async fn leader(cluster: &Installation, name: &str) -> ChartPod {
    let pod = cluster.pod(name);
    until_it_leads(&pod).await;
    pod
}

fn names(claims: &[NodeClaim]) -> BTreeSet<String> {
    claims
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect()
}

const SPOT_WARNING: &str =
    include_str!("../../adapters/tests/fixtures/eventbridge/spot-interruption.json");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_interruption_replaces_first_and_drains_through_the_pdb() {
    let cluster = Installation::new(&["settings.interruptionQueue=nodewright-demo"]).await;
    let client = cluster.client.clone();
    let queue = cluster
        .aws
        .sqs
        .create_queue()
        .queue_name("nodewright-demo")
        .send()
        .await
        .expect("the interruption queue")
        .queue_url()
        .expect("its URL")
        .to_owned();
    cluster
        .apply_tutorial(|pool| {
            let requirements = &mut pool["spec"]["template"]["spec"]["requirements"];
            assert_eq!(requirements[2]["key"], "karpenter.sh/capacity-type");
            requirements[2]["values"] = serde_json::json!(["spot"]);
        })
        .await;
    cluster.create_inflate().await;
    let pdb: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "inflate"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "inflate"}}},
    }))
    .expect("a PodDisruptionBudget");
    Api::<PodDisruptionBudget>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &pdb)
        .await
        .expect("the PDB");
    let pod = leader(&cluster, "nodewright-7b78d5f65b-spot1").await;
    cluster.scale_inflate(3).await;
    let nodes = inflate_runs(&client, 3).await;
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let old_node = nodes.first().expect("a node").clone();
    let old_instance = old_node.trim_end_matches(".ec2.internal").to_owned();
    let old_claims = names(&nodeclaims(&client).await);
    let live = cluster.live_instances().await;
    assert!(
        live.iter()
            .all(|i| i.capacity_type == Some(CapacityType::Spot)),
        "{live:?}"
    );

    // AWS sends the two-minute warning through EventBridge to the queue, now.
    let now = Timestamp::from_second(Timestamp::now().as_second()).expect("a time");
    let warning = SPOT_WARNING
        .replace("i-0b662ef9931388ba0", &old_instance)
        .replace("2026-12-02T12:00:00Z", &now.to_string());
    cluster
        .aws
        .sqs
        .send_message()
        .queue_url(&queue)
        .message_body(warning)
        .send()
        .await
        .expect("sent");

    eventually(
        "the pods run on the replacement and the old machine is gone",
        || async {
            let (running, on) = inflate_running(&client).await;
            let claims = names(&nodeclaims(&client).await);
            let live = cluster.live_instances().await;
            let old_live = live.iter().any(|i| i.instance_id == old_instance);
            if running == 3
                && !on.contains(&old_node)
                && claims.is_disjoint(&old_claims)
                && !old_live
            {
                Ok(())
            } else {
                Err(format!(
                    "{running} running on {on:?}; claims {claims:?}; old instance live {old_live}"
                ))
            }
        },
    )
    .await;
    // The message was deleted once logged: none is left, visible or in flight.
    let attributes = cluster
        .aws
        .sqs
        .get_queue_attributes()
        .queue_url(&queue)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .expect("the queue's attributes");
    for name in [
        QueueAttributeName::ApproximateNumberOfMessages,
        QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
    ] {
        let count = attributes.attributes().and_then(|a| a.get(&name)).cloned();
        assert_eq!(count.as_deref(), Some("0"), "{name:?}");
    }

    let name = pod.name.clone();

    assert_eq!(pod.stop().await, Some(0));
    cluster.replay_verifies(&name);
    let records = recorded(&cluster);
    let position = |what: &dyn Fn(&LogRecord) -> bool| records.iter().position(what);
    let received = position(&|r| {
        matches!(r, LogRecord::Event(e) if matches!(&e.kind,
            EventKind::InterruptionReceived { instance_id, .. } if *instance_id == old_instance))
    })
    .expect("the warning is logged");
    let commands = |r: &LogRecord| match r {
        LogRecord::Commands(cs) => cs.clone(),
        _ => Vec::new(),
    };
    let launched = records
        .iter()
        .enumerate()
        .skip(received)
        .find(|(_, r)| {
            commands(r)
                .iter()
                .any(|c| matches!(c, Command::LaunchNodeClaim { .. }))
        })
        .map(|(i, _)| i)
        .expect("a replacement");
    let first_eviction = position(&|r| {
        commands(r)
            .iter()
            .any(|c| matches!(c, Command::EvictPod { node, .. } if *node == old_node))
    })
    .expect("the old node's pods are evicted");
    let terminated = position(&|r| {
        commands(r).iter().any(|c| {
            matches!(c, Command::TerminateNodeClaim { reason: TerminationReason::Interrupted, instance_id, .. }
                if instance_id.as_deref() == Some(old_instance.as_str()))
        })
    })
    .expect("the old machine's termination");
    assert!(
        received < launched && launched <= first_eviction,
        "the replacement comes first: warning at record {received}, launch at {launched}, first eviction at {first_eviction}"
    );
    assert!(terminated > received);
    let evicted: BTreeSet<String> = records
        .iter()
        .flat_map(commands)
        .filter_map(|c| match c {
            Command::EvictPod {
                pod,
                node,
                forced: false,
                ..
            } if node == old_node => Some(pod.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        evicted.len(),
        3,
        "each pod evicted through the Eviction API: {evicted:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_replaces_the_nodes_one_budget_at_a_time() {
    let cluster = Installation::new(&[]).await;
    let client = cluster.client.clone();
    cluster.apply_tutorial(|_| {}).await;
    cluster.create_inflate().await;
    // One pod per machine, so that three machines drift.
    Api::<Deployment>::namespaced(client.clone(), "default")
        .patch(
            "inflate",
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"spec": {"template": {"spec": {"affinity": {
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "inflate"}},
                    }]}
                }}}}}),
            ),
        )
        .await
        .expect("patched");
    let pod = leader(&cluster, "nodewright-7b78d5f65b-drift").await;
    cluster.scale_inflate(3).await;
    assert_eq!(inflate_runs(&client, 3).await.len(), 3);
    let old_claims = names(&nodeclaims(&client).await);
    let old_instances = cluster.live_instance_ids().await;

    // Another AMI in the EC2NodeClass's selector: every machine launched from the old one drifts.
    let amis = nodewright_aws::testing::amd64_amis(&cluster.aws)
        .await
        .expect("the AMIs moto lists");
    let new_ami = amis
        .into_iter()
        .find(|a| *a != cluster.network.ami)
        .expect("a second AMI");
    Api::<EC2NodeClass>::all(client.clone())
        .patch(
            "default",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"amiSelectorTerms": [{"id": new_ami}]}})),
        )
        .await
        .expect("patched");

    let until = Instant::now() + Duration::from_secs(240);
    let mut most_going = 0;
    loop {
        let claims = nodeclaims(&client).await;
        let going = claims
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_some())
            .count();
        most_going = most_going.max(going);
        let (running, on) = inflate_running(&client).await;
        let live = cluster.live_instance_ids().await;
        if running == 3
            && on.len() == 3
            && names(&claims).is_disjoint(&old_claims)
            && claims.len() == 3
            && live.is_disjoint(&old_instances)
        {
            break;
        }
        assert!(
            Instant::now() < until,
            "{running} running on {on:?}; claims {:?}; live {live:?}\n{}",
            names(&claims),
            pod.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        most_going <= 1,
        "{most_going} NodeClaims were going at once"
    );

    let name = pod.name.clone();

    assert_eq!(pod.stop().await, Some(0));
    cluster.replay_verifies(&name);
    // From the log: each old machine was replaced for drift, never two at once (the default
    // budget, 10% of three nodes, allows one).
    let mut disrupting: BTreeSet<String> = BTreeSet::new();
    let mut drifted = BTreeSet::new();
    for record in recorded(&cluster) {
        match record {
            LogRecord::Commands(commands) => {
                for command in commands {
                    if let Command::TerminateNodeClaim {
                        nodeclaim,
                        reason: TerminationReason::Drifted,
                        ..
                    } = command
                    {
                        disrupting.insert(nodeclaim.clone());
                        drifted.insert(nodeclaim);
                        assert!(disrupting.len() <= 1, "{disrupting:?} disrupted at once");
                    }
                }
            }
            LogRecord::Event(e) => {
                if let EventKind::NodeClaimTerminated { nodeclaim, .. } = &e.kind {
                    disrupting.remove(nodeclaim);
                }
            }
            LogRecord::Snapshot(_) | LogRecord::SnapshotPart(_) => {}
            LogRecord::CommandsPart { .. } => panic!("a few machines' commands fit one record"),
            LogRecord::Term(_) => panic!("a store holds one log"),
        }
    }
    assert_eq!(drifted, old_claims, "every old machine drifted");
}

/// Two replicas as the chart runs them, each with a store of its own (no shared volume): the
/// leader is killed mid scale-up, and the standby, starting from an empty store, adopts what
/// the dead leader launched and finishes the job — no instance launched twice, none orphaned —
/// and its own store replays from the adoption.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_takes_over_when_the_leader_is_killed_mid_scale_up() {
    // The lease runs out after 5 s (15 s by default), set through the chart's controller.env.
    let cluster = Installation::new(&[
        "controller.env[0].name=LEADER_ELECTION_LEASE_DURATION",
        "controller.env[0].value=5s",
    ])
    .await;
    let client = cluster.client.clone();
    cluster.apply_tutorial(|_| {}).await;
    cluster.create_inflate().await;
    let mut first = leader(&cluster, "nodewright-7b78d5f65b-lead1").await;
    let second = cluster.pod("nodewright-7b78d5f65b-lead2");
    eventually("the second replica is a ready standby", || async {
        if second.ready().await && !second.leads().await {
            Ok(())
        } else {
            Err(second.log_tail())
        }
    })
    .await;

    // Only the leader holds the store, and says so.
    let (status, body) = second.log("").await;
    assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));

    cluster.scale_inflate(5).await;
    eventually("the leader has decided on a machine", || async {
        let claims = nodeclaims(&client).await;
        (!claims.is_empty())
            .then_some(())
            .ok_or("no NodeClaim yet".to_owned())
    })
    .await;
    first.kill();

    until_it_leads(&second).await;
    inflate_runs(&client, 5).await;
    // No duplicate and no orphan: each live instance is one NodeClaim's, each NodeClaim has one.
    let claims = names(&nodeclaims(&client).await);
    let live = cluster.live_instances().await;
    let owners: Vec<String> = live.iter().filter_map(|i| i.nodeclaim.clone()).collect();
    assert_eq!(
        owners.len(),
        live.len(),
        "an instance without its NodeClaim tag: {live:?}"
    );
    assert_eq!(
        owners.iter().cloned().collect::<BTreeSet<_>>(),
        claims,
        "instances {live:?} against NodeClaims {claims:?}"
    );
    assert_eq!(
        owners.len(),
        claims.len(),
        "a NodeClaim with two instances: {live:?}"
    );

    let name = second.name.clone();

    assert_eq!(second.stop().await, Some(0));
    let outcome = cluster.replay_verifies(&name);
    assert!(outcome.commands > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_written_in_the_last_format_keeps_going() {
    let cluster = Installation::new(&[]).await;
    let client = cluster.client.clone();
    // The store as nodewright 0.1.0 left it: the golden log of format version 1.
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/golden/v1-seed-tutorial.nwlog");
    let records = cluster.store_from("nodewright-7b78d5f65b-upgrd", &golden);
    cluster.apply_tutorial(|_| {}).await;
    cluster.create_inflate().await;
    let pod = leader(&cluster, "nodewright-7b78d5f65b-upgrd").await;
    cluster.scale_inflate(3).await;
    inflate_runs(&client, 3).await;
    assert_eq!(
        nodeclaims(&client).await.len(),
        cluster.live_instances().await.len()
    );

    let name = pod.name.clone();
    assert_eq!(pod.stop().await, Some(0));
    // The whole store replays: the old records, then this version's.
    let outcome = cluster.replay_verifies(&name);
    assert_eq!(outcome.header.source, "seed-tutorial");
    assert!(
        outcome.events + outcome.commands > records,
        "nothing was added to the {records} records"
    );
}
