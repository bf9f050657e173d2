//! The translation itself, with validation.

use std::collections::BTreeMap;

use nodewright_api as api;
use nodewright_core::disruption::schedule::CronSchedule;
use nodewright_core::model::affinity::{
    HostPort, InclusionPolicy, LabelSelector as Selector, PodAffinityTerm,
    TopologySpreadConstraint, WhenUnsatisfiable,
};
use nodewright_core::model::duration::{MaybeNever, parse_duration_ms, parse_maybe_never};
use nodewright_core::model::nodeclass::{
    KubeletConfig, NodeClass, NodeStorage, SelectorTerm, Threshold,
};
use nodewright_core::model::nodepool::{
    BudgetNodes, ConsolidationPolicy, DisruptionBudget, DisruptionReason, NodeClassRef, NodePool,
};
use nodewright_core::model::pdb::{IntOrPercent, PodDisruptionBudget as CorePdb};
use nodewright_core::model::pod::{OwnerRef, Pod, PodKey};
use nodewright_core::model::quantity::{parse_milli_cpu, parse_units};
use nodewright_core::model::requirements::{Operator, RequirementSpec};
use nodewright_core::model::resources::Resources;
use nodewright_core::model::taints::{Taint, TaintEffect, Toleration, TolerationOperator};
use serde::de::DeserializeOwned;

use super::error::{InvalidField, ManifestError};
use super::launch::{self, LaunchSettings};
use super::objects::*;
use super::unmodelled::{self, UnmodelledField};
use super::volumes::{Claim, ClaimTemplate, StorageClass, Volume};

/// A pod template (from a Deployment or DaemonSet): a pod without a name yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodTemplate {
    pub pod: Pod,
    pub termination_grace_period_seconds: i64,
    /// The PersistentVolumeClaims its volumes name (in the pod's namespace).
    pub volume_claims: Vec<String>,
}

impl PodTemplate {
    /// A pod as its own template: no volumes, Kubernetes' default grace period (30 s).
    pub fn bare(pod: Pod) -> Self {
        PodTemplate {
            pod,
            termination_grace_period_seconds: 30,
            volume_claims: Vec::new(),
        }
    }

    /// A pod of this template.
    pub fn instantiate(&self, namespace: &str, name: &str, created_at_ms: u64) -> Pod {
        let mut pod = self.pod.clone();
        pod.key = PodKey::new(namespace, name);
        pod.created_at_ms = created_at_ms;
        pod
    }
}

/// The most nodes one static NodePool (`spec.replicas`) keeps.
pub const MAX_STATIC_REPLICAS: i64 = 10_000;

/// The most replicas one workload may ask for: the scheduling benchmark's largest run (100,000
/// pods) is what the simulator is measured to hold.
pub const MAX_REPLICAS: i64 = 100_000;

/// The largest object (one YAML document) read: Kubernetes' own limit, the 1.5 MiB etcd takes
/// in one request. It also keeps every object well inside a log record.
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

/// A workload that keeps a number of identical pods: a Deployment, a ReplicaSet or a
/// StatefulSet. They differ only in how their pods are named and owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployment {
    pub kind: ReplicatedKind,
    pub namespace: String,
    pub name: String,
    pub replicas: u32,
    pub template: PodTemplate,
    /// A StatefulSet's `volumeClaimTemplates`.
    pub claim_templates: Vec<ClaimTemplate>,
}

/// The kinds of [`Deployment`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReplicatedKind {
    /// Pods `NAME-HASH-SUFFIX`, owned by the Deployment's ReplicaSet.
    Deployment,
    /// Pods `NAME-SUFFIX`, owned by the ReplicaSet.
    ReplicaSet,
    /// Pods `NAME-0`, `NAME-1`, ..., owned by the StatefulSet.
    StatefulSet,
}

impl ReplicatedKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ReplicatedKind::Deployment => "Deployment",
            ReplicatedKind::ReplicaSet => "ReplicaSet",
            ReplicatedKind::StatefulSet => "StatefulSet",
        }
    }

    /// The kind of the pods' owner reference.
    pub fn owner_kind(self) -> &'static str {
        match self {
            ReplicatedKind::Deployment | ReplicatedKind::ReplicaSet => "ReplicaSet",
            ReplicatedKind::StatefulSet => "StatefulSet",
        }
    }
}

/// The annotation that says how long a Job's pod runs once it is on a node (a duration such as
/// `10m`), on the Job, its pod template, or a CronJob's job template.
pub const RUN_TIME_ANNOTATION: &str = "nodewright.dev/run-time";
/// How long a Job's pod runs when no annotation says.
pub const DEFAULT_RUN_TIME: &str = "5m";

/// A Job: `completions` pods must each run to the end, at most `parallelism` at once; a pod
/// runs `run_ms` once bound, then succeeds and is gone. A pod evicted or deleted before the
/// end does not count, and the Job makes another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub namespace: String,
    pub name: String,
    pub completions: u32,
    pub parallelism: u32,
    pub run_ms: u64,
    pub template: PodTemplate,
}

/// A CronJob: a Job made each time the schedule fires (UTC, on the simulated clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronJob {
    pub namespace: String,
    pub name: String,
    pub schedule: String,
    pub suspend: bool,
    /// `Forbid`: no new Job while the last one runs; `Replace`: the running one is deleted
    /// first; `Allow` (the default): both run.
    pub concurrency: Concurrency,
    /// Its Jobs' shape (named `<cronjob>-<minute>` when made).
    pub job: Job,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    Allow,
    Forbid,
    Replace,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonSet {
    pub namespace: String,
    pub name: String,
    pub template: PodTemplate,
}

/// One object of a manifest file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Manifest {
    NodePool(NodePool),
    NodeClass(NodeClass),
    /// A pod, with the claims its volumes name.
    Pod(PodTemplate),
    Deployment(Deployment),
    DaemonSet(DaemonSet),
    Job(Job),
    CronJob(CronJob),
    PodDisruptionBudget(CorePdb),
    PersistentVolumeClaim(Claim),
    PersistentVolume(Volume),
    StorageClass(StorageClass),
}

