//! The madsim harness: the controller's own loop ([`control_loop::run`], the code the
//! in-cluster controller runs) over simulated adapters, in madsim's virtual time, with madsim's
//! seeded task scheduling and a seeded [`FaultPlan`] around it.
//!
//! Two simulated machines:
//! - the **controller** (a madsim node, killed and started again as the plan says): the control
//!   loop over the driver, and the interruption-queue consumer. Each start recovers from the
//!   log, carries out again what may not have been carried out, and lists the world;
//! - the **world** (the main task and its helpers): the simulated EC2 and cluster
//!   ([`World`]), the watches that carry its observations to the controller late but in order,
//!   the API calls that carry the controller's commands to it late, failing and retried, and
//!   the interruption queue (an SQS queue of EventBridge bodies, losing receives and
//!   delivering twice).
//!
//! The log lives on the world's side (it is the controller's disk: it outlives the process).
//! Only the simulated build has this module: `RUSTFLAGS="--cfg madsim"`.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use madsim::runtime::{Handle, Runtime};
use madsim::task::NodeId;
use madsim::time::{Instant, sleep_until};
use nodewright_adapters::control_loop::{self, Clock, InboxSender, Input};
use nodewright_adapters::driver::{CommandExecutor, DEFAULT_SNAPSHOT_EVERY, Driver, DriverError};
use nodewright_adapters::eventlog::{
    DecisionDigest, EventStore, LogError, LogHeader, LogRecord, MemoryStore,
};
use nodewright_adapters::relist::relist_events;
use nodewright_core::{Command, Core, Event, EventKind};
use tokio::sync::{Notify, oneshot};

use super::eventbridge::message_body;
use super::faults::FaultPlan;
use super::queue::SimQueue;
use super::rng::SimRng;
use super::world::{PlantedBug, World, build_report};
use crate::report::{Report, Violation};
use crate::scenario::Scenario;

/// How a madsim run is driven.
#[derive(Debug, Clone, Copy)]
pub struct MadsimOptions {
    /// The run stops at the first broken invariant.
    pub stop_at_violation: bool,
    pub planted: Option<PlantedBug>,
    /// The driver snapshots the core every this many events (0: never).
    pub snapshot_every: u64,
    /// madsim's seed, which orders the tasks ready at the same instant (none: the scenario's).
    pub scheduling_seed: Option<u64>,
}

impl Default for MadsimOptions {
    fn default() -> Self {
        MadsimOptions {
            stop_at_violation: false,
            planted: None,
            snapshot_every: DEFAULT_SNAPSHOT_EVERY,
            scheduling_seed: None,
        }
    }
}

/// What a madsim run gives back.
#[derive(Debug)]
pub struct MadsimRun {
    pub report: Report,
    pub plan: FaultPlan,
    /// Times the controller started again over its log.
    pub restarts: u64,
    /// Interruption messages: sent to the queue (copies included), received, deleted.
    pub queue: (u64, u64, u64),
    pub log: MemoryStore<LogHeader, LogRecord>,
}

/// Why a madsim run could not finish.
#[derive(Debug, thiserror::Error)]
pub enum MadsimError {
    #[error("the controller could not go on: {0}")]
    Driver(#[from] DriverError),
    #[error("the controller stopped without handing back its driver")]
    NoDriver,
}

/// The controller's disk: the log outlives the process that writes it.
#[derive(Clone)]
struct Disk {
    header: LogHeader,
    log: Arc<Mutex<MemoryStore<LogHeader, LogRecord>>>,
}

impl Disk {
    fn lock(&self) -> MutexGuard<'_, MemoryStore<LogHeader, LogRecord>> {
        // A poisoned lock only means a task panicked, which ends the simulation anyway.
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl EventStore<LogHeader, LogRecord> for Disk {
    fn header(&self) -> &LogHeader {
        &self.header
    }
    fn append(&mut self, records: &[LogRecord]) -> Result<(), LogError> {
        self.lock().append(records)
    }
    fn len(&self) -> u64 {
        self.lock().len()
    }
    fn read_range(&self, from: u64, to: u64) -> Result<Vec<LogRecord>, LogError> {
        self.lock().read_range(from, to)
    }
}

/// madsim's virtual clock, in ms since the start of the run.
#[derive(Clone, Copy)]
struct SimClock {
    epoch: Instant,
}

impl Clock for SimClock {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
    fn sleep_until(&self, at_ms: u64) -> impl Future<Output = ()> {
        sleep_until(self.epoch + Duration::from_millis(at_ms))
    }
}

/// Items delivered in the order they were sent, each no earlier than its own delay: a watch
/// stream, or the API calls of one client.
struct DelayLine<T> {
    items: VecDeque<(u64, T)>,
    last_due_ms: u64,
}

impl<T> DelayLine<T> {
    fn new() -> Self {
        DelayLine {
            items: VecDeque::new(),
            last_due_ms: 0,
        }
    }

