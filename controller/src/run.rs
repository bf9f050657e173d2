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
use nodewright_adapters::control_loop::{self, InboxSender, Input, Stopped};
use nodewright_adapters::driver::{CommandExecutor, Driver, DriverError};
use nodewright_adapters::eventlog::{LogError, LogHeader, LogRecord, RedbStore};
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
    self, DaemonSets, NodeClasses, NodePools, Nodes, Observed, PodDisruptionBudgets, Pods,
};
use thiserror::Error;
use tracing::{info, warn};

use crate::clock::WallClock;
use crate::deletions;
use crate::executor::{Executor, Hands, dispatch};
use crate::launch_classes::LaunchClasses;
use crate::leadership::{self, Leading};
use crate::log_export::LogExports;
use crate::metrics::{Measured, Metrics, Timed};
use crate::nodeclasses::NodeClassResolver;
use crate::nodepools;
use crate::registration;
use crate::serve::{Phase, Probes, serve};
use crate::settings::{SettingError, Settings};

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
    Lease(#[source] kube_lease_manager::LeaseManagerError),
    #[error(
        "the lease was lost: another replica leads now; this one stops (it comes back as a standby)"
    )]
    LostLease,
    #[error(
        "the event store {path} does not exist, but the cluster has {nodeclaims} NodeClaim(s): a new store knows none of their machines and would terminate them as orphans; fix: mount the volume that holds the store the controller wrote (NODEWRIGHT_STORE), or delete those NodeClaims first (their machines are drained and terminated) and start again"
    )]
    StoreMissing { path: String, nodeclaims: usize },
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
pub struct Connections {
    /// The API server (in-cluster, or a kubeconfig).
    pub kube: kube::Config,
    pub aws: ClientSettings,
}

fn spawn_watch<O>(api: Api<O::Object>, observed: O, inbox: &InboxSender, known: BTreeSet<O::Key>)
where
    O: Observed + Send + 'static,
    O::Key: Send,
    O::Object: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let inbox = inbox.clone();
    tokio::spawn(watch::run::<O>(api, observed, inbox, known, |e| {
        warn!(error = %e, "an object cannot be read; the rest is served");
    }));
}

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

