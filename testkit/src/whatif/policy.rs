//! The `--policy` file of a what-if: the NodePools and EC2NodeClasses to use instead of the
//! recorded ones, and Karpenter settings, as one multi-document YAML file.
//!
//! ```yaml
//! settings:               # optional; the same keys as a scenario's `settings`
//!   batchIdleDuration: 5s
//! ---
//! apiVersion: karpenter.sh/v1
//! kind: NodePool
//! metadata: {name: default}
//! spec: ...
//! ```
//!
//! Every NodePool and EC2NodeClass it holds must be one the recording applied (a typo would
//! otherwise add a pool instead of changing one); other kinds are refused.

use std::collections::BTreeMap;
use std::path::Path;

use nodewright_adapters::manifest::{Manifest, parse_manifests};
use nodewright_core::model::nodeclass::NodeClass;
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::{Config, EventKind};
use serde::Deserialize;

use super::WhatIfError;
use super::recording::Recording;
use crate::scenario::{SettingsFile, apply_settings};

/// What a what-if changes.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// The file it came from (`recorded` when nothing changes).
    pub source: String,
    nodepools: BTreeMap<String, NodePool>,
    nodeclasses: BTreeMap<String, NodeClass>,
    settings: Option<SettingsFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsDocument {
    settings: SettingsFile,
}

impl Policy {
    /// The recorded policy: nothing changes.
    pub fn recorded() -> Policy {
        Policy {
            source: "recorded".to_string(),
            ..Policy::default()
        }
    }

