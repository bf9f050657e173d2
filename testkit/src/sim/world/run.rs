//! The run loop: the real driver over the world, from the scenario's start to its end, with
//! the checks after every step and at the end, and a crash and restart where asked.

use super::*;

/// Why a run stopped early.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// Its log, written out and read back ([`logged_records`]), did not read.
    #[error(transparent)]
    Log(#[from] nodewright_adapters::eventlog::LogError),
}

/// The records of a run of `scenario` as its `.nwlog` file holds them: run as `options` say
/// into a store in memory, written out and read back — what a test that edits a log and replays
/// it starts from.
pub fn logged_records(
    scenario: &Scenario,
    options: RunOptions,
) -> Result<(LogHeader, Vec<LogRecord>), RunError> {
    let store: nodewright_adapters::eventlog::MemoryStore<LogHeader, LogRecord> =
        nodewright_adapters::eventlog::MemoryStore::new(LogHeader::new(
            scenario.config.clone(),
            &scenario.name,
        ));
    let (_, store) = run_with(scenario, store, options)?;
    let mut bytes = Vec::new();
    store.write_nwlog(&mut bytes)?;
    let (header, records) = nodewright_adapters::eventlog::read_nwlog_bytes(&bytes)?;
    Ok((header, records))
}

/// Runs a scenario to its end through the real driver, logging into `store`.
pub fn run<S: EventStore<LogHeader, LogRecord>>(
    scenario: &Scenario,
    store: S,
) -> Result<(Report, S), RunError> {
    run_with_crash(scenario, store, None)
}

/// Where a run's controller is stopped, once, and restarted at once from its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Crash {
    /// It runs to the end.
    #[default]
    Never,
    /// Right after event `k` is appended to the log, before the core handles it: nothing is
    /// lost, and the restarted controller must decide exactly what an uninterrupted one does.
    AfterAppend(u64),
    /// As event `k` arrives, before it is appended: it and every event in flight with it are
    /// lost with the process. The restart re-lists Kubernetes and EC2, asks again for every
    /// result it lacks, and the interruption queue delivers its undeleted messages again.
    BeforeAppend(u64),
}

/// A bug planted between the core and the world, to show that the invariant checks catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlantedBug {
    /// Launches offer again the offerings that just failed for lack of capacity.
    LaunchIntoUnavailable,
}

/// How a run is driven.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    pub crash: Crash,
    /// The driver snapshots the core every this many events (0: never).
    pub snapshot_every: u64,
    /// The run stops at the first broken invariant (the report holds what was seen so far).
    pub stop_at_violation: bool,
    pub planted: Option<PlantedBug>,
    /// Called now and then with the simulated time and the scenario's duration (ms).
    pub progress: Option<fn(u64, u64)>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            crash: Crash::Never,
            snapshot_every: DEFAULT_SNAPSHOT_EVERY,
            stop_at_violation: false,
            planted: None,
            progress: None,
        }
    }
}

/// [`run`], with the controller stopped once: right after event number `crash_at` is appended to
/// the log, before the core handles it. It restarts at once from the log
/// ([`Driver::recover`]) and what may not have been carried out is carried out again.
pub fn run_with_crash<S: EventStore<LogHeader, LogRecord>>(
    scenario: &Scenario,
    store: S,
    crash_at: Option<u64>,
) -> Result<(Report, S), RunError> {
    let options = RunOptions {
        crash: crash_at.map_or(Crash::Never, Crash::AfterAppend),
        ..RunOptions::default()
    };
    run_with(scenario, store, options)
}

