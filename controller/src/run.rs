//! The controller, put together: the event store and its recovery, the watchers, the node
//! class resolver, the catalog refresher, the instance lister and the interruption queue
//! feeding the control loop; the executor carrying out its commands; node registration.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use nodewright_adapters::control_loop::{self, Backlog, InboxSender, Input, Stopped};
use nodewright_adapters::driver::{CommandExecutor, Driver, DriverError};
use nodewright_adapters::eventlog::{LogError, LogHeader, LogRecord, RedbStore};
use nodewright_adapters::interruption_queue::Outcome;
use nodewright_aws::catalog::CatalogSource;
use nodewright_aws::instances::Instances;
use nodewright_aws::launch::Launcher;
use nodewright_aws::queue::InterruptionQueue;
use nodewright_aws::refresh::CatalogRefresher;
use nodewright_aws::resolve::Resolver;
use nodewright_aws::user_data::ClusterInfo;
use nodewright_aws::{AwsError, ClientSettings, Clients};
use nodewright_core::{Config, EventKind};
use nodewright_kubernetes::announce::Announcer;
use nodewright_kubernetes::nodeclaims::NodeClaims;
use nodewright_kubernetes::nodes::Nodes as NodeWrites;
use nodewright_kubernetes::volumes::{self, SharedStorage};
use nodewright_kubernetes::watch::{
    self, DaemonSets, Heard, NodeClasses, NodePools, Nodes, Observed, PodDisruptionBudgets, Pods,
    Trouble,
};
use thiserror::Error;
use tracing::{info, warn};

use crate::clock::WallClock;
use crate::deletions;
use crate::executor::{Executor, Hands, dispatch};
use crate::launch_classes::LaunchClasses;
use crate::leadership::{self, Fence, Leading};
use crate::log_access::LogGate;
use crate::log_export::LogExports;
use crate::metrics::{Measured, Metrics, Timed};
use crate::nodeclasses::NodeClassResolver;
use crate::nodepools;
use crate::observation;
use crate::registration;
use crate::serve::{Endpoints, Phase, Probes, serve};
use crate::set_aside::{Quarantine, SetAside};
use crate::settings::{SettingError, Settings};
use crate::shipping;

pub type Store = RedbStore<LogHeader, LogRecord>;

