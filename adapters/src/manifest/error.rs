//! Errors that name the file, the document, the field and the fix.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ManifestError {
    #[error(
        "{source_name}: document {document} (starting at line {first_line}) is not valid YAML for this object: {message}"
    )]
    Yaml {
        source_name: String,
        document: usize,
        first_line: usize,
        message: String,
    },
    #[error(
        "{source_name}: document {document}: kind {kind:?} (apiVersion {api_version:?}) is not one nodewright reads; use NodePool (karpenter.sh/v1), EC2NodeClass (karpenter.k8s.aws/v1), Pod, Deployment, DaemonSet or PodDisruptionBudget"
    )]
    UnknownKind {
        source_name: String,
        document: usize,
        kind: String,
        api_version: String,
    },
    #[error(transparent)]
    Invalid(Box<InvalidField>),
}

/// A field whose value nodewright refuses, with the fix.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "{source_name}: document {document} ({kind} {name:?}): field `{field}`: {problem}; fix: {fix}"
)]
pub struct InvalidField {
    pub source_name: String,
    pub document: usize,
    pub kind: String,
    pub name: String,
    pub field: String,
    pub problem: String,
    pub fix: String,
}