/// Splits a YAML stream into documents at `---` lines, with each document's first line.
fn split_documents(text: &str) -> Vec<(usize, String)> {
    let mut docs = Vec::new();
    let mut current = String::new();
    let mut first_line = 1;
    for (i, line) in text.lines().enumerate() {
        if line.trim_end() == "---" || line.starts_with("--- ") {
            docs.push((first_line, std::mem::take(&mut current)));
            first_line = i + 2;
            continue;
        }
        current.push_str(line);
        current.push('\n');
    }
    docs.push((first_line, current));
    docs.into_iter()
        .filter(|(_, d)| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .collect()
}

/// One document read as `T`; a YAML error names the file, the document and its first line.
fn typed<T: DeserializeOwned>(
    doc: &str,
    source_name: &str,
    document: usize,
    first_line: usize,
) -> Result<T, ManifestError> {
    serde_saphyr::from_str(doc).map_err(|e| ManifestError::Yaml {
        source_name: source_name.to_string(),
        document,
        first_line,
        message: super::describe_yaml_error(&e, source_name, first_line),
    })
}

/// Reads every object of a (possibly multi-document) YAML text. `source_name` names the file
/// in errors.
pub fn parse_manifests(text: &str, source_name: &str) -> Result<Vec<Manifest>, ManifestError> {
    parse_manifests_noting(text, source_name).map(|(manifests, _)| manifests)
}

/// [`parse_manifests`], and the fields set in them that the simulation does not model.
pub fn parse_manifests_noting(
    text: &str,
    source_name: &str,
) -> Result<(Vec<Manifest>, Vec<UnmodelledField>), ManifestError> {
    let mut out = Vec::new();
    let mut unmodelled = Vec::new();
    let mut note = |kind: &'static str, name: Option<&String>, document, entries: Vec<_>| {
        for (field, effect, in_controller) in entries {
            unmodelled.push(UnmodelledField {
                source_name: source_name.to_string(),
                document,
                kind,
                name: name.cloned().unwrap_or_default(),
                field,
                effect,
                in_controller,
            });
        }
    };
    for (index, (first_line, doc)) in split_documents(text).into_iter().enumerate() {
        let document = index + 1;
        let probe: TypeProbe = typed(&doc, source_name, document, first_line)?;
        let kind = probe.kind.unwrap_or_default();
        let api_version = probe.api_version.unwrap_or_default();
        let ctx = Ctx {
            source_name,
            document,
            kind: kind.clone(),
            name: String::new(),
        };
        if doc.len() > MAX_OBJECT_BYTES {
            return Err(ctx.invalid(
                "(the whole object)",
                &format!(
                    "is {} bytes, above the {MAX_OBJECT_BYTES} bytes (1.5 MiB) Kubernetes stores per object",
                    doc.len()
                ),
                "split it into smaller objects, as the API server would require",
            ));
        }
        let manifest = match (kind.as_str(), api_version.as_str()) {
            ("NodePool", "karpenter.sh/v1") => {
                let obj: api::NodePool = typed(&doc, source_name, document, first_line)?;
                // Every NodePool field is modelled: nothing to note.
                Manifest::NodePool(translate_nodepool(obj, ctx)?)
            }
            ("EC2NodeClass", "karpenter.k8s.aws/v1") => {
                let obj: api::EC2NodeClass = typed(&doc, source_name, document, first_line)?;
                let entries = unmodelled::of_nodeclass(&obj.spec);
                note(
                    "EC2NodeClass",
                    obj.metadata.name.as_ref(),
                    document,
                    entries,
                );
                Manifest::NodeClass(translate_nodeclass(obj, ctx)?)
            }
            ("Pod", "v1") => {
                let obj: PodObject = typed(&doc, source_name, document, first_line)?;
                let namespace = obj.metadata.namespace.clone().unwrap_or("default".into());
                let name = required_name(&obj.metadata, &ctx)?;
                let ctx = ctx.named(&name);
                let pod = pod_from_spec(
                    &namespace,
                    &name,
                    &obj.metadata.labels,
                    &obj.metadata.annotations,
                    &obj.spec,
                    None,
                )
                .map_err(|(field, problem, fix)| ctx.invalid(&field, &problem, &fix))?;
                Manifest::Pod(PodTemplate {
                    pod,
                    termination_grace_period_seconds: obj
                        .spec
                        .termination_grace_period_seconds
                        .unwrap_or(30),
                    volume_claims: claim_names(&obj.spec),
                })
            }
            ("Deployment", "apps/v1") => Manifest::Deployment(replicated(
                typed(&doc, source_name, document, first_line)?,
                ReplicatedKind::Deployment,
                &ctx,
            )?),
            ("ReplicaSet", "apps/v1") => Manifest::Deployment(replicated(
                typed(&doc, source_name, document, first_line)?,
                ReplicatedKind::ReplicaSet,
                &ctx,
            )?),
            ("StatefulSet", "apps/v1") => Manifest::Deployment(replicated(
                typed(&doc, source_name, document, first_line)?,
                ReplicatedKind::StatefulSet,
                &ctx,
            )?),
            ("Job", "batch/v1") => {
                let obj: JobObject = typed(&doc, source_name, document, first_line)?;
                let name = required_name(&obj.metadata, &ctx)?;
                let ctx = ctx.named(&name);
                let namespace = obj.metadata.namespace.clone().unwrap_or("default".into());
                Manifest::Job(job(
                    &namespace,
                    &name,
                    &obj.spec,
                    &[&obj.metadata.annotations],
                    "",
                    &ctx,
                )?)
            }
            ("CronJob", "batch/v1") => {
                let obj: CronJobObject = typed(&doc, source_name, document, first_line)?;
                let name = required_name(&obj.metadata, &ctx)?;
                let ctx = ctx.named(&name);
                let namespace = obj.metadata.namespace.clone().unwrap_or("default".into());
                let spec = &obj.spec;
                CronSchedule::parse(&spec.schedule).map_err(|e| {
                    ctx.invalid(
                        "spec.schedule",
                        &e.to_string(),
                        "write five cron fields, e.g. \"*/15 * * * *\", or @hourly",
                    )
                })?;
                let concurrency = match spec.concurrency_policy.as_deref() {
                    None | Some("Allow") => Concurrency::Allow,
                    Some("Forbid") => Concurrency::Forbid,
                    Some("Replace") => Concurrency::Replace,
                    Some(other) => {
                        return Err(ctx.invalid(
                            "spec.concurrencyPolicy",
                            &format!("{other:?} is not a concurrency policy"),
                            "use Allow, Forbid or Replace",
                        ));
                    }
                };
                let job = job(
                    &namespace,
                    &name,
                    &spec.job_template.spec,
                    &[
                        &obj.metadata.annotations,
                        &spec.job_template.metadata.annotations,
                    ],
                    "spec.jobTemplate.",
                    &ctx,
                )?;
                Manifest::CronJob(CronJob {
                    namespace,
                    name,
                    schedule: spec.schedule.clone(),
                    suspend: spec.suspend.unwrap_or(false),
                    concurrency,
                    job,
                })
            }
            ("DaemonSet", "apps/v1") => {
                let obj: DaemonSetObject = typed(&doc, source_name, document, first_line)?;
                let name = required_name(&obj.metadata, &ctx)?;
                let ctx = ctx.named(&name);
                let namespace = obj.metadata.namespace.clone().unwrap_or("default".into());
                let owner = OwnerRef {
                    kind: "DaemonSet".to_string(),
                    name: name.clone(),
                };
                let template = pod_template(&namespace, &obj.spec.template, owner).map_err(
                    |(field, problem, fix)| {
                        ctx.invalid(&format!("spec.template.{field}"), &problem, &fix)
                    },
                )?;
                Manifest::DaemonSet(DaemonSet {
                    namespace,
                    name,
                    template,
                })
            }
            ("PodDisruptionBudget", "policy/v1") => {
                let obj: PdbObject = typed(&doc, source_name, document, first_line)?;
                let name = required_name(&obj.metadata, &ctx)?;
                let ctx = ctx.named(&name);
                if obj.spec.min_available.is_some() && obj.spec.max_unavailable.is_some() {
                    return Err(ctx.invalid(
                        "spec",
                        "both minAvailable and maxUnavailable are set",
                        "keep only one of them",
                    ));
                }
                let amount = |value: &Option<Scalar>, field: &str| match value {
                    None => Ok(None),
                    Some(v) => IntOrPercent::parse(&v.as_text()).map(Some).ok_or_else(|| {
                        ctx.invalid(
                            field,
                            &format!("{:?} is not a count or a percentage", v.as_text()),
                            "write a whole number such as 1 or a percentage such as \"50%\"",
                        )
                    }),
                };
                let min_available = amount(&obj.spec.min_available, "spec.minAvailable")?;
                let max_unavailable = amount(&obj.spec.max_unavailable, "spec.maxUnavailable")?;
                let selector = label_selector(obj.spec.selector.as_ref(), "spec.selector")
                    .map_err(|(field, problem, fix)| ctx.invalid(&field, &problem, &fix))?;
                Manifest::PodDisruptionBudget(CorePdb {
                    namespace: obj.metadata.namespace.clone().unwrap_or("default".into()),
                    name,
                    selector,
                    min_available,
                    max_unavailable,
                })
            }
            ("PersistentVolumeClaim", "v1") => {
                let obj: ClaimObject = typed(&doc, source_name, document, first_line)?;
                let name = required_name(&obj.metadata, &ctx)?;
                Manifest::PersistentVolumeClaim(Claim {
                    namespace: obj.metadata.namespace.clone().unwrap_or("default".into()),
                    name,
                    storage_class: obj.spec.storage_class_name.clone(),
                    volume: obj.spec.volume_name.clone(),
                })
            }
            ("PersistentVolume", "v1") => {
                let obj: VolumeManifestObject = typed(&doc, source_name, document, first_line)?;
                let name = required_name(&obj.metadata, &ctx)?;
                let ctx = ctx.named(&name);
                let mut node_affinity = Vec::new();
                let terms = obj
                    .spec
                    .node_affinity
                    .as_ref()
                    .and_then(|a| a.required.as_ref())
                    .map(|r| r.node_selector_terms.as_slice())
                    .unwrap_or_default();
                for (t, term) in terms.iter().enumerate() {
                    let mut specs = Vec::new();
                    for (i, expr) in term.match_expressions.iter().enumerate() {
                        specs.push(
                            requirement(
                                expr,
                                &format!(
                                    "spec.nodeAffinity.required.nodeSelectorTerms[{t}].matchExpressions[{i}]"
                                ),
                            )
                            .map_err(|(field, problem, fix)| ctx.invalid(&field, &problem, &fix))?,
                        );
                    }
                    node_affinity.push(specs);
                }
                Manifest::PersistentVolume(Volume {
                    name,
                    node_affinity,
                })
            }
            ("StorageClass", "storage.k8s.io/v1") => {
                let obj: StorageClassObject = typed(&doc, source_name, document, first_line)?;
                let name = required_name(&obj.metadata, &ctx)?;
                let ctx = ctx.named(&name);
                let wait_for_first_consumer = match obj.volume_binding_mode.as_deref() {
                    None | Some("Immediate") => false,
                    Some("WaitForFirstConsumer") => true,
                    Some(other) => {
                        return Err(ctx.invalid(
                            "volumeBindingMode",
                            &format!("{other:?} is not a volume binding mode"),
                            "use Immediate or WaitForFirstConsumer",
                        ));
                    }
                };
                let mut allowed_topologies = Vec::new();
                for (t, term) in obj.allowed_topologies.iter().enumerate() {
                    let mut specs = Vec::new();
                    for (i, expr) in term.match_label_expressions.iter().enumerate() {
                        let field = format!("allowedTopologies[{t}].matchLabelExpressions[{i}]");
                        specs.push(
                            requirement_of(&expr.key, "In", expr.values.clone(), None, &field)
                                .map_err(|(field, problem, fix)| {
                                    ctx.invalid(&field, &problem, &fix)
                                })?,
                        );
                    }
                    allowed_topologies.push(specs);
                }
                Manifest::StorageClass(StorageClass {
                    name,
                    wait_for_first_consumer,
                    allowed_topologies,
                })
            }
            _ => {
                return Err(ManifestError::UnknownKind {
                    source_name: source_name.to_string(),
                    document,
                    kind,
                    api_version,
                });
            }
        };
        out.push(manifest);
    }
    Ok((out, unmodelled))
}

