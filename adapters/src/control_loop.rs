//! The controller's loop: it waits for the next input or the core's next timer, whichever comes
//! first, stamps the event with the clock, and hands it to the [`Driver`] (log, decide, log,
//! dispatch). It knows no runtime: the clock is a trait, the inbox a channel, so that the
//! in-cluster controller runs it on tokio and the simulated build runs the very same loop on
//! madsim, in virtual time.
//!
//! The adapters feed the inbox: the Kubernetes watchers and the EC2 results as
//! [`Input::Observed`], the interruption queue's batches as [`Input::Interruptions`] (the
//! receipts that may be deleted go back to the queue's consumer once the events are durable).

use std::future::Future;
use std::pin::pin;
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

/// The sending half the adapters hold.
pub type InboxSender = mpsc::UnboundedSender<Input>;
/// The loop's half.
pub type Inbox = mpsc::UnboundedReceiver<Input>;

/// A new inbox.
pub fn inbox() -> (InboxSender, Inbox) {
    mpsc::unbounded_channel()
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
