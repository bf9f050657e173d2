//! A kind's objects kept in memory by a reflector, with a signal on every change: the node
//! class resolver and node registration read them instead of asking the API server.

use std::fmt::Debug;
use std::hash::Hash;

use futures::StreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tracing::warn;

/// The objects of `api` (without their `managedFields`), and a receiver that wakes after changes (several changes may wake
/// it once). The reflector runs in its own task until the receiver is dropped.
pub fn cached<K>(api: Api<K>) -> (Store<K>, mpsc::Receiver<()>)
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let (store, writer) = reflector::store::<K>();
    let (changed, changes) = mpsc::channel(1);
    tokio::spawn(async move {
        // `managedFields` is most of a small object and nothing here reads it.
        let watch = watcher::watcher(api, watcher::Config::default())
            .modify(|object| object.managed_fields_mut().clear());
        let stream = reflector::reflector(writer, watch)
            .default_backoff()
            .touched_objects();
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            if let Err(e) = item {
                warn!(error = %e, "a watch failed; it is retried");
                continue;
            }
            match changed.try_send(()) {
                Ok(()) | Err(mpsc::error::TrySendError::Full(())) => {}
                Err(mpsc::error::TrySendError::Closed(())) => return,
            }
        }
    });
    (store, changes)
}
