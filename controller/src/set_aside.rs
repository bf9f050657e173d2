//! Never a crash loop. An event store whose records do not decode, whose replay decides
//! differently than it says (a log of another version), or on whose events the core panics,
//! is set aside — kept beside the store under a name that says why, named in a log line, an
//! Event on the leader's Lease and the metric `nodewright_log_set_aside_total` — and a new
//! store is begun from what the cluster shows. An object whose event panicked the core is
//! quarantined: its events are no longer given to the core (each one said in a log line), so
//! that the same object cannot panic the next term too. A panic that names no object, again
//! and again, stops the controller with the error: that is a bug to report, not a loop.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nodewright_adapters::driver::DriverError;
use nodewright_core::EventKind;
use nodewright_kubernetes::announce::{Announcement, Announcer, Regarding};
use tracing::{error, warn};

use crate::metrics::Metrics;
use crate::settings::Settings;

/// How many stores may be set aside within [`WINDOW`] before the controller stops.
pub const MAX_SET_ASIDE: usize = 3;
/// See [`MAX_SET_ASIDE`].
pub const WINDOW: Duration = Duration::from_secs(600);

/// Why a store was set aside, as the metric's label and the file's name say it.
pub fn why(error: &DriverError) -> &'static str {
    match error {
        DriverError::Panicked { .. } => "panicked",
        DriverError::Diverged { .. } => "diverged",
        _ => "unreadable",
    }
}

/// The object an event is about, as the quarantine names it (`pod default/web-0`,
/// `node ip-10-0-0-1`, ...); `None` for events about no one object.
pub fn subject(kind: &EventKind) -> Option<String> {
    Some(match kind {
        EventKind::PodApplied(pod) => format!("pod {}", pod.key),
        EventKind::PodBound { pod, .. }
        | EventKind::PodDeleted { pod }
        | EventKind::EvictionRefused { pod, .. } => format!("pod {pod}"),
        EventKind::NodeApplied(node) => format!("node {}", node.name),
        EventKind::NodeDeleted { name } | EventKind::NodeDeleting { name } => {
            format!("node {name}")
        }
        EventKind::NodePoolApplied(pool) => format!("nodepool {}", pool.name),
        EventKind::NodePoolDeleted { name } => format!("nodepool {name}"),
        EventKind::NodeClassApplied(class) => format!("ec2nodeclass {}", class.name),
        EventKind::NodeClassDeleted { name } => format!("ec2nodeclass {name}"),
        EventKind::NodeClassResolved(resolved) => format!("ec2nodeclass {}", resolved.name),
        EventKind::DaemonSetApplied(ds) => format!("daemonset {}/{}", ds.namespace, ds.name),
        EventKind::DaemonSetDeleted { namespace, name } => format!("daemonset {namespace}/{name}"),
        EventKind::PodDisruptionBudgetApplied(pdb) => {
            format!("poddisruptionbudget {}/{}", pdb.namespace, pdb.name)
        }
        EventKind::PodDisruptionBudgetDeleted { namespace, name } => {
            format!("poddisruptionbudget {namespace}/{name}")
        }
        EventKind::LaunchSucceeded { nodeclaim, .. }
        | EventKind::LaunchFailed { nodeclaim, .. }
        | EventKind::NodeClaimTerminated { nodeclaim }
        | EventKind::NodeClaimDeleted { nodeclaim }
        | EventKind::TerminationFailed { nodeclaim, .. } => format!("nodeclaim {nodeclaim}"),
        EventKind::InterruptionReceived { instance_id, .. } => format!("instance {instance_id}"),
        EventKind::CatalogUpdated(_)
        | EventKind::Tick
        | EventKind::InstancesListed { .. }
        | EventKind::InstancesRelisted { .. }
        | EventKind::NodeClaimsObserved { .. } => return None,
    })
}

/// The objects whose events the core no longer sees, shared with the control loop's filter.
#[derive(Debug, Clone, Default)]
pub struct Quarantine(Arc<Mutex<BTreeSet<String>>>);

