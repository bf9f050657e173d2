//! The world's seeded generator (the core's SplitMix64 on its own stream): the same seed draws
//! the same latencies and names on every machine.

use nodewright_core::names::SplitMix64;

#[derive(Debug, Clone)]
pub struct SimRng {
    rng: SplitMix64,
}

impl SimRng {
    pub fn new(seed: u64) -> Self {
        SimRng {
            rng: SplitMix64::new(seed ^ 0x5349_4d55_4c41_5445),
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// Uniform in `min..=max`.
    pub fn between(&mut self, min: u64, max: u64) -> u64 {
        if max <= min {
            return min;
        }
        min + self.next_u64() % (max - min + 1)
    }

    /// Five characters as Kubernetes' generated name suffixes.
    pub fn name_suffix(&mut self) -> String {
        self.rng.name_suffix()
    }
}