#[derive(Debug, Error)]
pub enum ControllerError {
    #[error(transparent)]
    Setting(#[from] SettingError),
    #[error("the event store {path}: {source}")]
    Store {
        path: String,
        #[source]
        source: LogError,
    },
    #[error("recovering from the event store: {0}")]
    Recover(#[source] DriverError),
    #[error("the control loop stopped: {0}")]
    Loop(#[source] DriverError),
    #[error("AWS: {0}")]
    Aws(#[from] AwsError),
    #[error("the API server: {0}")]
    Kubernetes(#[source] kube::Error),
    #[error(
        "serving {what} on {address}: {source}; fix: free the port or choose another ({setting})"
    )]
    Serve {
        what: &'static str,
        address: std::net::SocketAddr,
        setting: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("leader election: {0}")]
    Lease(#[source] crate::leadership::LeaseError),
    #[error(
        "the lease was lost: another replica leads now; this one stops (it comes back as a standby)"
    )]
    LostLease,
    #[error("observing the cluster at the start: {0}")]
    Observe(#[from] crate::observation::ObservationError),
    /// The store's log cannot go on (see [`DriverError::poisons_the_log`]): it is set aside.
    #[error("the event store cannot go on: {0}")]
    Poisoned(#[source] DriverError),
}

/// The core's configuration for a new store: Karpenter's defaults, the cluster's name, the
/// batch windows, and a seed of its own (NodeClaim names differ between clusters and stores).
fn new_config(settings: &Settings) -> Config {
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    Config {
        cluster_name: settings.cluster_name.clone(),
        seed,
        batch_idle_ms: settings.batch_idle.as_millis() as u64,
        batch_max_ms: settings.batch_max.as_millis() as u64,
        sibling_hold_ms: settings.sibling_hold.as_millis() as u64,
        count_lost_work: settings.count_lost_work,
        separate_when_cheaper: settings.separate_when_cheaper,
        expiration_waits_for_jobs: settings.expiration_waits_for_jobs,
        ..Config::default()
    }
}

/// Opens the store, or creates it with a new configuration.
pub fn open_store(settings: &Settings) -> Result<Store, ControllerError> {
    let path: &Path = &settings.store;
    let error = |source| ControllerError::Store {
        path: path.display().to_string(),
        source,
    };
    if path.exists() {
        let store = Store::open(path).map_err(error)?;
        let config = &store.header().config;
        if config.cluster_name != settings.cluster_name {
            warn!(
                store = %path.display(),
                logged = config.cluster_name,
                given = settings.cluster_name,
                "the store was written for another cluster name; its configuration is kept (a log replays with the configuration it was written with)"
            );
        }
        Ok(store)
    } else {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| {
                error(LogError::Io {
                    path: Some(dir.to_path_buf()),
                    action: "create the store's folder",
                    source,
                })
            })?;
        }
        let header = LogHeader::new(
            new_config(settings),
            &format!("controller of cluster {}", settings.cluster_name),
        );
        Store::create(path, &header).map_err(error)
    }
}

/// Everything the controller talks to.
#[derive(Clone)]
pub struct Connections {
    /// The API server (in-cluster, or a kubeconfig).
    pub kube: kube::Config,
    pub aws: ClientSettings,
}

/// Watches one kind into the inbox. What goes wrong is a log line and
/// `nodewright_watch_troubles_total{kind, why}`: an object that cannot be read (`unreadable`:
/// left out, the rest served) or a failed watch call (`failed`: retried with backoff). How
/// fresh the watch is goes to the probes (`/readyz`, `nodewright_watch_staleness_seconds`).
fn spawn_watch<O>(
    api: Api<O::Object>,
    observed: O,
    inbox: &InboxSender,
    known: BTreeSet<O::Key>,
    (metrics, probes): (&Arc<Metrics>, &Probes),
) where
    O: Observed + Send + 'static,
    O::Key: Send,
    O::Object: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let inbox = inbox.clone();
    let metrics = Arc::clone(metrics);
    let probes = probes.clone();
    let kind = <O::Object as kube::Resource>::kind(&()).to_string();
    tokio::spawn(watch::run::<O>(api, observed, inbox, known, move |heard| {
        let trouble = match heard {
            Heard::Answer => return probes.watch_answered(&kind),
            Heard::Trouble(trouble) => trouble,
        };
        let why = match &trouble {
            Trouble::Unreadable(_) => "unreadable",
            Trouble::WatchFailed(_) => {
                probes.watch_failed(&kind);
                "failed"
            }
        };
        warn!(kind, error = %trouble, "watch trouble");
        metrics.watch_trouble(&kind, why);
    }));
}

/// How long a Kubernetes call of a command, an Event or the lease may take to connect, and to
/// be answered.
const CALL_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// The configuration of the client the commands, the Events and the lease call with: every
/// call bounded by [`CALL_TIMEOUT`], none retried by kube (the caller's retries are bounded).
/// The watches keep the configuration given: a watch waits for changes by design, and kube's
/// watcher bounds how long it stays idle.
fn calls_config(given: &kube::Config) -> kube::Config {
    let mut config = given.clone();
    config.default_retry = false;
    config.connect_timeout = Some(CALL_CONNECT_TIMEOUT);
    config.read_timeout = Some(CALL_TIMEOUT);
    config.write_timeout = Some(CALL_TIMEOUT);
    config.reset_reader_on_write = true;
    config
}

/// How long the watches' client waits for the next bytes of an answer: a watch call ends
/// after `watch::WATCH_CALL_SECONDS` (60 s), so a call silent for longer is on an API server
/// that hangs, and fails (a stale watch, see `serve::WATCH_STALE_BOUND`).
const WATCH_READ_TIMEOUT: Duration = Duration::from_secs(90);

/// The configuration of the client the watches and lists use: its reads bounded by
/// [`WATCH_READ_TIMEOUT`].
fn watches_config(given: &kube::Config) -> kube::Config {
    let mut config = given.clone();
    config.connect_timeout = Some(CALL_CONNECT_TIMEOUT);
    config.read_timeout = Some(WATCH_READ_TIMEOUT);
    config.reset_reader_on_write = true;
    config
}

/// How many commands the executor may have not done before the loop stops taking
/// observations (and takes only the results that free it).
const EXECUTOR_BACKLOG: usize = 4096;

/// How long a new leader waits for the store while the last one still has it open.
const STORE_IN_USE_PATIENCE: Duration = Duration::from_secs(60);

/// Opens the store, waiting while another process (a leader still stopping) has it open.
async fn open_store_when_free(settings: &Settings) -> Result<Store, ControllerError> {
    let since = Instant::now();
    loop {
        match open_store(settings) {
            Err(ControllerError::Store { source, .. })
                if source.is_store_in_use() && since.elapsed() < STORE_IN_USE_PATIENCE =>
            {
                info!(store = %settings.store.display(), "the store is still open in the last leader; waiting");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            other => return other,
        }
    }
}

/// Serves the metrics and probe endpoints.
async fn serve_endpoints(
    settings: &Settings,
    probes: &Probes,
    metrics: &Arc<Metrics>,
    exports: &LogExports,
) -> Result<(), ControllerError> {
    let mut bound = Vec::new();
    for (what, address, setting, endpoints) in [
        (
            "/metrics",
            settings.metrics_address,
            "METRICS_PORT",
            Endpoints::Metrics,
        ),
        (
            "/healthz and /readyz",
            settings.health_address,
            "HEALTH_PROBE_PORT",
            Endpoints::Probes,
        ),
        (
            "/log",
            settings.log_address,
            "LOG_PORT",
            Endpoints::Log(exports.clone()),
        ),
    ] {
        let at = serve(address, probes.clone(), Arc::clone(metrics), endpoints)
            .await
            .map_err(|source| ControllerError::Serve {
                what,
                address,
                setting,
                source,
            })?;
        bound.push(at);
    }
    let (metrics_at, health_at, log_at) = (bound[0], bound[1], bound[2]);
    info!(metrics = %metrics_at, probes = %health_at, log = %log_at, "serving /metrics, /healthz and /readyz, and /log");
    Ok(())
}

/// What every term of the controller shares: its settings and connections, its metrics,
/// probes and log exports, and the stores it set aside.
struct Shared {
    settings: Settings,
    client: kube::Client,
    calls: kube::Client,
    aws: Clients,
    kubernetes_version: String,
    metrics: Arc<Metrics>,
    probes: Probes,
    exports: LogExports,
    announcer: Announcer,
}

/// Runs the controller until `stop` completes; the log is durable at every step, so a stop at
/// any point loses nothing. With leader election on, it first waits, connected and ready, for
/// the lease; it stops with [`ControllerError::LostLease`] if the lease is lost.
///
/// It leads in terms: each term opens the store, recovers from it, observes the cluster (the
/// catalog, NodePools, EC2NodeClasses, every NodeClaim with its instance), and decides. A term
/// whose store cannot go on (records that do not decode, a replay that diverges, an event that
/// panics the core) sets the store aside and the next term begins a new one from observation
/// ([`crate::set_aside`]).
pub async fn run(
    settings: Settings,
    connections: Connections,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<Stopped, ControllerError> {
    settings.validate()?;
    let metrics = Arc::new(Metrics::new());
    let probes = Probes::default();
    let exports = LogExports::default();
    serve_endpoints(&settings, &probes, &metrics, &exports).await?;
    let mut stop = Box::pin(stop);

    let client = kube::Client::try_from(watches_config(&connections.kube))
        .map_err(ControllerError::Kubernetes)?;
    // The commands' calls: bounded in time, and retried by the executor (a bounded, jittered
    // backoff) rather than by kube, which retries a 429 or a 503 for minutes. The Eviction
    // API's 429 is an answer (a PodDisruptionBudget allows no disruption now) that the core
    // must hear at once.
    let calls = kube::Client::try_from(calls_config(&connections.kube))
        .map_err(ControllerError::Kubernetes)?;
    // The log is served to callers the API server allows, asked with the controller's client.
    exports.guard(LogGate::new(calls.clone()));
    let aws = Clients::connect(&connections.aws).await?;
    let kubernetes_version = match &settings.kubernetes_version {
        Some(v) => v.clone(),
        None => {
            let v = client
                .apiserver_version()
                .await
                .map_err(ControllerError::Kubernetes)?;
            format!("{}.{}", v.major, v.minor.trim_end_matches('+'))
        }
    };

    // A warm standby: connected, ready, waiting for the lease.
    let mut leading: Option<Leading> = None;
    if let Some(election) = &settings.leader_election {
        probes.set(Phase::Standby);
        let identity = leadership::holder_identity(&settings.identity);
        tokio::select! {
            acquired = leadership::acquire(calls.clone(), election, &identity, Arc::clone(&metrics)) => {
                leading = Some(acquired.map_err(ControllerError::Lease)?);
            }
            _ = &mut stop => {
                probes.set(Phase::Stopping);
                return Ok(Stopped::Asked);
            }
        }
    }
    metrics.set_leader(true);
    // Every term hears the stop.
    let (stopping, stop_heard) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        stop.await;
        let _ = stopping.send(true);
    });

    let shared = Shared {
        announcer: Announcer::new(calls.clone(), Some(settings.identity.clone())),
        settings,
        client,
        calls,
        aws,
        kubernetes_version,
        metrics,
        probes,
        exports,
    };
    let mut set_aside = SetAside::default();
    let outcome = loop {
        shared.probes.set(Phase::Recovering);
        // Every side effect of a term checks it is still the leader's.
        let fence = leading
            .as_ref()
            .map(Leading::fence)
            .unwrap_or_else(Fence::unbounded);
        let term = lead_one_term(&shared, &set_aside.quarantine, stop_heard.clone(), fence);
        let outcome = match &mut leading {
            // The loop waits only between events: ending it there leaves the log whole.
            Some(lease) => tokio::select! {
                outcome = term => outcome,
                _ = lease.lost() => Err(ControllerError::LostLease),
            },
            None => term.await,
        };
        match outcome {
            Err(ControllerError::Poisoned(error)) => {
                let subject = panicked_subject(&shared.settings.store, &error);
                if let Err(error) = set_aside
                    .set_aside(
                        &shared.settings,
                        &shared.metrics,
                        &shared.announcer,
                        error,
                        subject,
                    )
                    .await
                {
                    break Err(ControllerError::Loop(error));
                }
            }
            other => break other,
        }
    };
    shared.probes.set(Phase::Stopping);
    shared.metrics.set_leader(false);
    if let Some(lease) = leading {
        lease.release().await;
    }
    outcome
}

/// A driver's error as the controller takes it: [`ControllerError::Poisoned`] when the store
/// cannot go on (it is set aside), `otherwise` when it can.
fn poisoned_or(
    error: DriverError,
    otherwise: fn(DriverError) -> ControllerError,
) -> ControllerError {
    if error.poisons_the_log() {
        ControllerError::Poisoned(error)
    } else {
        otherwise(error)
    }
}

/// The object the event that panicked the core was about, read back from the store.
fn panicked_subject(store: &Path, error: &DriverError) -> Option<String> {
    let DriverError::Panicked { record, .. } = error else {
        return None;
    };
    let reader = Store::open(store).ok()?;
    let mut records = reader.read_range(*record, record + 1).ok()?;
    match records.pop()? {
        LogRecord::Event(event) => crate::set_aside::subject(&event.kind),
        _ => None,
    }
}

/// One term: the store opened and recovered from, the cluster observed, the watchers and the
/// loop run until the stop, the inbox closing, or an error.
async fn lead_one_term(
    shared: &Shared,
    quarantine: &Quarantine,
    mut stop_heard: tokio::sync::watch::Receiver<bool>,
    fence: Arc<Fence>,
) -> Result<Stopped, ControllerError> {
    let Shared {
        settings,
        client,
        calls,
        aws,
        kubernetes_version,
        metrics,
        probes,
        exports,
        announcer,
    } = shared;
    let store = match open_store_when_free(settings).await {
        Ok(store) => store,
        // A store that opens damaged (a record missing, its header unreadable) or that a newer
        // nodewright wrote is set aside as any other that cannot go on.
        Err(ControllerError::Store { source, .. }) if source.is_damaged_or_foreign() => {
            return Err(ControllerError::Poisoned(DriverError::Log(source)));
        }
        Err(e) => return Err(e),
    };
    let offered = exports.offer(store.reader().map_err(|source| ControllerError::Store {
        path: settings.store.display().to_string(),
        source,
    })?);
    let shipper = shipping::shipper(
        settings.log_segments.as_ref(),
        &aws.s3,
        &store,
        &settings.cluster_name,
        metrics,
    )
    .map_err(|source| ControllerError::Store {
        path: settings.store.display().to_string(),
        source,
    })?;
    let store = Timed::new(store, Arc::clone(metrics)).telling(probes.clone());
    probes.forget_watches();
    let recovered = Driver::recover(store).map_err(|e| poisoned_or(e, ControllerError::Recover));
    let (mut driver, recovery) = match recovered {
        Ok(found) => found,
        Err(e) => {
            drop(offered);
            return Err(e);
        }
    };
    if let Some(fault) = settings.fault {
        driver = driver.with_fault(fault);
    }
    info!(
        events = recovery.events,
        reissued = recovery.reissue().count(),
        "recovered from the event store"
    );
    let seed = driver.core().config().seed;

    // The executor's commands not done: at its bound the loop takes only results.
    let backlog = Backlog::new(EXECUTOR_BACKLOG);
    let (sender, inbox) = control_loop::inbox();
    let mut inbox = inbox.with_backlog(backlog.clone());
    let classes = LaunchClasses::default();
    let (to_executor, commands) = dispatch(backlog.clone());
    let (pool_usage, pool_usage_changes) = tokio::sync::watch::channel(Default::default());
    let mut to_executor = Measured::new(to_executor, Arc::clone(metrics), settings.store.clone())
        .publishing_pools(pool_usage);
    // The catalog the instance types' labels are read from, for the NodeClaims launched.
    let known_catalog = driver
        .core()
        .state()
        .catalog
        .as_ref()
        .map(|c| Arc::clone(&c.catalog));
    let (catalog, catalog_changes) = tokio::sync::watch::channel(known_catalog.clone());
    let hands = Hands {
        eviction_client: calls.clone(),
        claims: NodeClaims::new(calls.clone()),
        nodes: NodeWrites::new(calls.clone()),
        announcer: announcer.clone(),
        launcher: Launcher::new(
            aws.ec2.clone(),
            ClusterInfo {
                name: settings.cluster_name.clone(),
                endpoint: settings.cluster_endpoint.clone(),
                ca_bundle: settings.cluster_ca_bundle.clone(),
                service_cidr: settings.service_cidr.clone(),
            },
            &format!("{}/{seed}", settings.cluster_name),
        ),
        instances: Instances::new(aws.ec2.clone(), &settings.cluster_name),
        classes: classes.clone(),
        catalog: catalog_changes,
        inbox: sender.clone(),
        metrics: Arc::clone(metrics),
        fence,
    };
    tokio::spawn(Executor::new(hands.clone(), backlog).run(commands));
    // What the last process may not have carried out.
    for command in recovery.reissue() {
        to_executor.execute(command);
    }

    // What is there, before anything is decided: the catalog (adopted machines are priced
    // from it), the NodePools and EC2NodeClasses, then every NodeClaim with its instance. The
    // instance lister starts after, so that no adopted machine is taken for an orphan.
    let mut refresher = CatalogRefresher::new(
        CatalogSource::new(aws.ec2.clone(), &aws.region),
        &aws.region,
        None,
    )
    .publishing(catalog);
    observation::first_catalog(&mut refresher, known_catalog.as_ref(), &sender).await;
    let told = observation::observe(client, &hands.instances, announcer, &sender).await?;

    // The watchers, each knowing what the core knows of its kind, so that what was deleted
    // while no process watched is deleted for the core too.
    let state = driver.core().state();
    // The volumes pods name, for their zone (Karpenter's volume topology).
    let storage = SharedStorage::default();
    volumes::spawn_watchers(client, &storage).await;
    spawn_watch::<Pods>(
        Api::<Pod>::all(client.clone()),
        Pods { storage },
        &sender,
        state.pods.keys().cloned().collect(),
        (metrics, probes),
    );
    spawn_watch::<Nodes>(
        Api::<Node>::all(client.clone()),
        Nodes,
        &sender,
        state.nodes.keys().cloned().collect(),
        (metrics, probes),
    );
    spawn_watch::<NodePools>(
        Api::all(client.clone()),
        NodePools,
        &sender,
        state
            .nodepools
            .keys()
            .cloned()
            .chain(told.nodepools)
            .collect(),
        (metrics, probes),
    );
    spawn_watch::<NodeClasses>(
        Api::all(client.clone()),
        NodeClasses,
        &sender,
        state
            .nodeclasses
            .keys()
            .cloned()
            .chain(told.nodeclasses)
            .collect(),
        (metrics, probes),
    );
    spawn_watch::<PodDisruptionBudgets>(
        Api::<PodDisruptionBudget>::all(client.clone()),
        PodDisruptionBudgets,
        &sender,
        state.pdbs.keys().cloned().collect(),
        (metrics, probes),
    );
    spawn_watch::<DaemonSets>(
        Api::<DaemonSet>::all(client.clone()),
        DaemonSets,
        &sender,
        state.daemonsets.keys().cloned().collect(),
        (metrics, probes),
    );

    tokio::spawn(
        NodeClassResolver {
            api: Api::all(client.clone()),
            resolver: Resolver::new(aws.ec2.clone(), aws.ssm.clone(), kubernetes_version),
            classes,
            inbox: sender.clone(),
            refresh: settings.nodeclass_refresh,
        }
        .run(),
    );
    tokio::spawn(deletions::run(Api::all(client.clone()), sender.clone()));
    tokio::spawn(nodepools::run(
        client.clone(),
        hands.announcer.clone(),
        pool_usage_changes,
    ));
    tokio::spawn(registration::run(
        client.clone(),
        hands.claims.clone(),
        hands.nodes.clone(),
    ));
    tokio::spawn(refresher.run(sender.clone()));
    {
        let instances = hands.instances.clone();
        let inbox = sender.clone();
        let period = settings.instance_gc_period;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            while !inbox.is_closed() {
                tick.tick().await;
                match instances.listing().await {
                    Ok(instances) => {
                        let _ = inbox
                            .observe(EventKind::InstancesListed {
                                instances: instances.into(),
                            })
                            .await;
                    }
                    Err(e) => warn!(error = %e, "listing the cluster's instances failed"),
                }
            }
        });
    }
    if let Some(name) = &settings.interruption_queue {
        let queue = InterruptionQueue::open(aws.sqs.clone(), name).await?;
        let inbox = sender.clone();
        let metrics = Arc::clone(metrics);
        tokio::spawn(async move {
            queue
                .run(inbox, |outcome| match outcome {
                    Outcome::Malformed { .. } => metrics.interruption_message_dropped("malformed"),
                    Outcome::Ignored { .. } => metrics.interruption_message_dropped("ignored"),
                    Outcome::Handled { .. } => {}
                })
                .await
        });
    }
    {
        let inbox = sender.clone();
        tokio::spawn(async move {
            let _ = stop_heard.wait_for(|stopping| *stopping).await;
            let _ = inbox.send(Input::Stop);
        });
    }
    let sealing =
        shipper
            .as_ref()
            .zip(settings.log_segments.as_ref())
            .map(|(shipper, segments)| {
                tokio::spawn(shipping::every(
                    Arc::clone(shipper),
                    sender.clone(),
                    segments.every,
                ))
            });
    drop(sender);

    info!(
        cluster = settings.cluster_name,
        kubernetes_version, "controller running"
    );
    probes.set(Phase::Leading);
    let outcome = control_loop::run_admitting(
        &mut driver,
        &mut inbox,
        &mut to_executor,
        &WallClock,
        |kind| !quarantine.holds(kind),
    )
    .await
    .map_err(|e| poisoned_or(e, ControllerError::Loop));
    info!(
        events = driver.events(),
        commands = driver.commands(),
        "stopped"
    );
    // The loop takes nothing more: what was sent to it and not taken is dropped, so that a
    // seal asked for and not answered stops being waited for.
    inbox.close();
    while inbox.try_recv().is_some() {}
    // The term's last segment: sealed and shipped before the lease goes (not when the store
    // is to be set aside: what it holds stays with it). A shipment under way finishes first
    // (it holds the shipper): cut off, it could leave a segment in the bucket that the
    // shipper does not know of, and the next one would overlap it.
    if let Some(shipper) = &shipper
        && outcome.is_ok()
    {
        match driver.seal() {
            Ok(seal) => shipping::last(shipper, seal).await,
            Err(error) => warn!(%error, "the term's last seal could not be appended"),
        }
    }
    if let Some(sealing) = sealing {
        // Waiting for its next tick, or for the shipper: it ships nothing more (the inbox is
        // closed), and is dropped with the shipper it holds before the store closes.
        sealing.abort();
        let _ = sealing.await;
    }
    // The store is closed before the lease goes (or the store is set aside), so that the next
    // leader or term can open it.
    drop(shipper);
    drop(offered);
    drop(driver);
    outcome
}
