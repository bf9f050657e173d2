//! The watchers: each kind's watch stream turned into the core's events, with what a watch
//! restart needs.
//!
//! A watch that restarts (410 Gone, a stale resourceVersion, a dropped connection) lists the
//! kind again: `Init`, one `InitApply` per object, `InitDone`. A [`Mirror`] remembers which
//! objects it told the core about, so that after the relist it deletes exactly those the
//! listing lacks — nothing is lost (a deletion missed while the watch was down is still sent)
//! and nothing is counted twice (an object already known is applied again, which the core
//! takes as the same object).

use std::collections::BTreeSet;
use std::fmt::Debug;

use futures::{Stream, StreamExt};
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use nodewright_adapters::control_loop::InboxSender;
use nodewright_core::EventKind;

use crate::ObserveError;
pub use crate::kinds::{DaemonSets, NodeClasses, NodePools, Nodes, PodDisruptionBudgets, Pods};

/// A kind the core follows: how its objects are keyed, applied and deleted.
pub trait Observed {
    type Object;
    type Key: Ord + Clone + Debug;
    fn key(object: &Self::Object) -> Self::Key;
    /// The event an object gives; `None` when the core should not know it (a pod the
    /// scheduler has not tried yet).
    fn applied(&self, object: &Self::Object) -> Result<Option<EventKind>, ObserveError>;
    fn deleted(key: Self::Key) -> EventKind;
    /// An event that follows the applied one (a Node being deleted: `NodeDeleting`).
    fn followed_by(&self, _object: &Self::Object) -> Option<EventKind> {
        None
    }
}

/// What one watcher has told the core, to answer a relist with the right deletions.
#[derive(Debug)]
pub struct Mirror<O: Observed> {
    /// How the kind's objects read (with what they need: the pods, the cluster's volumes).
    observed: O,
    /// The objects the core knows from this watcher.
    known: BTreeSet<O::Key>,
    /// During a relist: the objects listed so far.
    listing: Option<BTreeSet<O::Key>>,
}

impl<O: Observed + Default> Default for Mirror<O> {
    fn default() -> Self {
        Mirror::knowing(O::default(), BTreeSet::new())
    }
}

impl<O: Observed> Mirror<O> {
    /// A mirror of a watcher that starts after a restart: the core already knows `known` (from
    /// its log), so the first listing deletes those of them that are gone.
    pub fn knowing(observed: O, known: BTreeSet<O::Key>) -> Self {
        Mirror {
            observed,
            known,
            listing: None,
        }
    }

    /// The core's events for one watch event. An object that cannot be read is reported on
    /// `errors` and left out; the rest of the kind keeps being served.
    pub fn on_event(
        &mut self,
        event: Event<O::Object>,
        errors: &mut Vec<ObserveError>,
    ) -> Vec<EventKind> {
        match event {
            Event::Init => {
                self.listing = Some(BTreeSet::new());
                Vec::new()
            }
            Event::InitApply(object) => {
                if let Some(listing) = &mut self.listing {
                    listing.insert(O::key(&object));
                }
                self.apply(&object, errors)
            }
            Event::InitDone => {
                let listed = self.listing.take().unwrap_or_default();
                let gone: Vec<O::Key> = self.known.difference(&listed).cloned().collect();
                gone.into_iter().map(|key| self.delete(key)).collect()
            }
            Event::Apply(object) => self.apply(&object, errors),
            Event::Delete(object) => {
                let key = O::key(&object);
                if self.known.contains(&key) {
                    vec![self.delete(key)]
                } else {
                    Vec::new()
                }
            }
        }
    }

    fn apply(&mut self, object: &O::Object, errors: &mut Vec<ObserveError>) -> Vec<EventKind> {
        let key = O::key(object);
        match self.observed.applied(object) {
            Ok(Some(event)) => {
                self.known.insert(key);
                let mut events = vec![event];
                events.extend(self.observed.followed_by(object));
                events
            }
            // No longer the core's business (a pod finished, or waiting again): if the core
            // knew it, it is gone for the core.
            Ok(None) if self.known.contains(&key) => vec![self.delete(key)],
            Ok(None) => Vec::new(),
            Err(e) => {
                errors.push(e);
                Vec::new()
            }
        }
    }

    fn delete(&mut self, key: O::Key) -> EventKind {
        self.known.remove(&key);
        O::deleted(key)
    }
}

/// What went wrong in a watch; nothing of it stops the watch.
#[derive(Debug, thiserror::Error)]
pub enum Trouble {
    /// An object that cannot be read: left out, the rest of the kind is served.
    #[error(transparent)]
    Unreadable(#[from] ObserveError),
    /// A watch call that failed (the API server unreachable, a 5xx, an expired
    /// resourceVersion): retried with kube's default backoff, and the next list repairs what
    /// was missed meanwhile.
    #[error(
        "the watch call failed ({0}); it is retried with backoff, and the next list repairs what was missed"
    )]
    WatchFailed(String),
}

/// What a watch tells its owner beside the events it feeds: that the API server answered
/// (the watch is fresh), or what went wrong.
#[derive(Debug)]
pub enum Heard {
    /// The API server answered: an event, or a list.
    Answer,
    Trouble(Trouble),
}

/// How long a watch call may stay open: the API server ends it after this, and kube's watcher
/// takes a call silent for longer (plus a margin) for dead and starts another, so that a
/// watch on an API server that hangs fails within a bound instead of waiting forever.
pub const WATCH_CALL_SECONDS: u32 = 60;

