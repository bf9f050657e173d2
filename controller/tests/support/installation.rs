//! nodewright installed as a user installs it: `helm install` of `charts/nodewright` into the
//! test cluster, the guide's NodePool and EC2NodeClass applied, and the chart's pods run as
//! processes — the `nodewright` binary with the environment and arguments of the Deployment
//! the chart created, authenticated as the chart's ServiceAccount (so RBAC grants it what the
//! chart grants, no more), each pod's store in a folder standing for its volume.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use nodewright_api::{EC2NodeClass, NodePool};
use nodewright_aws::Clients;
use nodewright_aws::instances::{Described, Instances};
use nodewright_aws::testing::Network;
use nodewright_controlplane::ControlPlane;
use nodewright_controlplane::kubelet::KubeletStandIn;
use nodewright_testkit::services::moto::Moto;
use tokio::task::JoinHandle;

use super::{clients, free_address};

/// The guide's cluster name (`scenarios/tutorial/*.yaml` are written for it).
pub const GUIDE_CLUSTER: &str = "nodewright-demo";

/// Where the chart is installed.
pub const NAMESPACE: &str = "nodewright";

/// The release name; the chart's objects are named after it.
pub const RELEASE: &str = "nodewright";

pub fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/nodewright")
}

fn tutorial(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios/tutorial")
        .join(file)
}

/// Runs the helm built beside the test control plane, with no user configuration or cache.
pub async fn helm(args: &[&str]) -> Output {
    let helm = nodewright_controlplane::helm()
        .await
        .expect("the helm binary");
    let home = tempfile::tempdir().expect("a folder");
    Command::new(helm)
        .args(args)
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .output()
        .expect("helm runs")
}

pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The `nodewright` binary of this build, with the `controller` feature (the workspace's test
/// command builds it beside the test binaries), or `NODEWRIGHT_BIN`.
pub fn nodewright_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("NODEWRIGHT_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test> → target/<profile>/nodewright
    let binary = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join(format!("nodewright{}", std::env::consts::EXE_SUFFIX)))
        .expect("the build folder");
    assert!(
        binary.exists(),
        "{} does not exist; fix: build it with `cargo build --features controller` (the README's \
         test command builds it), or point NODEWRIGHT_BIN at one",
        binary.display()
    );
    // A plain `cargo build` leaves a binary without the controller in the same place.
    let has_controller = Command::new(&binary)
        .args(["controller", "--help"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        has_controller,
        "{} was built without the `controller` feature; fix: cargo build --features controller",
        binary.display()
    );
    binary
}

/// A cluster with nodewright installed by its chart: an empty control plane (the chart brings
/// the CRDs), moto with the guide's discoverable network, the kubelet stand-in, and the chart
/// installed with `values` (`key=value`, as `helm --set` takes them).
pub struct Installation {
    pub control_plane: ControlPlane,
    pub moto: Moto,
    pub aws: Clients,
    pub client: kube::Client,
    pub network: Network,
    /// Holds the store (the chart's volume) and the processes' logs.
    pub dir: tempfile::TempDir,
    /// The chart's Deployment, as the API server holds it.
    pub deployment: Deployment,
    /// A kubeconfig authenticating as the chart's ServiceAccount.
    kubeconfig: PathBuf,
    kubelet: JoinHandle<()>,
    /// Bearer tokens of ServiceAccounts bound to the chart's `<release>-log-reader`, to its
    /// `<release>-log-reader-redacted`, and to nothing.
    pub log_reader: String,
    pub redacted_log_reader: String,
    pub stranger: String,
}

/// A token of ServiceAccount `name` (created in [`NAMESPACE`]), bound to `cluster_role` if
/// given.
async fn token_of(client: &kube::Client, name: &str, cluster_role: Option<&str>) -> String {
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE);
    let mut account = ServiceAccount::default();
    account.metadata.name = Some(name.to_owned());
    accounts
        .create(&PostParams::default(), &account)
        .await
        .expect("a ServiceAccount");
    if let Some(role) = cluster_role {
        let mut binding = ClusterRoleBinding {
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: role.into(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: name.into(),
                namespace: Some(NAMESPACE.into()),
                ..Subject::default()
            }]),
            ..ClusterRoleBinding::default()
        };
        binding.metadata.name = Some(format!("{name}-binding"));
        Api::<ClusterRoleBinding>::all(client.clone())
            .create(&PostParams::default(), &binding)
            .await
            .expect("a ClusterRoleBinding");
    }
    token_request(client, name).await
}

