//! What a launch needs of each EC2NodeClass (its spec, launch settings and what its selectors
//! found), kept by the node class resolver and read by the launch executor.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use nodewright_aws::launch::LaunchClass;
use tokio::sync::Notify;

#[derive(Default)]
struct Shared {
    classes: RwLock<BTreeMap<String, LaunchClass>>,
    /// Woken at every insert.
    inserted: Notify,
}

/// The node classes ready to launch with, by name.
#[derive(Clone, Default)]
pub struct LaunchClasses(Arc<Shared>);

impl LaunchClasses {
    pub fn get(&self, name: &str) -> Option<LaunchClass> {
        // A poisoned lock means a writer panicked mid-insert; the map is still whole (inserts
        // and removals are single calls), so reading it on is safe.
        let map = self.0.classes.read().unwrap_or_else(|e| e.into_inner());
        map.get(name).cloned()
    }

    /// The class, waiting up to `within` for it to be resolved (right after a start, a
    /// re-issued launch comes before the first resolution).
    pub async fn ready(&self, name: &str, within: Duration) -> Option<LaunchClass> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let inserted = self.0.inserted.notified();
            if let Some(class) = self.get(name) {
                return Some(class);
            }
            if tokio::time::timeout_at(deadline, inserted).await.is_err() {
                return self.get(name);
            }
        }
    }

    pub fn insert(&self, class: LaunchClass) {
        {
            let mut map = self.0.classes.write().unwrap_or_else(|e| e.into_inner());
            map.insert(class.class.name.clone(), class);
        }
        self.0.inserted.notify_waiters();
    }

    pub fn remove(&self, name: &str) {
        let mut map = self.0.classes.write().unwrap_or_else(|e| e.into_inner());
        map.remove(name);
    }
}
