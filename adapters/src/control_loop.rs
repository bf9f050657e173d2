//! The controller's loop: it waits for the next input or the core's next timer, whichever comes
//! first, stamps the event with the clock, and hands it to the [`Driver`] (log, decide, log,
//! dispatch). It knows no runtime: the clock is a trait, the inbox a channel, so that the
//! in-cluster controller runs it on tokio and the simulated build runs the very same loop on
//! madsim, in virtual time.
//!
//! The adapters feed the inbox: the Kubernetes watchers and the EC2 results as
//! [`Input::Observed`], the interruption queue's batches as [`Input::Interruptions`] (the
//! receipts that may be deleted go back to the queue's consumer once the events are durable).
//!
//! The inbox has two lanes. Observations of the cluster and the cloud
//! ([`InboxSender::observe`]) wait in a bounded lane ([`INBOX_CAPACITY`]): a watcher whose
//! observations are not taken waits, and reads no further (back-pressure). The commands'
//! results, the interruption batches and the controls ([`InboxSender::send`]) go first, in a
//! lane bounded by what causes them: one result per command carried out, one batch at a time
//! (its consumer waits for the reply), one seal at a time. With a [`Backlog`], the loop takes
//! no observation while the executor has [`Backlog::bound`] commands not done: it takes only
//! results, which free the executor, so the loop never waits on the executor nor the executor
//! on the loop.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;

use nodewright_core::{Event, EventKind};
use tokio::sync::{mpsc, oneshot};

use crate::driver::{CommandExecutor, Driver, DriverError};
use crate::eventlog::{EventStore, LogError, LogHeader, LogRecord};
use crate::interruption_queue::{Batch, QueueMessage, handle_batch};

/// The controller's clock, in milliseconds since its epoch (the Unix epoch in a cluster, the
/// start of the run in a simulation).
pub trait Clock {
    fn now_ms(&self) -> u64;
    /// Completes once the clock reads `at_ms` or later.
    fn sleep_until(&self, at_ms: u64) -> impl Future<Output = ()>;
}

/// What the adapters hand to the loop.
#[derive(Debug)]
pub enum Input {
    /// An observation of Kubernetes or the cloud, stamped with the clock when the loop takes it.
    Observed(EventKind),
    /// A batch received from the interruption queue; the outcome, with the receipts that may be
    /// deleted, goes back on `reply`.
    Interruptions {
        messages: Vec<QueueMessage>,
        reply: oneshot::Sender<Batch>,
    },
    /// Seal the store: append a snapshot of the core, and answer on the sender with the
    /// record index it begins at (what came before is a segment that replays on its own).
    Seal(oneshot::Sender<Result<u64, LogError>>),
    /// Stop after what came before.
    Stop,
}

/// How many observations the inbox holds, not yet taken, before their senders wait.
pub const INBOX_CAPACITY: usize = 1024;

/// The sending half the adapters hold.
#[derive(Debug, Clone)]
pub struct InboxSender {
    first: mpsc::UnboundedSender<Input>,
    observations: mpsc::Sender<EventKind>,
}

/// The inbox is closed: the loop is gone (the process or its term is stopping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the control loop's inbox is closed")]
pub struct Closed;

impl InboxSender {
    /// Sends an input the loop takes before any observation, at once: a command's result, an
    /// interruption batch, a seal, a stop. What causes them bounds them.
    pub fn send(&self, input: Input) -> Result<(), Closed> {
        self.first.send(input).map_err(|_| Closed)
    }

    /// Sends an observation of the cluster or the cloud, waiting while the inbox holds
    /// [`INBOX_CAPACITY`] observations not yet taken.
    pub async fn observe(&self, kind: EventKind) -> Result<(), Closed> {
        self.observations.send(kind).await.map_err(|_| Closed)
    }

    /// Whether the loop is gone.
    pub fn is_closed(&self) -> bool {
        self.first.is_closed()
    }
}

/// The loop's half.
#[derive(Debug)]
pub struct Inbox {
    first: mpsc::UnboundedReceiver<Input>,
    observations: mpsc::Receiver<EventKind>,
    backlog: Option<Backlog>,
}

/// A new inbox.
pub fn inbox() -> (InboxSender, Inbox) {
    let (first, first_rx) = mpsc::unbounded_channel();
    let (observations, observations_rx) = mpsc::channel(INBOX_CAPACITY);
    (
        InboxSender {
            first,
            observations,
        },
        Inbox {
            first: first_rx,
            observations: observations_rx,
            backlog: None,
        },
    )
}

/// The commands handed to the executor and not yet done, shared by the dispatch that counts
/// them in, the executor that counts them out, and the loop, which takes no observation while
/// there are [`Backlog::bound`] of them.
#[derive(Debug, Clone)]
pub struct Backlog {
    count: Arc<AtomicUsize>,
    bound: usize,
    room: Arc<tokio::sync::Notify>,
}

impl Backlog {
    pub fn new(bound: usize) -> Self {
        assert!(bound > 0, "a backlog bound of at least one command");
        Backlog {
            count: Arc::default(),
            bound,
            room: Arc::default(),
        }
    }

    /// A command handed over.
    pub fn add(&self) {
        self.count.fetch_add(1, Ordering::AcqRel);
    }

