//! What-if: a recorded world under another policy (`nodewright replay LOG --policy F.yaml`).
//!
//! The recording becomes a scenario of the simulated world ([`recording`]): the world's own
//! inputs are kept and nodewright's decisions, with what followed from them, are simulated again.
//! It is run twice with the same seed, under the recorded policy (the baseline) and under the new
//! one, and the two runs are compared: what is left is the policy's effect, not the simulation's
//! error. `docs/what-if.md` says what this can and cannot predict.

pub mod policy;
pub mod recording;
mod scenario;

use std::collections::BTreeMap;

use nodewright_adapters::eventlog::{LogError, LogHeader, LogRecord, MemoryStore};
use nodewright_adapters::manifest::ManifestError;
use nodewright_core::model::nodeclaim::TerminationReason;
use nodewright_core::{Command, EventKind};
use serde::Serialize;
use thiserror::Error;

use crate::report::{Percentiles, Report};
use crate::scenario::ScenarioError;
use crate::sim::RunError;
pub use policy::Policy;
pub use recording::Recording;
pub use scenario::scenario_of;

#[derive(Debug, Error)]
pub enum WhatIfError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("{file}: {problem}")]
    Policy { file: String, problem: String },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Settings(#[from] ScenarioError),
    #[error(
        "{file}: {kind} {name:?} is not in the recording (it has {}); a policy changes recorded objects only: check the name",
        if known.is_empty() { "none".to_string() } else { known.join(", ") }
    )]
    UnknownObject {
        file: String,
        kind: &'static str,
        name: String,
        known: Vec<String>,
    },
    #[error("the log holds no CatalogUpdated event: nothing to launch from")]
    NoCatalog,
    #[error(
        "the log was cut from a longer one and starts at its event {0}, from a snapshot: a what-if needs the workload from the start; export the range from the store's start (no --from)"
    )]
    CutLog(u64),
    #[error(
        "the log is assembled from {0} pieces (leader terms or segments, `log export --segments`): a what-if runs one store's workload from its start; export one term's range from its replica's store, or assemble a range within one term"
    )]
    AssembledLog(u64),
    #[error("the simulation failed: {0}")]
    Run(#[from] RunError),
}

/// What the recording itself shows (for how close the re-simulated baseline comes).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Recorded {
    pub machines_launched: u64,
    pub total_usd: f64,
    pub voluntary_disruptions: u64,
    pub evictions: u64,
}

/// One run's figures, as compared.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Figures {
    pub decision_digest: String,
    pub machines_launched: u64,
    pub total_usd: f64,
    pub pending_seconds: Percentiles,
    pub scheduled: u64,
    pub never_scheduled: u64,
    /// Hours pods spent on a node: the work the cost bought.
    pub scheduled_pod_hours: f64,
    /// Cost over scheduled pod-hours: what to compare when the runs schedule different pods.
    pub usd_per_scheduled_pod_hour: Option<f64>,
    /// Pods never scheduled, by reason.
    pub left_out: Vec<LeftOut>,
    /// Machines removed by a voluntary disruption (empty, underutilized, drifted).
    pub voluntary_disruptions: u64,
    pub evictions: u64,
}

impl Figures {
    fn of(report: &Report) -> Figures {
        let d = &report.disruptions;
        Figures {
            decision_digest: report.decision_digest.clone(),
            machines_launched: report.nodes.launched,
            total_usd: round(report.cost.total_usd),
            pending_seconds: report.pods.pending_seconds.clone(),
            scheduled: report.pods.scheduled,
            never_scheduled: report.pods.never_scheduled,
            scheduled_pod_hours: round(report.pods.scheduled_pod_hours),
            usd_per_scheduled_pod_hour: (report.pods.scheduled_pod_hours > 0.0)
                .then(|| round(report.cost.total_usd / report.pods.scheduled_pod_hours)),
            left_out: left_out(report),
            voluntary_disruptions: d.empty + d.underutilized + d.drifted,
            evictions: d.evictions,
        }
    }
}

/// The pods a run never scheduled and the core gave a reason for (still pending at the end,
/// or deleted while unschedulable), by reason: the most pods first.
fn left_out(report: &Report) -> Vec<LeftOut> {
    crate::report::group_by_reason(
        report
            .unschedulable
            .iter()
            .chain(&report.deleted_unschedulable),
    )
    .into_iter()
    .map(|g| LeftOut {
        reason: g.reason.to_string(),
        pods: g.pods.len() as u64,
        examples: g.pods.iter().take(3).map(|p| p.to_string()).collect(),
    })
    .collect()
}

/// Pods a run never scheduled for one reason.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LeftOut {
    pub reason: String,
    pub pods: u64,
    /// Up to three of them.
    pub examples: Vec<String>,
}

