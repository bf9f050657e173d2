//! Leader election on a Lease, fenced: one replica runs the core, the others wait connected and
//! ready, and the first to take the lease after the leader stops or dies takes over.
//!
//! The elector is client-go's, written against the Lease API: a standby takes the lease only
//! once it has seen the same record, unrenewed, for the lease's whole duration by its own
//! clock (never trusting another machine's clock); the leader renews every retry period, and
//! stops acting — no launch, no termination, no eviction — once it has not renewed within the
//! renew deadline, which ends before any standby may take over. Every side effect checks the
//! term's [`Fence`] just before it is made. A leader that loses the lease stops (the process
//! exits and comes back as a standby), as Karpenter's does.
//!
//! Timing, from the lease duration `D` (Karpenter's: 15 s): the renew deadline is `2D/3`
//! (10 s), the retry period `2D/15` (2 s). The deadline is counted from the moment a renewal
//! that succeeded was sent, so a standby, which counts from the moment it saw that renewal,
//! always counts from later: between the fence closing and the first takeover lie at least
//! `D/3` (5 s).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use thiserror::Error;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::metrics::Metrics;

/// The Lease and its timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElection {
    /// `LEADER_ELECTION_NAME` (Karpenter's: `karpenter-leader-election`).
    pub name: String,
    /// `LEADER_ELECTION_NAMESPACE`: the controller's namespace.
    pub namespace: String,
    /// How long a lease holds without renewal: a dead leader's standby waits this long.
    pub lease_duration: Duration,
}

impl LeaderElection {
    /// How long the leader acts without a renewal that succeeded: two thirds of the lease.
    pub fn renew_deadline(&self) -> Duration {
        self.lease_duration * 2 / 3
    }

    /// How often the leader renews, and a standby looks: two fifteenths of the lease.
    pub fn retry_period(&self) -> Duration {
        self.lease_duration * 2 / 15
    }
}

/// This replica's name in the Lease: the pod's name, made unique so that two processes never
/// share one (a restarted pod must not believe it still holds its predecessor's lease).
pub fn holder_identity(identity: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{identity}_{}_{nanos:08x}", std::process::id())
}

#[derive(Debug, Error)]
pub enum LeaseError {
    #[error("the Lease API: {0}")]
    Api(#[from] kube::Error),
    #[error("the Lease API did not answer within {0:?}")]
    TimedOut(Duration),
}

/// A term's fence: whether the side effects decided in it may still be made. It holds while
/// the lease was renewed within the renew deadline, and never again once it has lapsed.
#[derive(Debug)]
pub struct Fence {
    /// The lease's transitions when the term began: which term this is.
    term: u64,
    base: Instant,
    /// Until when it holds, in milliseconds after `base`; `u64::MAX`: always (one replica,
    /// no election).
    until_ms: AtomicU64,
    lapsed: AtomicBool,
}

/// A side effect refused: the term it was decided in is over.
#[derive(Debug, Clone, Copy, Error)]
#[error(
    "the leader's term {term} is over (the lease was not renewed within its deadline, or was lost): the side effect is not made; the next leader decides again"
)]
pub struct Fenced {
    pub term: u64,
}

impl Fence {
    /// A fence that always holds: one replica, no election.
    pub fn unbounded() -> Arc<Fence> {
        Arc::new(Fence {
            term: 0,
            base: Instant::now(),
            until_ms: AtomicU64::new(u64::MAX),
            lapsed: AtomicBool::new(false),
        })
    }

    fn new(term: u64, until: Instant) -> Arc<Fence> {
        let base = Instant::now();
        let fence = Fence {
            term,
            base,
            until_ms: AtomicU64::new(0),
            lapsed: AtomicBool::new(false),
        };
        fence.extend(until);
        Arc::new(fence)
    }

    /// Holds until `until` (never shortened, never after it lapsed).
    fn extend(&self, until: Instant) {
        let ms = until.saturating_duration_since(self.base).as_millis() as u64;
        self.until_ms.fetch_max(ms, Ordering::AcqRel);
    }

    /// Never holds again.
    pub fn lapse(&self) {
        self.lapsed.store(true, Ordering::Release);
    }

    pub fn term(&self) -> u64 {
        self.term
    }

