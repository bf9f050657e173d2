//! One scenario under many seeds: every run independent and deterministic, spread over the
//! machine's cores, each stopped at its first broken invariant. `nodewright simulate --seeds`
//! and the many-seeds tests run it.

use std::fmt;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nodewright_adapters::eventlog::{LogHeader, LogRecord, MemoryStore};

use crate::report::{ExpectationResult, Report, Violation};
use crate::scenario::Scenario;
use crate::sim::{self, PlantedBug, RunError, RunOptions};

/// A seed whose run failed.
#[derive(Debug, Clone)]
pub struct SeedFailure {
    pub seed: u64,
    /// Why, typed: what a caller acts on.
    pub causes: Vec<FailureCause>,
    /// Its report's whole summary, or the error that stopped it.
    pub summary: String,
}

/// Why a seed's run failed.
#[derive(Debug, Clone, PartialEq)]
pub enum FailureCause {
    /// An invariant broke (the run stopped there).
    Invariant(Violation),
    /// An expectation of the scenario did not hold.
    Expectation(ExpectationResult),
    /// The run could not go on (an error of the world or the harness, with the fault plan of a
    /// madsim run).
    Stopped(String),
}

impl fmt::Display for FailureCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailureCause::Invariant(v) => write!(
                f,
                "INVARIANT BROKEN at {:.0}s (event {}): {}: {}",
                v.at_seconds, v.event, v.kind, v.detail
            ),
            FailureCause::Expectation(e) => write!(f, "expect {}: FAILED ({})", e.name, e.detail),
            FailureCause::Stopped(why) => write!(f, "{why}"),
        }
    }
}

impl FailureCause {
    /// The causes of a report that did not pass.
    pub fn of(report: &Report) -> Vec<FailureCause> {
        report
            .invariant_violations
            .iter()
            .cloned()
            .map(FailureCause::Invariant)
            .chain(
                report
                    .expectations
                    .iter()
                    .filter(|e| !e.passed)
                    .cloned()
                    .map(FailureCause::Expectation),
            )
            .collect()
    }
}

#[derive(Debug, Clone)]
pub struct SeedsOutcome {
    pub runs: u64,
    pub events: u64,
    /// By seed.
    pub failures: Vec<SeedFailure>,
    pub elapsed: Duration,
}

/// Runs `scenario` once per seed of `seeds`, on `threads` threads (at least one), and calls
/// `progress` with the number of runs done after each run.
pub fn run_seeds(
    scenario: &Scenario,
    seeds: Range<u64>,
    threads: usize,
    planted: Option<PlantedBug>,
    progress: &(dyn Fn(u64) + Sync),
) -> SeedsOutcome {
    let runner = |scenario: &Scenario, seed: u64| {
        run_one(scenario, seed, planted).map_err(|err| format!("the run stopped: {err}"))
    };
    run_seeds_with(scenario, seeds, threads, &runner, progress)
}

/// One run of a scenario under a seed, stopped at its first broken invariant: its report, or
/// why it could not finish.
pub type SeedRunner<'a> = dyn Fn(&Scenario, u64) -> Result<Report, String> + Sync + 'a;

/// [`run_seeds`] with another way of running one seed (the madsim harness, in the simulated
/// build).
pub fn run_seeds_with(
    scenario: &Scenario,
    seeds: Range<u64>,
    threads: usize,
    runner: &SeedRunner<'_>,
    progress: &(dyn Fn(u64) + Sync),
) -> SeedsOutcome {
    let started = Instant::now();
    let next = AtomicU64::new(seeds.start);
    let done = AtomicU64::new(0);
    let events = AtomicU64::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= seeds.end {
                        break;
                    }
                    match runner(scenario, seed) {
                        Ok(report) => {
                            events.fetch_add(report.events, Ordering::Relaxed);
                            if !report.passed() {
                                push(
                                    &failures,
                                    SeedFailure {
                                        seed,
                                        causes: FailureCause::of(&report),
                                        summary: report.summary(),
                                    },
                                );
                            }
                        }
                        Err(why) => push(
                            &failures,
                            SeedFailure {
                                seed,
                                causes: vec![FailureCause::Stopped(why.clone())],
                                summary: why,
                            },
                        ),
                    }
                    progress(done.fetch_add(1, Ordering::Relaxed) + 1);
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap_or_else(|e| e.into_inner());
    failures.sort_by_key(|f: &SeedFailure| f.seed);
    SeedsOutcome {
        runs: done.into_inner(),
        events: events.into_inner(),
        failures,
        elapsed: started.elapsed(),
    }
}

fn push(failures: &Mutex<Vec<SeedFailure>>, failure: SeedFailure) {
    // A poisoned lock only means another run panicked; its list is still whole.
    let mut list = failures.lock().unwrap_or_else(|e| e.into_inner());
    list.push(failure);
}

/// One run of the scenario under `seed`, stopped at its first broken invariant.
pub fn run_one(
    scenario: &Scenario,
    seed: u64,
    planted: Option<PlantedBug>,
) -> Result<Report, RunError> {
    let scenario = scenario.clone().with_seed(seed);
    let header = LogHeader::new(scenario.config.clone(), &scenario.name);
    let store: MemoryStore<LogHeader, LogRecord> = MemoryStore::new(header);
    let options = RunOptions {
        stop_at_violation: true,
        planted,
        ..RunOptions::default()
    };
    sim::run_with(&scenario, store, options).map(|(report, _)| report)
}

/// One run of the scenario under `seed` in the madsim harness, under the seed's fault plan,
/// stopped at its first broken invariant. A failed run's summary starts with its fault plan.
#[cfg(madsim)]
pub fn run_one_madsim(scenario: &Scenario, seed: u64) -> Result<Report, String> {
    use crate::sim::faults::FaultPlan;
    use crate::sim::madsim_world::{self, MadsimOptions};
    let scenario = scenario.clone().with_seed(seed);
    let plan = FaultPlan::draw(seed, scenario.duration_ms);
    let shown = plan.to_string();
    let options = MadsimOptions {
        stop_at_violation: true,
        ..MadsimOptions::default()
    };
    match madsim_world::run(&scenario, plan, options) {
        Ok(run) => Ok(run.report),
        Err(err) => Err(format!("faults: {shown}\nthe run stopped: {err}")),
    }
}
