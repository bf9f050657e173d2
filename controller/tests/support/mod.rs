//! What the controller's tests share: a real control plane with the CRDs, a moto EC2 with a
//! discoverable network, the controller running in-process over both, the kubelet stand-in.

#![allow(dead_code)]

pub mod installation;

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, PostParams};
use nodewright_adapters::control_loop::Stopped;
use nodewright_api::{EC2NodeClass, NodeClaim, NodePool};
use nodewright_aws::instances::{Described, Instances};
use nodewright_aws::testing::{self, Network};
use nodewright_aws::{ClientSettings, Clients};
use nodewright_controller::leadership::LeaderElection;
use nodewright_controller::{ControllerError, Settings};
use nodewright_controlplane::ControlPlane;
use nodewright_controlplane::kubelet::KubeletStandIn;
use nodewright_core::config::LostWork;
use nodewright_testkit::services::moto::Moto;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const CLUSTER: &str = "demo";

pub fn aws_settings(moto: &Moto) -> ClientSettings {
    testing::local_settings(&moto.endpoint())
}

pub async fn clients(moto: &Moto) -> Clients {
    testing::local_clients(&moto.endpoint())
        .await
        .expect("clients for the moto server")
}

/// A VPC with two discoverable subnets (us-east-1a, us-east-1b) and a discoverable security
/// group; returns an amd64 AMI moto lists.
pub async fn network(c: &Clients) -> String {
    Network::create(c, CLUSTER, &["us-east-1a", "us-east-1b"])
        .await
        .expect("a network")
        .ami
}

pub fn nodeclass(ami: &str) -> EC2NodeClass {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "amiFamily": "AL2023",
            "role": "KarpenterNodeRole-demo",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
            "amiSelectorTerms": [{"id": ami}],
        }
    }))
    .expect("an EC2NodeClass")
}

/// An on-demand pool of m5 types that never consolidates (the tests watch launches).
pub fn nodepool(name: &str, nodeclass: &str) -> NodePool {
    nodepool_expiring(name, nodeclass, "720h")
}

/// [`nodepool`] whose nodes expire after `expire_after`.
pub fn nodepool_expiring(name: &str, nodeclass: &str, expire_after: &str) -> NodePool {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge", "m5.2xlarge"]},
                ],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodeclass},
                "expireAfter": expire_after,
            }},
            "disruption": {"consolidateAfter": "Never"},
        }
    }))
    .expect("a NodePool")
}

pub async fn create<K>(client: &kube::Client, object: &K)
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    Api::<K>::all(client.clone())
        .create(&PostParams::default(), object)
        .await
        .expect("created");
}

/// A port nothing listens on now.
pub fn free_address() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
}

pub fn settings(store: &Path) -> Settings {
    Settings {
        cluster_name: CLUSTER.into(),
        cluster_endpoint: "https://demo.example".into(),
        cluster_ca_bundle: "Q0E=".into(),
        service_cidr: "10.100.0.0/16".into(),
        interruption_queue: None,
        batch_idle: Duration::from_secs(1),
        batch_max: Duration::from_secs(10),
        sibling_hold: Duration::from_secs(120),
        count_lost_work: LostWork::AllButReplicated,
        separate_when_cheaper: true,
        expiration_waits_for_jobs: true,
        feature_gates: Vec::new(),
        store: store.to_path_buf(),
        kubernetes_version: Some("1.33".into()),
        instance_gc_period: Duration::from_secs(30),
        nodeclass_refresh: Duration::from_secs(60),
        identity: "nodewright-test".into(),
        leader_election: Some(LeaderElection {
            name: "nodewright-leader-election".into(),
            namespace: "default".into(),
            lease_duration: Duration::from_secs(3),
        }),
        metrics_address: free_address(),
        health_address: free_address(),
        log_address: free_address(),
        log_segments: None,
        fault: None,
    }
}

