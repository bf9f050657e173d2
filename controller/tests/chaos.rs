//! Faults between the controller and the real services it talks to: Toxiproxy between the
//! controller and the API server, and between the controller and moto (EC2, SQS, SSM). Each
//! scenario creates pending pods, injects its fault while the controller launches for them,
//! lifts it, and then checks what must hold after any fault:
//!
//! - every pending pod runs within a bound of the recovery;
//! - exactly one instance per NodeClaim: no launch was made twice;
//! - after the garbage collector's period, no orphan instance and no NodeClaim without one;
//! - the recorded log replays with `--verify`.
//!
//! The short form (the README's test command) runs each fault for 20 s; set
//! `NODEWRIGHT_CHAOS=full` for the full matrix: each fault for 60 s, and more faults. Each
//! scenario prints its figures (`chaos figures: ...`) for `docs/benchmarks.md`.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use nodewright_aws::instances::Instances;
use nodewright_controlplane::{Toxic, Toxiproxy, eventually, pause_pod};
use support::*;

const PODS: usize = 4;
/// How often the garbage collector lists instances in these scenarios.
const GC_PERIOD: Duration = Duration::from_secs(10);

/// The full matrix, or the short form.
fn full() -> bool {
    std::env::var("NODEWRIGHT_CHAOS").is_ok_and(|v| v == "full")
}

/// Whether this run is the short form, for a scenario of the full matrix only (it says so).
fn short_form() -> bool {
    if !full() {
        println!("the full matrix only (NODEWRIGHT_CHAOS=full)");
    }
    !full()
}

/// How long a fault lasts.
fn fault_length() -> Duration {
    if full() {
        Duration::from_secs(60)
    } else {
        Duration::from_secs(20)
    }
}

/// A world whose controller reaches the API server through proxy `apiserver` and moto through
/// proxy `aws`.
struct ChaosWorld {
    world: World,
    toxiproxy: Toxiproxy,
    connections: nodewright_controller::Connections,
}

impl ChaosWorld {
    async fn start() -> ChaosWorld {
        let world = World::start(support::nodepool("default", "default")).await;
        let toxiproxy = Toxiproxy::start().await.expect("toxiproxy starts");
        let apiserver: SocketAddr = world
            .control_plane
            .server_url()
            .trim_start_matches("https://")
            .parse()
            .expect("the API server's address");
        let api_through = toxiproxy
            .proxy("apiserver", apiserver)
            .await
            .expect("a proxy to the API server");
        let aws_through = toxiproxy
            .proxy("aws", SocketAddr::from(([127, 0, 0, 1], world.moto.port())))
            .await
            .expect("a proxy to moto");
        let mut kube = world
            .control_plane
            .config()
            .await
            .expect("the client configuration");
        kube.cluster_url = format!("https://{api_through}").parse().expect("a URL");
        let aws = nodewright_aws::ClientSettings {
            endpoint_url: Some(format!("http://{aws_through}")),
            ..aws_settings(&world.moto)
        };
        ChaosWorld {
            world,
            toxiproxy,
            connections: nodewright_controller::Connections { kube, aws },
        }
    }

    /// The controller, restarted whenever it exits, as its Deployment's pod is (a leader that
    /// loses its lease exits, and comes back as a standby). Karpenter's lease of 15 s.
    fn controller(&self) -> Supervised {
        let mut settings = settings(&self.world.store);
        settings.instance_gc_period = GC_PERIOD;
        if let Some(election) = settings.leader_election.as_mut() {
            election.lease_duration = Duration::from_secs(15);
        }
        Supervised::start(settings, self.connections.clone())
    }

    async fn create_pods(&self) {
        let pods: Api<Pod> = Api::namespaced(self.world.client.clone(), "default");
        for k in 0..PODS {
            pods.create(
                &PostParams::default(),
                &pause_pod(&format!("chaos-{k}"), "1", "1Gi"),
            )
            .await
            .expect("a pod");
        }
    }

    /// Waits until every pod runs.
    async fn pods_run(&self) {
        eventually("every pod runs", || async {
            let waiting: Vec<String> = pods(&self.world.client)
                .await
                .iter()
                .filter(|p| running_on(p).is_none())
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            if waiting.is_empty() {
                Ok(())
            } else {
                Err(format!("not running: {waiting:?}"))
            }
        })
        .await;
    }

