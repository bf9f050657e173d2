//! What a launch needs of each EC2NodeClass (its spec, launch settings and what its selectors
//! found), kept by the node class resolver and read by the launch executor.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use nodewright_aws::launch::LaunchClass;

/// The node classes ready to launch with, by name.
#[derive(Clone, Default)]
pub struct LaunchClasses(Arc<RwLock<BTreeMap<String, LaunchClass>>>);

impl LaunchClasses {
    pub fn get(&self, name: &str) -> Option<LaunchClass> {
        // A poisoned lock means a writer panicked mid-insert; the map is still whole (inserts
        // and removals are single calls), so reading it on is safe.
        let map = self.0.read().unwrap_or_else(|e| e.into_inner());
        map.get(name).cloned()
    }

    pub fn insert(&self, class: LaunchClass) {
        let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
        map.insert(class.class.name.clone(), class);
    }

    pub fn remove(&self, name: &str) {
        let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
        map.remove(name);
    }
}
