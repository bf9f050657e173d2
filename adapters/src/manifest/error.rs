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
        "{source_name}: document {document}: kind {kind:?} (apiVersion {api_version:?}) is not one nodewright reads; use NodePool (karpenter.sh/v1), EC2NodeClass (karpenter.k8s.aws/v1), Pod, Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob (batch/v1), PodDisruptionBudget, PersistentVolumeClaim, PersistentVolume or StorageClass (storage.k8s.io/v1)"
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

/// A YAML error in the words of its reader's user-facing messages, with the snippet's lines
/// numbered as in the whole file (`first_line` is where the parsed text starts) and headed by
/// the file's name. The caller says what was being read; this never adds its own "error:".
pub fn describe_yaml_error(
    error: &serde_saphyr::Error,
    source_name: &str,
    first_line: usize,
) -> String {
    let options = serde_saphyr::render_options! {
        formatter: &serde_saphyr::UserMessageFormatter,
        line_offset: first_line.saturating_sub(1) as u64,
        source_name: Some(source_name),
    };
    let rendered = error.render_with_options(options);
    // The snippet heads its text with its own "error: "; the caller's message already says it.
    match rendered.strip_prefix("error: ") {
        Some(rest) => rest.to_string(),
        None => rendered,
    }
}