/// How many machines of one kind each run launched or removed.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DecisionCount {
    /// `nodepool/instance-type capacity-type` for launches; the rule for removals.
    pub what: String,
    pub baseline: u64,
    pub what_if: u64,
}

/// The outcome of a what-if.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WhatIf {
    pub log_source: String,
    pub policy: String,
    pub changes: String,
    /// Whether the two runs scheduled the same pods (by count): when not, their costs buy
    /// different work, and the cost per scheduled pod-hour is the figure to compare.
    pub like_for_like: bool,
    pub recorded: Recorded,
    pub baseline: Figures,
    pub what_if: Figures,
    /// Launches by NodePool, instance type and capacity type, where the runs differ.
    pub launched: Vec<DecisionCount>,
    /// Removals by rule, where the runs differ.
    pub removed: Vec<DecisionCount>,
}

/// The log of a what-if run: every event and command of the recorded world under the policy.
pub type WhatIfLog = MemoryStore<LogHeader, LogRecord>;

/// Runs the recording under its own policy and under `policy`, and compares them.
pub fn what_if(recording: &Recording, policy: &Policy) -> Result<WhatIf, WhatIfError> {
    what_if_logged(recording, policy).map(|(outcome, _)| outcome)
}

/// [`what_if`], and the log of the run under `policy` (for `explain`).
pub fn what_if_logged(
    recording: &Recording,
    policy: &Policy,
) -> Result<(WhatIf, WhatIfLog), WhatIfError> {
    policy.check_against(recording)?;
    let baseline_scenario = scenario_of(recording, &Policy::recorded())?;
    let changed_scenario = scenario_of(recording, policy)?;
    let (baseline, _) = run(&baseline_scenario)?;
    let (changed, log) = run(&changed_scenario)?;
    let outcome = WhatIf {
        log_source: recording.header.source.clone(),
        policy: policy.source.clone(),
        changes: policy.describe(),
        like_for_like: baseline.pods.scheduled == changed.pods.scheduled
            && baseline.pods.never_scheduled == changed.pods.never_scheduled,
        recorded: recorded(recording),
        baseline: Figures::of(&baseline),
        what_if: Figures::of(&changed),
        launched: differing(count(&baseline, launch_kind), count(&changed, launch_kind)),
        removed: differing(
            count(&baseline, removal_kind),
            count(&changed, removal_kind),
        ),
    };
    Ok((outcome, log))
}

fn run(scenario: &crate::Scenario) -> Result<(Report, WhatIfLog), WhatIfError> {
    let header = LogHeader::new(scenario.config.clone(), &scenario.name);
    let store: WhatIfLog = MemoryStore::new(header);
    Ok(crate::sim::run(scenario, store)?)
}

fn round(usd: f64) -> f64 {
    (usd * 10_000.0).round() / 10_000.0
}

fn recorded(recording: &Recording) -> Recorded {
    let end = recording.end_ms();
    let mut running: BTreeMap<&str, (u64, f64)> = BTreeMap::new();
    let mut usd = 0.0;
    let mut launched = 0;
    for event in &recording.events {
        match &event.kind {
            EventKind::LaunchSucceeded {
                nodeclaim,
                instance,
            } => {
                launched += 1;
                running.insert(nodeclaim, (event.at_ms, instance.price.usd_per_hour()));
            }
            EventKind::NodeClaimTerminated { nodeclaim } => {
                if let Some((from, price)) = running.remove(nodeclaim.as_str()) {
                    usd += price * (event.at_ms.saturating_sub(from)) as f64 / 3_600_000.0;
                }
            }
            _ => {}
        }
    }
    for (from, price) in running.values() {
        usd += price * end.saturating_sub(*from) as f64 / 3_600_000.0;
    }
    let (mut voluntary, mut evictions) = (0, 0);
    for (_, command) in &recording.commands {
        match command {
            Command::TerminateNodeClaim { reason, .. }
                if reason.is_voluntary() || *reason == TerminationReason::Drifted =>
            {
                voluntary += 1
            }
            Command::EvictPod { forced: false, .. } => evictions += 1,
            _ => {}
        }
    }
    Recorded {
        machines_launched: launched,
        total_usd: round(usd),
        voluntary_disruptions: voluntary,
        evictions,
    }
}

fn launch_kind(m: &crate::report::MachineReport) -> Option<String> {
    Some(format!(
        "{}/{} {}",
        m.nodepool, m.instance_type, m.capacity_type
    ))
}

fn removal_kind(m: &crate::report::MachineReport) -> Option<String> {
    let reason = m.termination_reason.as_deref()?;
    Some(reason.split(':').next().unwrap_or(reason).to_string())
}

