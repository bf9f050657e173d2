//! The controller's memory in a large cluster: a real control plane (etcd, kube-apiserver,
//! kube-scheduler, kube-controller-manager, kwok) with `--nodes` kwok nodes and `--pods` running
//! pods, moto for EC2, and `nodewright controller` as its own process. Once its core knows
//! every node and pod (its metrics say so), the process's peak and current resident memory
//! are read from /proc.
//!
//! ```sh
//! cargo build --release --features controller
//! cargo run --release -p nodewright-controller --example memory -- --pods 10000 --nodes 1000
//! ```
//!
//! It needs `NODEWRIGHT_MOTO_SERVER` and `NODEWRIGHT_CONTROLPLANE_BIN` as the tests do
//! (`.ci/test` sets both up).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use nodewright_aws::testing::{self, Network};
use nodewright_controlplane::{ControlPlane, pause_pod};
use nodewright_testkit::services::moto::Moto;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CLUSTER: &str = "demo";
/// Requests at once while filling the cluster.
const CONCURRENCY: usize = 32;

struct Args {
    pods: usize,
    nodes: usize,
    binary: PathBuf,
    /// A program to run the controller under (`heaptrack`, say); the figures read from /proc
    /// are then the wrapper's.
    wrap: Option<String>,
}

fn args() -> Result<Args, String> {
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let mut args = Args {
        pods: 10_000,
        nodes: 1_000,
        binary: PathBuf::from(target).join("release/nodewright"),
        wrap: None,
    };
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let value = given
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<usize>()
                .map_err(|_| format!("{flag} {value:?} is not a number"))
        };
        match flag.as_str() {
            "--pods" => args.pods = number()?,
            "--nodes" => args.nodes = number()?,
            "--binary" => args.binary = PathBuf::from(&value),
            "--wrap" => args.wrap = Some(value),
            other => {
                return Err(format!(
                    "unknown flag {other}; use --pods, --nodes, --binary, --wrap"
                ));
            }
        }
    }
    if !args.binary.exists() {
        return Err(format!(
            "{} does not exist; fix: cargo build --release --features controller, or pass --binary",
            args.binary.display()
        ));
    }
    Ok(args)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

async fn metrics(port: u16) -> String {
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return String::new();
    };
    let request = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if stream.write_all(request.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    response
}

/// Stops the controller as the kubelet would (SIGTERM), and waits for it.
fn stop(controller: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &controller.id().to_string()])
        .status();
    let _ = controller.wait();
}