/// What a running controller serves: its metrics and its probes.
// The tests await these on their own runtime; no caller needs the futures to be `Send`.
#[allow(async_fn_in_trait)]
pub trait Served {
    fn metrics_address(&self) -> std::net::SocketAddr;
    fn health_address(&self) -> std::net::SocketAddr;

    /// Its metrics, as Prometheus reads them.
    async fn metrics(&self) -> String {
        Running::get(self.metrics_address(), "/metrics")
            .await
            .map(|(_, body)| body)
            .unwrap_or_default()
    }

    /// Whether `/readyz` answers 200.
    async fn ready(&self) -> bool {
        Running::get(self.health_address(), "/readyz")
            .await
            .is_some_and(|(status, _)| status == 200)
    }

    /// Whether it holds the lease and runs the core (its `nodewright_leader` gauge).
    async fn leads(&self) -> bool {
        self.metrics()
            .await
            .lines()
            .any(|l| l == "nodewright_leader 1")
    }
}

impl Served for Running {
    fn metrics_address(&self) -> std::net::SocketAddr {
        self.metrics
    }

    fn health_address(&self) -> std::net::SocketAddr {
        self.health
    }
}

/// A controller running in a runtime of its own (as a process would) until
/// [`Running::stop`] or [`Running::kill`].
pub struct Running {
    /// Where its `/metrics` and its probes are served.
    pub metrics: std::net::SocketAddr,
    pub health: std::net::SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    kill: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Option<Result<Stopped, ControllerError>>>>,
}

impl Running {
    pub async fn start(control_plane: &ControlPlane, moto: &Moto, store: &Path) -> Running {
        Running::start_with(control_plane, moto, settings(store)).await
    }

    pub async fn start_with(
        control_plane: &ControlPlane,
        moto: &Moto,
        settings: Settings,
    ) -> Running {
        let connections = nodewright_controller::Connections {
            kube: control_plane
                .config()
                .await
                .expect("the client configuration"),
            aws: aws_settings(moto),
        };
        Running::start_connected(settings, connections)
    }