/// An hour's token of ServiceAccount `name` in [`NAMESPACE`] (the TokenRequest API).
async fn token_request(client: &kube::Client, name: &str) -> String {
    Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
        .create_token_request(
            name,
            &PostParams::default(),
            &TokenRequest {
                spec: TokenRequestSpec {
                    audiences: vec![],
                    expiration_seconds: Some(3600),
                    ..TokenRequestSpec::default()
                },
                ..TokenRequest::default()
            },
        )
        .await
        .unwrap_or_else(|e| panic!("a token of {name}: {e}"))
        .status
        .expect("the token")
        .token
}

impl Installation {
    pub async fn new(values: &[&str]) -> Installation {
        let control_plane = ControlPlane::start().await.expect("a control plane");
        let moto = Moto::start();
        let aws = clients(&moto).await;
        let network = Network::create(&aws, GUIDE_CLUSTER, &["us-east-1a", "us-east-1b"])
            .await
            .expect("a network");
        let client = control_plane.client();

        let chart = chart();
        let kubeconfig = control_plane.kubeconfig().to_string_lossy().into_owned();
        let mut args = vec![
            "install",
            RELEASE,
            chart.to_str().expect("a UTF-8 path"),
            "--kubeconfig",
            &kubeconfig,
            "--namespace",
            NAMESPACE,
            "--create-namespace",
            "--set",
            "settings.clusterName=nodewright-demo",
        ];
        for value in values {
            args.extend(["--set", value]);
        }
        let out = helm(&args).await;
        assert!(out.status.success(), "helm install: {}", text(&out));
        assert!(text(&out).contains("STATUS: deployed"), "{}", text(&out));

        let deployment = Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
            .get(RELEASE)
            .await
            .expect("the chart's Deployment");
        let service_account = deployment
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|s| s.service_account_name.clone())
            .expect("the pod's ServiceAccount");
        let token = token_request(&client, &service_account).await;
        let kubeconfig = control_plane
            .kubeconfig_with_token(&service_account, &token)
            .expect("a kubeconfig for the ServiceAccount");
        let kubelet = KubeletStandIn::new(
            control_plane.client(),
            Instances::new(aws.ec2.clone(), GUIDE_CLUSTER),
            Duration::from_secs(1),
        )
        .spawn();
        let log_reader = token_of(&client, "log-reader", Some("nodewright-log-reader")).await;
        let redacted_log_reader = token_of(
            &client,
            "redacted-log-reader",
            Some("nodewright-log-reader-redacted"),
        )
        .await;
        let stranger = token_of(&client, "stranger", None).await;
        Installation {
            log_reader,
            redacted_log_reader,
            stranger,
            control_plane,
            moto,
            aws,
            client,
            network,
            dir: tempfile::tempdir().expect("a folder"),
            deployment,
            kubeconfig,
            kubelet,
        }
    }

    /// The guide's EC2NodeClass (its AMI id replaced by one moto lists, as the guide fills in
    /// `${AMD_AMI_ID}`) and NodePool, with `pool` changing the NodePool's JSON first.
    pub async fn apply_tutorial(&self, pool: impl FnOnce(&mut serde_json::Value)) {
        let class = std::fs::read_to_string(tutorial("ec2nodeclass.yaml"))
            .expect("the tutorial's EC2NodeClass")
            .replace("ami-0a1b2c3d4e5f67890", &self.network.ami);
        let class: EC2NodeClass = serde_saphyr::from_str(&class).expect("an EC2NodeClass");
        let mut nodepool: serde_json::Value = serde_saphyr::from_str(
            &std::fs::read_to_string(tutorial("nodepool.yaml")).expect("the tutorial's NodePool"),
        )
        .expect("a NodePool");
        pool(&mut nodepool);
        let nodepool: NodePool = serde_json::from_value(nodepool).expect("a NodePool");
        // The chart's CRDs must be established before their objects can be made.
        let class = nodewright_controlplane::eventually("the EC2NodeClass is accepted", || {
            let class = class.clone();
            async move {
                Api::<EC2NodeClass>::all(self.client.clone())
                    .create(&PostParams::default(), &class)
                    .await
                    .map_err(|e| e.to_string())
            }
        })
        .await;
        assert_eq!(class.metadata.name.as_deref(), Some("default"));
        Api::<NodePool>::all(self.client.clone())
            .create(&PostParams::default(), &nodepool)
            .await
            .expect("the NodePool");
    }

    /// The guide's `inflate` Deployment (zero replicas) in namespace default.
    pub async fn create_inflate(&self) {
        let inflate: Deployment = serde_saphyr::from_str(
            &std::fs::read_to_string(tutorial("inflate.yaml")).expect("the tutorial's inflate"),
        )
        .expect("a Deployment");
        Api::<Deployment>::namespaced(self.client.clone(), "default")
            .create(&PostParams::default(), &inflate)
            .await
            .expect("inflate");
    }

    /// `kubectl scale deployment inflate --replicas N`.
    pub async fn scale_inflate(&self, replicas: i32) {
        Api::<Deployment>::namespaced(self.client.clone(), "default")
            .patch(
                "inflate",
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"replicas": replicas}})),
            )
            .await
            .expect("scaled");
    }

    /// The guide cluster's live instances in EC2.
    pub async fn live_instances(&self) -> Vec<Described> {
        super::live_instances_of(&self.aws, GUIDE_CLUSTER).await
    }

    /// The ids of [`Installation::live_instances`].
    pub async fn live_instance_ids(&self) -> std::collections::BTreeSet<String> {
        self.live_instances()
            .await
            .into_iter()
            .map(|i| i.instance_id)
            .collect()
    }

    /// The store of the chart's pod `pod`, in the folder standing for that pod's volume (each
    /// replica has its own).
    pub fn store_of(&self, pod: &str) -> PathBuf {
        self.dir
            .path()
            .join(format!("volume-{pod}"))
            .join("events.redb")
    }

    /// One of the chart's pods, `name`, run as a process.
    pub fn pod(&self, name: &str) -> ChartPod {
        ChartPod::start(self, name)
    }

    /// The store of pod `pod` exported and replayed with `--verify` (see
    /// [`super::replay_verifies`]).
    pub fn replay_verifies(&self, pod: &str) -> nodewright_replay::verify::VerifyOutcome {
        super::replay_verifies(&self.store_of(pod), self.dir.path())
    }
}

