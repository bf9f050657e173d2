//! A real Kubernetes control plane for nodewright's tests: etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler and kwok, started as local processes on free
//! loopback ports, with fake nodes that kwok keeps Ready and whose pods it marks Running.
//!
//! A test starts one, talks to it through [`ControlPlane::client`] (or `kubectl
//! --kubeconfig` on [`ControlPlane::kubeconfig`]), adds nodes with
//! [`ControlPlane::add_fake_node`], and drops it at the end:
//!
//! ```no_run
//! # async fn example() -> Result<(), nodewright_controlplane::Error> {
//! use std::collections::BTreeMap;
//! use nodewright_controlplane::ControlPlane;
//!
//! let control_plane = ControlPlane::start().await?;
//! control_plane
//!     .add_fake_node("node-1", "4", "16Gi", "110", BTreeMap::new())
//!     .await?;
//! let client = control_plane.client();
//! // ... create workloads with `client`, poll for what the controllers did ...
//! # Ok(())
//! # }
//! ```
//!
//! The binaries come from the folder in `NODEWRIGHT_CONTROLPLANE_BIN` when it is set, else
//! from `testkit/controlplane/build.sh`, which builds them from Go modules once (minutes) and
//! then answers at once. Each control plane lives in its own temporary folder (certificates,
//! kubeconfigs, etcd's data, one log per process) and uses its own ports, so tests may run
//! several at the same time. Dropping it kills the processes; if the thread is panicking
//! (a failed assertion) the folder is kept and its path and the end of every log are printed,
//! so tests should fail by panicking (`expect`, `assert!`) rather than by returning `Err`.

mod binaries;
mod crds;
mod error;
mod kubeconfig;
#[cfg(feature = "kubelet")]
pub mod kubelet;
mod pki;
mod process;
mod toxiproxy;
mod wait;
mod workload;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, NodeStatus, ServiceAccount};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

pub use binaries::BIN_ENV;

/// The helm binary built beside the control plane (for the chart's tests).
pub async fn helm() -> Result<std::path::PathBuf, Error> {
    Ok(binaries::locate().await?.path(binaries::HELM))
}
pub use error::Error;
pub use toxiproxy::{Toxic, Toxiproxy};
pub use wait::eventually;
pub use workload::{pause_pod, pause_pod_spec};

use binaries::{Binaries, ETCD, KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER, KWOK};
use kubeconfig::Identity;
use process::{Process, Processes, TAIL_LINES};

/// The annotation kwok's `--manage-nodes-with-annotation-selector` selects: only nodes
/// carrying it are simulated.
pub const FAKE_NODE_ANNOTATION: (&str, &str) = ("kwok.x-k8s.io/node", "fake");
/// The label every fake node carries.
pub const FAKE_NODE_LABEL: (&str, &str) = ("type", "kwok");

/// How long etcd may take to answer `/health`.
/// How many times a start is tried when a port it chose was taken before a component bound it.
const PORT_ATTEMPTS: u32 = 3;
const ETCD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long kube-apiserver may take to answer `/readyz` with `ok`.
const APISERVER_TIMEOUT: Duration = Duration::from_secs(60);
/// How long kube-controller-manager may take to create the `default` ServiceAccount.
const CONTROLLERS_TIMEOUT: Duration = Duration::from_secs(60);
/// Pause between readiness checks.
const POLL: Duration = Duration::from_millis(200);

/// A running control plane; see the crate documentation.
pub struct ControlPlane {
    client: kube::Client,
    server_url: String,
    kubeconfig: PathBuf,
    ca_cert: PathBuf,
    log_dir: PathBuf,
    processes: Processes,
    /// `None` only during drop.
    dir: Option<tempfile::TempDir>,
}

impl fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlPlane")
            .field("server_url", &self.server_url)
            .field("kubeconfig", &self.kubeconfig)
            .field("log_dir", &self.log_dir)
            .finish_non_exhaustive()
    }
}

