//! The cluster's PersistentVolumeClaims, PersistentVolumes and StorageClasses, kept for the
//! pod watcher: a pod's claims restrict where it runs (`nodewright_adapters::manifest::volumes`).
//!
//! They are not the core's business: what they mean for a pod is carried in the pod's event
//! (its required node affinity), so a replay needs none of them. Each kind is read through the
//! scenario loader's translation, so a claim means the same here as in `nodewright simulate`.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass as KubeStorageClass;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use nodewright_adapters::manifest::Manifest;
use nodewright_adapters::manifest::volumes::Storage;
use serde::Serialize;
use tracing::warn;

use crate::translate::manifest_of;

/// The storage objects, shared by their watchers and the pod watcher.
pub type SharedStorage = Arc<RwLock<Storage>>;

/// How long a start waits for the first listing of the storage objects before it reads pods
/// without them (a cluster whose RBAC forbids listing them, say).
pub const FIRST_LISTING_PATIENCE: Duration = Duration::from_secs(30);

/// Watches the three kinds into `storage` until the runtime stops, and returns once each has
/// been listed (or [`FIRST_LISTING_PATIENCE`] has passed): pods read before then would miss
/// their volumes' zones, as a controller's informers must sync before it acts.
pub async fn spawn_watchers(client: &Client, storage: &SharedStorage) {
    let (listed, mut first_listings) = tokio::sync::mpsc::channel::<()>(3);
    tokio::spawn(follow(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        storage.clone(),
        listed.clone(),
        "PersistentVolumeClaim",
        |storage| &mut storage.claims,
        |m| match m {
            Manifest::PersistentVolumeClaim(c) => Some(((c.namespace.clone(), c.name.clone()), c)),
            _ => None,
        },
    ));
    tokio::spawn(follow(
        Api::<PersistentVolume>::all(client.clone()),
        storage.clone(),
        listed.clone(),
        "PersistentVolume",
        |storage| &mut storage.volumes,
        |m| match m {
            Manifest::PersistentVolume(v) => Some((v.name.clone(), v)),
            _ => None,
        },
    ));
    tokio::spawn(follow(
        Api::<KubeStorageClass>::all(client.clone()),
        storage.clone(),
        listed,
        "StorageClass",
        |storage| &mut storage.classes,
        |m| match m {
            Manifest::StorageClass(c) => Some((c.name.clone(), c)),
            _ => None,
        },
    ));
    let all_listed = async {
        for _ in 0..3 {
            first_listings.recv().await;
        }
    };
    if tokio::time::timeout(FIRST_LISTING_PATIENCE, all_listed)
        .await
        .is_err()
    {
        warn!(
            "PersistentVolumeClaims, PersistentVolumes or StorageClasses could not be listed in time (can the service account list them?): pods are read without their volumes' zones until they are"
        );
    }
}

/// One kind's watch into its map of `storage`: a relist replaces the map once complete.
async fn follow<K, Key, Value>(
    api: Api<K>,
    storage: SharedStorage,
    listed: tokio::sync::mpsc::Sender<()>,
    kind: &'static str,
    map: fn(&mut Storage) -> &mut BTreeMap<Key, Value>,
    read: fn(Manifest) -> Option<(Key, Value)>,
) where
    K: kube::Resource + Clone + Serialize + serde::de::DeserializeOwned + Debug + Send + 'static,
    Key: Ord,
{
    let entry = |object: &K| -> Option<(Key, Value)> {
        let name = object.meta().name.clone().unwrap_or_default();
        match manifest_of(kind, &name, object) {
            Ok(manifest) => read(manifest),
            Err(e) => {
                warn!(kind, name, error = %e, "a storage object cannot be read; pods that use it are not restricted by it");
                None
            }
        }
    };
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let mut listing: Option<BTreeMap<Key, Value>> = None;
    while let Some(item) = stream.next().await {
        // A failed watch call: the backoff retries it, and the next list repairs the gap.
        let Ok(event) = item else { continue };
        let write = || storage.write().unwrap_or_else(PoisonError::into_inner);
        match event {
            Event::Init => listing = Some(BTreeMap::new()),
            Event::InitApply(object) => {
                if let (Some(listing), Some((key, value))) = (&mut listing, entry(&object)) {
                    listing.insert(key, value);
                }
            }
            Event::InitDone => {
                if let Some(whole) = listing.take() {
                    *map(&mut write()) = whole;
                }
                // Only the first listing is waited for; later ones find the channel full or
                // its receiver gone, which is fine.
                let _ = listed.try_send(());
            }
            Event::Apply(object) => {
                if let Some((key, value)) = entry(&object) {
                    map(&mut write()).insert(key, value);
                }
            }
            Event::Delete(object) => {
                if let Some((key, _)) = entry(&object) {
                    map(&mut write()).remove(&key);
                }
            }
        }
    }
}
