//! The controller's HTTP endpoints, each port serving its own: `/metrics` (Prometheus text
//! format) on the metrics port, `/healthz` and `/readyz` on the health-probe port (Karpenter's
//! ports), and `/log` (the leader's event store as a `.nwlog`, served only to callers the API
//! server allows, see [`crate::log_export`]) on the log port, which neither the chart's Service
//! nor its NetworkPolicy opens. hyper serves them: it is already in the build as kube's HTTP
//! stack.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tracing::warn;

use crate::log_export::{Body, LogExports, text};
use crate::metrics::Metrics;

/// Where the replica stands, for `/readyz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Connecting to the API server and AWS.
    Starting = 0,
    /// Connected; waiting for the lease (a warm standby).
    Standby = 1,
    /// Holds the lease; recovering the core from the store.
    Recovering = 2,
    /// Runs the core.
    Leading = 3,
    /// Stopping.
    Stopping = 4,
}

/// How stale a watch may be before the leader is not ready: how long it may go without an
/// answer of the API server once one of its calls failed (a quiet kind is not stale: kube's
/// watcher ends each call after `WATCH_CALL_SECONDS` and starts another, and a call that
/// fails says so).
pub const WATCH_STALE_BOUND: Duration = Duration::from_secs(90);

/// One watch's freshness.
#[derive(Debug, Clone, Copy)]
struct WatchHealth {
    last_answer: Instant,
    /// A call failed since the last answer.
    failing: bool,
}

/// The replica's phase, the freshness of the leader's watches and whether its store appends,
/// shared with the endpoints.
#[derive(Debug, Clone, Default)]
pub struct Probes {
    phase: Arc<AtomicU8>,
    watches: Arc<Mutex<BTreeMap<String, WatchHealth>>>,
    store_failing: Arc<AtomicBool>,
}

impl Probes {
    /// The API server answered `kind`'s watch.
    pub fn watch_answered(&self, kind: &str) {
        let mut watches = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        watches.insert(
            kind.to_string(),
            WatchHealth {
                last_answer: Instant::now(),
                failing: false,
            },
        );
    }

    /// A call of `kind`'s watch failed.
    pub fn watch_failed(&self, kind: &str) {
        let mut watches = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        watches
            .entry(kind.to_string())
            .or_insert(WatchHealth {
                last_answer: Instant::now(),
                failing: true,
            })
            .failing = true;
    }

    /// Forgets the watches (a term ended: the next one starts its own).
    pub fn forget_watches(&self) {
        self.watches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// How stale each watch is: for one failing, the time since its last answer; zero for
    /// one that is not.
    pub fn watch_staleness(&self) -> Vec<(String, Duration)> {
        let watches = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        watches
            .iter()
            .map(|(kind, health)| {
                let stale = if health.failing {
                    health.last_answer.elapsed()
                } else {
                    Duration::ZERO
                };
                (kind.clone(), stale)
            })
            .collect()
    }

    /// Whether the store's last append failed.
    pub fn store_appends(&self, ok: bool) {
        self.store_failing.store(!ok, Ordering::Release);
    }

    /// Why the replica is not ready, if it is not.
    pub fn not_ready(&self) -> Option<String> {
        let phase = self.phase();
        if !matches!(phase, Phase::Standby | Phase::Leading) {
            return Some(format!("{phase:?}"));
        }
        if phase == Phase::Leading {
            if self.store_failing.load(Ordering::Acquire) {
                return Some("the event store cannot append".into());
            }
            let stale: Vec<String> = self
                .watch_staleness()
                .into_iter()
                .filter(|(_, stale)| *stale > WATCH_STALE_BOUND)
                .map(|(kind, stale)| format!("{kind} ({}s)", stale.as_secs()))
                .collect();
            if !stale.is_empty() {
                return Some(format!(
                    "watches stale beyond {}s: {}",
                    WATCH_STALE_BOUND.as_secs(),
                    stale.join(", ")
                ));
            }
        }
        None
    }

    pub fn set(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Release);
    }

    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Acquire) {
            1 => Phase::Standby,
            2 => Phase::Recovering,
            3 => Phase::Leading,
            4 => Phase::Stopping,
            _ => Phase::Starting,
        }
    }

    /// Ready: a standby that can take over, or the leader running the core with fresh
    /// watches and a store that appends.
    pub fn ready(&self) -> bool {
        self.not_ready().is_none()
    }
}

/// What one port serves.
#[derive(Clone)]
pub enum Endpoints {
    /// `/metrics`.
    Metrics,
    /// `/healthz` and `/readyz`.
    Probes,
    /// `/log`.
    Log(LogExports),
}