    /// How many NodeClaims got more than one instance, over every instance EC2 ever ran for
    /// the cluster (terminated ones too).
    async fn duplicate_launches(&self) -> usize {
        let all = Instances::new(self.world.aws.ec2.clone(), CLUSTER)
            .list()
            .await
            .expect("instances");
        let mut per_claim: BTreeMap<String, usize> = BTreeMap::new();
        for i in all {
            if let Some(claim) = i.nodeclaim {
                *per_claim.entry(claim).or_default() += 1;
            }
        }
        per_claim.values().map(|n| n.saturating_sub(1)).sum()
    }

    /// Waits (the garbage collector's period and grace) until the live instances are exactly
    /// those the NodeClaims name, and every NodeClaim names one; the orphans seen first.
    async fn settles(&self) -> usize {
        let first_orphans = std::sync::Mutex::new(None);
        let first = &first_orphans;
        eventually(
            "every NodeClaim has its one instance, and no instance is an orphan",
            || async move {
                let claims = nodeclaims(&self.world.client).await;
                let claimed = claimed_instance_ids(&claims);
                let live = live_instance_ids(&self.world.aws).await;
                let orphans = live.iter().filter(|i| !claimed.contains(i)).count();
                first
                    .lock()
                    .expect("not poisoned")
                    .get_or_insert(orphans);
                let without = claims.len() - claimed.len();
                if orphans == 0 && without == 0 && claimed == live {
                    Ok(())
                } else {
                    Err(format!(
                        "{} NodeClaims ({without} without an instance), live {live:?}, claimed {claimed:?}",
                        claims.len()
                    ))
                }
            },
        )
        .await;
        first_orphans
            .into_inner()
            .expect("not poisoned")
            .unwrap_or(0)
    }
}

/// A controller run again whenever it exits, until [`Supervised::stop`]: the process and
/// its restarts, in a thread and runtime of their own.
struct Supervised {
    metrics: SocketAddr,
    health: SocketAddr,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<u32>>,
}

impl Served for Supervised {
    fn metrics_address(&self) -> SocketAddr {
        self.metrics
    }

    fn health_address(&self) -> SocketAddr {
        self.health
    }
}