    pub fn load(path: &Path) -> Result<Policy, WhatIfError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| WhatIfError::Policy {
            file: source.clone(),
            problem: format!("cannot read it: {e}"),
        })?;
        Policy::parse(&text, &source)
    }

    /// Reads a policy file's text; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Policy, WhatIfError> {
        let mut policy = Policy {
            source: source.to_string(),
            ..Policy::default()
        };
        // The settings document is read here and blanked (its lines kept as comments, so the
        // line numbers of the manifests' errors stay right); the rest are manifests.
        let mut manifests_text = String::new();
        let mut first_line = 1;
        for doc in documents(text) {
            let doc_first_line = first_line;
            first_line += doc.lines().count();
            let is_settings = doc
                .lines()
                .find(|l| {
                    !l.trim().is_empty() && !l.trim_start().starts_with('#') && !is_separator(l)
                })
                .is_some_and(|l| l.starts_with("settings:"));
            if is_settings {
                let parsed: SettingsDocument =
                    serde_saphyr::from_str(&doc).map_err(|e| WhatIfError::Policy {
                        file: source.to_string(),
                        problem: format!(
                            "the settings document: {}",
                            nodewright_adapters::manifest::describe_yaml_error(
                                &e,
                                source,
                                doc_first_line
                            )
                        ),
                    })?;
                if policy.settings.replace(parsed.settings).is_some() {
                    return Err(WhatIfError::Policy {
                        file: source.to_string(),
                        problem: "two settings documents; keep one".to_string(),
                    });
                }
                for line in doc.lines() {
                    manifests_text.push_str(if is_separator(line) { "---\n" } else { "#\n" });
                }
            } else {
                manifests_text.push_str(&doc);
            }
        }
        for manifest in parse_manifests(&manifests_text, source)? {
            match manifest {
                Manifest::NodePool(pool) => {
                    policy.nodepools.insert(pool.name.clone(), pool);
                }
                Manifest::NodeClass(class) => {
                    policy.nodeclasses.insert(class.name.clone(), class);
                }
                other => {
                    return Err(WhatIfError::Policy {
                        file: source.to_string(),
                        problem: format!(
                            "it holds a {}; a policy holds NodePools, EC2NodeClasses and settings only (the workload comes from the log)",
                            kind_of(&other)
                        ),
                    });
                }
            }
        }
        if policy.nodepools.is_empty() && policy.nodeclasses.is_empty() && policy.settings.is_none()
        {
            return Err(WhatIfError::Policy {
                file: source.to_string(),
                problem: "it changes nothing: give NodePools, EC2NodeClasses or settings"
                    .to_string(),
            });
        }
        let mut check = Config::default();
        policy.apply_settings(&mut check)?;
        Ok(policy)
    }

    /// Refuses a NodePool or EC2NodeClass the recording never applied.
    pub fn check_against(&self, recording: &Recording) -> Result<(), WhatIfError> {
        let known_pools = recording.nodepools();
        if let Some(unknown) = self.nodepools.keys().find(|n| !known_pools.contains(*n)) {
            return Err(WhatIfError::UnknownObject {
                file: self.source.clone(),
                kind: "NodePool",
                name: unknown.clone(),
                known: known_pools.into_iter().collect(),
            });
        }
        let known_classes = recording.nodeclasses();
        if let Some(unknown) = self
            .nodeclasses
            .keys()
            .find(|n| !known_classes.contains(*n))
        {
            return Err(WhatIfError::UnknownObject {
                file: self.source.clone(),
                kind: "EC2NodeClass",
                name: unknown.clone(),
                known: known_classes.into_iter().collect(),
            });
        }
        if self.changes_nothing_in(recording)? {
            return Err(WhatIfError::Policy {
                file: self.source.clone(),
                problem: format!(
                    "it changes nothing: its {} as the log recorded them, so both runs would be the same; change a field to ask a question",
                    self.describe()
                ),
            });
        }
        Ok(())
    }

    /// Every NodePool and EC2NodeClass it gives is exactly the one the recording applied (each
    /// time it applied one of that name), and its settings leave the recorded configuration as
    /// it was.
    fn changes_nothing_in(&self, recording: &Recording) -> Result<bool, WhatIfError> {
        let mut applied_pools: BTreeMap<&str, Vec<&NodePool>> = BTreeMap::new();
        let mut applied_classes: BTreeMap<&str, Vec<&NodeClass>> = BTreeMap::new();
        for event in &recording.events {
            match &event.kind {
                EventKind::NodePoolApplied(p) => applied_pools.entry(&p.name).or_default().push(p),
                EventKind::NodeClassApplied(c) => {
                    applied_classes.entry(&c.name).or_default().push(c)
                }
                _ => {}
            }
        }
        let same_pools = self.nodepools.iter().all(|(name, pool)| {
            applied_pools
                .get(name.as_str())
                .is_some_and(|recorded| recorded.iter().all(|r| *r == pool))
        });
        let same_classes = self.nodeclasses.iter().all(|(name, class)| {
            applied_classes
                .get(name.as_str())
                .is_some_and(|recorded| recorded.iter().all(|r| *r == class))
        });
        let mut config = recording.header.config.clone();
        self.apply_settings(&mut config)?;
        Ok(same_pools && same_classes && config == recording.header.config)
    }

    /// Whether it holds settings and nothing else.
    pub fn changes_only_settings(&self) -> bool {
        self.nodepools.is_empty() && self.nodeclasses.is_empty()
    }

    pub fn nodepool(&self, name: &str) -> Option<&NodePool> {
        self.nodepools.get(name)
    }

    pub fn nodeclass(&self, name: &str) -> Option<&NodeClass> {
        self.nodeclasses.get(name)
    }

    pub fn apply_settings(&self, config: &mut Config) -> Result<(), WhatIfError> {
        if let Some(settings) = &self.settings {
            apply_settings(config, settings, &self.source)?;
        }
        Ok(())
    }

    /// What it changes, for a heading: `NodePool default, settings`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .nodepools
            .keys()
            .map(|n| format!("NodePool {n}"))
            .chain(self.nodeclasses.keys().map(|n| format!("EC2NodeClass {n}")))
            .collect();
        if self.settings.is_some() {
            parts.push("settings".to_string());
        }
        if parts.is_empty() {
            "nothing".to_string()
        } else {
            parts.join(", ")
        }
    }
}

fn kind_of(manifest: &Manifest) -> &'static str {
    match manifest {
        Manifest::NodePool(_) => "NodePool",
        Manifest::NodeClass(_) => "EC2NodeClass",
        Manifest::Pod(_) => "Pod",
        Manifest::Deployment(d) => d.kind.as_str(),
        Manifest::DaemonSet(_) => "DaemonSet",
        Manifest::Job(_) => "Job",
        Manifest::CronJob(_) => "CronJob",
        Manifest::PodDisruptionBudget(_) => "PodDisruptionBudget",
        Manifest::PersistentVolumeClaim(_) => "PersistentVolumeClaim",
        Manifest::PersistentVolume(_) => "PersistentVolume",
        Manifest::StorageClass(_) => "StorageClass",
    }
}

/// The documents of a YAML text, each with its separator line, so that joined again they give
/// the text back line for line.
fn documents(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        if is_separator(line) {
            docs.push(String::new());
            if let Some(last) = docs.last_mut() {
                last.push_str(line);
                last.push('\n');
            }
            continue;
        }
        if let Some(last) = docs.last_mut() {
            last.push_str(line);
            last.push('\n');
        }
    }
    docs
}

fn is_separator(line: &str) -> bool {
    line.trim_end() == "---" || line.starts_with("--- ")
}
