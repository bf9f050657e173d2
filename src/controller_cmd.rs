//! `nodewright controller`: its flags and environment (Karpenter's names where Karpenter has
//! one), JSON logs, and a graceful stop on SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use nodewright_controller::leadership::LeaderElection;
use nodewright_controller::settings::{LogSegments, SettingError, parse_feature_gates};
use nodewright_controller::{Connections, Settings};
use nodewright_core::config::LostWork;

/// The controller's settings; every flag can be given in the environment instead.
#[derive(clap::Args)]
pub struct ControllerArgs {
    /// The cluster's name: instances are tagged with it and launch tokens are scoped by it.
    #[arg(long, env = "CLUSTER_NAME")]
    cluster_name: String,
    /// The API server's URL that new nodes join.
    #[arg(long, env = "CLUSTER_ENDPOINT", default_value = "")]
    cluster_endpoint: String,
    /// The cluster's CA bundle (base64 PEM), for the nodes' bootstrap.
    #[arg(long, env = "CLUSTER_CA_BUNDLE", default_value = "")]
    cluster_ca_bundle: String,
    /// The cluster's service CIDR, for the nodes' cluster DNS address.
    #[arg(long, env = "SERVICE_CIDR", default_value = "10.100.0.0/16")]
    service_cidr: String,
    /// The SQS queue of interruption events (EventBridge rules feed it).
    #[arg(long, env = "INTERRUPTION_QUEUE")]
    interruption_queue: Option<String>,
    /// A batch of pending pods closes this long after the last one arrived.
    #[arg(long, env = "BATCH_IDLE_DURATION", default_value = "1s", value_parser = humantime::parse_duration)]
    batch_idle_duration: Duration,
    /// ... and at most this long after it opened.
    #[arg(long, env = "BATCH_MAX_DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    batch_max_duration: Duration,
    /// How long the machines of one decision that hold spreading pods wait for each other
    /// before pods may land on them (`0s`: not at all, as Karpenter). Read when the event
    /// store is created: a store keeps the setting it was written with.
    #[arg(long, env = "SIBLING_HOLD_DURATION", default_value = "2m", value_parser = humantime::parse_duration)]
    sibling_hold_duration: Duration,
    /// Whether consolidation counts the work an eviction throws away — a Job's pod starts
    /// over — beside the restart, and the saving of moving Jobs' pods no longer than they have
    /// run (`false`: only the restart, as Karpenter). Read when the event store is created.
    #[arg(long, env = "COUNT_LOST_WORK", default_value_t = true, action = clap::ArgAction::Set)]
    count_lost_work: bool,
    /// Whether that counts every pod no ReplicaSet, StatefulSet or ReplicationController makes
    /// again too: one no controller owns (whoever made it runs it again), a workflow's or CI
    /// runner's (`false`: only its restart, as Karpenter). Read when the event store is created.
    #[arg(long, env = "COUNT_LOST_WORK_OF_UNREPLICATED_PODS", default_value_t = true, action = clap::ArgAction::Set)]
    count_lost_work_of_unreplicated_pods: bool,
    /// Whether a machine planned for accelerator pods (GPUs, AWS Neuron) is
    /// launched as one machine per pod where those cost less (`false`: Karpenter's packing).
    /// Read when the event store is created.
    #[arg(long, env = "SEPARATE_MACHINES_WHEN_CHEAPER", default_value_t = true, action = clap::ArgAction::Set)]
    separate_machines_when_cheaper: bool,
    /// Whether a machine past its `expireAfter` leaves the pods that would lose their work (a
    /// Job's, an unowned one) to finish before it goes, as if they were annotated
    /// `karpenter.sh/do-not-disrupt` (`false`: evicted, as Karpenter).
    /// Read when the event store is created.
    #[arg(long, env = "EXPIRATION_WAITS_FOR_JOBS", default_value_t = true, action = clap::ArgAction::Set)]
    expiration_waits_for_jobs: bool,
    /// Karpenter's feature gates: `SpotToSpotConsolidation=true,...`.
    #[arg(long, env = "FEATURE_GATES", default_value = "")]
    feature_gates: String,
    /// The event store (a redb file; keep it on a persistent volume).
    #[arg(
        long,
        env = "NODEWRIGHT_STORE",
        default_value = "/var/lib/nodewright/events.redb"
    )]
    store: PathBuf,
    /// The Kubernetes version AMI aliases resolve for (default: the API server's).
    #[arg(long, env = "KUBERNETES_VERSION")]
    kubernetes_version: Option<String>,
    /// How often the cluster's instances are listed for the garbage collector.
    #[arg(long, env = "NODEWRIGHT_INSTANCE_GC_PERIOD", default_value = "2m", value_parser = humantime::parse_duration)]
    instance_gc_period: Duration,
    /// How often EC2NodeClasses are resolved again.
    #[arg(long, env = "NODEWRIGHT_NODECLASS_REFRESH", default_value = "5m", value_parser = humantime::parse_duration)]
    nodeclass_refresh: Duration,
    /// This replica's name in Events (the pod's name in a cluster).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Run without a Lease (one replica only).
    #[arg(long, env = "DISABLE_LEADER_ELECTION")]
    disable_leader_election: bool,
    /// The Lease the replicas elect a leader on.
    #[arg(
        long,
        env = "LEADER_ELECTION_NAME",
        default_value = "nodewright-leader-election"
    )]
    leader_election_name: String,
    /// The Lease's namespace (default: SYSTEM_NAMESPACE, the controller's own, else kube-system).
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE")]
    leader_election_namespace: Option<String>,
    /// How long the Lease holds without renewal: how long a standby waits for a dead leader.
    #[arg(long, env = "LEADER_ELECTION_LEASE_DURATION", default_value = "15s", value_parser = humantime::parse_duration)]
    leader_election_lease_duration: Duration,
    /// The port of /metrics.
    #[arg(long, env = "METRICS_PORT", default_value_t = 8080)]
    metrics_port: u16,
    /// The port of /healthz and /readyz.
    #[arg(long, env = "HEALTH_PROBE_PORT", default_value_t = 8081)]
    health_probe_port: u16,
    /// The port of /log: the leader's event store, served only to callers the API server
    /// allows (get eventlogs.nodewright.dev, or eventlogs/redacted for the redacted log).
    #[arg(long, env = "LOG_PORT", default_value_t = 8082)]
    log_port: u16,
    /// Where the leader ships sealed segments of its store, `s3://<bucket>/<prefix>` (the
    /// cluster's name is added under the prefix), so that the log outlives the replica's pod
    /// and leader changes. Empty: the log stays in the replica's store only.
    #[arg(long, env = "LOG_SEGMENTS_BUCKET", default_value = "")]
    log_segments_bucket: String,
    /// How often the leader seals its store and ships what came before (and when its term
    /// ends).
    #[arg(long, env = "LOG_SEGMENT_INTERVAL", default_value = "5m", value_parser = humantime::parse_duration)]
    log_segment_interval: Duration,
    /// error, warn, info, debug or trace (or a tracing filter).
    #[arg(long, env = "LOG_LEVEL", default_value = "info")]
    log_level: String,
}