    fn push(&mut self, now_ms: u64, delay_ms: u64, item: T) {
        let due = (now_ms + delay_ms).max(self.last_due_ms);
        self.last_due_ms = due;
        self.items.push_back((due, item));
    }

    fn next_due(&self) -> Option<u64> {
        self.items.front().map(|(due, _)| *due)
    }

    fn pop_due(&mut self, now_ms: u64) -> Option<T> {
        if self.next_due()? <= now_ms {
            self.items.pop_front().map(|(_, item)| item)
        } else {
            None
        }
    }

    /// What was on its way dies with the process that sent it or was to receive it.
    fn clear(&mut self) {
        self.items.clear();
    }
}

/// Everything both machines touch, behind one lock that is never held across an await.
struct Shared {
    world: World,
    queue: SimQueue,
    /// The fault plan's draws (latencies, failures, losses), apart from the world's.
    rng: SimRng,
    /// The running controller's inbox (none while it is down).
    inbox: Option<InboxSender>,
    watches: DelayLine<EventKind>,
    api_calls: DelayLine<Vec<Command>>,
    /// This step's commands, as dispatched; they go out as one batch of API calls.
    step_calls: Vec<Command>,
    digest: DecisionDigest,
    violations: Vec<Violation>,
    /// The running driver's event count (for the violations' event index).
    events: u64,
    restarts: u64,
    /// The controller has started once already.
    started: bool,
    /// Set once the run must end early (a broken invariant, a driver that cannot go on).
    stop: bool,
    failure: Option<DriverError>,
    /// The driver, handed back when the controller is asked to stop.
    finished: Option<Driver<Disk>>,
}

impl Shared {
    fn draw_between(&mut self, (min, max): (u64, u64)) -> u64 {
        self.rng.between(min, max)
    }

