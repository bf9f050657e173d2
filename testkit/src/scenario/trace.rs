//! Real workload traces as scenarios. `alibaba-openb` is the pod list of Alibaba's GPU cluster
//! trace (cluster-trace-gpu-v2023, "openb"): one row per pod,
//! `name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time,
//! deletion_time, scheduled_time` (times in seconds). The mapping is in `docs/traces.md`.

use std::collections::BTreeMap;

use nodewright_adapters::manifest::{Job, Manifest, PodTemplate};
use nodewright_core::model::labels;
use nodewright_core::model::pod::{OwnerRef, Pod};
use nodewright_core::model::requirements::{Operator, RequirementSpec};
use nodewright_core::model::resources::NVIDIA_GPU;

use super::load::load_str;
use super::model::{Action, DeleteKind, Scenario, ScenarioError, TimelineAction};
use crate::sim::rng::SimRng;

/// What each row of the trace becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TracePods {
    /// A Job of one pod that runs the row's run time (`deletion_time − scheduled_time`) once
    /// bound: a pod evicted before it ends is made again and runs it all again, as a batch
    /// job restarts. What an eviction costs in lost work shows.
    #[default]
    Jobs,
    /// A bare pod created at `creation_time` and deleted at `deletion_time`: an evicted one is
    /// gone, and so is the rest of its work (nothing makes it again).
    BarePods,
}

/// How to read a trace, and the variant of it to make: the rows sampled, each row's pods
/// copied, each row's times shifted, all of it chosen by `seed`. The default is the trace as
/// it is, at real time, as Jobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceOptions {
    /// Times are divided by this (1: real time).
    pub time_scale: f64,
    pub pods: TracePods,
    /// Rows kept, per mille (1000: all), each row drawn on its own.
    pub sample_per_mille: u32,
    /// Pods made of each kept row (1: the trace's load; 2: twice it).
    pub copies: u32,
    /// Each pod starts up to this much later than its row says (seconds of trace time, drawn
    /// uniformly per pod; its run time is kept).
    pub shift_max_s: u64,
    /// Seeds the sampling and the shifts.
    pub seed: u64,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            time_scale: 1.0,
            pods: TracePods::Jobs,
            sample_per_mille: 1000,
            copies: 1,
            shift_max_s: 0,
            seed: 1,
        }
    }
}

/// The most copies of one row (`--copies`): 100 times the default trace is 725,500 pods.
pub const MAX_TRACE_COPIES: u32 = 100;

impl TraceOptions {
    /// The trace as it is, at `time_scale`, as Jobs.
    pub fn at_time_scale(time_scale: f64) -> Self {
        TraceOptions {
            time_scale,
            ..TraceOptions::default()
        }
    }

    /// Whether the options make a variant rather than the trace itself.
    pub fn is_variant(&self) -> bool {
        self.sample_per_mille < 1000 || self.copies != 1 || self.shift_max_s > 0
    }

    fn check(&self, source: &str) -> Result<(), ScenarioError> {
        let refuse = |message: String| Err(trace_error(source, 0, message));
        if !(self.time_scale.is_finite() && self.time_scale >= 1.0) {
            return refuse(format!(
                "--time-scale {}: give a factor of 1 or more (1 keeps real time, 100 runs it 100 times faster)",
                self.time_scale
            ));
        }
        if self.sample_per_mille == 0 || self.sample_per_mille > 1000 {
            return refuse(format!(
                "--sample {}: give the share of rows to keep, above 0 and at most 1 (0.5 keeps about half)",
                self.sample_per_mille as f64 / 1000.0
            ));
        }
        if self.copies == 0 || self.copies > MAX_TRACE_COPIES {
            return refuse(format!(
                "--copies {}: give how many pods each row makes, 1 to {MAX_TRACE_COPIES}",
                self.copies
            ));
        }
        Ok(())
    }
}

/// The base scenario the trace's pods are added to: the NodePool, the EC2NodeClass, the cloud.
pub const ALIBABA_OPENB_BASE: &str = include_str!("../../../scenarios/traces/alibaba-openb.yaml");

/// What reading a trace found, besides the scenario.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceSummary {
    pub rows: usize,
    /// Rows of pods that never ran (no `scheduled_time`): left out, as the trace says nothing of
    /// what they would have needed to run.
    pub never_ran: usize,
    pub pods: usize,
    pub gpu_pods: usize,
}

