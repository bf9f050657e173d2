//! NodeClaim names (`default-x7k2p`) from a generator seeded by the configuration, so the same
//! events give the same names.

use serde::{Deserialize, Serialize};

/// SplitMix64: small, fast, and the same on every platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Five lowercase letters and digits, like Kubernetes' generated name suffixes.
    pub fn name_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut n = self.next_u64();
        (0..5)
            .map(|_| {
                let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
                n /= ALPHABET.len() as u64;
                c
            })
            .collect()
    }
}

/// The NodeClaim name generator: SplitMix64 on the configured seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NameGenerator {
    rng: SplitMix64,
}

impl NameGenerator {
    /// The generator of a core configured with `seed`.
    pub fn new(seed: u64) -> Self {
        NameGenerator {
            rng: SplitMix64::new(seed ^ 0x6e6f_6465_7772_6974),
        }
    }

    /// Five lowercase letters and digits, like Kubernetes' generated names.
    pub fn suffix(&mut self) -> String {
        self.rng.name_suffix()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_names() {
        let mut a = NameGenerator::new(7);
        let mut b = NameGenerator::new(7);
        let mut c = NameGenerator::new(8);
        let xs: Vec<String> = (0..5).map(|_| a.suffix()).collect();
        let ys: Vec<String> = (0..5).map(|_| b.suffix()).collect();
        let zs: Vec<String> = (0..5).map(|_| c.suffix()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        assert!(xs.iter().all(|s| s.len() == 5));
    }
}