/// Feeds one kind's watch into the control loop's inbox until the inbox closes; what it
/// hears besides (answers, trouble) goes to `on_heard`. The watch restarts with kube's default
/// backoff. `known`: what the core knows of the kind already (see [`Mirror::knowing`]).
pub async fn run<O>(
    api: Api<O::Object>,
    observed: O,
    inbox: InboxSender,
    known: BTreeSet<O::Key>,
    mut on_heard: impl FnMut(Heard),
) where
    O: Observed,
    O::Object: kube::Resource + Clone + serde::de::DeserializeOwned + Debug + Send + 'static,
{
    let config = watcher::Config::default().timeout(WATCH_CALL_SECONDS);
    let stream = watcher::watcher(api, config).default_backoff();
    feed::<O>(
        stream,
        inbox,
        Mirror::knowing(observed, known),
        &mut on_heard,
    )
    .await;
}

/// [`run`] over any stream of watch events (a test can feed its own).
pub async fn feed<O: Observed>(
    stream: impl Stream<Item = Result<Event<O::Object>, watcher::Error>>,
    inbox: InboxSender,
    mut mirror: Mirror<O>,
    on_heard: &mut impl FnMut(Heard),
) {
    let mut stream = std::pin::pin!(stream);
    while let Some(item) = stream.next().await {
        let event = match item {
            Ok(event) => {
                on_heard(Heard::Answer);
                event
            }
            Err(error) => {
                on_heard(Heard::Trouble(Trouble::WatchFailed(error.to_string())));
                continue;
            }
        };
        let mut errors = Vec::new();
        for kind in mirror.on_event(event, &mut errors) {
            if inbox.observe(kind).await.is_err() {
                return;
            }
        }
        errors
            .into_iter()
            .for_each(|e| on_heard(Heard::Trouble(Trouble::Unreadable(e))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Node as KubeNode, NodeSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use nodewright_adapters::control_loop::Input;

    fn node(name: &str) -> KubeNode {
        KubeNode {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec::default()),
            status: None,
        }
    }

    fn names(events: &[EventKind]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                EventKind::NodeApplied(n) => format!("+{}", n.name),
                EventKind::NodeDeleted { name } => format!("-{name}"),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_relist_deletes_what_it_lacks_and_nothing_else() {
        let mut mirror = Mirror::<Nodes>::default();
        let mut errors = Vec::new();
        let mut run = |e| names(&mirror.on_event(e, &mut errors));
        assert!(run(Event::Init).is_empty());
        assert_eq!(run(Event::InitApply(node("a"))), ["+a"]);
        assert_eq!(run(Event::InitApply(node("b"))), ["+b"]);
        assert!(run(Event::InitDone).is_empty());
        assert_eq!(run(Event::Apply(node("c"))), ["+c"]);
        // The watch breaks; b was deleted meanwhile and its deletion never arrived.
        assert!(run(Event::Init).is_empty());
        assert_eq!(run(Event::InitApply(node("a"))), ["+a"]);
        assert_eq!(run(Event::InitApply(node("c"))), ["+c"]);
        assert_eq!(run(Event::InitDone), ["-b"]);
        // A deletion the core already had is not sent twice.
        assert_eq!(run(Event::Delete(node("c"))), ["-c"]);
        assert!(run(Event::Delete(node("c"))).is_empty());
        assert!(errors.is_empty());
    }

    #[test]
    fn a_node_that_cannot_be_read_is_reported_and_the_rest_served() {
        let mut bad = node("bad");
        bad.spec = Some(NodeSpec {
            taints: Some(vec![k8s_openapi::api::core::v1::Taint {
                key: "k".into(),
                effect: "Sometimes".into(),
                ..Default::default()
            }]),
            ..NodeSpec::default()
        });
        let mut mirror = Mirror::<Nodes>::default();
        let mut errors = Vec::new();
        assert!(mirror.on_event(Event::Apply(bad), &mut errors).is_empty());
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].to_string().contains("spec.taints[0].effect"),
            "{}",
            errors[0]
        );
        let served = mirror.on_event(Event::Apply(node("good")), &mut errors);
        assert_eq!(names(&served), ["+good"]);
    }

    /// A failed watch call is told, not dropped, and the watch goes on: what comes after it
    /// still reaches the inbox.
    #[tokio::test]
    async fn a_failed_watch_call_is_told_and_the_watch_goes_on() {
        let stream = futures::stream::iter(vec![
            Ok(Event::Apply(node("a"))),
            Err(watcher::Error::NoResourceVersion),
            Ok(Event::Apply(node("b"))),
        ]);
        let (sender, mut inbox) = nodewright_adapters::control_loop::inbox();
        let mut troubles = Vec::new();
        let mut answers = 0;
        feed::<Nodes>(
            stream,
            sender,
            Mirror::default(),
            &mut |heard| match heard {
                Heard::Answer => answers += 1,
                Heard::Trouble(t) => troubles.push(t.to_string()),
            },
        )
        .await;
        assert_eq!(answers, 2, "each event is an answer");
        let mut seen = Vec::new();
        while let Some(Input::Observed(kind)) = inbox.try_recv() {
            seen.push(kind);
        }
        assert_eq!(names(&seen), ["+a", "+b"]);
        assert_eq!(troubles.len(), 1, "{troubles:?}");
        assert!(
            troubles[0].contains("the watch call failed"),
            "{troubles:?}"
        );
    }
}