    /// A controller connected as `connections` say (through a proxy, say).
    pub fn start_connected(
        settings: Settings,
        connections: nodewright_controller::Connections,
    ) -> Running {
        // The controller's log, shown with a failing test's output.
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
            .try_init();
        let (stop, stopped) = oneshot::channel::<()>();
        let (kill, killed) = oneshot::channel::<()>();
        let (metrics, health) = (settings.metrics_address, settings.health_address);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime");
            // Killed: the runtime is dropped with every task of the controller in it, wherever
            // they stand, as when a process dies.
            runtime.block_on(async move {
                tokio::select! {
                    stopped = nodewright_controller::run(settings, connections, async move {
                        let _ = stopped.await;
                    }) => Some(stopped),
                    _ = killed => None,
                }
            })
        });
        Running {
            metrics,
            health,
            stop: Some(stop),
            kill: Some(kill),
            thread: Some(thread),
        }
    }

    /// `GET path` on `address`: the status code and the body (None: nothing answers).
    pub async fn get(address: std::net::SocketAddr, path: &str) -> Option<(u16, String)> {
        let (status, body) = Self::get_bytes(address, path).await?;
        Some((status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// [`Running::get`] with the body as bytes.
    pub async fn get_bytes(address: std::net::SocketAddr, path: &str) -> Option<(u16, Vec<u8>)> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.ok()?;
        let end = response.windows(4).position(|w| w == b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&response[..end]).into_owned();
        let status = head.split(' ').nth(1)?.parse().ok()?;
        Some((status, response[end + 4..].to_vec()))
    }

    /// Asks it to stop and waits until it has.
    pub async fn stop(mut self) -> Stopped {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.outcome()
            .await
            .expect("the controller stopped cleanly")
    }

    /// Waits until it returns by itself, and what it returned.
    pub async fn outcome(mut self) -> Result<Stopped, ControllerError> {
        let thread = self.thread.take().expect("running");
        tokio::task::spawn_blocking(move || thread.join())
            .await
            .expect("joined")
            .expect("the controller's thread")
            .expect("not killed")
    }

    /// Kills it where it stands: nothing after this point is done.
    pub async fn kill(mut self) {
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
        let thread = self.thread.take().expect("running");
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
    }
}

/// One test's world: a control plane with the CRDs, moto with a discoverable network, the
/// EC2NodeClass `default` and a NodePool, a kubelet stand-in registering launched instances
/// after a second, and a folder for the controller's store.
pub struct World {
    pub control_plane: ControlPlane,
    pub moto: Moto,
    pub aws: Clients,
    pub client: kube::Client,
    pub dir: tempfile::TempDir,
    pub store: PathBuf,
    kubelet: JoinHandle<()>,
}

impl World {
    pub async fn start(pool: NodePool) -> World {
        World::start_staggered(pool, Duration::ZERO).await
    }

    /// A world whose k-th instance registers its Node `1 s + k × stagger` after it runs.
    pub async fn start_staggered(pool: NodePool, stagger: Duration) -> World {
        let control_plane = ControlPlane::start_with_crds()
            .await
            .expect("a control plane");
        let moto = Moto::start();
        let aws = clients(&moto).await;
        let ami = network(&aws).await;
        let client = control_plane.client();
        create(&client, &nodeclass(&ami)).await;
        create(&client, &pool).await;
        let dir = tempfile::tempdir().expect("a folder");
        let store = dir.path().join("events.redb");
        let kubelet = {
            let mut standin = KubeletStandIn::new(
                control_plane.client(),
                Instances::new(aws.ec2.clone(), CLUSTER),
                Duration::from_secs(1),
            );
            standin.stagger = stagger;
            standin.spawn()
        };
        World {
            control_plane,
            moto,
            aws,
            client,
            dir,
            store,
            kubelet,
        }
    }

    /// A controller over this world's store.
    pub async fn controller(&self) -> Running {
        Running::start(&self.control_plane, &self.moto, &self.store).await
    }

    /// A controller over this world's store, its settings changed by `change`.
    pub async fn controller_with(&self, change: impl FnOnce(&mut Settings)) -> Running {
        let mut settings = settings(&self.store);
        change(&mut settings);
        Running::start_with(&self.control_plane, &self.moto, settings).await
    }

    /// Waits until pod `pod` (namespace default), node `node`, every NodeClaim and instance
    /// `instance_id` are gone.
    pub async fn machine_gone(&self, pod: &str, node: &str, instance_id: &str) {
        let pods_api: Api<Pod> = Api::namespaced(self.client.clone(), "default");
        let nodes_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.client.clone());
        nodewright_controlplane::eventually(
            "the pod, node, NodeClaim and instance are gone",
            || async {
                let pod = pods_api.get_opt(pod).await.map_err(|e| e.to_string())?;
                let node = nodes_api.get_opt(node).await.map_err(|e| e.to_string())?;
                let claims = nodeclaims(&self.client).await;
                let live = live_instances(&self.aws).await;
                let gone = !live.iter().any(|i| i.instance_id == instance_id);
                if pod.is_none() && node.is_none() && claims.is_empty() && gone {
                    Ok(())
                } else {
                    Err(format!(
                        "pod {}, node {}, {} NodeClaims, instance live {}",
                        pod.is_some(),
                        node.is_some(),
                        claims.len(),
                        !gone
                    ))
                }
            },
        )
        .await;
    }

    /// How many commands of `kind` the exported log (`controller.nwlog`, after
    /// [`World::replay_verifies`]) holds, and events of `kind`.
    pub fn logged(&self, kind: &str) -> (u64, u64) {
        let summary = nodewright_replay::inspect_file(&self.dir.path().join("controller.nwlog"))
            .expect("inspected");
        let count = |kinds: &std::collections::BTreeMap<&'static str, u64>| {
            kinds.get(kind).copied().unwrap_or(0)
        };
        (
            count(&summary.commands_by_kind),
            count(&summary.events_by_kind),
        )
    }

    /// The store exported and replayed (see [`replay_verifies`]); the log stays in the folder
    /// as `controller.nwlog`.
    pub fn replay_verifies(&self) -> nodewright_replay::verify::VerifyOutcome {
        replay_verifies(&self.store, self.dir.path())
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.kubelet.abort();
    }
}