impl Quarantine {
    /// Whether the event is about a quarantined object (said in a log line when it is).
    pub fn holds(&self, kind: &EventKind) -> bool {
        let set = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if set.is_empty() {
            return false;
        }
        match subject(kind) {
            Some(subject) if set.contains(&subject) => {
                warn!(
                    subject,
                    event = kind.name(),
                    "an event about a quarantined object is not given to the core"
                );
                true
            }
            _ => false,
        }
    }

    fn add(&self, subject: String) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(subject);
    }
}

/// The stores set aside lately, and the quarantine.
#[derive(Debug, Default)]
pub struct SetAside {
    lately: Vec<Instant>,
    pub quarantine: Quarantine,
}

impl SetAside {
    /// Sets the store aside after `error` (the subject of the event that panicked the core,
    /// if any, is quarantined). `Err` when too many were set aside lately: the controller
    /// stops with the error.
    pub async fn set_aside(
        &mut self,
        settings: &Settings,
        metrics: &Metrics,
        announcer: &Announcer,
        error: DriverError,
        subject: Option<String>,
    ) -> Result<PathBuf, DriverError> {
        let now = Instant::now();
        self.lately.retain(|at| now.duration_since(*at) < WINDOW);
        if self.lately.len() >= MAX_SET_ASIDE {
            error!(error = %error, set_aside = self.lately.len(), "the event store was set aside too often; stopping");
            return Err(error);
        }
        self.lately.push(now);
        let why = why(&error);
        let kept = kept_name(&settings.store, why);
        if let Err(e) = std::fs::rename(&settings.store, &kept) {
            // Kept where it is would make the next term read it again: give up instead.
            error!(store = %settings.store.display(), error = %e, "the event store cannot be set aside");
            return Err(error);
        }
        if let Some(subject) = &subject {
            self.quarantine.add(subject.clone());
        }
        metrics.log_set_aside(why);
        let note = format!(
            "the event store was set aside as {} ({error}){}; a new store begins from what the cluster shows",
            kept.display(),
            subject
                .as_deref()
                .map(|s| format!(
                    "; {s} is quarantined: its events are no longer given to the core"
                ))
                .unwrap_or_default()
        );
        warn!(store = %settings.store.display(), kept = %kept.display(), why, "{note}");
        if let Some(election) = &settings.leader_election {
            let event = Announcement {
                regarding: Regarding::Lease {
                    namespace: election.namespace.clone(),
                    name: election.name.clone(),
                },
                warning: true,
                reason: "EventStoreSetAside",
                action: "SetAside",
                note,
            };
            if let Err(e) = announcer.publish(&event).await {
                warn!(error = %e, "publishing a Kubernetes Event failed");
            }
        }
        Ok(kept)
    }
}

/// `events.redb` → `events.set-aside-<ms>-<why>.redb`, beside it.
fn kept_name(store: &Path, why: &str) -> PathBuf {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let stem = store
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "events".to_string());
    let extension = store
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    store.with_file_name(format!("{stem}.set-aside-{ms}-{why}{extension}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_aside_store_keeps_its_folder_and_says_why() {
        let kept = kept_name(Path::new("/data/events.redb"), "panicked");
        let name = kept.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(kept.parent(), Some(Path::new("/data")));
        assert!(name.starts_with("events.set-aside-"), "{name}");
        assert!(name.ends_with("-panicked.redb"), "{name}");
    }

    #[test]
    fn a_quarantined_pod_is_held_and_others_pass() {
        use nodewright_core::model::pod::PodKey;
        let q = Quarantine::default();
        let poisoned = EventKind::PodDeleted {
            pod: PodKey::new("default", "poison"),
        };
        let other = EventKind::PodDeleted {
            pod: PodKey::new("default", "web"),
        };
        assert!(!q.holds(&poisoned));
        q.add(subject(&poisoned).unwrap());
        assert!(q.holds(&poisoned));
        assert!(!q.holds(&other));
        assert!(!q.holds(&EventKind::Tick));
    }
}
