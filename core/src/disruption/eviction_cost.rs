//! What evicting pods costs, for consolidation's payback rule. Every evicted pod costs a
//! restart (`Config::eviction_cost_micro_usd`). The pods `Config::count_lost_work` names — a
//! Job's pod, which starts over when evicted, and by default every pod no replicating
//! controller makes again (one no controller owns, a workflow's) — also cost the work they
//! throw away: each one's share of its machine
//! (its fullest resource: CPU, memory or GPUs) at the machine's price, for as long as it has
//! existed; and since they end, the saving of moving only such pods is counted no longer than
//! the oldest has run. A ReplicaSet's, StatefulSet's or ReplicationController's pod is replaced
//! and serves on: it costs its restart.

use crate::catalog::Price;
use crate::config::Config;
use crate::model::pod::Pod;
use crate::model::resources::Resources;
use crate::state::PricedPod;

/// The cost of the evictions of one consolidation, summed pod by pod.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EvictionCost {
    /// The pods evicted.
    pub evictions: usize,
    /// The restarts: evictions × the cost per evicted pod.
    pub restarts_usd: f64,
    /// The work thrown away (zero unless `Config::count_lost_work` is on).
    pub lost_work_usd: f64,
    /// Whether some pod's work is not counted lost (a replicated one, which serves on).
    pub any_keeps_work: bool,
    /// Whether some pod's lost work was counted (one `Config::count_lost_work` names).
    pub counts_lost_work: bool,
    /// The age of the oldest pod.
    pub oldest_ms: u64,
}

impl EvictionCost {
    /// Counts evicting `pod` from a machine with `allocatable` at `price`, at `now_ms`.
    pub fn add(
        &mut self,
        config: &Config,
        pod: &Pod,
        allocatable: &Resources,
        price: Price,
        now_ms: u64,
    ) {
        let pod = PricedPod::of(pod, allocatable, config.count_lost_work);
        self.add_priced(config, &pod, price, now_ms);
    }

    /// [`Self::add`] for a pod as a node's summary keeps it ([`PricedPod`], read under
    /// `config.count_lost_work`).
    pub fn add_priced(&mut self, config: &Config, pod: &PricedPod, price: Price, now_ms: u64) {
        self.evictions += 1;
        self.restarts_usd += config.eviction_cost_micro_usd as f64 / 1e6;
        self.any_keeps_work |= !pod.loses_work;
        self.oldest_ms = self.oldest_ms.max(now_ms.saturating_sub(pod.created_at_ms));
        if pod.loses_work {
            self.counts_lost_work = true;
            let age_h = now_ms.saturating_sub(pod.created_at_ms) as f64 / 3_600_000.0;
            self.lost_work_usd += pod.share * price.usd_per_hour() * age_h;
        }
    }

    /// How long a saving from moving these pods may be counted on, at most `horizon_ms`: a
    /// machine carrying only pods that end (a Job's, an unowned one, a workflow's) is free when the last
    /// one ends, and a pod that has run
    /// for a time is as likely as not to run that long again (the Lindy estimate, for run
    /// times with a long tail) — so no longer than the oldest has run.
    pub fn horizon_ms(&self, config: &Config, horizon_ms: u64) -> u64 {
        if config.count_lost_work.is_on() && !self.any_keeps_work && self.evictions > 0 {
            horizon_ms.min(self.oldest_ms)
        } else {
            horizon_ms
        }
    }

    /// The whole cost: restarts and work lost.
    pub fn usd(&self) -> f64 {
        self.restarts_usd + self.lost_work_usd
    }