/// A Job's spec (of a Job, or a CronJob's job template at `prefix`): its counts, checked, its
/// run time from the first of `annotations` and the pod template's that sets one.
fn job(
    namespace: &str,
    name: &str,
    spec: &JobSpec,
    annotations: &[&BTreeMap<String, String>],
    prefix: &str,
    ctx: &Ctx,
) -> Result<Job, ManifestError> {
    let count = |value: Option<i64>, field: &str| -> Result<u32, ManifestError> {
        let value = value.unwrap_or(1);
        if !(1..=MAX_REPLICAS).contains(&value) {
            return Err(ctx.invalid(
                &format!("{prefix}spec.{field}"),
                &format!("{value} is outside 1..={MAX_REPLICAS}"),
                &format!("give {field} from 1 to {MAX_REPLICAS}"),
            ));
        }
        Ok(value as u32)
    };
    let completions = count(spec.completions, "completions")?;
    let parallelism = count(spec.parallelism, "parallelism")?;
    let run_time = annotations
        .iter()
        .copied()
        .chain([&spec.template.metadata.annotations])
        .find_map(|a| a.get(RUN_TIME_ANNOTATION))
        .map(String::as_str)
        .unwrap_or(DEFAULT_RUN_TIME);
    let run_ms = parse_duration_ms(run_time).map_err(|e| {
        ctx.invalid(
            &format!("metadata.annotations.{RUN_TIME_ANNOTATION}"),
            &format!("{run_time:?}: {e}"),
            "write a duration such as 90s, 10m or 2h",
        )
    })?;
    let owner = OwnerRef {
        kind: "Job".to_string(),
        name: name.to_string(),
    };
    let template =
        pod_template(namespace, &spec.template, owner).map_err(|(field, problem, fix)| {
            ctx.invalid(&format!("{prefix}spec.template.{field}"), &problem, &fix)
        })?;
    Ok(Job {
        namespace: namespace.to_string(),
        name: name.to_string(),
        completions,
        parallelism,
        run_ms,
        template,
    })
}

/// A Deployment, ReplicaSet or StatefulSet: its replicas (checked) and its pod template.
fn replicated(
    obj: DeploymentObject,
    kind: ReplicatedKind,
    ctx: &Ctx,
) -> Result<Deployment, ManifestError> {
    let name = required_name(&obj.metadata, ctx)?;
    let ctx = ctx.named(&name);
    let namespace = obj.metadata.namespace.clone().unwrap_or("default".into());
    let replicas = obj.spec.replicas.unwrap_or(1);
    if replicas < 0 {
        return Err(ctx.invalid(
            "spec.replicas",
            &format!("{replicas} is negative"),
            "set spec.replicas to 0 or more",
        ));
    }
    if replicas > MAX_REPLICAS {
        return Err(ctx.invalid(
            "spec.replicas",
            &format!("{replicas} is above the most nodewright simulates, {MAX_REPLICAS}"),
            &format!(
                "give at most {MAX_REPLICAS} replicas (split a larger workload into several {}s)",
                kind.as_str()
            ),
        ));
    }
    let owner = OwnerRef {
        kind: kind.owner_kind().to_string(),
        name: name.clone(),
    };
    let template =
        pod_template(&namespace, &obj.spec.template, owner).map_err(|(field, problem, fix)| {
            ctx.invalid(&format!("spec.template.{field}"), &problem, &fix)
        })?;
    let mut claim_templates = Vec::new();
    for (i, claim) in obj.spec.volume_claim_templates.iter().enumerate() {
        let Some(claim_name) = claim.metadata.name.clone() else {
            return Err(ctx.invalid(
                &format!("spec.volumeClaimTemplates[{i}].metadata.name"),
                "is missing",
                "name each claim template (its pods' claims are TEMPLATE-POD)",
            ));
        };
        claim_templates.push(ClaimTemplate {
            name: claim_name,
            storage_class: claim.spec.storage_class_name.clone(),
        });
    }
    Ok(Deployment {
        kind,
        namespace,
        name,
        replicas: replicas as u32,
        template,
        claim_templates,
    })
}

