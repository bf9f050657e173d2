//! Leader election on a Lease (kube-lease-manager): one replica runs the core, the others wait
//! connected and ready, and the first to take the lease after the leader stops or dies takes
//! over from the same event store. A leader that loses the lease stops at once (the process
//! exits and comes back as a standby), as Karpenter's does.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

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

/// This replica's name in the Lease: the pod's name, made unique so that two processes never
/// share one (a restarted pod must not believe it still holds its predecessor's lease).
pub fn holder_identity(identity: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{identity}_{}_{nanos:08x}", std::process::id())
}

/// The lease, held.
pub struct Leading {
    state: watch::Receiver<bool>,
    task: JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
}

/// Waits until this replica holds the lease.
pub async fn acquire(
    client: kube::Client,
    election: &LeaderElection,
    identity: &str,
) -> Result<Leading, LeaseManagerError> {
    let duration = election.lease_duration.as_secs().max(2);
    // Renewed a third of the way before it runs out (Karpenter: 15 s lease, renewed by 10 s).
    let grace = (duration / 3).max(1);
    let manager = LeaseManagerBuilder::new(client, &election.name)
        .with_namespace(&election.namespace)
        .with_identity(identity)
        .with_duration(duration)
        .with_grace(grace)
        .build()
        .await?;
    let (mut state, task) = manager.watch().await;
    info!(
        lease = election.name,
        namespace = election.namespace,
        identity,
        "waiting for the lease"
    );
    while !*state.borrow_and_update() {
        if state.changed().await.is_err() {
            // The manager's task ended: its error says why.
            return match task.await {
                Ok(Err(e)) => Err(e),
                _ => Err(LeaseManagerError::ControlChannelError(
                    tokio::sync::watch::error::SendError(false),
                )),
            };
        }
    }
    info!(lease = election.name, identity, "holding the lease");
    Ok(Leading { state, task })
}

impl Leading {
    /// Completes when the lease is lost.
    pub async fn lost(&mut self) {
        loop {
            if !*self.state.borrow_and_update() {
                return;
            }
            if self.state.changed().await.is_err() {
                return;
            }
        }
    }

    /// Gives the lease up, so that a standby takes over at once rather than after the lease
    /// runs out.
    pub async fn release(self) {
        drop(self.state);
        match self.task.await {
            Ok(Ok(_)) => info!("the lease is released"),
            Ok(Err(e)) => warn!(error = %e, "releasing the lease failed; it runs out instead"),
            Err(e) => warn!(error = %e, "the lease manager's task failed"),
        }
    }
}