pub fn kubelet(control_plane: &ControlPlane, c: &Clients, delay: Duration) -> JoinHandle<()> {
    KubeletStandIn::new(
        control_plane.client(),
        Instances::new(c.ec2.clone(), CLUSTER),
        delay,
    )
    .spawn()
}

/// The cluster's live instances in EC2.
pub async fn live_instances(c: &Clients) -> Vec<Described> {
    live_instances_of(c, CLUSTER).await
}

/// The live instances of the cluster named `cluster` in EC2.
pub async fn live_instances_of(c: &Clients, cluster: &str) -> Vec<Described> {
    Instances::new(c.ec2.clone(), cluster)
        .list()
        .await
        .expect("instances")
        .into_iter()
        .filter(Described::is_live)
        .collect()
}

/// The ids of the live instances of the test's cluster, sorted.
pub async fn live_instance_ids(c: &Clients) -> Vec<String> {
    let mut ids: Vec<String> = live_instances(c)
        .await
        .into_iter()
        .map(|i| i.instance_id)
        .collect();
    ids.sort();
    ids
}

/// The instance ids the NodeClaims' statuses name (from their provider ids), sorted.
pub fn claimed_instance_ids(claims: &[NodeClaim]) -> Vec<String> {
    let mut ids: Vec<String> = claims
        .iter()
        .filter_map(|c| c.status.as_ref()?.provider_id.clone())
        .filter_map(|p| p.rsplit('/').next().map(str::to_string))
        .collect();
    ids.sort();
    ids
}

pub async fn nodeclaims(client: &kube::Client) -> Vec<NodeClaim> {
    Api::<NodeClaim>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("NodeClaims")
        .items
}

pub async fn pods(client: &kube::Client) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items
}

/// Exports the store to a portable log and replays it: every command must come out as logged.
pub fn replay_verifies(store: &Path, dir: &Path) -> nodewright_replay::verify::VerifyOutcome {
    let log: PathBuf = dir.join("controller.nwlog");
    nodewright_replay::export::export(store, &log, None, None, false).expect("exported");
    let outcome = nodewright_replay::verify_file(&log).expect("the log reads");
    assert!(
        outcome.divergence.is_none(),
        "the recorded log does not replay: {:?}",
        outcome.divergence
    );
    outcome
}

/// The node a pod runs on, once it is Running.
pub fn running_on(pod: &Pod) -> Option<String> {
    let running = pod.status.as_ref()?.phase.as_deref() == Some("Running");
    let node = pod.spec.as_ref()?.node_name.clone()?;
    running.then_some(node)
}

/// Creates pod `name` of the size given in default and waits until it runs; its node.
pub async fn running_pod_sized(
    client: &kube::Client,
    name: &str,
    cpu: &str,
    memory: &str,
) -> String {
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods_api
        .create(
            &PostParams::default(),
            &nodewright_controlplane::pause_pod(name, cpu, memory),
        )
        .await
        .expect("a pod");
    nodewright_controlplane::eventually(&format!("{name} runs"), || async {
        let pod = pods_api.get(name).await.map_err(|e| e.to_string())?;
        running_on(&pod).ok_or_else(|| format!("{:?}", pod.status))
    })
    .await
}

/// [`running_pod_sized`] of 500m and 1Gi.
pub async fn running_pod(client: &kube::Client, name: &str) -> String {
    running_pod_sized(client, name, "500m", "1Gi").await
}