/// What [`start_in`] hands back when every component is up.
struct Started {
    client: kube::Client,
    server_url: String,
    kubeconfig: PathBuf,
    ca_cert: PathBuf,
}

impl ControlPlane {
    /// Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, and
    /// returns once the API server is ready and the controllers work (the `default`
    /// ServiceAccount exists). Takes a few seconds once the binaries are built.
    ///
    /// On failure the processes are stopped and the temporary folder is kept; the error
    /// names the failed step and shows the end of the relevant log.
    pub async fn start() -> Result<ControlPlane, Error> {
        let binaries = binaries::locate().await?;
        let mut attempt = 1;
        loop {
            match ControlPlane::start_once(&binaries).await {
                // The ports are chosen free, then released for the components to bind: a
                // connection another process opened meanwhile may have taken one. New ports.
                Err(e) if e.is_port_taken() && attempt < PORT_ATTEMPTS => {
                    eprintln!(
                        "nodewright-controlplane: {e}\nnodewright-controlplane: a port was taken meanwhile; starting again on other ports"
                    );
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    /// One start, on ports free when it begins.
    async fn start_once(binaries: &Binaries) -> Result<ControlPlane, Error> {
        let dir = tempfile::Builder::new()
            .prefix("nodewright-controlplane-")
            .tempdir()
            .map_err(error::io("create a temporary folder for the control plane"))?;
        let log_dir = dir.path().join("logs");
        std::fs::create_dir(&log_dir)
            .map_err(error::io(format!("create {}", log_dir.display())))?;

        let mut processes = Processes::default();
        match start_in(binaries, dir.path(), &log_dir, &mut processes).await {
            Ok(started) => Ok(ControlPlane {
                client: started.client,
                server_url: started.server_url,
                kubeconfig: started.kubeconfig,
                ca_cert: started.ca_cert,
                log_dir,
                processes,
                dir: Some(dir),
            }),
            Err(e) => {
                processes.stop_all();
                if !processes.0.is_empty() {
                    // The error points into the logs: keep them.
                    let kept = dir.keep();
                    eprintln!(
                        "nodewright-controlplane: start failed; its files are kept in {}",
                        kept.display()
                    );
                }
                Err(e)
            }
        }
    }

    /// A client authenticated as `admin` (group `system:masters`).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// A kubeconfig file with the CA and the admin token, for `kubectl --kubeconfig`.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Writes a kubeconfig that authenticates with the bearer `token` (a ServiceAccount's,
    /// from the TokenRequest API) and returns its path: what a process run as that
    /// ServiceAccount reads, so that it has the rights RBAC grants it and no more.
    pub fn kubeconfig_with_token(&self, name: &str, token: &str) -> Result<PathBuf, Error> {
        let dir = self
            .dir
            .as_ref()
            .map_or(self.log_dir.as_path(), |d| d.path());
        let path = dir.join(format!("{name}.kubeconfig"));
        let identity = Identity {
            user: name.to_owned(),
            token: token.to_owned(),
        };
        kubeconfig::write_kubeconfig(&path, &self.server_url, &self.ca_cert, &identity)?;
        Ok(path)
    }

    /// The cluster-admin client configuration (for a client built with other settings).
    pub async fn config(&self) -> Result<kube::Config, Error> {
        kubeconfig::config(&self.kubeconfig).await
    }

    /// kube-apiserver's address, `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> String {
        self.server_url.clone()
    }

    /// Pauses a component (`kube-apiserver`, `etcd`, ...) with SIGSTOP: it keeps its
    /// connections open and answers nothing, as a machine that hangs does, until
    /// [`ControlPlane::resume`].
    pub fn pause(&self, component: &str) -> Result<(), Error> {
        self.signal(component, "-STOP")
    }

    /// Resumes a component [`ControlPlane::pause`] paused (SIGCONT).
    pub fn resume(&self, component: &str) -> Result<(), Error> {
        self.signal(component, "-CONT")
    }

    fn signal(&self, component: &str, signal: &str) -> Result<(), Error> {
        let pid = self
            .processes
            .0
            .iter()
            .find(|p| p.name == component)
            .and_then(|p| p.id())
            .ok_or_else(|| {
                error::io(format!("signal {component}"))(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{component} is not running"),
                ))
            })?;
        let status = std::process::Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .map_err(error::io(format!("send {signal} to {component}")))?;
        if status.success() {
            Ok(())
        } else {
            Err(error::io(format!("send {signal} to {component}"))(
                std::io::Error::other(format!("kill exited with {status}")),
            ))
        }
    }

    /// The folder holding one log file per process (`etcd.log`, `kube-apiserver.log`, ...).
    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }

    /// Creates a Node that kwok simulates: annotated `kwok.x-k8s.io/node: fake`, labelled
    /// `type: kwok` plus `labels`, with capacity and allocatable `cpu`, `memory` and `pods`
    /// (Kubernetes quantities such as `"4"`, `"16Gi"`, `"110"`). kwok then marks it Ready and
    /// kube-controller-manager removes its `node.kubernetes.io/not-ready` taint, within a few
    /// seconds; the returned Node is as created, not yet Ready.
    pub async fn add_fake_node(
        &self,
        name: &str,
        cpu: &str,
        memory: &str,
        pods: &str,
        labels: BTreeMap<String, String>,
    ) -> Result<Node, Error> {
        let mut all_labels =
            BTreeMap::from([(FAKE_NODE_LABEL.0.to_owned(), FAKE_NODE_LABEL.1.to_owned())]);
        all_labels.extend(labels);
        let resources = BTreeMap::from([
            ("cpu".to_owned(), Quantity(cpu.to_owned())),
            ("memory".to_owned(), Quantity(memory.to_owned())),
            ("pods".to_owned(), Quantity(pods.to_owned())),
        ]);
        let node = Node {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(all_labels),
                annotations: Some(BTreeMap::from([(
                    FAKE_NODE_ANNOTATION.0.to_owned(),
                    FAKE_NODE_ANNOTATION.1.to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(NodeStatus {
                capacity: Some(resources.clone()),
                allocatable: Some(resources),
                ..NodeStatus::default()
            }),
        };
        Api::<Node>::all(self.client())
            .create(&PostParams::default(), &node)
            .await
            .map_err(|source| Error::Api {
                action: format!("create the fake node {name}"),
                source,
            })
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.processes.stop_all();
        let Some(dir) = self.dir.take() else {
            return;
        };
        if !std::thread::panicking() {
            return; // `dir` is deleted here.
        }
        let kept = dir.keep();
        eprintln!(
            "nodewright-controlplane: the test panicked; the control plane's files are kept in {}",
            kept.display()
        );
        for process in &self.processes.0 {
            eprintln!(
                "---- last {TAIL_LINES} lines of {} ----\n{}",
                process.log.display(),
                process::tail(&process.log, TAIL_LINES)
            );
        }
        eprintln!("---- end of the control plane's logs ----");
    }
}

/// Starts every component in `dir`, pushing each process onto `processes` as it starts so
/// the caller stops them all whatever happens.
async fn start_in(
    binaries: &Binaries,
    dir: &Path,
    log_dir: &Path,
    processes: &mut Processes,
) -> Result<Started, Error> {
    let [etcd_client_port, etcd_peer_port, apiserver_port] = process::free_ports::<3>()?;
    let pki = pki::generate(&dir.join("pki"))?;

    let admin = Identity::new("admin");
    let controller_manager = Identity::new("system:kube-controller-manager");
    let scheduler = Identity::new("system:kube-scheduler");
    let kwok = Identity::new("kwok");
    let token_file = dir.join("tokens.csv");
    kubeconfig::write_token_file(
        &token_file,
        &[&admin, &controller_manager, &scheduler, &kwok],
    )?;

    let server_url = format!("https://127.0.0.1:{apiserver_port}");
    let kubeconfig_for = |identity: &Identity, file: &str| -> Result<PathBuf, Error> {
        let path = dir.join(file);
        kubeconfig::write_kubeconfig(&path, &server_url, &pki.ca_cert, identity)?;
        Ok(path)
    };
    let admin_kubeconfig = kubeconfig_for(&admin, "admin.kubeconfig")?;
    let controller_manager_kubeconfig =
        kubeconfig_for(&controller_manager, "kube-controller-manager.kubeconfig")?;
    let scheduler_kubeconfig = kubeconfig_for(&scheduler, "kube-scheduler.kubeconfig")?;
    let kwok_kubeconfig = kubeconfig_for(&kwok, "kwok.kubeconfig")?;
    let scheduler_config = dir.join("kube-scheduler.yaml");
    kubeconfig::write_scheduler_config(&scheduler_config, &scheduler_kubeconfig)?;

    let spawn = |processes: &mut Processes, name: &'static str, args: Vec<String>| {
        let process = Process::spawn(name, &binaries.path(name), &args, dir, log_dir)?;
        processes.0.push(process);
        Ok::<(), Error>(())
    };
    let path = |p: &Path| p.to_string_lossy().into_owned();

    // 1. etcd: a single member, fsync off (its data is thrown away).
    let etcd_client_url = format!("http://127.0.0.1:{etcd_client_port}");
    let etcd_peer_url = format!("http://127.0.0.1:{etcd_peer_port}");
    spawn(
        processes,
        ETCD,
        vec![
            "--name=controlplane".to_owned(),
            format!("--data-dir={}", path(&dir.join("etcd-data"))),
            format!("--listen-client-urls={etcd_client_url}"),
            format!("--advertise-client-urls={etcd_client_url}"),
            format!("--listen-peer-urls={etcd_peer_url}"),
            format!("--initial-advertise-peer-urls={etcd_peer_url}"),
            format!("--initial-cluster=controlplane={etcd_peer_url}"),
            "--unsafe-no-fsync=true".to_owned(),
        ],
    )?;
    wait_until(
        processes,
        ETCD,
        "waiting for etcd's /health",
        ETCD_TIMEOUT,
        || etcd_health(etcd_client_port),
    )
    .await?;

    // 2. kube-apiserver.
    let service_account_key = path(&pki.service_account_key);
    spawn(
        processes,
        KUBE_APISERVER,
        vec![
            format!("--etcd-servers={etcd_client_url}"),
            "--bind-address=127.0.0.1".to_owned(),
            "--advertise-address=127.0.0.1".to_owned(),
            format!("--secure-port={apiserver_port}"),
            format!("--cert-dir={}", path(&dir.join("apiserver-certs"))),
            format!("--tls-cert-file={}", path(&pki.serving_cert)),
            format!("--tls-private-key-file={}", path(&pki.serving_key)),
            format!("--client-ca-file={}", path(&pki.ca_cert)),
            format!("--token-auth-file={}", path(&token_file)),
            "--authorization-mode=RBAC".to_owned(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
            format!(
                "--service-account-key-file={}",
                path(&pki.service_account_public_key)
            ),
            format!("--service-account-signing-key-file={service_account_key}"),
            format!(
                "--service-cluster-ip-range={}",
                pki::SERVICE_CLUSTER_IP_RANGE
            ),
            // The `kubernetes` Endpoints may not hold a loopback address: skip writing them.
            "--endpoint-reconciler-type=none".to_owned(),
            "--profiling=false".to_owned(),
        ],
    )?;
    let client = kubeconfig::client(&admin_kubeconfig).await?;
    wait_until(
        processes,
        KUBE_APISERVER,
        "waiting for kube-apiserver's /readyz",
        APISERVER_TIMEOUT,
        || apiserver_ready(&client),
    )
    .await?;

    // 3.-5. The controllers, the scheduler and kwok, none serving anything.
    spawn(
        processes,
        KUBE_CONTROLLER_MANAGER,
        vec![
            format!("--kubeconfig={}", path(&controller_manager_kubeconfig)),
            format!("--service-account-private-key-file={service_account_key}"),
            format!("--root-ca-file={}", path(&pki.ca_cert)),
            "--leader-elect=false".to_owned(),
            "--secure-port=0".to_owned(),
            "--profiling=false".to_owned(),
        ],
    )?;
    spawn(
        processes,
        KUBE_SCHEDULER,
        vec![
            format!("--config={}", path(&scheduler_config)),
            "--secure-port=0".to_owned(),
            "--profiling=false".to_owned(),
        ],
    )?;
    let mut kwok_args = vec![
        format!("--kubeconfig={}", path(&kwok_kubeconfig)),
        "--manage-all-nodes=false".to_owned(),
        format!(
            "--manage-nodes-with-annotation-selector={}={}",
            FAKE_NODE_ANNOTATION.0, FAKE_NODE_ANNOTATION.1
        ),
    ];
    kwok_args.extend(
        binaries
            .stages
            .iter()
            .map(|stage| format!("--config={}", path(stage))),
    );
    spawn(processes, KWOK, kwok_args)?;

    // kube-controller-manager's serviceaccount controller creates `default/default`.
    let service_accounts = Api::<ServiceAccount>::namespaced(client.clone(), "default");
    wait_until(
        processes,
        KUBE_CONTROLLER_MANAGER,
        "waiting for the default ServiceAccount (kube-controller-manager)",
        CONTROLLERS_TIMEOUT,
        || async {
            match service_accounts.get_opt("default").await {
                Ok(Some(_)) => Ok(()),
                Ok(None) => Err("default/default does not exist yet".to_owned()),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await?;
    processes.ensure_running("starting the control plane")?;

    Ok(Started {
        client,
        server_url,
        kubeconfig: admin_kubeconfig,
        ca_cert: pki.ca_cert.clone(),
    })
}

/// Polls `check` until it succeeds, failing early if any process exits and after `timeout`
/// with the last problem and the log of the process named `subject`.
async fn wait_until<F, Fut>(
    processes: &mut Processes,
    subject: &'static str,
    step: &'static str,
    timeout: Duration,
    mut check: F,
) -> Result<(), Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        processes.ensure_running(step)?;
        let problem = match tokio::time::timeout(POLL * 10, check()).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(problem)) => problem,
            Err(_) => format!("the check took over {:?}", POLL * 10),
        };
        if Instant::now() >= deadline {
            return Err(processes.not_ready(subject, step, timeout, problem));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Whether etcd answers `GET /health` with `"health":"true"`.
async fn etcd_health(port: u16) -> Result<(), String> {
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let mut stream = std::net::TcpStream::connect_timeout(&address, Duration::from_secs(1))
            .map_err(|e| format!("connecting to {address}: {e}"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .map_err(|e| e.to_string())?;
        stream
            .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .map_err(|e| format!("sending GET /health: {e}"))?;
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .map_err(|e| format!("reading the answer to GET /health: {e}"))?;
        if response.contains(r#""health":"true""#) {
            Ok(())
        } else {
            Err(format!("GET /health answered {response:?}"))
        }
    })
    .await
    .map_err(|e| format!("the health check thread failed: {e}"))?
}

/// Whether kube-apiserver answers `GET /readyz` with `ok`.
async fn apiserver_ready(client: &kube::Client) -> Result<(), String> {
    let mut request = http::Request::new(Vec::new());
    *request.uri_mut() = http::Uri::from_static("/readyz");
    match client.request_text(request).await {
        Ok(body) if body.trim() == "ok" => Ok(()),
        Ok(body) => Err(format!("GET /readyz answered {body:?}")),
        Err(e) => Err(format!("GET /readyz: {e}")),
    }
}
