//! Why an object from the API server could not be read into the core's terms.

use nodewright_adapters::manifest::ManifestError;

#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// The object breaks a rule of the translation (the error names the field).
    #[error(transparent)]
    Invalid(#[from] ManifestError),
    /// The object could not be written as JSON for the translation (never expected of an
    /// object the API server sent).
    #[error("{kind} {name}: cannot be read: {source}")]
    Encoding {
        kind: &'static str,
        name: String,
        #[source]
        source: serde_json::Error,
    },
    /// A Node field is not what Kubernetes allows.
    #[error("Node {node}: {field}: {problem}")]
    Node {
        node: String,
        field: String,
        problem: String,
    },
}