    /// How long it holds from now (zero once it does not).
    fn remaining(&self) -> Duration {
        let until = Duration::from_millis(self.until_ms.load(Ordering::Acquire));
        until.saturating_sub(self.base.elapsed())
    }

    /// Whether a side effect of this term may be made now.
    pub fn holds(&self) -> bool {
        if self.lapsed.load(Ordering::Acquire) {
            return false;
        }
        let until = self.until_ms.load(Ordering::Acquire);
        until == u64::MAX || (self.base.elapsed().as_millis() as u64) < until
    }

    /// [`Fence::holds`], as a result for `?`.
    pub fn check(&self) -> Result<(), Fenced> {
        if self.holds() {
            Ok(())
        } else {
            Err(Fenced { term: self.term })
        }
    }
}

/// What a look at the Lease found.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    transitions: i32,
    duration_seconds: Option<i32>,
}

impl Record {
    fn of(spec: &LeaseSpec) -> Record {
        Record {
            holder: spec.holder_identity.clone().filter(|h| !h.is_empty()),
            renew_time: spec.renew_time.clone(),
            transitions: spec.lease_transitions.unwrap_or(0),
            duration_seconds: spec.lease_duration_seconds,
        }
    }
}

/// `call`, failing with [`LeaseError::TimedOut`] if it takes longer than `within`.
async fn bounded<T>(
    within: Duration,
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, LeaseError> {
    tokio::time::timeout(within, call)
        .await
        .map_err(|_| LeaseError::TimedOut(within))?
        .map_err(LeaseError::from)
}

/// One replica's side of the election.
struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    election: LeaderElection,
    /// The record last seen and when this process saw it change.
    observed: Option<(Record, Instant)>,
}

impl Elector {
    /// How long one call of the Lease API may take: a retry period, at least a second.
    fn call_bound(&self) -> Duration {
        self.election.retry_period().max(Duration::from_secs(1))
    }