    fn happens(&mut self, permille: u64) -> bool {
        permille > 0 && self.rng.between(0, 999) < permille
    }
}

/// The wake-ups between the tasks.
#[derive(Default)]
struct Bells {
    world: Notify,
    watches: Notify,
    api: Notify,
    queue: Notify,
    controller_up: Notify,
    end: Notify,
}

/// All a task needs.
#[derive(Clone)]
struct Sim {
    shared: Arc<Mutex<Shared>>,
    bells: Arc<Bells>,
    disk: Disk,
    clock: SimClock,
    scenario: Arc<Scenario>,
    plan: Arc<FaultPlan>,
    options: MadsimOptions,
}

impl Sim {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves the world's clock to now, hands what it emitted to the watches and the queue, and
    /// rings who has something new.
    fn flush(&self, shared: &mut Shared) {
        let now = self.clock.now_ms();
        shared.world.advance_to(now);
        shared.world.record_changes();
        let mut sent = false;
        let mut queued = false;
        for Event { kind, .. } in shared.world.take_outbox() {
            match kind {
                EventKind::InterruptionReceived {
                    message_id,
                    instance_id,
                    interruption,
                } => {
                    let body = message_body(&message_id, now, &instance_id, &interruption);
                    if shared.happens(self.plan.sqs_duplicate_permille) {
                        shared.queue.send(body.clone(), now);
                    }
                    shared.queue.send(body, now);
                    queued = true;
                }
                kind => {
                    let delay = shared.draw_between(self.plan.watch_delay_ms);
                    shared.watches.push(now, delay, kind);
                    sent = true;
                }
            }
        }
        if sent {
            self.bells.watches.notify_one();
        }
        if queued {
            self.bells.queue.notify_one();
        }
        self.bells.world.notify_one();
    }
}

/// Waits until `at_ms` (never, if none) or until `bell` rings, whichever comes first.
async fn sleep_or_ring(clock: &SimClock, at_ms: Option<u64>, bell: &Notify) {
    control_loop::until_timer(clock, at_ms, bell.notified()).await;
}

/// The world's own events (timeline, API answers, nodes joining), each at its time.
async fn world_task(sim: Sim) {
    loop {
        let next = sim.lock().world.next_event_at();
        sleep_or_ring(&sim.clock, next, &sim.bells.world).await;
        let now = sim.clock.now_ms();
        let mut shared = sim.lock();
        let mut ran = false;
        while shared.world.next_event_at().is_some_and(|t| t <= now) {
            shared.world.run_next(&sim.scenario);
            ran = true;
        }
        if ran {
            sim.flush(&mut shared);
        }
    }
}

/// The watches: observations reach the controller's inbox late, in order; while it is down
/// they are lost (its informers list the world when it comes back).
async fn watch_task(sim: Sim) {
    loop {
        let next = sim.lock().watches.next_due();
        sleep_or_ring(&sim.clock, next, &sim.bells.watches).await;
        let now = sim.clock.now_ms();
        let mut shared = sim.lock();
        while let Some(kind) = shared.watches.pop_due(now) {
            if let Some(inbox) = &shared.inbox {
                // A closed inbox is a controller being stopped: the observation is lost.
                let _ = inbox.send(Input::Observed(kind));
            }
        }
    }
}

/// The controller's API calls reach the world late, a step's calls together; a failed call is
/// retried with backoff.
async fn api_task(sim: Sim) {
    loop {
        let next = sim.lock().api_calls.next_due();
        sleep_or_ring(&sim.clock, next, &sim.bells.api).await;
        let now = sim.clock.now_ms();
        let mut shared = sim.lock();
        let mut performed = false;
        while let Some(calls) = shared.api_calls.pop_due(now) {
            shared.world.advance_to(now);
            for command in &calls {
                shared.world.perform(command);
            }
            performed = true;
        }
        if performed {
            sim.flush(&mut shared);
        }
    }
}

/// Failed attempts of one batch of API calls, at most.
const API_FAILURES_MAX: u32 = 8;

/// Puts a batch of API calls on their way: the slowest call's latency, plus a backoff for each
/// failed attempt.
fn send_calls(sim: &Sim, shared: &mut Shared, calls: Vec<Command>) {
    if calls.is_empty() {
        return;
    }
    let mut delay = shared.draw_between(sim.plan.api_latency_ms);
    let mut backoff = 100;
    // The adapter's retries give up after this many failures; the controller's next attempt
    // then goes through.
    for _ in 0..API_FAILURES_MAX {
        if !shared.happens(sim.plan.api_error_permille) {
            break;
        }
        delay += backoff + shared.draw_between(sim.plan.api_latency_ms);
        backoff = (backoff * 2).min(10_000);
    }
    shared.api_calls.push(sim.clock.now_ms(), delay, calls);
    sim.bells.api.notify_one();
}

/// The controller's executor: commands leave as API calls; after each step the invariants are
/// checked on the core as the step left it.
struct SimExecutor {
    sim: Sim,
}

impl CommandExecutor for SimExecutor {
    fn execute(&mut self, command: &Command) {
        let mut shared = self.sim.lock();
        let command = shared.world.dispatched(command);
        shared.step_calls.push(command);
    }

