//! A cluster object through the scenario loader's translation: the object is written as JSON
//! (k8s-openapi's types and the loader's are serde-compatible) and read back as a manifest, so
//! that the controller and `nodewright simulate` give an object the same meaning and refuse it
//! with the same message.

use nodewright_adapters::manifest::{Manifest, parse_manifests};
use serde::Serialize;

use crate::ObserveError;

/// The manifest `object` reads as; `kind` and `name` name it in errors
/// (`cluster PodDisruptionBudget apps/web: ...`).
pub fn manifest_of<T: Serialize>(
    kind: &'static str,
    name: &str,
    object: &T,
) -> Result<Manifest, ObserveError> {
    let json = serde_json::to_string(object).map_err(|source| ObserveError::Encoding {
        kind,
        name: name.to_string(),
        source,
    })?;
    let mut manifests = parse_manifests(&json, &format!("cluster {kind} {name}"))?;
    // A JSON object is one document, so exactly one manifest (the kind is one the loader
    // reads: the watchers only pass those).
    manifests.pop().ok_or_else(|| ObserveError::Encoding {
        kind,
        name: name.to_string(),
        source: serde::de::Error::custom("the object read as no manifest"),
    })
}
