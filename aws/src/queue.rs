//! The interruption queue: long-poll SQS (10 messages, 20 s), hand each batch to the control
//! loop as [`Input::Interruptions`], and delete only the receipts the loop answers with —
//! those whose events are durable in the log. A crash before the delete re-delivers the
//! message after its visibility timeout; the core handles a repeated message idempotently.

use nodewright_adapters::control_loop::{InboxSender, Input};
use nodewright_adapters::interruption_queue::{Batch, Outcome, QueueMessage};
use tokio::sync::oneshot;

use crate::error::AwsError;

/// SQS's largest batch and longest wait.
pub const MAX_MESSAGES: i32 = 10;
pub const WAIT_SECONDS: i32 = 20;

/// One interruption queue.
#[derive(Debug, Clone)]
pub struct InterruptionQueue {
    sqs: aws_sdk_sqs::Client,
    url: String,
    wait_seconds: i32,
}

impl InterruptionQueue {
    /// Finds the queue by name (Karpenter's `INTERRUPTION_QUEUE` setting is a name); a queue
    /// that does not exist is an error naming it.
    pub async fn open(sqs: aws_sdk_sqs::Client, name: &str) -> Result<Self, AwsError> {
        let out = sqs
            .get_queue_url()
            .queue_name(name)
            .send()
            .await
            .map_err(|e| {
                let mut e = AwsError::from_sdk("sqs:GetQueueUrl", e);
                if e.is_not_found() {
                    e.message = format!(
                        "the interruption queue {name:?} does not exist in this account and region; fix: create it (docs/aws.md) or correct INTERRUPTION_QUEUE"
                    );
                }
                e
            })?;
        Ok(InterruptionQueue {
            sqs,
            url: out.queue_url().unwrap_or_default().to_string(),
            wait_seconds: WAIT_SECONDS,
        })
    }

    /// A shorter long poll (tests).
    pub fn with_wait_seconds(mut self, seconds: i32) -> Self {
        self.wait_seconds = seconds;
        self
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// One long poll: up to 10 messages.
    pub async fn receive(&self) -> Result<Vec<QueueMessage>, AwsError> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(MAX_MESSAGES)
            .wait_time_seconds(self.wait_seconds)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("sqs:ReceiveMessage", e))?;
        Ok(out
            .messages()
            .iter()
            .filter_map(|m| {
                Some(QueueMessage {
                    receipt: m.receipt_handle()?.to_string(),
                    body: m.body().unwrap_or_default().to_string(),
                })
            })
            .collect())
    }

    pub async fn delete(&self, receipt: &str) -> Result<(), AwsError> {
        self.sqs
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(receipt)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("sqs:DeleteMessage", e))?;
        Ok(())
    }

    /// One round: receive, hand the batch to the loop, delete what it says is durable.
    /// Returns the batch's outcome (None when nothing arrived, or the loop is gone).
    pub async fn poll_once(&self, inbox: &InboxSender) -> Result<Option<Batch>, AwsError> {
        let messages = self.receive().await?;
        if messages.is_empty() {
            return Ok(None);
        }
        let (reply, answer) = oneshot::channel();
        if inbox
            .send(Input::Interruptions { messages, reply })
            .is_err()
        {
            return Ok(None);
        }
        let Ok(batch) = answer.await else {
            return Ok(None);
        };
        for receipt in &batch.delete {
            self.delete(receipt).await?;
        }
        Ok(Some(batch))
    }

    /// Polls until the loop goes away; errors are logged and retried after a pause. Every
    /// message's outcome is told to `heard` (the controller counts the dropped ones); one that
    /// is dropped — malformed, or of a kind nodewright does not act on — is a log line too.
    pub async fn run(&self, inbox: InboxSender, mut heard: impl FnMut(&Outcome)) {
        while !inbox.is_closed() {
            match self.poll_once(&inbox).await {
                Ok(Some(batch)) => {
                    for outcome in &batch.outcomes {
                        log_dropped(outcome);
                        heard(outcome);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "interruption queue");
                    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                }
            }
        }
    }
}

/// The log line of a message that was deleted without an event: a malformed one is a warning
/// (something other than EventBridge's rules sends to the queue, or a rule is wrong), one of a
/// kind nodewright does not act on is told at debug level.
fn log_dropped(outcome: &Outcome) {
    match outcome {
        Outcome::Malformed { error } => tracing::warn!(
            error = %error,
            "an interruption queue message that is not an interruption event was deleted"
        ),
        Outcome::Ignored { message_id, why } => {
            tracing::debug!(message_id, why, "an interruption queue message was ignored")
        }
        Outcome::Handled { .. } => {}
    }
}
