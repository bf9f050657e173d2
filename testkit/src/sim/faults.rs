//! The fault plan of a run of the simulated build: what goes wrong between the controller and
//! the world, drawn from the run's seed. The world's own faults (capacity shortages, throttled
//! CreateFleet, interruptions) are the scenario's; these are the ones around the controller:
//! slow and failing API calls, late watches, interruption messages lost or delivered twice, the
//! controller process killed and started again.

use std::fmt;

use super::rng::SimRng;

/// One stop of the controller process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedCrash {
    /// When the process is killed, in ms since the start of the run.
    pub at_ms: u64,
    /// How long it stays down before it starts again over its log.
    pub down_ms: u64,
}

/// What goes wrong around the controller in one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultPlan {
    pub seed: u64,
    /// Every API call the controller makes (Kubernetes writes, EC2 calls) takes between these
    /// many milliseconds, drawn per call.
    pub api_latency_ms: (u64, u64),
    /// Per mille of API calls that fail (throttled, 5xx, timed out); the adapter retries them
    /// with exponential backoff until they succeed.
    pub api_error_permille: u64,
    /// An observation reaches the controller between these many milliseconds after it happened
    /// (watches keep each object's order).
    pub watch_delay_ms: (u64, u64),
    /// Per mille of interruption-queue receives whose answer is lost: the messages stay
    /// invisible until the visibility timeout and come again.
    pub sqs_loss_permille: u64,
    /// Per mille of interruption messages the queue delivers twice.
    pub sqs_duplicate_permille: u64,
    /// When the controller is killed, in order; each restart comes before the next stop.
    pub crashes: Vec<PlannedCrash>,
}

/// The seed's stream for the fault plan, apart from the world's.
const FAULT_STREAM: u64 = 0x4641_554c_5453_0001;

impl FaultPlan {
    /// A run with nothing going wrong around the controller: calls answered after 10 ms,
    /// observations delivered at once.
    pub fn calm(seed: u64) -> Self {
        FaultPlan {
            seed,
            api_latency_ms: (10, 10),
            api_error_permille: 0,
            watch_delay_ms: (0, 0),
            sqs_loss_permille: 0,
            sqs_duplicate_permille: 0,
            crashes: Vec::new(),
        }
    }

    /// The plan of `seed` for a run of `duration_ms`.
    pub fn draw(seed: u64, duration_ms: u64) -> Self {
        let mut rng = SimRng::new(seed ^ FAULT_STREAM);
        let latency_min = rng.between(5, 100);
        let latency_max = latency_min + rng.between(0, 2_000);
        let watch_min = rng.between(0, 50);
        let watch_max = watch_min + rng.between(0, 500);
        // A quarter of the runs have no crash, half one, a quarter two.
        let stops = match rng.between(0, 3) {
            0 => 0,
            3 => 2,
            _ => 1,
        };
        let mut crashes = Vec::new();
        // Between 5 % and 90 % of the run, apart from each other, each back before the next.
        let mut earliest = duration_ms / 20;
        for i in 0..stops {
            let latest = duration_ms / 10 * 9 / (stops - i);
            if earliest >= latest {
                break;
            }
            let at_ms = rng.between(earliest, latest);
            // Up again before the run ends.
            let room = duration_ms - at_ms - 1;
            let down_ms = rng.between(room.min(1_000), room.min(60_000));
            crashes.push(PlannedCrash { at_ms, down_ms });
            earliest = at_ms + down_ms + 1_000;
        }
        FaultPlan {
            seed,
            api_latency_ms: (latency_min, latency_max),
            api_error_permille: rng.between(0, 150),
            watch_delay_ms: (watch_min, watch_max),
            sqs_loss_permille: rng.between(0, 300),
            sqs_duplicate_permille: rng.between(0, 300),
            crashes,
        }
    }
}

fn percent(permille: u64) -> String {
    format!("{}.{}%", permille / 10, permille % 10)
}

impl fmt::Display for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "API calls {}-{} ms with {} failing; watches {}-{} ms late; interruption messages {} of receives lost, {} delivered twice; ",
            self.api_latency_ms.0,
            self.api_latency_ms.1,
            percent(self.api_error_permille),
            self.watch_delay_ms.0,
            self.watch_delay_ms.1,
            percent(self.sqs_loss_permille),
            percent(self.sqs_duplicate_permille),
        )?;
        if self.crashes.is_empty() {
            return write!(f, "no controller crash");
        }
        let stops: Vec<String> = self
            .crashes
            .iter()
            .map(|c| {
                format!(
                    "at {:.1}s (down {:.1}s)",
                    c.at_ms as f64 / 1000.0,
                    c.down_ms as f64 / 1000.0
                )
            })
            .collect();
        write!(f, "controller killed {}", stops.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_plan_and_others_differ() {
        let day = 86_400_000;
        assert_eq!(FaultPlan::draw(7, day), FaultPlan::draw(7, day));
        let plans: std::collections::BTreeSet<String> = (0..50)
            .map(|seed| {
                let mut plan = FaultPlan::draw(seed, day);
                plan.seed = 0;
                format!("{plan:?}")
            })
            .collect();
        assert_eq!(plans.len(), 50, "every seed draws its own plan");
    }

    #[test]
    fn crashes_are_apart_and_back_before_the_end() {
        for seed in 0..500 {
            for duration in [60_000, 900_000, 86_400_000] {
                let plan = FaultPlan::draw(seed, duration);
                let mut back = 0;
                for c in &plan.crashes {
                    assert!(c.at_ms > back, "seed {seed}: {plan}");
                    back = c.at_ms + c.down_ms;
                    assert!(back < duration, "seed {seed}: {plan}");
                }
            }
        }
    }

    #[test]
    fn some_plans_crash_and_some_do_not() {
        let crashes: Vec<usize> = (0..100)
            .map(|s| FaultPlan::draw(s, 3_600_000).crashes.len())
            .collect();
        assert!(crashes.contains(&0));
        assert!(crashes.contains(&1));
        assert!(crashes.contains(&2));
    }
}