impl Drop for Installation {
    fn drop(&mut self) {
        self.kubelet.abort();
    }
}

/// One of the chart's pods as a process: what the kubelet would run, given the pod's
/// environment (field references resolved), its ServiceAccount's token, its volume, and the
/// cloud credentials IRSA would provide (moto's endpoint and test keys).
pub struct ChartPod {
    pub name: String,
    pub metrics: std::net::SocketAddr,
    pub health: std::net::SocketAddr,
    /// Where it serves `/log`, and the token it is asked with by [`ChartPod::log`].
    pub log_address: std::net::SocketAddr,
    log_token: String,
    pub log: PathBuf,
    /// `None` once stopped or killed.
    child: Option<Child>,
}

impl ChartPod {
    fn start(installation: &Installation, name: &str) -> ChartPod {
        let pod = installation
            .deployment
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("the pod template");
        let container = &pod.containers[0];
        let mount = container
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == "store")
            .expect("the store's mount")
            .mount_path
            .clone();
        let volume = installation.dir.path().join(format!("volume-{name}"));
        std::fs::create_dir_all(&volume).expect("the volume's folder");
        // Each pod has a network of its own in a cluster; here they share the host's.
        let (metrics, health, log_address) = (free_address(), free_address(), free_address());
        let mut command = Command::new(nodewright_binary());
        command.env_clear();
        for var in container.env.iter().flatten() {
            let value = match (&var.value, &var.value_from) {
                (Some(value), _) => value.clone(),
                (None, Some(from)) => {
                    match from.field_ref.as_ref().map(|f| f.field_path.as_str()) {
                        Some("metadata.name") => name.to_owned(),
                        Some("metadata.namespace") => NAMESPACE.to_owned(),
                        other => panic!(
                            "{}: a field reference the test does not resolve: {other:?}",
                            var.name
                        ),
                    }
                }
                (None, None) => String::new(),
            };
            let value = match var.name.as_str() {
                "NODEWRIGHT_STORE" => value.replacen(&mount, &volume.to_string_lossy(), 1),
                "METRICS_PORT" => metrics.port().to_string(),
                "HEALTH_PROBE_PORT" => health.port().to_string(),
                "LOG_PORT" => log_address.port().to_string(),
                _ => value,
            };
            command.env(&var.name, value);
        }
        let moto = installation.moto.endpoint();
        command
            .env("KUBECONFIG", &installation.kubeconfig)
            .env("AWS_ENDPOINT_URL", &moto)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .args(container.args.iter().flatten());
        let log = installation.dir.path().join(format!("{name}.log"));
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("the pod's log"))
            .spawn()
            .expect("nodewright starts");
        ChartPod {
            name: name.to_owned(),
            metrics,
            health,
            log_address,
            log_token: installation.log_reader.clone(),
            log,
            child: Some(child),
        }
    }

    /// `GET /log?<query>` on its log port, as a reader of the whole log: the status and the
    /// body.
    pub async fn log(&self, query: &str) -> (u16, Vec<u8>) {
        self.log_as(Some(&self.log_token), query).await
    }

    /// `GET /log?<query>` with bearer `token` (none: no `Authorization` header).
    pub async fn log_as(&self, token: Option<&str>, query: &str) -> (u16, Vec<u8>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(self.log_address)
            .await
            .expect("the log port answers");
        let authorization = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let request =
            format!("GET /log?{query} HTTP/1.0\r\nHost: localhost\r\n{authorization}\r\n");
        stream.write_all(request.as_bytes()).await.expect("sent");
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.expect("read");
        let end = response
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("an HTTP answer");
        let head = String::from_utf8_lossy(&response[..end]).into_owned();
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("a status");
        (status, response[end + 4..].to_vec())
    }

    /// SIGTERM, as the kubelet stops a pod, and its exit code.
    pub async fn stop(mut self) -> Option<i32> {
        let mut child = self.child.take().expect("running");
        let pid = child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .expect("joined")
            .expect("the pod's exit");
        status.code()
    }

    /// SIGKILL: nothing after this point is done.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The end of its log.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl super::Served for ChartPod {
    fn metrics_address(&self) -> std::net::SocketAddr {
        self.metrics
    }

    fn health_address(&self) -> std::net::SocketAddr {
        self.health
    }
}