/// A store is created only for a cluster with no NodeClaims: the store is what tells the core
/// which machines are its own, and a new one beside existing NodeClaims would see their
/// instances as orphans.
async fn refuse_a_new_store_beside_existing_machines(
    settings: &Settings,
    client: &kube::Client,
) -> Result<(), ControllerError> {
    if settings.store.exists() {
        return Ok(());
    }
    let claims = Api::<nodewright_api::NodeClaim>::all(client.clone())
        .list_metadata(&kube::api::ListParams::default())
        .await
        .map_err(ControllerError::Kubernetes)?;
    if claims.items.is_empty() {
        Ok(())
    } else {
        Err(ControllerError::StoreMissing {
            path: settings.store.display().to_string(),
            nodeclaims: claims.items.len(),
        })
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
    for (what, address, setting, log) in [
        ("/metrics", settings.metrics_address, "METRICS_PORT", None),
        (
            "/healthz, /readyz and /log",
            settings.health_address,
            "HEALTH_PROBE_PORT",
            Some(exports.clone()),
        ),
    ] {
        let at = serve(address, probes.clone(), Arc::clone(metrics), log)
            .await
            .map_err(|source| ControllerError::Serve {
                what,
                address,
                setting,
                source,
            })?;
        bound.push(at);
    }
    let (metrics_at, health_at) = (bound[0], bound[1]);
    info!(metrics = %metrics_at, probes = %health_at, "serving /metrics, /healthz, /readyz and /log");
    Ok(())
}

/// Runs the controller until `stop` completes; the log is durable at every step, so a stop at
/// any point loses nothing. With leader election on, it first waits, connected and ready, for
/// the lease; it stops with [`ControllerError::LostLease`] if the lease is lost.
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

    let client =
        kube::Client::try_from(connections.kube.clone()).map_err(ControllerError::Kubernetes)?;
    // kube retries a 429 by default, for minutes; the Eviction API's 429 is an answer (a
    // PodDisruptionBudget allows no disruption now) that the core must hear at once.
    let mut no_retry = connections.kube.clone();
    no_retry.default_retry = false;
    let eviction_client = kube::Client::try_from(no_retry).map_err(ControllerError::Kubernetes)?;
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
            acquired = leadership::acquire(client.clone(), election, &identity) => {
                leading = Some(acquired.map_err(ControllerError::Lease)?);
            }
            _ = &mut stop => {
                probes.set(Phase::Stopping);
                return Ok(Stopped::Asked);
            }
        }
    }
    probes.set(Phase::Recovering);
    metrics.set_leader(true);

    refuse_a_new_store_beside_existing_machines(&settings, &client).await?;
    let store = open_store_when_free(&settings).await?;
    let offered = exports.offer(store.reader().map_err(|source| ControllerError::Store {
        path: settings.store.display().to_string(),
        source,
    })?);
    let store = Timed::new(store, Arc::clone(&metrics));
    let (mut driver, recovery) = Driver::recover(store).map_err(ControllerError::Recover)?;
    info!(
        events = recovery.events,
        reissued = recovery.reissue().count(),
        "recovered from the event store"
    );
    let seed = driver.core().config().seed;

    let (sender, mut inbox) = control_loop::inbox();
    let classes = LaunchClasses::default();
    let (to_executor, commands) = dispatch();
    let (pool_usage, pool_usage_changes) = tokio::sync::watch::channel(Default::default());
    let mut to_executor = Measured::new(to_executor, Arc::clone(&metrics), settings.store.clone())
        .publishing_pools(pool_usage);
    // The catalog the instance types' labels are read from, for the NodeClaims launched.
    let (catalog, catalog_changes) = tokio::sync::watch::channel(
        driver
            .core()
            .state()
            .catalog
            .as_ref()
            .map(|c| Arc::clone(&c.catalog)),
    );
    let hands = Hands {
        eviction_client,
        claims: NodeClaims::new(client.clone()),
        nodes: NodeWrites::new(client.clone()),
        announcer: Announcer::new(client.clone(), Some(settings.identity.clone())),
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
    };
    tokio::spawn(Executor::new(hands.clone()).run(commands));
    // What the last process may not have carried out.
    for command in recovery.reissue() {
        to_executor.execute(command);
    }

    // The watchers, each knowing what the core knows of its kind, so that what was deleted
    // while no process watched is deleted for the core too.
    let state = driver.core().state();
    // The volumes pods name, for their zone (Karpenter's volume topology).
    let storage = SharedStorage::default();
    volumes::spawn_watchers(&client, &storage).await;
    spawn_watch::<Pods>(
        Api::<Pod>::all(client.clone()),
        Pods { storage },
        &sender,
        state.pods.keys().cloned().collect(),
    );
    spawn_watch::<Nodes>(
        Api::<Node>::all(client.clone()),
        Nodes,
        &sender,
        state.nodes.keys().cloned().collect(),
    );
    spawn_watch::<NodePools>(
        Api::all(client.clone()),
        NodePools,
        &sender,
        state.nodepools.keys().cloned().collect(),
    );
    spawn_watch::<NodeClasses>(
        Api::all(client.clone()),
        NodeClasses,
        &sender,
        state.nodeclasses.keys().cloned().collect(),
    );
    spawn_watch::<PodDisruptionBudgets>(
        Api::<PodDisruptionBudget>::all(client.clone()),
        PodDisruptionBudgets,
        &sender,
        state.pdbs.keys().cloned().collect(),
    );
    spawn_watch::<DaemonSets>(
        Api::<DaemonSet>::all(client.clone()),
        DaemonSets,
        &sender,
        state.daemonsets.keys().cloned().collect(),
    );

    tokio::spawn(
        NodeClassResolver {
            api: Api::all(client.clone()),
            resolver: Resolver::new(aws.ec2.clone(), aws.ssm.clone(), &kubernetes_version),
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
    tokio::spawn(
        CatalogRefresher::new(
            CatalogSource::new(aws.ec2.clone(), &aws.region),
            &aws.region,
            None,
        )
        .publishing(catalog)
        .run(sender.clone()),
    );
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
                        let _ = inbox.send(Input::Observed(EventKind::InstancesListed {
                            instances: instances.into(),
                        }));
                    }
                    Err(e) => warn!(error = %e, "listing the cluster's instances failed"),
                }
            }
        });
    }
    if let Some(name) = &settings.interruption_queue {
        let queue = InterruptionQueue::open(aws.sqs.clone(), name).await?;
        let inbox = sender.clone();
        tokio::spawn(async move { queue.run(inbox).await });
    }
    {
        let inbox = sender.clone();
        tokio::spawn(async move {
            stop.await;
            let _ = inbox.send(Input::Stop);
        });
    }
    drop(sender);

    info!(
        cluster = settings.cluster_name,
        kubernetes_version, "controller running"
    );
    probes.set(Phase::Leading);
    let looping = control_loop::run(&mut driver, &mut inbox, &mut to_executor, &WallClock);
    let outcome = match &mut leading {
        // The loop waits only between events: ending it there leaves the log whole.
        Some(lease) => tokio::select! {
            outcome = looping => outcome.map_err(ControllerError::Loop),
            _ = lease.lost() => Err(ControllerError::LostLease),
        },
        None => looping.await.map_err(ControllerError::Loop),
    };
    probes.set(Phase::Stopping);
    metrics.set_leader(false);
    info!(
        events = driver.events(),
        commands = driver.commands(),
        "stopped"
    );
    // The store is closed before the lease goes, so that the next leader can open it.
    drop(offered);
    drop(driver);
    if let Some(lease) = leading {
        lease.release().await;
    }
    outcome
}
