//! The controller's loop, on a clock that jumps to each timer: inputs are stamped with the
//! clock and go through the driver in order, the core's timers fire when the inbox is quiet, an
//! interruption batch comes back with the receipts that may be deleted, and the loop stops when
//! asked or when its inbox closes. (The simulated build runs the same loop on madsim.)

use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use nodewright_adapters::control_loop::{self, Clock, InboxSender, Input, Stopped};
use nodewright_adapters::driver::{CommandExecutor, Driver};
use nodewright_adapters::eventlog::{EventStore, LogHeader, LogRecord, MemoryStore};
use nodewright_adapters::interruption_queue::QueueMessage;
use nodewright_core::model::nodeclass::NodeClass;
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::pod::Pod;
use nodewright_core::{Command, Config, Core, Event, EventKind};

/// A clock whose sleeps end at once, moving it forward.
struct JumpingClock {
    now_ms: Cell<u64>,
}

impl Clock for JumpingClock {
    fn now_ms(&self) -> u64 {
        self.now_ms.get()
    }
    fn sleep_until(&self, at_ms: u64) -> impl Future<Output = ()> {
        self.now_ms.set(self.now_ms.get().max(at_ms));
        std::future::ready(())
    }
}

/// Polls a future that never waits on anything outside this thread to its end.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..1_000_000 {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
    panic!("the loop never finished");
}

/// Records commands; asks the loop to stop at the first launch.
struct StopAtLaunch {
    inbox: InboxSender,
    commands: Vec<Command>,
    steps: u64,
}

impl CommandExecutor for StopAtLaunch {
    fn execute(&mut self, command: &Command) {
        if matches!(command, Command::LaunchNodeClaim { .. }) {
            let _ = self.inbox.send(Input::Stop);
        }
        self.commands.push(command.clone());
    }
    fn stepped(&mut self, _core: &Core, _event: &Event, _commands: &[Command]) {
        self.steps += 1;
    }
}

fn events(store: &MemoryStore<LogHeader, LogRecord>) -> Vec<Event> {
    store
        .read_range(0, store.len())
        .expect("reads")
        .into_iter()
        .filter_map(|r| match r {
            LogRecord::Event(e) => Some(e),
            _ => None,
        })
        .collect()
}

fn driver() -> Driver<MemoryStore<LogHeader, LogRecord>> {
    Driver::new(MemoryStore::new(LogHeader::new(Config::default(), "loop")))
}

#[test]
fn inputs_are_stamped_and_handled_in_order_then_the_batch_timer_fires_a_launch() {
    let mut driver = driver();
    let (sender, mut inbox) = control_loop::inbox();
    let clock = JumpingClock {
        now_ms: Cell::new(5_000),
    };
    let catalog = nodewright_testkit::us_east_1_catalog();
    for kind in [
        EventKind::CatalogUpdated(catalog),
        EventKind::NodeClassApplied(Box::new(NodeClass::new("default"))),
        EventKind::NodePoolApplied(Box::new(NodePool::new("default", "default"))),
        EventKind::PodApplied(Box::new(Pod::new("default", "web", 1_000, 1 << 30))),
    ] {
        sender.send(Input::Observed(kind)).expect("open");
    }
    let mut executor = StopAtLaunch {
        inbox: sender.clone(),
        commands: Vec::new(),
        steps: 0,
    };
    let stopped = block_on(control_loop::run(
        &mut driver,
        &mut inbox,
        &mut executor,
        &clock,
    ));
    assert_eq!(stopped.expect("no log error"), Stopped::Asked);
    let logged = events(driver.store());
    let kinds: Vec<&str> = logged.iter().map(|e| e.kind.name()).collect();
    assert_eq!(
        &kinds[..4],
        [
            "CatalogUpdated",
            "NodeClassApplied",
            "NodePoolApplied",
            "PodApplied"
        ]
    );
    assert!(logged[..4].iter().all(|e| e.at_ms == 5_000), "stamped now");
    let tick = logged.last().expect("a tick");
    assert_eq!(tick.kind.name(), "Tick");
    assert!(tick.at_ms > 5_000, "the tick came at the core's timer");
    assert!(
        executor
            .commands
            .iter()
            .any(|c| matches!(c, Command::LaunchNodeClaim { .. })),
        "{:?}",
        executor.commands
    );
    assert_eq!(
        executor.steps,
        logged.len() as u64,
        "stepped after every step"
    );
}

