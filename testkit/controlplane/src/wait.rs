//! Waiting for what controllers do: they act asynchronously, so tests poll.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often [`eventually`] looks again.
const POLL: Duration = Duration::from_millis(500);
/// How long [`eventually`] waits before it gives up.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Polls `check` every 500 ms until it returns `Ok`, panicking after two minutes with the last
/// `Err` it returned (the state that was wrong).
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + TIMEOUT;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(state) if Instant::now() >= deadline => {
                panic!("{what}: not so after {TIMEOUT:?}; last state: {state}")
            }
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}