/// The base scenario (`base`, YAML, `files` for its `file:` manifests) with the pods of the
/// openb pod list `csv`, read as `options` say. The run lasts until the last deletion (as
/// Jobs: an hour of trace time after the last row would have ended, had every pod been placed
/// at once).
pub fn alibaba_openb(
    csv: &str,
    source: &str,
    options: TraceOptions,
    base: Scenario,
) -> Result<(Scenario, TraceSummary), ScenarioError> {
    options.check(source)?;
    let time_scale = options.time_scale;
    let mut rng = SimRng::new(options.seed);
    let mut lines = csv.lines().enumerate();
    let header: Vec<&str> = match lines.next() {
        Some((_, h)) => h.split(',').map(str::trim).collect(),
        None => return Err(trace_error(source, 1, "the file is empty".into())),
    };
    let column = |name: &str| -> Result<usize, ScenarioError> {
        header.iter().position(|h| *h == name).ok_or_else(|| {
            trace_error(
                source,
                1,
                format!(
                    "the header has no column {name:?}; an openb pod list starts with name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
                ),
            )
        })
    };
    let c = Columns {
        name: column("name")?,
        cpu: column("cpu_milli")?,
        memory: column("memory_mib")?,
        gpus: column("num_gpu")?,
        gpu_milli: column("gpu_milli")?,
        gpu_spec: column("gpu_spec")?,
        created: column("creation_time")?,
        deleted: column("deletion_time")?,
        scheduled: column("scheduled_time")?,
    };
    let mut summary = TraceSummary::default();
    let mut scenario = base;
    let mut timeline: Vec<TimelineAction> = Vec::new();
    let mut last_ms = 0u64;
    let mut seen: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    let scale = |seconds: u64| -> u64 { (seconds as f64 * 1000.0 / time_scale).round() as u64 };
    for (index, line) in lines {
        let line_no = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        summary.rows += 1;
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let field = |i: usize| fields.get(i).copied().unwrap_or("");
        if field(c.scheduled).is_empty() {
            summary.never_ran += 1;
            continue;
        }
        let number = |i: usize, what: &str| -> Result<u64, ScenarioError> {
            field(i).parse::<u64>().map_err(|_| {
                trace_error(
                    source,
                    line_no,
                    format!("{what} is {:?}, not a whole number", field(i)),
                )
            })
        };
        let name = field(c.name);
        if name.is_empty() {
            return Err(trace_error(source, line_no, "the pod has no name".into()));
        }
        let cpu = number(c.cpu, "cpu_milli")?;
        let memory_mib = number(c.memory, "memory_mib")?;
        let gpus = number(c.gpus, "num_gpu")?;
        let gpu_milli = number(c.gpu_milli, "gpu_milli")?;
        let created = number(c.created, "creation_time")?;
        let deleted = number(c.deleted, "deletion_time")?;
        if deleted < created {
            return Err(trace_error(
                source,
                line_no,
                format!("deletion_time {deleted} is before creation_time {created}"),
            ));
        }
        let too_large = |what: &str| {
            trace_error(
                source,
                line_no,
                format!("{what} is too large to be a pod's request"),
            )
        };
        let cpu = i64::try_from(cpu).map_err(|_| too_large("cpu_milli"))?;
        let memory = i64::try_from(memory_mib)
            .ok()
            .and_then(|m| m.checked_mul(1024 * 1024))
            .ok_or_else(|| too_large("memory_mib"))?;
        let gpus = i64::try_from(gpus).map_err(|_| too_large("num_gpu"))?;
        if !seen.insert(name.to_string()) {
            return Err(trace_error(
                source,
                line_no,
                format!("the pod {name} appears twice; every row must name another pod"),
            ));
        }
        let scheduled = number(c.scheduled, "scheduled_time")?;
        // Drawn for every row, kept or not, so that a row's fate depends on the seed alone.
        let keep = rng.between(0, 999) < u64::from(options.sample_per_mille);
        let mut pod = Pod::new("openb", name, cpu, memory);
        // A fraction of a GPU still takes a whole one: Kubernetes counts GPUs in units.
        let whole = if gpus == 0 && gpu_milli > 0 { 1 } else { gpus };
        if whole > 0 {
            pod.requests.set_extended(NVIDIA_GPU, whole);
        }
        let spec = field(c.gpu_spec);
        if whole > 0 && !spec.is_empty() {
            let names: Vec<String> = spec.split('|').map(aws_gpu_name).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            pod.required_node_affinity = vec![vec![RequirementSpec::new(
                labels::INSTANCE_GPU_NAME,
                Operator::In,
                &names,
            )]];
        }
        // The trace's run: from its start in Alibaba's cluster to its deletion.
        let run_s = deleted.saturating_sub(scheduled.max(created));
        for copy in 0..options.copies {
            let shift_s = rng.between(0, options.shift_max_s);
            if !keep {
                continue;
            }
            let name = if copy == 0 {
                name.to_string()
            } else {
                format!("{name}-copy{copy}")
            };
            summary.pods += 1;
            if whole > 0 {
                summary.gpu_pods += 1;
            }
            let from = scale(created.saturating_add(shift_s));
            let mut pod = pod.clone();
            pod.key.name = name.clone();
            match options.pods {
                TracePods::BarePods => {
                    let until = scale(deleted.saturating_add(shift_s));
                    last_ms = last_ms.max(until);
                    timeline.push(TimelineAction {
                        at_ms: from,
                        action: Action::Apply(vec![Manifest::Pod(PodTemplate::bare(pod))]),
                    });
                    timeline.push(TimelineAction {
                        at_ms: until,
                        action: Action::Delete {
                            kind: DeleteKind::Pod,
                            namespace: "openb".to_string(),
                            name,
                        },
                    });
                }
                TracePods::Jobs => {
                    let run_ms = scale(run_s);
                    last_ms = last_ms.max(from.saturating_add(run_ms));
                    pod.owner = Some(OwnerRef {
                        kind: "Job".to_string(),
                        name: name.clone(),
                    });
                    timeline.push(TimelineAction {
                        at_ms: from,
                        action: Action::Apply(vec![Manifest::Job(Job {
                            namespace: "openb".to_string(),
                            name,
                            completions: 1,
                            parallelism: 1,
                            run_ms,
                            template: PodTemplate::bare(pod),
                        })]),
                    });
                }
            }
        }
    }
    // In time order; at one moment, in the file's order (a stable sort).
    timeline.sort_by_key(|t| t.at_ms);
    scenario.timeline.extend(timeline);
    // As Jobs, the waits and the restarts take longer than the trace: an hour (of trace time)
    // more, and a Job still running then is cut there (its cost and its bound both end).
    let margin_ms = match options.pods {
        TracePods::BarePods => 60_000,
        TracePods::Jobs => scale(3_600).max(60_000),
    };
    scenario.duration_ms = scenario.duration_ms.max(last_ms.saturating_add(margin_ms));
    scenario.description = format!(
        "{} {} of the Alibaba openb trace {source}{}{}",
        summary.pods,
        match options.pods {
            TracePods::Jobs => "one-pod Jobs",
            TracePods::BarePods => "pods",
        },
        if options.is_variant() {
            format!(
                " (variant: {} of the rows, {} pod(s) each, starts shifted up to {} s, seed {})",
                options.sample_per_mille as f64 / 1000.0,
                options.copies,
                options.shift_max_s,
                options.seed
            )
        } else {
            String::new()
        },
        if time_scale > 1.0 {
            format!(", {time_scale}× faster than real time")
        } else {
            String::new()
        }
    );
    Ok((scenario, summary))
}