/// (VmHWM, VmRSS) in KiB.
fn memory_kib(child: &Child) -> (u64, u64) {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = match args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let control_plane = ControlPlane::start_with_crds()
        .await
        .expect("a control plane");
    let moto = Moto::start();
    let aws = testing::local_clients(&moto.endpoint())
        .await
        .expect("clients");
    let network = Network::create(&aws, CLUSTER, &["us-east-1a", "us-east-1b"])
        .await
        .expect("a network");
    let client = control_plane.client();
    let nodeclass: nodewright_api::EC2NodeClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": "KarpenterNodeRole-demo",
            "amiFamily": "AL2023",
            "amiSelectorTerms": [{"id": network.ami}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}]
        }
    }))
    .expect("an EC2NodeClass");
    let nodepool: nodewright_api::NodePool = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "requirements": [],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
        }}}
    }))
    .expect("a NodePool");
    Api::<nodewright_api::EC2NodeClass>::all(client.clone())
        .create(&PostParams::default(), &nodeclass)
        .await
        .expect("created");
    Api::<nodewright_api::NodePool>::all(client.clone())
        .create(&PostParams::default(), &nodepool)
        .await
        .expect("created");

    let dir = tempfile::tempdir().expect("a folder");
    let store = dir.path().join("events.redb");
    let metrics_port = free_port();
    let mut command = match &args.wrap {
        Some(wrapper) => {
            let mut c = Command::new(wrapper);
            c.arg(&args.binary);
            c
        }
        None => Command::new(&args.binary),
    };
    let mut controller = command
        .arg("controller")
        .env("KUBECONFIG", control_plane.kubeconfig())
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("CLUSTER_NAME", CLUSTER)
        .env("KUBERNETES_VERSION", "1.33")
        .env("NODEWRIGHT_STORE", &store)
        .env("METRICS_PORT", metrics_port.to_string())
        .env("HEALTH_PROBE_PORT", free_port().to_string())
        .env("LEADER_ELECTION_NAMESPACE", "default")
        .env("LOG_LEVEL", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("the controller starts");
    // Running: it holds the lease and serves its metrics.
    loop {
        if metrics(metrics_port)
            .await
            .lines()
            .any(|l| l == "nodewright_leader 1")
        {
            break;
        }
        if let Ok(Some(status)) = controller.try_wait() {
            eprintln!("error: the controller exited: {status}");
            std::process::exit(1);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, idle) = memory_kib(&controller);
    let start = Instant::now();

    // The cluster fills up while the controller watches: kwok nodes, then pods bound to them
    // (ten per node by default), which kwok runs.
    let per_node = args.pods.div_ceil(args.nodes.max(1));
    futures::stream::iter(0..args.nodes)
        .map(|i| {
            let control_plane = &control_plane;
            async move {
                control_plane
                    .add_fake_node(
                        &format!("node-{i:05}"),
                        "16",
                        "64Gi",
                        &(per_node + 10).to_string(),
                        BTreeMap::from([(
                            "topology.kubernetes.io/zone".into(),
                            "us-east-1a".into(),
                        )]),
                    )
                    .await
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("the nodes");
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    futures::stream::iter(0..args.pods)
        .map(|i| {
            let pods_api = pods_api.clone();
            async move {
                let mut pod = pause_pod(&format!("app-{i:05}"), "100m", "128Mi");
                if let Some(spec) = pod.spec.as_mut() {
                    spec.node_name = Some(format!("node-{:05}", i % args.nodes.max(1)));
                }
                pods_api.create(&PostParams::default(), &pod).await
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("the pods");
    let filled = start.elapsed();

    // Caught up: the core knows every node and every pod as bound.
    let caught_up = loop {
        let text = metrics(metrics_port).await;
        let nodes = text
            .lines()
            .find_map(|l| l.strip_prefix("karpenter_cluster_state_node_count "))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        let bound = text
            .lines()
            .filter(|l| l.starts_with("karpenter_pods_state{") && l.contains("phase=\"Bound\""))
            .count();
        if nodes >= args.nodes && bound >= args.pods {
            break start.elapsed();
        }
        if let Ok(Some(status)) = controller.try_wait() {
            eprintln!("error: the controller exited: {status}");
            std::process::exit(1);
        }
        if start.elapsed() > Duration::from_secs(1800) {
            eprintln!(
                "error: the controller did not catch up in 30 minutes ({nodes} nodes, {bound} pods)"
            );
            let _ = controller.kill();
            std::process::exit(1);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    // Steady state: kwok's status updates settle, the gauges refresh.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let (peak, now) = memory_kib(&controller);
    let text = metrics(metrics_port).await;
    let events: f64 = text
        .lines()
        .filter(|l| l.starts_with("nodewright_events_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    let log_bytes = std::fs::metadata(&store).map(|m| m.len()).unwrap_or(0);
    stop(&mut controller);

    println!("nodes                 {}", args.nodes);
    println!("pods                  {}", args.pods);
    println!("cluster filled in     {:.1} s", filled.as_secs_f64());
    println!("core caught up after  {:.1} s", caught_up.as_secs_f64());
    println!("events handled        {events}");
    println!(
        "event store           {:.1} MiB",
        log_bytes as f64 / (1024.0 * 1024.0)
    );
    println!("resident at start     {:.1} MiB", mib(idle));
    println!("resident now          {:.1} MiB", mib(now));
    println!("resident peak (HWM)   {:.1} MiB", mib(peak));
}