    /// The cost of evicting the pods of both: the same as adding `other`'s pods one by one,
    /// but for the rounding of the sums.
    pub fn join(&self, other: &EvictionCost) -> EvictionCost {
        EvictionCost {
            evictions: self.evictions + other.evictions,
            restarts_usd: self.restarts_usd + other.restarts_usd,
            lost_work_usd: self.lost_work_usd + other.lost_work_usd,
            any_keeps_work: self.any_keeps_work || other.any_keeps_work,
            counts_lost_work: self.counts_lost_work || other.counts_lost_work,
            oldest_ms: self.oldest_ms.max(other.oldest_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LostWork;
    use crate::model::pod::OwnerRef;

    const HOUR_MS: u64 = 3_600_000;

    fn owned_by(kind: &str) -> Pod {
        let mut pod = Pod::new("default", "p", 2_000, 4 << 30);
        pod.owner = Some(OwnerRef {
            kind: kind.to_string(),
            name: "w".to_string(),
        });
        pod.created_at_ms = HOUR_MS;
        pod
    }

    fn machine() -> (Resources, Price) {
        // Half its CPU and a quarter of its memory for the pod; $2/h.
        (Resources::new(4_000, 16 << 30, 110), Price(2_000_000))
    }

    #[test]
    fn a_jobs_pod_costs_its_share_of_the_machine_for_its_age() {
        let (alloc, price) = machine();
        let mut cost = EvictionCost::default();
        // Three hours old: half of a $2/h machine for 3 h is $3, and the restart.
        cost.add(
            &Config::default(),
            &owned_by("Job"),
            &alloc,
            price,
            4 * HOUR_MS,
        );
        assert_eq!(cost.evictions, 1);
        assert!((cost.lost_work_usd - 3.0).abs() < 1e-9, "{cost:?}");
        assert!((cost.usd() - 3.05).abs() < 1e-9, "{cost:?}");
    }

    #[test]
    fn a_replicated_pod_costs_its_restart_only() {
        let (alloc, price) = machine();
        let mut cost = EvictionCost::default();
        for kind in ["ReplicaSet", "StatefulSet"] {
            cost.add(
                &Config::default(),
                &owned_by(kind),
                &alloc,
                price,
                4 * HOUR_MS,
            );
        }
        assert_eq!(cost.lost_work_usd, 0.0);
        assert!((cost.usd() - 0.1).abs() < 1e-9, "{cost:?}");
    }

    #[test]
    fn by_default_every_pod_but_a_replicated_ones_loses_its_work() {
        let job = owned_by("Job");
        let mut unowned = owned_by("Job");
        unowned.owner = None;
        let replicated = owned_by("ReplicaSet");
        let default = Config::default().count_lost_work;
        assert_eq!(default, LostWork::AllButReplicated);
        assert!(default.counts(&job));
        assert!(default.counts(&unowned));
        // A workflow's step, a CI runner: their controllers do not make them again to serve on.
        for kind in ["Workflow", "TaskRun", "EphemeralRunner"] {
            assert!(default.counts(&owned_by(kind)), "{kind}");
        }
        for kind in ["ReplicaSet", "StatefulSet", "ReplicationController"] {
            assert!(!default.counts(&owned_by(kind)), "{kind}");
        }
        // Counting Jobs only: an unowned pod costs its restart, as Karpenter counts it.
        assert!(LostWork::Jobs.counts(&job));
        assert!(!LostWork::Jobs.counts(&unowned));
        assert!(!LostWork::Jobs.counts(&replicated));
        for pod in [&job, &unowned, &replicated] {
            assert!(!LostWork::Off.counts(pod));
        }
    }

    #[test]
    fn an_unowned_pod_costs_its_share_of_the_machine_for_its_age_unless_only_jobs_count() {
        let (alloc, price) = machine();
        let mut pod = owned_by("Job");
        pod.owner = None;
        let mut cost = EvictionCost::default();
        cost.add(&Config::default(), &pod, &alloc, price, 4 * HOUR_MS);
        assert!((cost.lost_work_usd - 3.0).abs() < 1e-9, "{cost:?}");
        // Nothing among them serves on: the saving counts no longer than its age.
        assert_eq!(
            cost.horizon_ms(&Config::default(), 24 * HOUR_MS),
            3 * HOUR_MS
        );
        let jobs_only = Config {
            count_lost_work: LostWork::Jobs,
            ..Config::default()
        };
        let mut cost = EvictionCost::default();
        cost.add(&jobs_only, &pod, &alloc, price, 4 * HOUR_MS);
        assert_eq!(cost.lost_work_usd, 0.0);
        assert_eq!(cost.horizon_ms(&jobs_only, 24 * HOUR_MS), 24 * HOUR_MS);
    }

    #[test]
    fn the_switches_name_the_setting() {
        assert_eq!(LostWork::from_switches(false, true), LostWork::Off);
        assert_eq!(LostWork::from_switches(false, false), LostWork::Off);
        assert_eq!(LostWork::from_switches(true, false), LostWork::Jobs);
        assert_eq!(
            LostWork::from_switches(true, true),
            LostWork::AllButReplicated
        );
    }

    #[test]
    fn the_saving_of_moving_pods_that_end_counts_no_longer_than_the_oldest_has_run() {
        let (alloc, price) = machine();
        let day = 24 * HOUR_MS;
        let mut jobs = EvictionCost::default();
        // Created at 1 h; at 4 h the older is 3 h old.
        jobs.add(
            &Config::default(),
            &owned_by("Job"),
            &alloc,
            price,
            4 * HOUR_MS,
        );
        let mut younger = owned_by("Job");
        younger.created_at_ms = 3 * HOUR_MS;
        jobs.add(&Config::default(), &younger, &alloc, price, 4 * HOUR_MS);
        assert_eq!(jobs.horizon_ms(&Config::default(), day), 3 * HOUR_MS);
        // Never beyond the configured horizon.
        assert_eq!(jobs.horizon_ms(&Config::default(), HOUR_MS), HOUR_MS);
        // A replicated pod among them serves on: the configured horizon.
        let mut mixed = jobs;
        mixed.add(
            &Config::default(),
            &owned_by("ReplicaSet"),
            &alloc,
            price,
            4 * HOUR_MS,
        );
        assert_eq!(mixed.horizon_ms(&Config::default(), day), day);
        // Not counting lost work, Karpenter's rule: the configured horizon.
        let karpenter = Config {
            count_lost_work: LostWork::Off,
            ..Config::default()
        };
        assert_eq!(jobs.horizon_ms(&karpenter, day), day);
    }

    #[test]
    fn with_lost_work_not_counted_every_pod_costs_its_restart() {
        let (alloc, price) = machine();
        let config = Config {
            count_lost_work: LostWork::Off,
            ..Config::default()
        };
        let mut cost = EvictionCost::default();
        cost.add(&config, &owned_by("Job"), &alloc, price, 4 * HOUR_MS);
        assert_eq!(cost.lost_work_usd, 0.0);
        assert!((cost.usd() - 0.05).abs() < 1e-9, "{cost:?}");
    }

    proptest::proptest! {
        /// Joining each machine's cost gives what adding every pod one by one gives, but for
        /// the rounding of the sums: what a consolidation search's sure no relies on.
        #[test]
        fn joining_the_machines_costs_adds_their_pods(
            machines in proptest::collection::vec(
                proptest::collection::vec((0u64..100 * HOUR_MS, 0usize..4, 1i64..64_000), 0..12),
                1..6,
            ),
            now_ms in 100 * HOUR_MS..200 * HOUR_MS,
        ) {
            let (alloc, price) = machine();
            let kinds = [None, Some("Job"), Some("ReplicaSet"), Some("Workflow")];
            let config = Config::default();
            let mut one_by_one = EvictionCost::default();
            let mut joined = EvictionCost::default();
            for pods in &machines {
                let mut this = EvictionCost::default();
                for &(created_at_ms, kind, cpu_milli) in pods {
                    let mut pod = owned_by("Job");
                    pod.owner = kinds[kind].map(|k| OwnerRef {
                        kind: k.to_string(),
                        name: "w".to_string(),
                    });
                    pod.created_at_ms = created_at_ms;
                    pod.requests.cpu_milli = cpu_milli;
                    one_by_one.add(&config, &pod, &alloc, price, now_ms);
                    this.add(&config, &pod, &alloc, price, now_ms);
                }
                joined = joined.join(&this);
            }
            proptest::prop_assert_eq!(joined.evictions, one_by_one.evictions);
            proptest::prop_assert_eq!(joined.any_keeps_work, one_by_one.any_keeps_work);
            proptest::prop_assert_eq!(joined.counts_lost_work, one_by_one.counts_lost_work);
            proptest::prop_assert_eq!(joined.oldest_ms, one_by_one.oldest_ms);
            proptest::prop_assert_eq!(
                joined.horizon_ms(&config, 24 * HOUR_MS),
                one_by_one.horizon_ms(&config, 24 * HOUR_MS)
            );
            let (a, b) = (joined.usd(), one_by_one.usd());
            proptest::prop_assert!((a - b).abs() <= 1e-12 * b.max(1.0), "{a} vs {b}");
        }
    }
}