/// [`run`], driven as `options` say.
pub fn run_with<S: EventStore<LogHeader, LogRecord>>(
    scenario: &Scenario,
    store: S,
    options: RunOptions,
) -> Result<(Report, S), RunError> {
    let mut driver = Driver::new(store).with_snapshot_every(options.snapshot_every);
    let mut crashed = false;
    let mut relist_due = false;
    let mut world = World::start(scenario, options.planted);
    let mut digest = DecisionDigest::new();
    let mut violations: Vec<Violation> = Vec::new();
    // Stamps what a check found with the driver's event count; true when the run must stop.
    let note = |violations: &mut Vec<Violation>, found: Vec<Violation>, event: u64| {
        for mut v in found {
            v.event = event;
            violations.push(v);
        }
        options.stop_at_violation && !violations.is_empty()
    };

    let mut stopped = false;
    let mut progress_at = 0u64;
    'run: loop {
        // Feed every observation of this instant through the driver.
        while !world.outbox.is_empty() {
            let mut batch = std::mem::take(&mut world.outbox).into_iter();
            while let Some(event) = batch.next() {
                world.step_commands.clear();
                let crash_here = !crashed
                    && match options.crash {
                        Crash::Never => false,
                        Crash::AfterAppend(k) | Crash::BeforeAppend(k) => k == driver.events(),
                    };
                if crash_here {
                    crashed = true;
                    let mut redelivered = Vec::new();
                    if matches!(options.crash, Crash::AfterAppend(_)) {
                        driver.append_only(event)?;
                    } else {
                        // Lost with the process: this event, the rest of its batch, and what
                        // the world has answered since; but SQS delivers again every message
                        // that was not deleted.
                        redelivered = std::iter::once(event)
                            .chain(batch.by_ref())
                            .chain(std::mem::take(&mut world.outbox))
                            .filter(|e| matches!(e.kind, EventKind::InterruptionReceived { .. }))
                            .collect();
                    }
                    driver = restart(driver, &mut world, &mut digest, options)?;
                    world.outbox.extend(redelivered);
                    relist_due = true;
                    continue;
                }
                let commands = driver.step(event, &mut world)?;
                digest.add_all(&commands);
                world.record_changes();
                let mut found =
                    invariants::check_step(driver.core(), &world.step_commands, world.now_ms);
                found.extend(world.replace_loops.check(driver.core(), world.now_ms));
                found.append(&mut world.violations);
                if note(&mut violations, found, driver.events()) {
                    stopped = true;
                    break 'run;
                }
            }
            if relist_due {
                // The restarted controller's informers list the world once its log is caught up.
                relist_due = false;
                for kind in relist_events(driver.core().state(), world.listing()) {
                    world.emit(kind);
                }
            }
        }
        world.record_changes();
        let found = invariants::check_world(driver.core(), world.cloud.running(), world.now_ms);
        if note(&mut violations, found, driver.events()) {
            stopped = true;
            break 'run;
        }

        let next_world = world.queue.keys().next().map(|(t, _)| *t);
        let next_timer = driver.next_timer_ms();
        let next = match (next_world, next_timer) {
            (Some(w), Some(t)) => w.min(t),
            (Some(w), None) => w,
            (None, Some(t)) => t,
            (None, None) => break,
        };
        if next > scenario.duration_ms {
            break;
        }
        if let Some(progress) = options.progress
            && driver.events() >= progress_at
        {
            progress_at = driver.events() + 4096;
            progress(next, scenario.duration_ms);
        }
        world.advance_to(next);
        if next_world == Some(next) {
            let Some((_, event)) = world.queue.pop_first() else {
                break;
            };
            world.run_world_event(event, scenario);
        } else {
            world.emit(EventKind::Tick);
        }
    }
    if !stopped {
        let found = world.end_checks(scenario, driver.core());
        note(&mut violations, found, driver.events());
    }

    let report = build_report(
        scenario,
        &world,
        driver.core(),
        (driver.events(), driver.commands()),
        &digest,
        violations,
    );
    Ok((report, driver.into_store()))
}

impl World {
    /// The checks at the end of a run: every machine joined in time, every pod placed or told
    /// why, and the core's view equal to the cluster's, whatever was lost on the way.
    pub(crate) fn end_checks(
        &mut self,
        scenario: &Scenario,
        core: &nodewright_core::Core,
    ) -> Vec<Violation> {
        self.advance_to(scenario.duration_ms);
        self.record_changes();
        // A machine has the launch and registration timeouts to join; a pod as long to be
        // placed or told why not.
        let config = core.config();
        let patience = config.launch_timeout_ms + config.registration_timeout_ms;
        let joined = |id: &str| {
            self.machines
                .values()
                .any(|m| m.instance_id.as_deref() == Some(id) && m.node.is_some())
        };
        let pending = self
            .cluster
            .pods
            .values()
            .filter(|p| p.node_name.is_none() && !p.is_daemonset_pod())
            .map(|p| {
                (
                    &p.key,
                    p.created_at_ms,
                    self.unschedulable.contains_key(&p.key),
                )
            });
        let mut gap = relist_events(core.state(), self.kubernetes_listing());
        gap.extend(pod_gap(core.state(), self.cluster.pods.values()));
        let mut found = invariants::check_view(&gap, self.now_ms);
        found.extend(invariants::check_end(
            self.cloud.running(),
            joined,
            pending,
            patience,
            self.now_ms,
        ));
        found
    }
}

/// The controller starts again over its log: the core is recovered, what may not have been
/// carried out is carried out again. (The world is then listed again, through the driver, so
/// the log holds what the listing found.)
fn restart<S: EventStore<LogHeader, LogRecord>>(
    driver: Driver<S>,
    world: &mut World,
    digest: &mut DecisionDigest,
    options: RunOptions,
) -> Result<Driver<S>, RunError> {
    let (recovered, recovery) = Driver::recover(driver.into_store())?;
    let driver = recovered.with_snapshot_every(options.snapshot_every);
    digest.add_all(&recovery.last_commands);
    for command in recovery.reissue() {
        world.execute(command);
    }
    world.record_changes();
    Ok(driver)
}
