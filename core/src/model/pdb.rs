//! PodDisruptionBudgets (`policy/v1`): how many matching pods may be unavailable at once. The
//! drain evicts a pod only when every budget that selects it allows one more disruption.

use serde::{Deserialize, Serialize};

use super::affinity::LabelSelector;
use super::pod::Pod;

/// `minAvailable` / `maxUnavailable`: a count or a percentage of the matching pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IntOrPercent {
    /// A number of pods.
    Int(i64),
    /// A share of the matching pods.
    Percent(u32),
}

impl IntOrPercent {
    /// Parses `"1"`, `"25%"`.
    pub fn parse(raw: &str) -> Option<IntOrPercent> {
        match raw.trim().strip_suffix('%') {
            Some(p) => p
                .parse()
                .ok()
                .filter(|p| *p <= 100)
                .map(IntOrPercent::Percent),
            None => raw
                .trim()
                .parse()
                .ok()
                .filter(|n| *n >= 0)
                .map(IntOrPercent::Int),
        }
    }

    /// The count this value means out of `total` pods; percentages round up.
    pub fn of(self, total: i64) -> i64 {
        match self {
            IntOrPercent::Int(n) => n,
            IntOrPercent::Percent(p) => (total * p as i64 + 99) / 100,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
/// A PodDisruptionBudget.
pub struct PodDisruptionBudget {
    /// Its namespace: it selects pods there only.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The pods it covers.
    pub selector: LabelSelector,
    /// `minAvailable`.
    pub min_available: Option<IntOrPercent>,
    /// `maxUnavailable`.
    pub max_unavailable: Option<IntOrPercent>,
}

impl PodDisruptionBudget {
    /// Whether it covers `pod` (same namespace, selector matches).
    pub fn selects(&self, pod: &Pod) -> bool {
        pod.key.namespace == self.namespace && self.selector.matches(&pod.labels)
    }

    /// [`allowed`](Self::allowed) over `pods`: the ones it selects are expected, those bound
    /// to a node and not `unavailable` (leaving, shutting down) are healthy.
    pub fn allowed_among<'a>(
        &self,
        pods: impl IntoIterator<Item = &'a Pod>,
        unavailable: impl Fn(&Pod) -> bool,
    ) -> i64 {
        let (mut expected, mut healthy) = (0i64, 0i64);
        for p in pods.into_iter().filter(|p| self.selects(p)) {
            expected += 1;
            healthy += (p.node_name.is_some() && !unavailable(p)) as i64;
        }
        self.allowed(expected, healthy)
    }

    /// How many more of the selected pods may be disrupted: `expected` pods exist, `healthy`
    /// of them run.
    pub fn allowed(&self, expected: i64, healthy: i64) -> i64 {
        match (self.max_unavailable, self.min_available) {
            (Some(max), _) => max.of(expected) - (expected - healthy),
            (None, Some(min)) => healthy - min.of(expected),
            (None, None) => healthy,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_count_like_kubernetes() {
        let pdb = |min: Option<&str>, max: Option<&str>| PodDisruptionBudget {
            namespace: "default".into(),
            name: "p".into(),
            selector: LabelSelector::default(),
            min_available: min.and_then(IntOrPercent::parse),
            max_unavailable: max.and_then(IntOrPercent::parse),
        };
        assert_eq!(pdb(None, Some("1")).allowed(5, 5), 1);
        assert_eq!(pdb(None, Some("1")).allowed(5, 4), 0);
        assert_eq!(pdb(Some("4"), None).allowed(5, 5), 1);
        assert_eq!(pdb(Some("80%"), None).allowed(5, 5), 1);
        assert_eq!(pdb(None, Some("50%")).allowed(5, 5), 3);
        assert_eq!(IntOrPercent::parse("150%"), None);
        assert_eq!(IntOrPercent::parse("-1"), None);
    }
}
