//! The interruption queue as SQS keeps it: at-least-once delivery, a visibility timeout, receipt
//! handles, deletion by receipt. The consumer around it (which receives, hands the batch to the
//! driver, and deletes what may be deleted) is the controller's; this is the queue's side.

use std::collections::BTreeMap;

use nodewright_adapters::interruption_queue::QueueMessage;

/// SQS's default visibility timeout: a received message not deleted comes again after it.
pub const VISIBILITY_TIMEOUT_MS: u64 = 30_000;
/// The most messages one receive returns.
pub const RECEIVE_MAX: usize = 10;

#[derive(Debug, Clone)]
struct Queued {
    body: String,
    visible_at_ms: u64,
    receives: u32,
}

/// A standard SQS queue.
#[derive(Debug, Clone, Default)]
pub struct SimQueue {
    messages: BTreeMap<u64, Queued>,
    next_id: u64,
    /// Messages sent, deleted, and received (copies included).
    pub sent: u64,
    pub deleted: u64,
    pub received: u64,
}

impl SimQueue {
    /// Sends a message, visible at once.
    pub fn send(&mut self, body: String, now_ms: u64) {
        self.next_id += 1;
        self.sent += 1;
        self.messages.insert(
            self.next_id,
            Queued {
                body,
                visible_at_ms: now_ms,
                receives: 0,
            },
        );
    }

    /// Receives up to [`RECEIVE_MAX`] visible messages, oldest first; each is invisible for the
    /// visibility timeout. A receipt names one receive of one message.
    pub fn receive(&mut self, now_ms: u64) -> Vec<QueueMessage> {
        let mut out = Vec::new();
        for (id, m) in self.messages.iter_mut() {
            if out.len() == RECEIVE_MAX {
                break;
            }
            if m.visible_at_ms > now_ms {
                continue;
            }
            m.visible_at_ms = now_ms + VISIBILITY_TIMEOUT_MS;
            m.receives += 1;
            out.push(QueueMessage {
                receipt: format!("{id}:{}", m.receives),
                body: m.body.clone(),
            });
        }
        self.received += out.len() as u64;
        out
    }

    /// Deletes the message a receipt names; true if it was still there.
    pub fn delete(&mut self, receipt: &str) -> bool {
        let id = receipt
            .split_once(':')
            .and_then(|(id, _)| id.parse::<u64>().ok());
        let gone = id.and_then(|id| self.messages.remove(&id)).is_some();
        self.deleted += u64::from(gone);
        gone
    }

    /// When the next message becomes visible (now, if one is).
    pub fn next_visible_at(&self) -> Option<u64> {
        self.messages.values().map(|m| m.visible_at_ms).min()
    }

    /// Messages not deleted yet.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_not_deleted_comes_again_after_the_visibility_timeout() {
        let mut q = SimQueue::default();
        q.send("a".into(), 0);
        let first = q.receive(0);
        assert_eq!(first.len(), 1);
        assert!(q.receive(1_000).is_empty(), "invisible while being handled");
        assert_eq!(q.next_visible_at(), Some(VISIBILITY_TIMEOUT_MS));
        let again = q.receive(VISIBILITY_TIMEOUT_MS);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].body, "a");
        assert!(q.delete(&again[0].receipt));
        assert!(q.is_empty());
        assert!(!q.delete(&first[0].receipt), "already gone");
    }

    #[test]
    fn a_receive_returns_at_most_ten_oldest_first() {
        let mut q = SimQueue::default();
        for i in 0..12 {
            q.send(format!("m{i}"), 0);
        }
        let batch = q.receive(0);
        assert_eq!(batch.len(), RECEIVE_MAX);
        assert_eq!(batch[0].body, "m0");
        assert_eq!(q.receive(0).len(), 2);
    }
}