/// A NodePool read from the API server, in the core's terms; `source_name` names where it came
/// from in errors (the controller uses `cluster`).
pub fn nodepool_from_api(obj: api::NodePool, source_name: &str) -> Result<NodePool, ManifestError> {
    let ctx = Ctx {
        source_name,
        document: 1,
        kind: "NodePool".to_string(),
        name: String::new(),
    };
    translate_nodepool(obj, ctx)
}

/// An EC2NodeClass read from the API server, in the core's terms, with how its machines are
/// launched.
pub fn nodeclass_from_api(
    obj: api::EC2NodeClass,
    source_name: &str,
) -> Result<(NodeClass, LaunchSettings), ManifestError> {
    let ctx = Ctx {
        source_name,
        document: 1,
        kind: "EC2NodeClass".to_string(),
        name: obj.metadata.name.clone().unwrap_or_default(),
    };
    let settings = launch::launch_settings(&obj.spec)
        .map_err(|(field, problem, fix)| ctx.invalid(&field, &problem, &fix))?;
    Ok((translate_nodeclass(obj, ctx)?, settings))
}

/// The EC2NodeClasses of a (possibly multi-document) YAML text, each with how its machines are
/// launched; other kinds are read (and must be valid) but not returned.
pub fn parse_node_classes(
    text: &str,
    source_name: &str,
) -> Result<Vec<(NodeClass, LaunchSettings)>, ManifestError> {
    let mut out = Vec::new();
    for (index, (first_line, doc)) in split_documents(text).into_iter().enumerate() {
        let document = index + 1;
        let probe: TypeProbe = typed(&doc, source_name, document, first_line)?;
        if probe.kind.as_deref() != Some("EC2NodeClass")
            || probe.api_version.as_deref() != Some("karpenter.k8s.aws/v1")
        {
            continue;
        }
        let obj: api::EC2NodeClass = typed(&doc, source_name, document, first_line)?;
        let ctx = Ctx {
            source_name,
            document,
            kind: "EC2NodeClass".to_string(),
            name: obj.metadata.name.clone().unwrap_or_default(),
        };
        let settings = launch::launch_settings(&obj.spec)
            .map_err(|(field, problem, fix)| ctx.invalid(&field, &problem, &fix))?;
        out.push((translate_nodeclass(obj, ctx)?, settings));
    }
    Ok(out)
}

/// What the core keeps of a NodeClaim's spec, read from the API server's object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeClaimSpecParts {
    /// `spec.requirements`.
    pub requirements: Vec<RequirementSpec>,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// `spec.startupTaints`.
    pub startup_taints: Vec<Taint>,
    /// `spec.resources.requests`.
    pub requests: Resources,
    /// `spec.expireAfter` in milliseconds (`None`: Never; absent: Karpenter's 720h).
    pub expire_after_ms: Option<u64>,
}

/// A NodeClaim's spec read from the API server (one nodewright or Karpenter wrote), in the
/// core's terms; `name` names the object in errors.
pub fn nodeclaim_spec_from_api(
    spec: &api::NodeClaimSpec,
    name: &str,
) -> Result<NodeClaimSpecParts, ManifestError> {
    let ctx = Ctx {
        source_name: "cluster",
        document: 1,
        kind: "NodeClaim".to_string(),
        name: name.to_string(),
    };
    let e = |(field, problem, fix): FieldError| ctx.invalid(&field, &problem, &fix);
    let requirements = spec
        .requirements
        .iter()
        .enumerate()
        .map(|(i, r)| pool_requirement(r, &format!("spec.requirements[{i}]")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(e)?;
    let taints_of = |list: &[api::Taint], field: &str| {
        list.iter()
            .enumerate()
            .map(|(i, t)| taint(t, &format!("{field}[{i}]")))
            .collect::<Result<Vec<_>, _>>()
            .map_err(e)
    };
    let taints = taints_of(&spec.taints, "spec.taints")?;
    let startup_taints = taints_of(&spec.startup_taints, "spec.startupTaints")?;
    let mut requests = Resources::default();
    for (resource, value) in spec.resources.iter().flat_map(|r| &r.requests) {
        check_resource_name(resource, "spec.resources.requests").map_err(e)?;
        let amount =
            resource_amount(resource, value.as_str(), "spec.resources.requests").map_err(e)?;
        requests.set(resource, amount);
    }
    let expire_after_ms = match spec.expire_after.as_deref() {
        None => Some(nodewright_core::model::nodepool::DEFAULT_EXPIRE_AFTER_MS),
        Some(text) => match parse_maybe_never(text).map_err(|err| {
            ctx.invalid(
                "spec.expireAfter",
                &err.to_string(),
                "write a duration such as 720h, or Never",
            )
        })? {
            MaybeNever::Never => None,
            MaybeNever::After(ms) => Some(ms),
        },
    };
    Ok(NodeClaimSpecParts {
        requirements,
        taints,
        startup_taints,
        requests,
        expire_after_ms,
    })
}

/// Where we are, for error messages.
#[derive(Clone)]
struct Ctx<'a> {
    source_name: &'a str,
    document: usize,
    kind: String,
    name: String,
}

impl<'a> Ctx<'a> {
    fn named(&self, name: &str) -> Ctx<'a> {
        Ctx {
            name: name.to_string(),
            ..self.clone()
        }
    }

    fn invalid(&self, field: &str, problem: &str, fix: &str) -> ManifestError {
        ManifestError::Invalid(Box::new(InvalidField {
            source_name: self.source_name.to_string(),
            document: self.document,
            kind: self.kind.clone(),
            name: self.name.clone(),
            field: field.to_string(),
            problem: problem.to_string(),
            fix: fix.to_string(),
        }))
    }
}

fn required_name(meta: &ObjectMeta, ctx: &Ctx) -> Result<String, ManifestError> {
    required(meta.name.as_deref(), ctx)
}

fn required(name: Option<&str>, ctx: &Ctx) -> Result<String, ManifestError> {
    match name {
        Some(n) if !n.is_empty() => Ok(n.to_string()),
        _ => Err(ctx.invalid(
            "metadata.name",
            "is missing",
            "give the object a name under metadata.name",
        )),
    }
}

type FieldError = (String, String, String);

fn field_error(field: &str, problem: impl Into<String>, fix: &str) -> FieldError {
    (field.to_string(), problem.into(), fix.to_string())
}

/// A pod's node selector requirement.
fn requirement(obj: &RequirementObject, field: &str) -> Result<RequirementSpec, FieldError> {
    let values: Vec<String> = obj.values.iter().map(Scalar::as_text).collect();
    requirement_of(&obj.key, &obj.operator, values, None, field)
}

/// A NodePool's requirement, with `minValues`.
fn pool_requirement(
    obj: &api::NodeSelectorRequirement,
    field: &str,
) -> Result<RequirementSpec, FieldError> {
    requirement_of(
        &obj.key,
        &obj.operator,
        obj.values.clone(),
        obj.min_values,
        field,
    )
}

