//! The interruption queue's consumer logic, without the queue: a batch of received messages
//! (SQS gives up to 10 per long poll) goes through the driver, and the receipts of the messages
//! that may be deleted come back. A message may be deleted once every event it carries is
//! durable in the log — or when it carries none (ignored, malformed): delivery is at least
//! once, and the core handles a repeated message idempotently. The SQS adapter does the
//! receiving and deleting around this.

use nodewright_core::{Event, EventKind};

use crate::driver::{CommandExecutor, Driver, DriverError};
use crate::eventbridge::{self, MessageError};
use crate::eventlog::{EventStore, LogHeader, LogRecord};

/// One received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueMessage {
    /// What deleting it takes (SQS's receipt handle).
    pub receipt: String,
    pub body: String,
}

/// What became of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Its events are in the log and handled.
    Handled { message_id: String, events: usize },
    /// A message nodewright does not act on.
    Ignored { message_id: String, why: String },
    /// A body that is not an interruption event: logged, and deleted all the same so that it
    /// does not come back forever.
    Malformed { error: MessageError },
}

/// The result of a batch.
#[derive(Debug)]
pub struct Batch {
    /// Receipts to delete, in the order the messages came.
    pub delete: Vec<String>,
    pub outcomes: Vec<Outcome>,
    /// The log refused an append: this message and the rest of the batch stay in the queue and
    /// come back.
    pub error: Option<DriverError>,
}

/// Hands a batch of messages to the driver, at `now_ms` on the controller's clock.
pub fn handle_batch<S: EventStore<LogHeader, LogRecord>>(
    driver: &mut Driver<S>,
    executor: &mut impl CommandExecutor,
    now_ms: u64,
    messages: &[QueueMessage],
) -> Batch {
    let mut batch = Batch {
        delete: Vec::new(),
        outcomes: Vec::new(),
        error: None,
    };
    for message in messages {
        let parsed = match eventbridge::parse(&message.body) {
            Ok(parsed) => parsed,
            Err(error) => {
                batch.delete.push(message.receipt.clone());
                batch.outcomes.push(Outcome::Malformed { error });
                continue;
            }
        };
        if let Some(why) = parsed.ignored.clone() {
            batch.delete.push(message.receipt.clone());
            batch.outcomes.push(Outcome::Ignored {
                message_id: parsed.message_id,
                why,
            });
            continue;
        }
        let events: Vec<EventKind> = parsed.events();
        let mut stored = 0;
        for kind in events {
            if let Err(e) = driver.step(Event::new(now_ms, kind), executor) {
                batch.error = Some(e);
                return batch;
            }
            stored += 1;
        }
        batch.delete.push(message.receipt.clone());
        batch.outcomes.push(Outcome::Handled {
            message_id: parsed.message_id,
            events: stored,
        });
    }
    batch
}