impl Supervised {
    fn start(
        settings: nodewright_controller::Settings,
        connections: nodewright_controller::Connections,
    ) -> Supervised {
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
            .try_init();
        let (stop, stopping) = tokio::sync::watch::channel(false);
        let (metrics, health) = (settings.metrics_address, settings.health_address);
        let thread = std::thread::spawn(move || {
            let mut restarts = 0;
            loop {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("a runtime");
                let mut heard = stopping.clone();
                let outcome = runtime.block_on(nodewright_controller::run(
                    settings.clone(),
                    connections.clone(),
                    async move {
                        let _ = heard.wait_for(|stop| *stop).await;
                    },
                ));
                drop(runtime);
                if *stopping.borrow() {
                    return restarts;
                }
                println!("the controller exited ({outcome:?}); it starts again");
                restarts += 1;
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        Supervised {
            metrics,
            health,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops it; how many times it was restarted.
    async fn stop(mut self) -> u32 {
        let _ = self.stop.send(true);
        let thread = self.thread.take().expect("running");
        tokio::task::spawn_blocking(move || thread.join().expect("the controller's thread"))
            .await
            .expect("joined")
    }
}

/// The figures a scenario prints.
struct Figures {
    scenario: &'static str,
    fault: Duration,
    recovered_in: Duration,
    duplicates: usize,
    orphans_when_running: usize,
    orphans_after_gc: usize,
    restarts: u32,
}

/// A fault, injected `after` the pods are created, for [`fault_length`], then lifted.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// `toxic` on the proxies named.
    Toxic {
        proxies: &'static [&'static str],
        toxic: Toxic,
        after: Duration,
    },
    /// The service behind the proxy gone: connections closed, new ones refused.
    Gone {
        proxy: &'static str,
        after: Duration,
    },
}

impl Fault {
    async fn inject(self, toxiproxy: &Toxiproxy) {
        match self {
            Fault::Toxic {
                proxies,
                toxic,
                after,
            } => {
                tokio::time::sleep(after).await;
                for proxy in proxies {
                    toxiproxy.add(proxy, toxic).await.expect("a toxic");
                }
                tokio::time::sleep(fault_length()).await;
                for proxy in proxies {
                    toxiproxy.clear(proxy).await.expect("cleared");
                }
            }
            Fault::Gone { proxy, after } => {
                tokio::time::sleep(after).await;
                toxiproxy.set_enabled(proxy, false).await.expect("cut");
                tokio::time::sleep(fault_length()).await;
                toxiproxy.set_enabled(proxy, true).await.expect("restored");
            }
        }
    }
}

const BOTH: &[&str] = &["apiserver", "aws"];

/// Runs one scenario: pods created, `fault` injected while they wait and lifted, then the
/// checks.
async fn scenario(name: &'static str, fault: Fault) -> Figures {
    let chaos = ChaosWorld::start().await;
    let controller = chaos.controller();
    eventually("the controller leads", || async {
        if controller.leads().await {
            Ok(())
        } else {
            Err("not yet".to_string())
        }
    })
    .await;
    chaos.create_pods().await;
    let began = Instant::now();
    fault.inject(&chaos.toxiproxy).await;
    let lifted = Instant::now();
    chaos.pods_run().await;
    let recovered_in = lifted.elapsed();
    let orphans_when_running = chaos.settles().await;
    let duplicates = chaos.duplicate_launches().await;
    let claimed = claimed_instance_ids(&nodeclaims(&chaos.world.client).await);
    let orphans_after_gc = live_instance_ids(&chaos.world.aws)
        .await
        .into_iter()
        .filter(|i| !claimed.contains(i))
        .count();
    assert_eq!(duplicates, 0, "{name}: a NodeClaim got two instances");
    assert_eq!(
        orphans_after_gc, 0,
        "{name}: orphans after the collector's period"
    );
    let metrics = controller.metrics().await;
    let restarts = controller.stop().await;
    let outcome = chaos.world.replay_verifies();
    assert!(outcome.divergence.is_none());
    let figures = Figures {
        scenario: name,
        fault: lifted - began,
        recovered_in,
        duplicates,
        orphans_when_running,
        orphans_after_gc,
        restarts,
    };
    println!(
        "chaos figures: {} | fault {:.0} s | every pod running {:.1} s after it was lifted | duplicate launches {} | orphans when the pods ran {}, after the collector's period {} | controller restarts {} | log verified ({} events)",
        figures.scenario,
        figures.fault.as_secs_f64(),
        figures.recovered_in.as_secs_f64(),
        figures.duplicates,
        figures.orphans_when_running,
        figures.orphans_after_gc,
        figures.restarts,
        outcome.events
    );
    for line in metrics.lines().filter(|l| {
        l.starts_with("nodewright_command_failures_total")
            || l.starts_with("nodewright_watch_troubles_total")
            || l.starts_with("nodewright_lease_renewals_failed_total")
            || l.starts_with("nodewright_fenced_side_effects_total")
    }) {
        println!("  {line}");
    }
    drop(chaos.toxiproxy);
    figures
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_and_jitter_on_every_connection() {
    let toxic = Toxic::Latency {
        ms: 300,
        jitter_ms: 200,
    };
    let fault = Fault::Toxic {
        proxies: BOTH,
        toxic,
        after: Duration::ZERO,
    };
    scenario("latency 300 ms +- 200 ms", fault).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_gone() {
    // After the controller has seen the pods and started launching.
    let fault = Fault::Gone {
        proxy: "apiserver",
        after: Duration::from_secs(2),
    };
    scenario("API server gone", fault).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ec2_gone() {
    let fault = Fault::Gone {
        proxy: "aws",
        after: Duration::ZERO,
    };
    scenario("EC2 gone", fault).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_reset() {
    let fault = Fault::Toxic {
        proxies: BOTH,
        toxic: Toxic::ResetPeer { after_ms: 500 },
        after: Duration::ZERO,
    };
    scenario("connections reset after 500 ms", fault).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bandwidth_cut_to_near_zero() {
    if short_form() {
        return;
    }
    let fault = Fault::Toxic {
        proxies: BOTH,
        toxic: Toxic::Bandwidth { kb_per_second: 1 },
        after: Duration::ZERO,
    };
    scenario("bandwidth 1 KB/s", fault).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_hangs() {
    if short_form() {
        return;
    }
    let fault = Fault::Toxic {
        proxies: &["apiserver"],
        toxic: Toxic::Timeout { ms: 0 },
        after: Duration::from_secs(2),
    };
    scenario("API server hangs", fault).await;
}

/// When the store's commands were decided: the time of the event each answered.
fn command_times(store: &std::path::Path) -> Vec<u64> {
    use nodewright_adapters::eventlog::{LogHeader, LogRecord, RedbStore};
    let store = RedbStore::<LogHeader, LogRecord>::open(store).expect("the store opens");
    let records = store.read_range(0, store.len()).expect("the records read");
    let mut at_ms = 0;
    let mut times = Vec::new();
    for record in records {
        match record {
            LogRecord::Event(event) => at_ms = event.at_ms,
            LogRecord::Commands(commands) => times.extend(commands.iter().map(|_| at_ms)),
            LogRecord::CommandsPart { commands, .. } => {
                times.extend(commands.iter().map(|_| at_ms))
            }
            _ => {}
        }
    }
    times
}

/// The leader cut off from the API server while a standby, which reaches it, waits: the
/// standby takes over, and no command of the old leader is decided after the new one's first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_partitioned_while_the_standby_waits() {
    if short_form() {
        return;
    }
    let chaos = ChaosWorld::start().await;
    let leader = chaos.controller();
    eventually("the first replica leads and runs the core", || async {
        if leader.leads().await && leader.ready().await {
            Ok(())
        } else {
            Err("not yet".to_string())
        }
    })
    .await;
    // The standby: its own store, straight to the API server and moto.
    let standby_store = chaos.world.dir.path().join("standby.redb");
    let mut settings = settings(&standby_store);
    settings.instance_gc_period = GC_PERIOD;
    if let Some(election) = settings.leader_election.as_mut() {
        election.lease_duration = Duration::from_secs(15);
    }
    let standby = Supervised::start(
        settings,
        nodewright_controller::Connections {
            kube: chaos
                .world
                .control_plane
                .config()
                .await
                .expect("the client configuration"),
            aws: aws_settings(&chaos.world.moto),
        },
    );
    eventually("the standby is ready", || async {
        if standby.ready().await && !standby.leads().await {
            Ok(())
        } else {
            Err("not yet".to_string())
        }
    })
    .await;
    chaos.create_pods().await;
    let began = Instant::now();
    Fault::Gone {
        proxy: "apiserver",
        after: Duration::from_secs(5),
    }
    .inject(&chaos.toxiproxy)
    .await;
    let lifted = Instant::now();
    chaos.pods_run().await;
    let recovered_in = lifted.elapsed();
    assert!(standby.leads().await, "the standby took over");
    chaos.settles().await;
    let duplicates = chaos.duplicate_launches().await;
    assert_eq!(duplicates, 0, "a NodeClaim got two instances");
    let (leader_restarts, standby_restarts) = (leader.stop().await, standby.stop().await);
    let old = command_times(&chaos.world.store);
    let new = command_times(&standby_store);
    assert!(
        !old.is_empty(),
        "the first leader decided before it was cut off"
    );
    // The new leader may need no command: it adopts what the old one launched.
    let gap = new.iter().min().map(|first_new| {
        let last_old = old.iter().max().copied().unwrap_or(0);
        assert!(
            last_old < *first_new,
            "the old leader decided at {last_old} ms, after the new one's first command at {first_new} ms"
        );
        first_new - last_old
    });
    for store in [&chaos.world.store, &standby_store] {
        let dir = tempfile::tempdir().expect("a folder");
        let outcome = replay_verifies(store, dir.path());
        assert!(outcome.divergence.is_none());
    }
    println!(
        "chaos figures: leader partitioned, standby waiting | fault {:.0} s | every pod running {:.1} s after it was lifted | duplicate launches {duplicates} | the old leader's last command before the new leader's first: {} | restarts: old leader {leader_restarts}, standby {standby_restarts} | both logs verified",
        (lifted - began).as_secs_f64(),
        recovered_in.as_secs_f64(),
        gap.map_or("the new leader needed none".to_string(), |ms| format!(
            "{ms} ms"
        )),
    );
}