    /// Takes or renews the lease if this replica may: `Some(transitions)` when it holds it.
    async fn try_acquire_or_renew(&mut self) -> Result<Option<u64>, LeaseError> {
        let call = self.call_bound();
        let current = bounded(call, self.api.get_opt(&self.name)).await?;
        let now = MicroTime(Timestamp::now());
        let duration_seconds = self.election.lease_duration.as_secs().max(1) as i32;
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(duration_seconds),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match bounded(call, self.api.create(&PostParams::default(), &lease)).await {
                Ok(created) => Ok(self.took(&created)),
                // Another replica created it first.
                Err(LeaseError::Api(kube::Error::Api(status))) if status.code == 409 => Ok(None),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let record = Record::of(&spec);
        if self.observed.as_ref().map(|(r, _)| r) != Some(&record) {
            self.observed = Some((record.clone(), Instant::now()));
        }
        let ours = record.holder.as_deref() == Some(self.identity.as_str());
        if !ours && record.holder.is_some() {
            let held_for = record
                .duration_seconds
                .map(|s| Duration::from_secs(s.max(1) as u64))
                .unwrap_or(self.election.lease_duration);
            let seen = self.observed.as_ref().map(|(_, at)| *at);
            if seen.is_none_or(|at| at.elapsed() < held_for) {
                return Ok(None);
            }
        }
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(duration_seconds),
            acquire_time: if ours {
                spec.acquire_time.clone()
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(if ours {
                record.transitions
            } else {
                record.transitions.saturating_add(1)
            }),
            ..spec
        });
        // The resource version read makes this a compare-and-swap: a replica that wrote in
        // between wins, and this one sees a conflict.
        match bounded(
            call,
            self.api.replace(&self.name, &PostParams::default(), &lease),
        )
        .await
        {
            Ok(replaced) => Ok(self.took(&replaced)),
            Err(LeaseError::Api(kube::Error::Api(status))) if status.code == 409 => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn took(&mut self, lease: &Lease) -> Option<u64> {
        let spec = lease.spec.clone().unwrap_or_default();
        let record = Record::of(&spec);
        let transitions = record.transitions.max(0) as u64;
        self.observed = Some((record, Instant::now()));
        Some(transitions)
    }

    /// Gives the lease up (when this replica holds it): a standby takes it at its next look.
    async fn release(&mut self) -> Result<(), LeaseError> {
        let call = self.call_bound();
        let Some(mut lease) = bounded(call, self.api.get_opt(&self.name)).await? else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        bounded(
            call,
            self.api.replace(&self.name, &PostParams::default(), &lease),
        )
        .await
        .map(drop)
    }
}

/// The lease, held: its fence, and the task renewing it.
pub struct Leading {
    fence: Arc<Fence>,
    held: watch::Receiver<bool>,
    renewing: JoinHandle<Elector>,
    stop_renewing: Option<tokio::sync::oneshot::Sender<()>>,
}

/// Waits until this replica holds the lease; from then on it renews it in the background.
/// `metrics` counts the renewals that failed.
pub async fn acquire(
    client: kube::Client,
    election: &LeaderElection,
    identity: &str,
    metrics: Arc<Metrics>,
) -> Result<Leading, LeaseError> {
    let mut elector = Elector {
        api: Api::namespaced(client, &election.namespace),
        name: election.name.clone(),
        identity: identity.to_string(),
        election: election.clone(),
        observed: None,
    };
    info!(
        lease = election.name,
        namespace = election.namespace,
        identity,
        "waiting for the lease"
    );
    let retry = election.retry_period();
    let (term, began) = loop {
        let began = Instant::now();
        match elector.try_acquire_or_renew().await {
            Ok(Some(term)) => break (term, began),
            Ok(None) => {}
            Err(e) => warn!(lease = election.name, error = %e, "looking at the lease failed"),
        }
        tokio::time::sleep(jittered(retry)).await;
    };
    let fence = Fence::new(term, began + election.renew_deadline());
    info!(lease = election.name, identity, term, "holding the lease");
    let (held_tx, held) = watch::channel(true);
    let (stop_renewing, mut stopped) = tokio::sync::oneshot::channel();
    let renewing = {
        let fence = Arc::clone(&fence);
        let deadline = election.renew_deadline();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(retry) => {}
                    _ = &mut stopped => return elector,
                }
                let began = Instant::now();
                // The attempt may take no longer than the fence has left.
                let attempt =
                    tokio::time::timeout(fence.remaining(), elector.try_acquire_or_renew()).await;
                match attempt {
                    Ok(Ok(Some(_))) => fence.extend(began + deadline),
                    Ok(Ok(None)) => {
                        warn!(lease = elector.name, "another replica holds the lease now");
                        fence.lapse();
                    }
                    Ok(Err(e)) => {
                        metrics.lease_renewal_failed();
                        warn!(lease = elector.name, error = %e, "renewing the lease failed");
                    }
                    Err(_) => {
                        metrics.lease_renewal_failed();
                        warn!(
                            lease = elector.name,
                            "renewing the lease did not finish within its deadline"
                        );
                    }
                }
                if !fence.holds() {
                    fence.lapse();
                    warn!(
                        lease = elector.name,
                        term = fence.term,
                        deadline_ms = deadline.as_millis() as u64,
                        "the lease was not renewed within its deadline: this replica stops acting"
                    );
                    let _ = held_tx.send(false);
                    return elector;
                }
            }
        })
    };
    Ok(Leading {
        fence,
        held,
        renewing,
        stop_renewing: Some(stop_renewing),
    })
}

/// `period`, give or take a fifth, so that replicas started together do not look together.
fn jittered(period: Duration) -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let fifth = period / 5;
    period - fifth + fifth * 2 * (nanos % 1000) / 1000
}

impl Leading {
    /// The term's fence, for the side effects decided in it.
    pub fn fence(&self) -> Arc<Fence> {
        Arc::clone(&self.fence)
    }

    /// Completes when the lease is lost (not renewed within the deadline, or taken).
    pub async fn lost(&mut self) {
        let _ = self.held.wait_for(|held| !*held).await;
    }

    /// Stops acting, then gives the lease up so that a standby takes over at once rather than
    /// after the lease runs out.
    pub async fn release(mut self) {
        self.fence.lapse();
        if let Some(stop) = self.stop_renewing.take() {
            let _ = stop.send(());
        }
        match self.renewing.await {
            Ok(mut elector) => match elector.release().await {
                Ok(()) => info!("the lease is released"),
                Err(e) => warn!(error = %e, "releasing the lease failed; it runs out instead"),
            },
            Err(e) => warn!(error = %e, "the lease's renewal task failed"),
        }
    }
}