struct Columns {
    name: usize,
    cpu: usize,
    memory: usize,
    gpus: usize,
    gpu_milli: usize,
    gpu_spec: usize,
    created: usize,
    deleted: usize,
    scheduled: usize,
}

/// The AWS name (`karpenter.k8s.aws/instance-gpu-name`) of a GPU model of the trace; a model
/// AWS does not offer keeps its own name, lowercased, and so matches no instance type.
pub fn aws_gpu_name(model: &str) -> String {
    let m = model.trim().to_ascii_uppercase();
    let known: BTreeMap<&str, &str> = BTreeMap::from([
        ("A100", "a100"),
        ("A10", "a10g"),
        ("H100", "h100"),
        ("L4", "l4"),
        ("T4", "t4"),
        ("V100", "v100"),
    ]);
    // The longest known model the name starts with (V100M16 and V100M32 are V100s).
    known
        .iter()
        .filter(|(k, _)| m.starts_with(*k))
        .max_by_key(|(k, _)| k.len())
        .map(|(_, v)| v.to_string())
        .unwrap_or_else(|| model.trim().to_ascii_lowercase())
}

fn trace_error(source: &str, line: usize, message: String) -> ScenarioError {
    ScenarioError::Trace {
        file: source.to_string(),
        line,
        message,
    }
}

/// The built-in base scenario of the openb trace.
pub fn alibaba_openb_base() -> Result<Scenario, ScenarioError> {
    load_str(
        ALIBABA_OPENB_BASE,
        "scenarios/traces/alibaba-openb.yaml",
        &super::builtin::embedded_files(),
    )
}