fn requirement_of(
    key: &str,
    operator: &str,
    values: Vec<String>,
    min_values: Option<i64>,
    field: &str,
) -> Result<RequirementSpec, FieldError> {
    let operator = Operator::parse(operator).ok_or_else(|| {
        field_error(
            &format!("{field}.operator"),
            format!("unknown operator {operator:?}"),
            &format!("use one of {}", Operator::NAMES),
        )
    })?;
    let min_values = match min_values {
        None => None,
        Some(n) if (1..=50).contains(&n) => Some(n as u32),
        Some(n) => {
            return Err(field_error(
                &format!("{field}.minValues"),
                format!("{n} is out of range"),
                "minValues must be between 1 and 50",
            ));
        }
    };
    let spec = RequirementSpec {
        key: key.to_string(),
        operator,
        values,
        min_values,
    };
    spec.validate().map_err(|e| {
        field_error(
            field,
            e.to_string(),
            "In/NotIn take values, Exists/DoesNotExist take none, Gt/Lt/Gte/Lte take one integer",
        )
    })?;
    if let Some(min) = min_values
        && operator == Operator::In
        && (spec.values.len() as u32) < min
    {
        return Err(field_error(
            &format!("{field}.minValues"),
            format!(
                "minValues {min} is more than the {} values listed",
                spec.values.len()
            ),
            "list at least minValues values, or lower minValues",
        ));
    }
    Ok(spec)
}

fn taint(obj: &api::Taint, field: &str) -> Result<Taint, FieldError> {
    let effect = TaintEffect::parse(&obj.effect).ok_or_else(|| {
        field_error(
            &format!("{field}.effect"),
            format!("unknown effect {:?}", obj.effect),
            "use NoSchedule, PreferNoSchedule or NoExecute",
        )
    })?;
    if obj.key.is_empty() {
        return Err(field_error(
            &format!("{field}.key"),
            "is empty",
            "give the taint a key",
        ));
    }
    Ok(Taint {
        key: obj.key.clone(),
        value: obj.value.clone(),
        effect,
    })
}

/// A resource amount in the core's unit (cpu: milli-cores; everything else: whole units).
fn resource_amount(name: &str, text: &str, field: &str) -> Result<i64, FieldError> {
    let parsed = if name == "cpu" {
        parse_milli_cpu(text)
    } else {
        parse_units(text)
    };
    parsed.map_err(|e| {
        field_error(
            &format!("{field}.{name}"),
            e.to_string(),
            "write a Kubernetes quantity such as 500m, 2, 512Mi or 4Gi",
        )
    })
}

fn check_resource_name(name: &str, field: &str) -> Result<(), FieldError> {
    let known = matches!(
        name,
        "cpu" | "memory" | "ephemeral-storage" | "pods" | "nodes"
    ) || name.starts_with("hugepages-")
        || name.contains('/');
    if known {
        Ok(())
    } else {
        Err(field_error(
            &format!("{field}.{name}"),
            format!("{name:?} is not a resource name"),
            "use cpu, memory, ephemeral-storage, pods, or a domain-qualified extended resource such as nvidia.com/gpu",
        ))
    }
}

