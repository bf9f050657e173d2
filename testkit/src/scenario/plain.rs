//! Plain Kubernetes YAML as a scenario: `nodewright simulate my-manifests.yaml`, or a folder of
//! such files, as `kubectl apply -f` takes them. NodePools, EC2NodeClasses and workloads are
//! wrapped in a scenario of defaults: every object is applied at the start (Deployments at the
//! replicas they give), the run lasts [`PLAIN_DURATION`] in the built-in us-east-1 catalog,
//! and the summary and report are those of any scenario, without expectations.

use std::path::{Path, PathBuf};

use super::load::{Directory, load_file, load_str};
use super::model::{Scenario, ScenarioError};

/// How long a run of plain manifests lasts.
pub const PLAIN_DURATION: &str = "30m";

/// Whether `text` is Kubernetes objects rather than a scenario: a scenario has no top-level
/// `apiVersion`, every Kubernetes object has one.
fn is_plain_manifests(text: &str) -> bool {
    text.lines().any(|line| line.starts_with("apiVersion:"))
}

fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>, ScenarioError> {
    let shown = dir.display().to_string();
    let entries = std::fs::read_dir(dir).map_err(|source| ScenarioError::Io {
        file: shown.clone(),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| e == "yaml" || e == "yml")
        })
        .collect();
    files.sort();
    Ok(files)
}

/// The scenario of plain manifest files: their objects applied at the start.
fn wrapped(name: &str, shown: &str, files: &[PathBuf]) -> Result<Scenario, ScenarioError> {
    let mut text = format!(
        "name: {}\ndescription: Kubernetes manifests from {}, applied at the start\nduration: {PLAIN_DURATION}\nmanifests:\n",
        serde_json::Value::from(name),
        serde_json::Value::from(shown),
    );
    for file in files {
        let file = std::path::absolute(file).unwrap_or_else(|_| file.clone());
        // A JSON string is a YAML scalar: any path reads back as written.
        text.push_str(&format!(
            "  - file: {}\n",
            serde_json::Value::from(file.to_string_lossy().into_owned())
        ));
    }
    load_str(&text, shown, &Directory(PathBuf::new()))
}

/// Several files and folders of plain Kubernetes YAML as one scenario, as `kubectl apply -f`
/// takes them (each folder's .yaml and .yml files in name order); a scenario file is refused
/// here, since it stands alone.
pub fn load_paths(paths: &[PathBuf]) -> Result<Scenario, ScenarioError> {
    if let [one] = paths {
        return load_path(one);
    }
    let mut files = Vec::new();
    for path in paths {
        let shown = path.display().to_string();
        if path.is_dir() {
            files.extend(yaml_files(path)?);
            continue;
        }
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            file: shown.clone(),
            source,
        })?;
        if !is_plain_manifests(&text) {
            return Err(ScenarioError::Yaml {
                file: shown,
                message: "a scenario file runs on its own: give it alone, or give only files \
                          and folders of Kubernetes manifests"
                    .into(),
            });
        }
        files.push(path.clone());
    }
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    wrapped("manifests", &shown.join(", "), &files)
}

/// A scenario file, a file of plain Kubernetes YAML, or a folder of such files.
pub fn load_path(path: &Path) -> Result<Scenario, ScenarioError> {
    let shown = path.display().to_string();
    let name = path
        .file_stem()
        .and_then(|n| n.to_str())
        .unwrap_or("manifests")
        .to_string();
    if path.is_dir() {
        let files = yaml_files(path)?;
        if files.is_empty() {
            return Err(ScenarioError::Yaml {
                file: shown,
                message: "the folder holds no .yaml or .yml file; give a folder of Kubernetes \
                          manifests, a manifest file, or a scenario file"
                    .into(),
            });
        }
        return wrapped(&name, &shown, &files);
    }
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
        file: shown.clone(),
        source,
    })?;
    if is_plain_manifests(&text) {
        wrapped(&name, &shown, &[path.to_path_buf()])
    } else {
        load_file(path)
    }
}
