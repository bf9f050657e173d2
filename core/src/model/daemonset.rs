//! DaemonSets: a pod on every node that admits it, which every machine must have room for.

use serde::{Deserialize, Serialize};

use super::pod::Pod;

/// A DaemonSet: its pod template (the pod's name is empty).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DaemonSet {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The pod it runs on every node (its requests are each node's overhead).
    pub template: Pod,
}