fn translate_nodepool(obj: api::NodePool, ctx: Ctx) -> Result<NodePool, ManifestError> {
    let name = required(obj.metadata.name.as_deref(), &ctx)?;
    let ctx = ctx.named(&name);
    let e = |(field, problem, fix): FieldError| ctx.invalid(&field, &problem, &fix);
    let spec = obj.spec;
    let replicas = match spec.replicas {
        None => None,
        Some(n) if n < 0 => {
            return Err(ctx.invalid(
                "spec.replicas",
                &format!("{n} is negative"),
                "set spec.replicas to 0 or more",
            ));
        }
        Some(n) if n > MAX_STATIC_REPLICAS => {
            return Err(ctx.invalid(
                "spec.replicas",
                &format!(
                    "{n} is above the most nodes one static NodePool keeps, {MAX_STATIC_REPLICAS}"
                ),
                &format!("give at most {MAX_STATIC_REPLICAS} replicas (split the pool by zone)"),
            ));
        }
        Some(n) => Some(n as u32),
    };
    // Karpenter's CRD: a static pool takes no weight and no limit but `nodes`.
    if replicas.is_some() {
        if spec.weight.is_some() {
            return Err(ctx.invalid(
                "spec.weight",
                "is set on a static NodePool (spec.replicas)",
                "remove spec.weight: a static pool is not chosen by priority",
            ));
        }
        if let Some(other) = spec
            .limits
            .iter()
            .flat_map(|l| l.keys())
            .find(|k| k.as_str() != "nodes")
        {
            return Err(ctx.invalid(
                &format!("spec.limits.{other}"),
                "is set on a static NodePool (spec.replicas), where only limits.nodes is supported",
                "keep only limits.nodes, the most machines the pool may have while it replaces some",
            ));
        }
    }
    let tspec = spec.template.spec;
    let class_ref = tspec.node_class_ref;
    let class_name = Some(class_ref.name)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ctx.invalid(
                "spec.template.spec.nodeClassRef.name",
                "is missing",
                "name the EC2NodeClass this NodePool launches with",
            )
        })?;
    let group = class_ref.group;
    let kind = class_ref.kind;
    if group != "karpenter.k8s.aws" || kind != "EC2NodeClass" {
        return Err(ctx.invalid(
            "spec.template.spec.nodeClassRef",
            &format!("refers to {kind} of group {group}"),
            "nodewright launches on AWS: use group karpenter.k8s.aws, kind EC2NodeClass",
        ));
    }
    if tspec.requirements.len() > 100 {
        return Err(ctx.invalid(
            "spec.template.spec.requirements",
            &format!("has {} terms", tspec.requirements.len()),
            "keep at most 100 requirements",
        ));
    }
    let mut requirements = Vec::new();
    for (i, r) in tspec.requirements.iter().enumerate() {
        let field = format!("spec.template.spec.requirements[{i}]");
        if let Some(why) = api::label_restriction(&r.key) {
            let fix = match api::closest_allowed_label(&r.key) {
                Some(meant) => format!("did you mean {meant}? Otherwise remove it"),
                None => "remove it; Karpenter sets these labels itself (pods select hostnames, NodePools do not)".to_string(),
            };
            return Err(ctx.invalid(
                &format!("{field}.key"),
                &format!("{} may not be used in NodePool requirements: {why}", r.key),
                &fix,
            ));
        }
        requirements.push(pool_requirement(r, &field).map_err(e)?);
    }
    let taints = tspec
        .taints
        .iter()
        .enumerate()
        .map(|(i, t)| taint(t, &format!("spec.template.spec.taints[{i}]")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(e)?;
    let startup_taints = tspec
        .startup_taints
        .iter()
        .enumerate()
        .map(|(i, t)| taint(t, &format!("spec.template.spec.startupTaints[{i}]")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(e)?;
    let never_or_duration = |raw: &Option<String>, field: &str, default: MaybeNever| match raw {
        None => Ok(default),
        Some(text) => parse_maybe_never(text).map_err(|err| {
            ctx.invalid(
                field,
                &err.to_string(),
                "write a duration such as 30s, 5m, 720h, or Never",
            )
        }),
    };
    let expire_after = never_or_duration(
        &tspec.expire_after,
        "spec.template.spec.expireAfter",
        MaybeNever::After(nodewright_core::model::nodepool::DEFAULT_EXPIRE_AFTER_MS),
    )?;
    let termination_grace_period_ms = match &tspec.termination_grace_period {
        None => None,
        Some(text) => Some(parse_duration_ms(text).map_err(|err| {
            ctx.invalid(
                "spec.template.spec.terminationGracePeriod",
                &err.to_string(),
                "write a duration such as 1h or 48h",
            )
        })?),
    };
    let disruption = spec.disruption;
    let consolidation_policy = match disruption
        .as_ref()
        .and_then(|d| d.consolidation_policy.as_deref())
    {
        None | Some("WhenEmptyOrUnderutilized") => ConsolidationPolicy::WhenEmptyOrUnderutilized,
        Some("WhenEmpty") => ConsolidationPolicy::WhenEmpty,
        Some("Balanced") => {
            return Err(ctx.invalid(
                "spec.disruption.consolidationPolicy",
                "the Balanced policy is not supported yet",
                "use WhenEmpty or WhenEmptyOrUnderutilized",
            ));
        }
        Some(other) => {
            return Err(ctx.invalid(
                "spec.disruption.consolidationPolicy",
                &format!("unknown policy {other:?}"),
                "use WhenEmpty or WhenEmptyOrUnderutilized",
            ));
        }
    };
    let consolidate_after = never_or_duration(
        &disruption.as_ref().map(|d| d.consolidate_after.clone()),
        "spec.disruption.consolidateAfter",
        MaybeNever::After(0),
    )?;
    let budgets = match disruption.and_then(|d| d.budgets) {
        None => vec![DisruptionBudget::default_budget()],
        Some(list) => list
            .iter()
            .enumerate()
            .map(|(i, b)| budget(b, &format!("spec.disruption.budgets[{i}]")))
            .collect::<Result<Vec<_>, _>>()
            .map_err(e)?,
    };
    let mut limits = BTreeMap::new();
    for (resource, value) in spec.limits.unwrap_or_default() {
        check_resource_name(&resource, "spec.limits").map_err(e)?;
        if value.as_str().starts_with('-') {
            return Err(ctx.invalid(
                &format!("spec.limits.{resource}"),
                &format!("{value} is negative"),
                "limits must be zero or more",
            ));
        }
        let amount = resource_amount(&resource, value.as_str(), "spec.limits").map_err(e)?;
        limits.insert(resource, amount);
    }
    let weight = match spec.weight {
        None => None,
        Some(w) if (1..=100).contains(&w) => Some(w as u32),
        Some(w) => {
            return Err(ctx.invalid(
                "spec.weight",
                &format!("{w} is out of range"),
                "weight must be between 1 and 100",
            ));
        }
    };
    let meta = spec.template.metadata.unwrap_or_default();
    if let Some((key, why)) = meta
        .labels
        .keys()
        .find_map(|k| api::label_restriction(k).map(|why| (k, why)))
    {
        return Err(ctx.invalid(
            &format!("spec.template.metadata.labels.{key}"),
            why,
            "use a label outside the karpenter.sh and karpenter.k8s.aws domains",
        ));
    }
    Ok(NodePool {
        name,
        weight,
        template_labels: meta.labels,
        template_annotations: meta.annotations,
        requirements,
        taints,
        startup_taints,
        node_class_ref: NodeClassRef {
            group,
            kind,
            name: class_name,
        },
        expire_after,
        termination_grace_period_ms,
        consolidation_policy,
        consolidate_after,
        budgets,
        limits,
        replicas,
    })
}

fn budget(obj: &api::Budget, field: &str) -> Result<DisruptionBudget, FieldError> {
    let text = obj.nodes.clone();
    let bad = || {
        field_error(
            &format!("{field}.nodes"),
            format!("{text:?} is not a node count or percentage"),
            "write a whole number such as \"5\" or a percentage such as \"10%\"",
        )
    };
    let nodes = match text.strip_suffix('%') {
        Some(p) => {
            let p: u32 = p.parse().map_err(|_| bad())?;
            if p > 100 {
                return Err(bad());
            }
            BudgetNodes::Percent(p)
        }
        None => BudgetNodes::Count(text.parse().map_err(|_| bad())?),
    };
    let duration_ms = match &obj.duration {
        None => None,
        Some(d) => Some(parse_duration_ms(d).map_err(|err| {
            field_error(
                &format!("{field}.duration"),
                err.to_string(),
                "write a duration such as 8h",
            )
        })?),
    };
    if obj.schedule.is_some() != duration_ms.is_some() {
        return Err(field_error(
            field,
            "schedule and duration must be set together",
            "give both a cron schedule and a duration, or neither",
        ));
    }
    let reasons = obj
        .reasons
        .iter()
        .map(|r| match r.as_str() {
            "Empty" => Ok(DisruptionReason::Empty),
            "Underutilized" => Ok(DisruptionReason::Underutilized),
            "Drifted" => Ok(DisruptionReason::Drifted),
            other => Err(field_error(
                &format!("{field}.reasons"),
                format!("unknown reason {other:?}"),
                "use Empty, Underutilized or Drifted",
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(DisruptionBudget {
        nodes,
        schedule: obj.schedule.clone(),
        duration_ms,
        reasons,
    })
}

fn subnet_terms(terms: &[api::SubnetSelectorTerm]) -> Vec<SelectorTerm> {
    terms
        .iter()
        .map(|t| SelectorTerm {
            id: t.id.clone(),
            tags: t.tags.clone(),
            ..SelectorTerm::default()
        })
        .collect()
}

fn capacity_reservation_terms(terms: &[api::CapacityReservationSelectorTerm]) -> Vec<SelectorTerm> {
    terms
        .iter()
        .map(|t| SelectorTerm {
            id: t.id.clone(),
            owner: t.owner_id.clone(),
            tags: t.tags.clone(),
            ..SelectorTerm::default()
        })
        .collect()
}

fn security_group_terms(terms: &[api::SecurityGroupSelectorTerm]) -> Vec<SelectorTerm> {
    terms
        .iter()
        .map(|t| SelectorTerm {
            id: t.id.clone(),
            name: t.name.clone(),
            tags: t.tags.clone(),
            ..SelectorTerm::default()
        })
        .collect()
}

fn ami_terms(terms: &[api::AmiSelectorTerm]) -> Vec<SelectorTerm> {
    terms
        .iter()
        .map(|t| SelectorTerm {
            id: t.id.clone(),
            name: t.name.clone(),
            alias: t.alias.clone(),
            owner: t.owner.clone(),
            tags: t.tags.clone(),
        })
        .collect()
}

fn translate_nodeclass(obj: api::EC2NodeClass, ctx: Ctx) -> Result<NodeClass, ManifestError> {
    let name = required(obj.metadata.name.as_deref(), &ctx)?;
    let ctx = ctx.named(&name);
    let e = |(field, problem, fix): FieldError| ctx.invalid(&field, &problem, &fix);
    let spec = obj.spec;
    match (&spec.role, &spec.instance_profile) {
        (Some(_), Some(_)) => {
            return Err(ctx.invalid(
                "spec.role",
                "both role and instanceProfile are set",
                "set exactly one of spec.role and spec.instanceProfile",
            ));
        }
        (None, None) => {
            return Err(ctx.invalid(
                "spec.role",
                "neither role nor instanceProfile is set",
                "set spec.role to the node IAM role (or spec.instanceProfile)",
            ));
        }
        _ => {}
    }
    if spec.subnet_selector_terms.is_empty() {
        return Err(ctx.invalid(
            "spec.subnetSelectorTerms",
            "is empty",
            "select subnets, e.g. by tag karpenter.sh/discovery: <cluster>",
        ));
    }
    if spec.security_group_selector_terms.is_empty() {
        return Err(ctx.invalid(
            "spec.securityGroupSelectorTerms",
            "is empty",
            "select security groups, e.g. by tag karpenter.sh/discovery: <cluster>",
        ));
    }
    if spec.ami_selector_terms.is_empty() {
        return Err(ctx.invalid(
            "spec.amiSelectorTerms",
            "is empty",
            "select AMIs, e.g. {alias: al2023@latest} or a pinned {id: ami-...}",
        ));
    }
    let launch = launch::launch_settings(&spec).map_err(e)?;
    let mut storage = NodeStorage {
        volume_bytes: (launch.ephemeral_volume_gib() as i64).saturating_mul(1 << 30),
        instance_store_raid0: launch.instance_store_raid0(),
        eviction_hard_nodefs: None,
    };
    let mut kubelet = KubeletConfig::default();
    if let Some(k) = spec.kubelet {
        kubelet.max_pods = k.max_pods.map(i64::from);
        kubelet.pods_per_core = k.pods_per_core.map(i64::from);
        for (resource, value) in &k.system_reserved {
            check_resource_name(resource, "spec.kubelet.systemReserved").map_err(e)?;
            let amount =
                resource_amount(resource, value, "spec.kubelet.systemReserved").map_err(e)?;
            kubelet.system_reserved.insert(resource.clone(), amount);
        }
        for (resource, value) in &k.kube_reserved {
            check_resource_name(resource, "spec.kubelet.kubeReserved").map_err(e)?;
            let amount =
                resource_amount(resource, value, "spec.kubelet.kubeReserved").map_err(e)?;
            kubelet.kube_reserved.insert(resource.clone(), amount);
        }
        if let Some(v) = k.eviction_hard.get("nodefs.available") {
            let field = "spec.kubelet.evictionHard.nodefs.available";
            storage.eviction_hard_nodefs = Some(match v.strip_suffix('%') {
                Some(p) => Threshold::Percent(p.parse().map_err(|_| {
                    ctx.invalid(
                        field,
                        &format!("{v:?} is not a percentage"),
                        "write e.g. 10% or 5Gi",
                    )
                })?),
                None => Threshold::Bytes(
                    resource_amount("nodefs.available", v, "spec.kubelet.evictionHard")
                        .map_err(e)?,
                ),
            });
        }
        if let Some(v) = k.eviction_hard.get("memory.available") {
            if let Some(p) = v.strip_suffix('%') {
                kubelet.eviction_hard_memory_percent = Some(p.parse().map_err(|_| {
                    ctx.invalid(
                        "spec.kubelet.evictionHard.memory.available",
                        &format!("{v:?} is not a percentage"),
                        "write e.g. 5% or 100Mi",
                    )
                })?);
            } else {
                kubelet.eviction_hard_memory_bytes = Some(
                    resource_amount("memory.available", v, "spec.kubelet.evictionHard")
                        .map_err(e)?,
                );
            }
        }
    }
    Ok(NodeClass {
        name,
        ami_family: spec.ami_family,
        role: spec.role,
        instance_profile: spec.instance_profile,
        subnet_selector_terms: subnet_terms(&spec.subnet_selector_terms),
        security_group_selector_terms: security_group_terms(&spec.security_group_selector_terms),
        ami_selector_terms: ami_terms(&spec.ami_selector_terms),
        kubelet,
        tags: spec.tags,
        storage,
        nested_virtualization: launch.nested_virtualization,
        capacity_reservation_selector_terms: capacity_reservation_terms(
            &spec.capacity_reservation_selector_terms,
        ),
    })
}

fn pod_template(
    namespace: &str,
    template: &PodTemplateObject,
    owner: OwnerRef,
) -> Result<PodTemplate, FieldError> {
    let pod = pod_from_spec(
        namespace,
        "",
        &template.metadata.labels,
        &template.metadata.annotations,
        &template.spec,
        Some(owner),
    )?;
    Ok(PodTemplate {
        pod,
        termination_grace_period_seconds: template
            .spec
            .termination_grace_period_seconds
            .unwrap_or(30),
        volume_claims: claim_names(&template.spec),
    })
}

/// The PersistentVolumeClaims a pod spec's volumes name.
fn claim_names(spec: &PodSpec) -> Vec<String> {
    spec.volumes
        .iter()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone())
        .collect()
}

/// Reads a pod spec into the core's [`Pod`]. The effective request is Kubernetes': the sum of
/// the app containers (a limit stands for a missing request), raised to the largest init
/// container, plus the pod overhead. Errors are `(field, problem, fix)`.
pub fn pod_from_spec(
    namespace: &str,
    name: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    spec: &PodSpec,
    owner: Option<OwnerRef>,
) -> Result<Pod, FieldError> {
    let container_requests = |c: &Container, field: &str| -> Result<Resources, FieldError> {
        let mut r = Resources::default();
        let mut names: BTreeMap<&String, &Scalar> = c.resources.limits.iter().collect();
        names.extend(c.resources.requests.iter());
        for (resource, value) in names {
            check_resource_name(resource, field)?;
            r.set(
                resource,
                resource_amount(resource, &value.as_text(), field)?,
            );
        }
        Ok(r)
    };
    let mut requests = Resources::default();
    let mut missing = false;
    for (i, c) in spec.containers.iter().enumerate() {
        let field = format!("spec.containers[{i}].resources.requests");
        let r = container_requests(c, &field)?;
        if r.cpu_milli == 0 && r.memory_bytes == 0 {
            missing = true;
        }
        requests.add(&r);
    }
    let mut init_max = Resources::default();
    for (i, c) in spec.init_containers.iter().enumerate() {
        let field = format!("spec.initContainers[{i}].resources.requests");
        let r = container_requests(c, &field)?;
        if c.restart_policy.as_deref() == Some("Always") {
            // A sidecar runs alongside the app containers.
            requests.add(&r);
        } else {
            init_max = init_max.max(&r);
        }
    }
    requests = requests.max(&init_max);
    for (resource, value) in &spec.overhead {
        check_resource_name(resource, "spec.overhead")?;
        let mut r = Resources::default();
        r.set(
            resource,
            resource_amount(resource, &value.as_text(), "spec.overhead")?,
        );
        requests.add(&r);
    }
    requests.pods = 1;

    let mut required_node_affinity = Vec::new();
    if let Some(required) = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| n.required.as_ref())
    {
        for (t, term) in required.node_selector_terms.iter().enumerate() {
            let mut specs = Vec::new();
            for (i, expr) in term.match_expressions.iter().enumerate() {
                specs.push(requirement(
                    expr,
                    &format!(
                        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{t}].matchExpressions[{i}]"
                    ),
                )?);
            }
            required_node_affinity.push(specs);
        }
    }
    let affinity = spec.affinity.as_ref();
    let mut preferred_node_affinity = Vec::new();
    for (t, term) in affinity
        .and_then(|a| a.node_affinity.as_ref())
        .map(|n| n.preferred.as_slice())
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let field = format!(
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{t}]"
        );
        let weight = check_weight(term.weight, &format!("{field}.weight"))?;
        let mut specs = Vec::new();
        for (i, expr) in term.preference.match_expressions.iter().enumerate() {
            specs.push(requirement(
                expr,
                &format!("{field}.preference.matchExpressions[{i}]"),
            )?);
        }
        preferred_node_affinity.push((weight, specs));
    }
    let pod_affinity = affinity_terms(
        affinity.and_then(|a| a.pod_affinity.as_ref()),
        "spec.affinity.podAffinity",
    )?;
    let pod_anti_affinity = affinity_terms(
        affinity.and_then(|a| a.pod_anti_affinity.as_ref()),
        "spec.affinity.podAntiAffinity",
    )?;
    let mut topology_spread = Vec::new();
    for (i, c) in spec.topology_spread_constraints.iter().enumerate() {
        topology_spread.push(spread_constraint(
            c,
            &format!("spec.topologySpreadConstraints[{i}]"),
        )?);
    }
    let mut host_ports = Vec::new();
    for (i, c) in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter())
        .enumerate()
    {
        for (j, p) in c.ports.iter().enumerate() {
            let Some(port) = p.host_port.filter(|p| *p != 0) else {
                continue;
            };
            let port = u16::try_from(port).map_err(|_| {
                field_error(
                    &format!("spec.containers[{i}].ports[{j}].hostPort"),
                    format!("{port} is not a port number"),
                    "use a port between 1 and 65535",
                )
            })?;
            host_ports.push(HostPort {
                port,
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".to_string()),
                host_ip: p.host_ip.clone().unwrap_or_default(),
            });
        }
    }
    let mut tolerations = Vec::new();
    for (i, t) in spec.tolerations.iter().enumerate() {
        let field = format!("spec.tolerations[{i}]");
        let operator = match t.operator.as_deref() {
            None | Some("Equal") => TolerationOperator::Equal,
            Some("Exists") => TolerationOperator::Exists,
            Some(other) => {
                return Err(field_error(
                    &format!("{field}.operator"),
                    format!("unknown operator {other:?}"),
                    "use Equal or Exists",
                ));
            }
        };
        let effect = match t.effect.as_deref() {
            None | Some("") => None,
            Some(raw) => Some(TaintEffect::parse(raw).ok_or_else(|| {
                field_error(
                    &format!("{field}.effect"),
                    format!("unknown effect {raw:?}"),
                    "use NoSchedule, PreferNoSchedule or NoExecute",
                )
            })?),
        };
        tolerations.push(Toleration {
            key: t.key.clone().filter(|k| !k.is_empty()),
            operator,
            value: t.value.clone(),
            effect,
        });
    }
    Ok(Pod {
        key: PodKey::new(namespace, name),
        labels: labels.clone(),
        annotations: nodewright_core::model::labels::read_annotations(annotations),
        requests,
        missing_requests: missing,
        node_selector: spec.node_selector.clone(),
        required_node_affinity,
        preferred_node_affinity,
        pod_affinity,
        pod_anti_affinity,
        topology_spread,
        host_ports,
        tolerations,
        priority: spec.priority.unwrap_or(0),
        owner,
        node_name: spec.node_name.clone(),
        created_at_ms: 0,
    })
}

fn check_weight(weight: i64, field: &str) -> Result<i32, FieldError> {
    if (1..=100).contains(&weight) {
        Ok(weight as i32)
    } else {
        Err(field_error(
            field,
            format!("{weight} is out of range"),
            "a preference weight is between 1 and 100",
        ))
    }
}

fn label_selector(obj: Option<&LabelSelector>, field: &str) -> Result<Selector, FieldError> {
    let Some(obj) = obj else {
        // Kubernetes: a term without a labelSelector selects no pod (`{}` selects all).
        return Ok(Selector::nothing());
    };
    let mut out = Selector {
        match_labels: obj.match_labels.clone(),
        match_expressions: Vec::new(),
    };
    for (i, e) in obj.match_expressions.iter().enumerate() {
        let spec = requirement(e, &format!("{field}.matchExpressions[{i}]"))?;
        if !matches!(
            spec.operator,
            Operator::In | Operator::NotIn | Operator::Exists | Operator::DoesNotExist
        ) {
            return Err(field_error(
                &format!("{field}.matchExpressions[{i}].operator"),
                format!("{} is not a label selector operator", spec.operator),
                "use In, NotIn, Exists or DoesNotExist",
            ));
        }
        out.match_expressions.push(spec);
    }
    Ok(out)
}

fn affinity_term(
    obj: &PodAffinityTermObject,
    weight: Option<i32>,
    field: &str,
) -> Result<PodAffinityTerm, FieldError> {
    if obj.topology_key.is_empty() {
        return Err(field_error(
            &format!("{field}.topologyKey"),
            "is empty",
            "name a node label such as topology.kubernetes.io/zone or kubernetes.io/hostname",
        ));
    }
    Ok(PodAffinityTerm {
        selector: label_selector(
            obj.label_selector.as_ref(),
            &format!("{field}.labelSelector"),
        )?,
        namespaces: obj.namespaces.clone(),
        topology_key: obj.topology_key.clone(),
        weight,
    })
}

fn affinity_terms(
    obj: Option<&PodAffinityObject>,
    field: &str,
) -> Result<Vec<PodAffinityTerm>, FieldError> {
    let Some(obj) = obj else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (i, t) in obj.required.iter().enumerate() {
        out.push(affinity_term(
            t,
            None,
            &format!("{field}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"),
        )?);
    }
    for (i, t) in obj.preferred.iter().enumerate() {
        let f = format!("{field}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        let weight = check_weight(t.weight, &format!("{f}.weight"))?;
        out.push(affinity_term(
            &t.pod_affinity_term,
            Some(weight),
            &format!("{f}.podAffinityTerm"),
        )?);
    }
    Ok(out)
}

fn spread_constraint(
    c: &TopologySpreadObject,
    field: &str,
) -> Result<TopologySpreadConstraint, FieldError> {
    if c.max_skew < 1 || c.max_skew > i32::MAX as i64 {
        return Err(field_error(
            &format!("{field}.maxSkew"),
            format!("{} is out of range", c.max_skew),
            "maxSkew is between 1 and 2147483647",
        ));
    }
    if c.topology_key.is_empty() {
        return Err(field_error(
            &format!("{field}.topologyKey"),
            "is empty",
            "name a node label such as topology.kubernetes.io/zone",
        ));
    }
    let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
        "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
        other => {
            return Err(field_error(
                &format!("{field}.whenUnsatisfiable"),
                format!("unknown value {other:?}"),
                "use DoNotSchedule or ScheduleAnyway",
            ));
        }
    };
    let policy = |raw: &Option<String>, default: InclusionPolicy, name: &str| match raw.as_deref() {
        None => Ok(default),
        Some("Honor") => Ok(InclusionPolicy::Honor),
        Some("Ignore") => Ok(InclusionPolicy::Ignore),
        Some(other) => Err(field_error(
            &format!("{field}.{name}"),
            format!("unknown value {other:?}"),
            "use Honor or Ignore",
        )),
    };
    let min_domains = match c.min_domains {
        None => None,
        Some(n) if (1..=i32::MAX as i64).contains(&n) => Some(n as u32),
        Some(n) => {
            return Err(field_error(
                &format!("{field}.minDomains"),
                format!("{n} is out of range"),
                "minDomains is between 1 and 2147483647",
            ));
        }
    };
    Ok(TopologySpreadConstraint {
        max_skew: c.max_skew as u32,
        topology_key: c.topology_key.clone(),
        when_unsatisfiable,
        selector: label_selector(c.label_selector.as_ref(), &format!("{field}.labelSelector"))?,
        min_domains,
        node_affinity_policy: policy(
            &c.node_affinity_policy,
            InclusionPolicy::Honor,
            "nodeAffinityPolicy",
        )?,
        node_taints_policy: policy(
            &c.node_taints_policy,
            InclusionPolicy::Ignore,
            "nodeTaintsPolicy",
        )?,
        match_label_keys: c.match_label_keys.clone(),
    })
}
