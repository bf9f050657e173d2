//! When the core next needs to look again: the earliest of the times the rules name.

/// The earliest time offered to it, if any (none: nothing to wake for).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Wake(Option<u64>);

impl Wake {
    /// Keeps the earlier of the time it holds and `at_ms`.
    pub fn offer(&mut self, at_ms: u64) {
        self.0 = Some(self.0.map_or(at_ms, |t| t.min(at_ms)));
    }

    /// [`Wake::offer`], when there is a time.
    pub fn offer_some(&mut self, at_ms: Option<u64>) {
        if let Some(at) = at_ms {
            self.offer(at);
        }
    }

    /// The earliest time offered.
    pub fn ms(self) -> Option<u64> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_earliest_time_offered() {
        let mut wake = Wake::default();
        assert_eq!(wake.ms(), None);
        wake.offer(30);
        wake.offer_some(None);
        wake.offer(10);
        wake.offer_some(Some(20));
        assert_eq!(wake.ms(), Some(10));
    }
}