    /// A command done.
    pub fn done(&self) {
        let before = self.count.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before > 0, "a command done that was not handed over");
        if before == self.bound {
            // The loop may take observations again (a permit is kept if it does not wait yet).
            self.room.notify_one();
        }
    }

    /// The commands not done.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn bound(&self) -> usize {
        self.bound
    }

    fn is_full(&self) -> bool {
        self.len() >= self.bound
    }
}

impl Inbox {
    /// While `backlog` holds its bound of commands, the loop takes results, not observations.
    pub fn with_backlog(mut self, backlog: Backlog) -> Self {
        self.backlog = Some(backlog);
        self
    }

    /// Takes nothing more: senders see it closed.
    pub fn close(&mut self) {
        self.first.close();
        self.observations.close();
    }

    /// The next input if one is there.
    pub fn try_recv(&mut self) -> Option<Input> {
        if let Ok(input) = self.first.try_recv() {
            return Some(input);
        }
        self.observations.try_recv().ok().map(Input::Observed)
    }

    /// The next input: the first lane's, else an observation unless the executor's backlog is
    /// full; `None` once every sender is gone.
    pub async fn recv(&mut self) -> Option<Input> {
        let backlog = self.backlog.clone();
        let room = backlog.as_ref().map(|b| Arc::clone(&b.room));
        let mut waiting_for_room = pin!(room_made(room.clone()));
        let (mut first_closed, mut observations_closed) = (false, false);
        std::future::poll_fn(|cx| {
            loop {
                if !first_closed {
                    match self.first.poll_recv(cx) {
                        Poll::Ready(Some(input)) => return Poll::Ready(Some(input)),
                        Poll::Ready(None) => first_closed = true,
                        Poll::Pending => {}
                    }
                }
                let full = backlog.as_ref().is_some_and(Backlog::is_full);
                if full {
                    if waiting_for_room.as_mut().poll(cx).is_ready() {
                        // Room was made: look again (a new wait for the next time).
                        waiting_for_room.set(room_made(room.clone()));
                        continue;
                    }
                } else if !observations_closed {
                    match self.observations.poll_recv(cx) {
                        Poll::Ready(Some(kind)) => return Poll::Ready(Some(Input::Observed(kind))),
                        Poll::Ready(None) => observations_closed = true,
                        Poll::Pending => {}
                    }
                }
                if first_closed && (observations_closed || full) {
                    return Poll::Ready(None);
                }
                return Poll::Pending;
            }
        })
        .await
    }
}

/// Completes when the backlog makes room (never without a backlog).
async fn room_made(room: Option<Arc<tokio::sync::Notify>>) {
    match room {
        Some(room) => room.notified().await,
        None => std::future::pending().await,
    }
}

/// Why the loop returned without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// [`Input::Stop`] arrived.
    Asked,
    /// Every sender is gone.
    InboxClosed,
}

/// Runs `future` until it completes or the clock reaches `timer_ms` (never, if none),
/// whichever comes first; `future` is polled first when both are ready. `None`: the timer.
pub async fn until_timer<C: Clock, F: Future>(
    clock: &C,
    timer_ms: Option<u64>,
    future: F,
) -> Option<F::Output> {
    let mut future = pin!(future);
    let mut sleep = pin!(async {
        match timer_ms {
            Some(at) => clock.sleep_until(at).await,
            None => std::future::pending::<()>().await,
        }
    });
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = future.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        if sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        Poll::Pending
    })
    .await
}

/// Runs `driver` until it is asked to stop or its inbox closes. An error of the log stops the
/// loop: the process then recovers from the log ([`Driver::recover`]) before going on.
pub async fn run<S, E, C>(
    driver: &mut Driver<S>,
    inbox: &mut Inbox,
    executor: &mut E,
    clock: &C,
) -> Result<Stopped, DriverError>
where
    S: EventStore<LogHeader, LogRecord>,
    E: CommandExecutor,
    C: Clock,
{
    run_admitting(driver, inbox, executor, clock, |_| true).await
}

/// [`run`], giving the core only the observed events `admit` lets through (the controller's
/// quarantine of an object whose event panicked the core); the rest are dropped unlogged.
pub async fn run_admitting<S, E, C>(
    driver: &mut Driver<S>,
    inbox: &mut Inbox,
    executor: &mut E,
    clock: &C,
    mut admit: impl FnMut(&EventKind) -> bool,
) -> Result<Stopped, DriverError>
where
    S: EventStore<LogHeader, LogRecord>,
    E: CommandExecutor,
    C: Clock,
{
    loop {
        // An input, or the core's timer (None).
        match until_timer(clock, driver.next_timer_ms(), inbox.recv()).await {
            Some(None) => return Ok(Stopped::InboxClosed),
            Some(Some(Input::Stop)) => return Ok(Stopped::Asked),
            Some(Some(Input::Seal(reply))) => {
                // The asker may be gone (stopping): the snapshot is kept all the same.
                let _ = reply.send(driver.seal());
            }
            Some(Some(Input::Observed(kind))) => {
                if admit(&kind) {
                    driver.step(Event::new(clock.now_ms(), kind), executor)?;
                }
            }
            Some(Some(Input::Interruptions { messages, reply })) => {
                let mut batch = handle_batch(driver, executor, clock.now_ms(), &messages);
                let error = batch.error.take();
                // The consumer may be gone (stopping): its messages then come back.
                let _ = reply.send(batch);
                if let Some(error) = error {
                    return Err(error);
                }
            }
            None => {
                driver.step(Event::new(clock.now_ms(), EventKind::Tick), executor)?;
            }
        }
    }
}