impl ControllerArgs {
    fn settings(&self) -> Result<Settings> {
        Ok(Settings {
            cluster_name: self.cluster_name.clone(),
            cluster_endpoint: self.cluster_endpoint.clone(),
            cluster_ca_bundle: self.cluster_ca_bundle.clone(),
            service_cidr: self.service_cidr.clone(),
            interruption_queue: self.interruption_queue.clone().filter(|q| !q.is_empty()),
            batch_idle: self.batch_idle_duration,
            batch_max: self.batch_max_duration,
            sibling_hold: self.sibling_hold_duration,
            count_lost_work: LostWork::from_switches(
                self.count_lost_work,
                self.count_lost_work_of_unreplicated_pods,
            ),
            separate_when_cheaper: self.separate_machines_when_cheaper,
            expiration_waits_for_jobs: self.expiration_waits_for_jobs,
            feature_gates: parse_feature_gates(&self.feature_gates)?,
            store: self.store.clone(),
            kubernetes_version: self.kubernetes_version.clone(),
            instance_gc_period: self.instance_gc_period,
            nodeclass_refresh: self.nodeclass_refresh,
            identity: self
                .identity
                .clone()
                .unwrap_or_else(|| "nodewright".to_string()),
            leader_election: (!self.disable_leader_election).then(|| LeaderElection {
                name: self.leader_election_name.clone(),
                namespace: self
                    .leader_election_namespace
                    .clone()
                    .or_else(|| std::env::var("SYSTEM_NAMESPACE").ok())
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| "kube-system".to_string()),
                lease_duration: self.leader_election_lease_duration,
            }),
            metrics_address: SocketAddr::from(([0, 0, 0, 0], self.metrics_port)),
            health_address: SocketAddr::from(([0, 0, 0, 0], self.health_probe_port)),
            log_address: SocketAddr::from(([0, 0, 0, 0], self.log_port)),
            log_segments: match self.log_segments_bucket.trim() {
                "" => None,
                url => {
                    let (bucket, prefix) =
                        nodewright_aws::log_bucket::parse_s3_url(url).map_err(|problem| {
                            SettingError {
                                setting: "LOG_SEGMENTS_BUCKET",
                                problem,
                                fix: "name the bucket as s3://<bucket>/<prefix>, or leave it empty",
                            }
                        })?;
                    Some(LogSegments {
                        bucket,
                        prefix,
                        every: self.log_segment_interval,
                    })
                }
            },
            fault: None,
        })
    }
}

/// Completes at SIGTERM (the kubelet stopping the pod) or Ctrl-C.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Runs the controller until it is stopped; exit 0 after a graceful stop.
/// glibc gives each thread that allocates an arena of its own (up to eight per core): with the
/// runtime's threads, a controller of 10,000 pods held 105 MB resident for a heap of 52 MB.
/// Two arenas took it to 98 MB, and the core caught up as fast (docs/benchmarks.md).
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; it is called once, before any thread
    // of the runtime exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

pub fn run(args: &ControllerArgs) -> Result<u8> {
    limit_malloc_arenas();
    let settings = args.settings()?;
    settings.validate()?;
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&args.log_level).with_context(|| {
                format!(
                    "LOG_LEVEL {:?} is not a log level or filter; fix: use info, debug, ...",
                    args.log_level
                )
            })?,
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let kube = kube::Config::infer()
            .await
            .context("finding the API server (in-cluster, or KUBECONFIG)")?;
        let connections = Connections {
            kube,
            aws: nodewright_aws::ClientSettings::default(),
        };
        nodewright_controller::run(settings, connections, stop_signal()).await?;
        Ok(0)
    })
}
