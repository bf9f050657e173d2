//! The wall clock the control loop stamps events with: milliseconds since the Unix epoch.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nodewright_adapters::control_loop::Clock;

/// The system clock, on tokio's timers.
#[derive(Debug, Clone, Copy, Default)]
pub struct WallClock;

impl Clock for WallClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }

    async fn sleep_until(&self, at_ms: u64) {
        let now = self.now_ms();
        if at_ms > now {
            tokio::time::sleep(Duration::from_millis(at_ms - now)).await;
        }
    }
}
