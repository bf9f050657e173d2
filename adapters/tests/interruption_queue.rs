//! The interruption queue's consumer logic: a message is deleted only once its events are
//! durable in the log; ignored and malformed messages are deleted (and reported); when the log
//! refuses an append, that message and the rest of the batch stay in the queue.

use std::path::Path;

use nodewright_adapters::driver::{CommandExecutor, Driver};
use nodewright_adapters::eventlog::{EventStore, LogError, LogHeader, LogRecord, MemoryStore};
use nodewright_adapters::interruption_queue::{Outcome, QueueMessage, handle_batch};
use nodewright_core::{Command, Config, EventKind};

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/eventbridge")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn message(receipt: &str, file: &str) -> QueueMessage {
    QueueMessage {
        receipt: receipt.into(),
        body: fixture(file),
    }
}

#[derive(Default)]
struct Executed(Vec<Command>);

impl CommandExecutor for Executed {
    fn execute(&mut self, command: &Command) {
        self.0.push(command.clone());
    }
}

/// A store that refuses every append once `fail_after` records are stored.
struct Flaky {
    inner: MemoryStore<LogHeader, LogRecord>,
    fail_after: u64,
}

impl EventStore<LogHeader, LogRecord> for Flaky {
    fn header(&self) -> &LogHeader {
        self.inner.header()
    }
    fn append(&mut self, records: &[LogRecord]) -> Result<(), LogError> {
        if self.inner.len() >= self.fail_after {
            return Err(LogError::Io {
                path: None,
                action: "append to the log",
                source: std::io::Error::other("disk full"),
            });
        }
        self.inner.append(records)
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_range(&self, from: u64, to: u64) -> Result<Vec<LogRecord>, LogError> {
        self.inner.read_range(from, to)
    }
}

fn header() -> LogHeader {
    LogHeader::new(Config::default(), "queue-test")
}

#[test]
fn events_are_logged_before_their_message_is_deleted_and_bad_messages_do_not_stop_the_batch() {
    let mut driver = Driver::new(MemoryStore::new(header()));
    let mut executed = Executed::default();
    let batch = handle_batch(
        &mut driver,
        &mut executed,
        1_000,
        &[
            message("r1", "spot-interruption.json"),
            message("r2", "malformed-not-json.txt"),
            message("r3", "unknown-detail-type.json"),
            message("r4", "health-scheduled-change.json"),
        ],
    );
    assert!(batch.error.is_none());
    assert_eq!(batch.delete, vec!["r1", "r2", "r3", "r4"]);
    assert!(matches!(
        &batch.outcomes[0],
        Outcome::Handled { events: 1, .. }
    ));
    assert!(matches!(&batch.outcomes[1], Outcome::Malformed { .. }));
    assert!(matches!(&batch.outcomes[2], Outcome::Ignored { .. }));
    assert!(matches!(
        &batch.outcomes[3],
        Outcome::Handled { events: 2, .. }
    ));
    let logged: Vec<String> = driver
        .store()
        .read_range(0, driver.store().len())
        .expect("records")
        .into_iter()
        .filter_map(|r| match r {
            LogRecord::Event(e) => match e.kind {
                EventKind::InterruptionReceived { instance_id, .. } => Some(instance_id),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(
        logged,
        vec![
            "i-0b662ef9931388ba0",
            "i-0b662ef9931388ba0",
            "i-0c3e1f4a5b6d7e8f9"
        ]
    );
    // Unknown instances: every event was answered with a report, not an error.
    assert_eq!(
        executed
            .0
            .iter()
            .filter(|c| matches!(
                c,
                Command::ReportInterruption {
                    nodeclaim: None,
                    ..
                }
            ))
            .count(),
        3
    );
}

#[test]
fn a_message_whose_event_is_not_durable_stays_in_the_queue() {
    // Room for the first message's event and its commands, then the log refuses.
    let mut driver = Driver::new(Flaky {
        inner: MemoryStore::new(header()),
        fail_after: 2,
    });
    let mut executed = Executed::default();
    let batch = handle_batch(
        &mut driver,
        &mut executed,
        1_000,
        &[
            message("r1", "spot-interruption.json"),
            message("r2", "rebalance-recommendation.json"),
            message("r3", "malformed-empty.txt"),
        ],
    );
    assert!(batch.error.is_some(), "the append failure is reported");
    assert_eq!(
        batch.delete,
        vec!["r1"],
        "only the durable message is deleted"
    );
    assert_eq!(batch.outcomes.len(), 1);
}

#[test]
fn a_driver_whose_commands_could_not_be_logged_refuses_to_go_on_until_recovered() {
    // The first event's record fits, its commands do not.
    let mut driver = Driver::new(Flaky {
        inner: MemoryStore::new(header()),
        fail_after: 1,
    });
    let mut executed = Executed::default();
    let first = handle_batch(
        &mut driver,
        &mut executed,
        1_000,
        &[message("r1", "spot-interruption.json")],
    );
    assert!(first.error.is_some());
    assert!(first.delete.is_empty());
    assert!(executed.0.is_empty(), "nothing was carried out");
    let again = handle_batch(
        &mut driver,
        &mut executed,
        2_000,
        &[message("r2", "rebalance-recommendation.json")],
    );
    assert!(
        again
            .error
            .as_ref()
            .is_some_and(|e| e.to_string().contains("recovered")),
        "{:?}",
        again.error
    );
    // Recovery logs the lost commands and hands them out again.
    let Flaky { inner, .. } = driver.into_store();
    let (_, recovery) = Driver::recover(inner).expect("recovers");
    assert!(recovery.logged_missing_commands);
    assert!(
        recovery
            .last_commands
            .iter()
            .any(|c| matches!(c, Command::ReportInterruption { .. }))
    );
}
