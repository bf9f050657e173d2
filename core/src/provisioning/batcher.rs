//! The batch window: pending pods are gathered until 1 s passes without a new one, or 10 s after
//! the first (Karpenter's `batchIdleDuration` / `batchMaxDuration`).

use serde::{Deserialize, Serialize};

/// The open batch window, if any.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batcher {
    opened_at_ms: Option<u64>,
    last_trigger_ms: u64,
}

impl Batcher {
    /// Something that may need a new machine happened at `now_ms`.
    pub fn trigger(&mut self, now_ms: u64) {
        if self.opened_at_ms.is_none() {
            self.opened_at_ms = Some(now_ms);
        }
        self.last_trigger_ms = now_ms;
    }

    /// When the open window closes, if one is open.
    pub fn closes_at_ms(&self, idle_ms: u64, max_ms: u64) -> Option<u64> {
        self.opened_at_ms
            .map(|opened| (self.last_trigger_ms + idle_ms).min(opened + max_ms))
    }

    /// Closes the window if its time has come; true when the batch should be solved now.
    pub fn take_if_due(&mut self, now_ms: u64, idle_ms: u64, max_ms: u64) -> bool {
        match self.closes_at_ms(idle_ms, max_ms) {
            Some(at) if at <= now_ms => {
                self.opened_at_ms = None;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closes_after_idle_or_max() {
        let mut b = Batcher::default();
        assert_eq!(b.closes_at_ms(1000, 10_000), None);
        b.trigger(0);
        assert_eq!(b.closes_at_ms(1000, 10_000), Some(1000));
        for t in (500..=9_500).step_by(500) {
            b.trigger(t);
        }
        assert_eq!(b.closes_at_ms(1000, 10_000), Some(10_000));
        assert!(!b.take_if_due(9_999, 1000, 10_000));
        assert!(b.take_if_due(10_000, 1000, 10_000));
        assert_eq!(b.closes_at_ms(1000, 10_000), None);
    }
}