impl Drop for ChartPod {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- the end of {}'s log ----\n{}",
                self.name,
                self.log_tail()
            );
        }
        self.kill();
    }
}

/// The records of the log exported by [`Installation::replay_verifies`], in order.
pub fn recorded(installation: &Installation) -> Vec<nodewright_adapters::eventlog::LogRecord> {
    use nodewright_adapters::eventlog::{LogHeader, LogRecord, NwlogReader};
    let path = installation.dir.path().join("controller.nwlog");
    let mut reader: NwlogReader<LogHeader, LogRecord, _> =
        NwlogReader::open(&path).expect("the exported log");
    let mut records = Vec::new();
    while let Some(entry) = reader.next_entry() {
        records.push(entry.expect("a record").record);
    }
    records
}

impl Installation {
    /// Writes the store of pod `pod` from the portable log `nwlog`, record by record, as the
    /// controller that wrote that log would have left it.
    pub fn store_from(&self, pod: &str, nwlog: &Path) -> u64 {
        use nodewright_adapters::eventlog::{LogHeader, LogRecord, NwlogReader, RedbStore};
        let mut reader: NwlogReader<LogHeader, LogRecord, _> =
            NwlogReader::open(nwlog).expect("the log");
        let store = self.store_of(pod);
        std::fs::create_dir_all(store.parent().expect("the volume")).expect("the volume");
        let mut out: RedbStore<LogHeader, LogRecord> =
            RedbStore::create(&store, reader.header()).expect("a store");
        let mut records = Vec::new();
        while let Some(entry) = reader.next_entry() {
            records.push(entry.expect("a record").record);
        }
        out.append(&records).expect("appended");
        records.len() as u64
    }
}