    fn stepped(&mut self, core: &Core, _event: &Event, commands: &[Command]) {
        let sim = &self.sim;
        let mut shared = sim.lock();
        shared.events += 1;
        shared.digest.add_all(commands);
        let calls = std::mem::take(&mut shared.step_calls);
        send_calls(sim, &mut shared, calls);
        if shared.stop {
            return;
        }
        shared.world.advance_to(sim.clock.now_ms());
        let found = shared.world.step_checks(core);
        let event = shared.events;
        for mut v in found {
            v.event = event;
            shared.violations.push(v);
        }
        if sim.options.stop_at_violation && !shared.violations.is_empty() {
            shared.stop = true;
            sim.bells.end.notify_one();
        }
    }
}

/// The interruption queue's consumer: long-polls the queue, hands each batch to the control
/// loop, deletes what may be deleted once its events are durable.
async fn queue_consumer(sim: Sim, inbox: InboxSender) {
    loop {
        let next = sim.lock().queue.next_visible_at();
        sleep_or_ring(&sim.clock, next, &sim.bells.queue).await;
        let now = sim.clock.now_ms();
        let messages = {
            let mut shared = sim.lock();
            let messages = shared.queue.receive(now);
            if messages.is_empty() || shared.happens(sim.plan.sqs_loss_permille) {
                // Nothing, or the answer was lost: the messages come again after the
                // visibility timeout.
                continue;
            }
            messages
        };
        let (reply, answer) = oneshot::channel();
        if inbox
            .send(Input::Interruptions { messages, reply })
            .is_err()
        {
            return;
        }
        let Ok(batch) = answer.await else {
            return;
        };
        let mut shared = sim.lock();
        for receipt in &batch.delete {
            shared.queue.delete(receipt);
        }
    }
}

/// One life of the controller process: recover from the log (or start a new one), carry out
/// again what may not have been, list the world, then run the control loop until asked to stop.
async fn controller(sim: Sim) {
    let disk = sim.disk.clone();
    let fresh = disk.is_empty();
    let (mut driver, recovery) = if fresh {
        (Driver::new(disk), None)
    } else {
        match Driver::recover(disk) {
            Ok((driver, recovery)) => (driver, Some(recovery)),
            Err(e) => {
                let mut shared = sim.lock();
                shared.failure = Some(e);
                shared.stop = true;
                sim.bells.end.notify_one();
                return;
            }
        }
    };
    driver = driver.with_snapshot_every(sim.options.snapshot_every);
    let (sender, mut inbox) = control_loop::inbox();
    {
        let mut shared = sim.lock();
        let restart = shared.started;
        shared.started = true;
        shared.events = driver.events();
        // Whatever was on its way to or from the old process died with it.
        shared.watches.clear();
        shared.api_calls.clear();
        shared.step_calls.clear();
        shared.inbox = Some(sender.clone());
        if let Some(recovery) = &recovery {
            shared.digest.add_all(&recovery.last_commands);
            let calls: Vec<Command> = recovery
                .reissue()
                .map(|c| shared.world.planted(c))
                .collect();
            send_calls(&sim, &mut shared, calls);
        }
        if restart {
            // The informers start with a listing of the world.
            shared.restarts += 1;
            shared.world.advance_to(sim.clock.now_ms());
            for kind in relist_events(driver.core().state(), shared.world.listing()) {
                let _ = sender.send(Input::Observed(kind));
            }
        }
    }
    sim.bells.controller_up.notify_one();
    madsim::task::spawn_local(queue_consumer(sim.clone(), sender));
    let mut executor = SimExecutor { sim: sim.clone() };
    let outcome = control_loop::run(&mut driver, &mut inbox, &mut executor, &sim.clock).await;
    let mut shared = sim.lock();
    shared.inbox = None;
    match outcome {
        Ok(_) => shared.finished = Some(driver),
        Err(e) => {
            shared.failure = Some(e);
            shared.stop = true;
        }
    }
    sim.bells.end.notify_one();
}

/// Kills the controller and starts it again as the plan says.
async fn crash_task(sim: Sim, node: NodeId) {
    let handle = Handle::current();
    for crash in sim.plan.crashes.iter() {
        sim.clock.sleep_until(crash.at_ms).await;
        {
            let mut shared = sim.lock();
            if shared.stop {
                return;
            }
            shared.inbox = None;
            shared.watches.clear();
            shared.api_calls.clear();
        }
        handle.kill(node);
        sim.clock.sleep_until(crash.at_ms + crash.down_ms).await;
        handle.restart(node);
    }
}

/// The run itself, inside the runtime.
async fn harness(sim: Sim) -> Result<(Report, u64, (u64, u64, u64)), MadsimError> {
    let handle = Handle::current();
    let node = {
        let sim = sim.clone();
        handle
            .create_node()
            .name("controller")
            .init(move || controller(sim.clone()))
            .build()
    };
    sim.bells.controller_up.notified().await;
    {
        // The world's first observations (the catalog, the manifests) go out once the
        // controller listens.
        let mut shared = sim.lock();
        sim.flush(&mut shared);
    }
    let tasks = [
        madsim::task::spawn(world_task(sim.clone())),
        madsim::task::spawn(watch_task(sim.clone())),
        madsim::task::spawn(api_task(sim.clone())),
        madsim::task::spawn(crash_task(sim.clone(), node.id())),
    ];
    let outcome = conclude(&sim).await;
    // madsim keeps a runtime's tasks after it ends: they are ended here, or every run would
    // keep its world.
    handle.kill(node.id());
    for task in tasks {
        task.abort();
        let _ = task.await;
    }
    outcome
}

/// Runs to the scenario's end (or the first broken invariant), stops the controller, runs the
/// end-of-run checks and builds the report.
async fn conclude(sim: &Sim) -> Result<(Report, u64, (u64, u64, u64)), MadsimError> {
    let duration = sim.scenario.duration_ms;
    sleep_or_ring(&sim.clock, Some(duration), &sim.bells.end).await;
    // Ask the controller to stop after what it has; wait for its driver.
    loop {
        {
            let mut shared = sim.lock();
            if shared.finished.is_some() || shared.failure.is_some() {
                break;
            }
            if let Some(inbox) = shared.inbox.take() {
                let _ = inbox.send(Input::Stop);
            }
        }
        sleep_or_ring(&sim.clock, None, &sim.bells.end).await;
    }
    let mut shared = sim.lock();
    if let Some(e) = shared.failure.take() {
        return Err(e.into());
    }
    // The loop above ends only once the driver is back or has failed.
    let Some(driver) = shared.finished.take() else {
        return Err(MadsimError::NoDriver);
    };
    let mut violations = std::mem::take(&mut shared.violations);
    if !shared.stop {
        let found = shared.world.end_checks(&sim.scenario, driver.core());
        let event = driver.events();
        violations.extend(found.into_iter().map(|mut v| {
            v.event = event;
            v
        }));
    }
    let report = build_report(
        &sim.scenario,
        &shared.world,
        driver.core(),
        (driver.events(), driver.commands()),
        &shared.digest,
        violations,
    );
    let queue = (
        shared.queue.sent,
        shared.queue.received,
        shared.queue.deleted,
    );
    Ok((report, shared.restarts, queue))
}

/// Runs `scenario` under `plan` in a madsim runtime seeded with the scenario's seed.
pub fn run(
    scenario: &Scenario,
    plan: FaultPlan,
    options: MadsimOptions,
) -> Result<MadsimRun, MadsimError> {
    let header = LogHeader::new(scenario.config.clone(), &scenario.name);
    let log_header = header.clone();
    let disk = Disk {
        header: header.clone(),
        log: Arc::new(Mutex::new(MemoryStore::new(header))),
    };
    let runtime = Runtime::with_seed_and_config(
        options.scheduling_seed.unwrap_or(scenario.seed),
        madsim::Config::default(),
    );
    let log = disk.log.clone();
    let scenario = Arc::new(scenario.clone());
    let plan = Arc::new(plan);
    let outcome = runtime.block_on({
        let plan = plan.clone();
        async move {
            let world = World::start(&scenario, options.planted);
            let sim = Sim {
                shared: Arc::new(Mutex::new(Shared {
                    world,
                    queue: SimQueue::default(),
                    rng: SimRng::new(plan.seed ^ 0x4150_4943_414c_4c53),
                    inbox: None,
                    watches: DelayLine::new(),
                    api_calls: DelayLine::new(),
                    step_calls: Vec::new(),
                    digest: DecisionDigest::new(),
                    violations: Vec::new(),
                    events: 0,
                    restarts: 0,
                    started: false,
                    stop: false,
                    failure: None,
                    finished: None,
                })),
                bells: Arc::new(Bells::default()),
                disk,
                clock: SimClock {
                    epoch: Instant::now(),
                },
                scenario,
                plan,
                options,
            };
            harness(sim).await
        }
    });
    let (report, restarts, queue) = outcome?;
    // The controller node's start-up closure keeps a handle on the disk as long as the runtime
    // lives: the log is taken out of the disk, which is left empty.
    let empty = MemoryStore::new(log_header);
    let log = std::mem::replace(&mut *log.lock().unwrap_or_else(|e| e.into_inner()), empty);
    Ok(MadsimRun {
        report,
        plan: Arc::unwrap_or_clone(plan),
        restarts,
        queue,
        log,
    })
}