fn count(
    report: &Report,
    kind: fn(&crate::report::MachineReport) -> Option<String>,
) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for m in &report.machines {
        if let Some(k) = kind(m) {
            *out.entry(k).or_default() += 1;
        }
    }
    out
}

fn differing(
    baseline: BTreeMap<String, u64>,
    what_if: BTreeMap<String, u64>,
) -> Vec<DecisionCount> {
    let mut keys: Vec<&String> = baseline.keys().chain(what_if.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|k| DecisionCount {
            what: k.clone(),
            baseline: baseline.get(k).copied().unwrap_or(0),
            what_if: what_if.get(k).copied().unwrap_or(0),
        })
        .filter(|c| c.baseline != c.what_if)
        .collect()
}

impl WhatIf {
    /// The comparison as text.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let b = &self.baseline;
        let w = &self.what_if;
        let _ = writeln!(
            out,
            "what-if: the recorded world of {} under {} (changes {})",
            self.log_source, self.policy, self.changes
        );
        let _ = writeln!(
            out,
            "recording: {} machines launched, ${:.4}, {} voluntary disruptions, {} evictions",
            self.recorded.machines_launched,
            self.recorded.total_usd,
            self.recorded.voluntary_disruptions,
            self.recorded.evictions
        );
        let _ = writeln!(
            out,
            "{:<26} {:>14} {:>14} {:>14}",
            "", "baseline", "what-if", "change"
        );
        let row = |out: &mut String, name: &str, a: f64, b: f64| {
            let _ = writeln!(
                out,
                "{name:<26} {:>14} {:>14} {:>14}",
                number(a),
                number(b),
                signed(b - a)
            );
        };
        row(&mut out, "cost (USD)", b.total_usd, w.total_usd);
        row(
            &mut out,
            "machines launched",
            b.machines_launched as f64,
            w.machines_launched as f64,
        );
        row(
            &mut out,
            "pending p50 (s)",
            b.pending_seconds.p50,
            w.pending_seconds.p50,
        );
        row(
            &mut out,
            "pending p99 (s)",
            b.pending_seconds.p99,
            w.pending_seconds.p99,
        );
        row(
            &mut out,
            "pending max (s)",
            b.pending_seconds.max,
            w.pending_seconds.max,
        );
        row(
            &mut out,
            "pods scheduled",
            b.scheduled as f64,
            w.scheduled as f64,
        );
        row(
            &mut out,
            "pods never scheduled",
            b.never_scheduled as f64,
            w.never_scheduled as f64,
        );
        if let (Some(a), Some(c)) = (b.usd_per_scheduled_pod_hour, w.usd_per_scheduled_pod_hour) {
            row(&mut out, "cost per pod-hour (USD)", a, c);
        }
        row(
            &mut out,
            "voluntary disruptions",
            b.voluntary_disruptions as f64,
            w.voluntary_disruptions as f64,
        );
        row(
            &mut out,
            "evictions",
            b.evictions as f64,
            w.evictions as f64,
        );
        if !self.like_for_like {
            let _ = writeln!(
                out,
                "not like for like: the runs schedule different pods ({} and {}), so their costs buy different work; compare the cost per pod-hour",
                b.scheduled, w.scheduled
            );
            for (run, figures) in [("baseline", b), ("what-if", w)] {
                for l in &figures.left_out {
                    let more = l.pods.saturating_sub(l.examples.len() as u64);
                    let more = if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    };
                    let _ = writeln!(
                        out,
                        "  left out by the {run}: {} pods ({}{more}): {}",
                        l.pods,
                        l.examples.join(", "),
                        l.reason
                    );
                }
            }
        }
        if self.launched.is_empty() && self.removed.is_empty() {
            let _ = writeln!(out, "decisions: the same machines launched and removed");
        }
        if !self.launched.is_empty() {
            let _ = writeln!(
                out,
                "machines launched (nodepool/type capacity: baseline -> what-if):"
            );
            for c in &self.launched {
                let _ = writeln!(out, "  {}: {} -> {}", c.what, c.baseline, c.what_if);
            }
        }
        if !self.removed.is_empty() {
            let _ = writeln!(out, "machines removed (rule: baseline -> what-if):");
            for c in &self.removed {
                let _ = writeln!(out, "  {}: {} -> {}", c.what, c.baseline, c.what_if);
            }
        }
        let _ = writeln!(
            out,
            "decision digests: baseline {}, what-if {}",
            short(&b.decision_digest),
            short(&w.decision_digest)
        );
        out
    }
}

/// At most four decimals, none when whole.
fn number(x: f64) -> String {
    let text = format!("{x:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn signed(delta: f64) -> String {
    if delta.abs() < 5e-5 {
        "0".to_string()
    } else if delta > 0.0 {
        format!("+{}", number(delta))
    } else {
        number(delta)
    }
}

fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}