fn answer(path: &str, probes: &Probes, metrics: &Metrics) -> Response<Body> {
    match path {
        "/healthz" => text(StatusCode::OK, "ok\n".into()),
        "/readyz" => match probes.not_ready() {
            None => text(StatusCode::OK, format!("ready: {:?}\n", probes.phase())),
            Some(why) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {why}\n"),
            ),
        },
        "/metrics" => {
            metrics.set_watch_staleness(&probes.watch_staleness());
            let mut response = text(StatusCode::OK, metrics.encode());
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            response
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "not found; try /metrics, /healthz or /readyz\n".into(),
        ),
    }
}

/// The answer of a port serving `endpoints`.
async fn answer_on(
    endpoints: &Endpoints,
    request: &Request<Incoming>,
    probes: &Probes,
    metrics: &Metrics,
) -> Response<Body> {
    let path = request.uri().path();
    match (endpoints, path) {
        (Endpoints::Metrics, "/metrics") | (Endpoints::Probes, "/healthz" | "/readyz") => {
            answer(path, probes, metrics)
        }
        (Endpoints::Log(log), "/log") => {
            let authorization = request
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok());
            log.answer(request.uri().query(), authorization).await
        }
        (Endpoints::Metrics, _) => text(StatusCode::NOT_FOUND, "not found; try /metrics\n".into()),
        (Endpoints::Probes, _) => text(
            StatusCode::NOT_FOUND,
            "not found; try /healthz or /readyz\n".into(),
        ),
        (Endpoints::Log(_), _) => text(StatusCode::NOT_FOUND, "not found; try /log\n".into()),
    }
}

/// Binds `address` (fails at once if it cannot) and serves `endpoints` on it until the
/// process stops.
pub async fn serve(
    address: SocketAddr,
    probes: Probes,
    metrics: Arc<Metrics>,
    endpoints: Endpoints,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    warn!(error = %e, "accepting a connection failed");
                    continue;
                }
            };
            let probes = probes.clone();
            let metrics = Arc::clone(&metrics);
            let endpoints = endpoints.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    let (probes, metrics, endpoints) =
                        (probes.clone(), Arc::clone(&metrics), endpoints.clone());
                    async move {
                        let response = answer_on(&endpoints, &request, &probes, &metrics).await;
                        Ok::<_, Infallible>(response)
                    }
                });
                if let Err(e) = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    warn!(error = %e, "serving a connection failed");
                }
            });
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_follows_the_phase() {
        let probes = Probes::default();
        let metrics = Metrics::new();
        let status = |p: &Probes| answer("/readyz", p, &metrics).status();
        assert_eq!(status(&probes), StatusCode::SERVICE_UNAVAILABLE);
        probes.set(Phase::Standby);
        assert_eq!(status(&probes), StatusCode::OK);
        probes.set(Phase::Recovering);
        assert_eq!(status(&probes), StatusCode::SERVICE_UNAVAILABLE);
        probes.set(Phase::Leading);
        assert_eq!(status(&probes), StatusCode::OK);
        // A watch that fails is not stale until the bound passes without an answer.
        probes.watch_answered("Pod");
        probes.watch_failed("Pod");
        assert_eq!(status(&probes), StatusCode::OK);
        probes
            .watches
            .lock()
            .unwrap()
            .get_mut("Pod")
            .unwrap()
            .last_answer -= WATCH_STALE_BOUND + Duration::from_secs(1);
        assert_eq!(status(&probes), StatusCode::SERVICE_UNAVAILABLE);
        let body = answer("/metrics", &probes, &metrics);
        assert_eq!(body.status(), StatusCode::OK);
        assert!(
            metrics
                .encode()
                .contains("nodewright_watch_staleness_seconds{kind=\"Pod\"} 91"),
            "{}",
            metrics.encode()
        );
        // An answer makes it fresh again.
        probes.watch_answered("Pod");
        assert_eq!(status(&probes), StatusCode::OK);
        probes.store_appends(false);
        assert_eq!(status(&probes), StatusCode::SERVICE_UNAVAILABLE);
        probes.store_appends(true);
        assert_eq!(status(&probes), StatusCode::OK);
        assert_eq!(
            answer("/healthz", &probes, &metrics).status(),
            StatusCode::OK
        );
        assert_eq!(
            answer("/nope", &probes, &metrics).status(),
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn metrics_carry_karpenters_names() {
        let metrics = Metrics::new();
        metrics.set_leader(true);
        let text = metrics.encode();
        // Families without a series yet (counters by label) are left out until they have one.
        for name in [
            "karpenter_cluster_state_node_count",
            "karpenter_scheduler_queue_depth",
            "nodewright_decision_duration_seconds",
            "nodewright_log_append_duration_seconds",
            "nodewright_leader 1",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
    }
}