#[test]
fn an_interruption_batch_comes_back_with_its_receipts_and_a_closed_inbox_ends_the_loop() {
    let mut driver = driver();
    let (sender, mut inbox) = control_loop::inbox();
    let clock = JumpingClock {
        now_ms: Cell::new(1_000),
    };
    let (reply, mut answer) = tokio::sync::oneshot::channel();
    let messages = vec![
        QueueMessage {
            receipt: "r-1".into(),
            body: "not json".into(),
        },
        QueueMessage {
            receipt: "r-2".into(),
            body: nodewright_testkit::sim::eventbridge::message_body(
                "m-2",
                1_000,
                "i-0123456789abcdef0",
                &nodewright_core::interruption::Interruption::RebalanceRecommendation,
            ),
        },
    ];
    sender
        .send(Input::Interruptions { messages, reply })
        .expect("open");
    drop(sender);
    let mut executor = StopAtLaunch {
        inbox: control_loop::inbox().0,
        commands: Vec::new(),
        steps: 0,
    };
    let stopped = block_on(control_loop::run(
        &mut driver,
        &mut inbox,
        &mut executor,
        &clock,
    ));
    assert_eq!(stopped.expect("no log error"), Stopped::InboxClosed);
    let batch = answer.try_recv().expect("the batch came back");
    assert_eq!(batch.delete, ["r-1", "r-2"]);
    let logged = events(driver.store());
    assert_eq!(logged.len(), 1, "the malformed message logs nothing");
    assert_eq!(logged[0].kind.name(), "InterruptionReceived");
}

/// The inbox's two lanes: observations wait in a bounded lane (a sender waits once it is
/// full), results and controls go first, and while the executor's backlog is full the loop
/// takes results only, until a command done makes room.
#[test]
fn observations_are_bounded_and_wait_for_the_executor() {
    use nodewright_adapters::control_loop::{Backlog, INBOX_CAPACITY};
    let (sender, inbox) = control_loop::inbox();
    let backlog = Backlog::new(2);
    let mut inbox = inbox.with_backlog(backlog.clone());
    let tick = || EventKind::Tick;
    let is_tick = |input: &Option<Input>| matches!(input, Some(Input::Observed(EventKind::Tick)));
    // The bounded lane takes INBOX_CAPACITY observations; the next sender waits.
    for _ in 0..INBOX_CAPACITY {
        let mut sent = pin!(sender.observe(tick()));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(sent.as_mut().poll(&mut cx).is_ready(), "room in the lane");
    }
    {
        let mut waits = pin!(sender.observe(tick()));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(
            waits.as_mut().poll(&mut cx).is_pending(),
            "a full lane makes its sender wait"
        );
    }
    // A result goes first.
    let result = EventKind::NodeClaimTerminated {
        nodeclaim: "a".into(),
    };
    sender.send(Input::Observed(result.clone())).expect("open");
    assert!(matches!(
        block_on(inbox.recv()),
        Some(Input::Observed(EventKind::NodeClaimTerminated { .. }))
    ));
    assert!(is_tick(&block_on(inbox.recv())));
    // The executor's backlog full: no observation is taken, a result is.
    backlog.add();
    backlog.add();
    {
        let mut next = pin!(inbox.recv());
        let mut cx = Context::from_waker(Waker::noop());
        assert!(
            next.as_mut().poll(&mut cx).is_pending(),
            "observations wait for the executor"
        );
        sender.send(Input::Observed(result)).expect("open");
        assert!(matches!(
            next.as_mut().poll(&mut cx),
            Poll::Ready(Some(Input::Observed(EventKind::NodeClaimTerminated { .. })))
        ));
    }
    // A command done makes room: observations flow again.
    backlog.done();
    assert!(is_tick(&block_on(inbox.recv())));
    assert_eq!(backlog.len(), 1);
}
