//! Where the money above the lower bound goes. Every running machine's cost is split, step by
//! step, by what the machine was doing: booting (launched, not yet a node that takes pods —
//! registering, or held for its siblings), idle (up, no workload pod: waiting for
//! `consolidateAfter`, or for pods that went elsewhere), or carrying pods. Of a machine carrying
//! pods, the share its pods' dominant resource (CPU or memory) leaves free is fragmentation,
//! and of the rest, what its offering costs over the cheapest offering that fit its launch is
//! the premium. At the end, the capacity Jobs' pods used before they were evicted (work done
//! again, which the bound does not count) is set apart, and what is left of the gap is the
//! pods' own capacity at the cheapest offering above the bound's fractional price per
//! resource.

use nodewright_core::model::resources::Resources;

use crate::report::CostSplit;

/// The capacity pods later evicted used while they ran, in USD.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EvictedCapacity {
    /// Every evicted pod's.
    pub all_usd: f64,
    /// The Jobs' pods' among them: their work is done again by the pod the Job makes next, and
    /// the bound counts only that one.
    pub redone_usd: f64,
}

/// What a running machine is doing during a step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Phase {
    Booting,
    Idle,
    /// Carrying pods; `share` is the largest of requested/allocatable over CPU, memory and the
    /// node's extended resources (GPUs), in 0..=1.
    Busy {
        share: f64,
    },
}

impl Phase {
    /// The phase of an up machine: idle without workload pods, else its dominant share.
    pub fn of_node(workload_pods: u32, used: &Resources, allocatable: &Resources) -> Phase {
        if workload_pods == 0 {
            return Phase::Idle;
        }
        Phase::Busy {
            share: used.dominant_share_of(allocatable),
        }
    }
}

/// Accumulated micro-USD × milliseconds per hour of price (the unit of the world's total).
#[derive(Debug, Clone, Default)]
pub struct CostMeter {
    booting: f64,
    idle: f64,
    free_room: f64,
    used: f64,
    used_at_cheapest: f64,
}

/// micro-USD per hour × milliseconds → USD.
fn usd(micro_usd_ms: f64) -> f64 {
    micro_usd_ms / 1e6 / 3.6e6
}

impl CostMeter {
    /// A machine at `price` (micro-USD per hour), whose launch's cheapest fitting offering was
    /// `cheapest`, spent `dt_ms` in `phase`.
    pub fn add(&mut self, price: u64, cheapest: u64, phase: Phase, dt_ms: u64) {
        let paid = price as f64 * dt_ms as f64;
        match phase {
            Phase::Booting => self.booting += paid,
            Phase::Idle => self.idle += paid,
            Phase::Busy { share } => {
                self.free_room += paid * (1.0 - share);
                self.used += paid * share;
                self.used_at_cheapest += cheapest.min(price) as f64 * dt_ms as f64 * share;
            }
        }
    }

    /// The split of `total_usd − lower_bound_usd`. Of the capacity pods later evicted used,
    /// the Jobs' pods' share (`redone_usd`) is a part: the bound does not count work done
    /// again. The whole (`evicted_usd`) is shown beside the parts: the bound counts the run of
    /// another evicted pod (a Deployment's: it served while it ran) as useful, so what its
    /// eviction adds above the bound is the replacement's booting and the idle and free room of
    /// the move, in those parts.
    pub fn split(
        &self,
        total_usd: f64,
        lower_bound_usd: f64,
        evicted: EvictedCapacity,
    ) -> CostSplit {
        let used = usd(self.used);
        let premium = used - usd(self.used_at_cheapest);
        let redone = evicted.redone_usd.clamp(0.0, used - premium);
        let evicted = evicted.all_usd.clamp(redone, used);
        let above = total_usd - lower_bound_usd;
        let (booting, idle, fragmentation) =
            (usd(self.booting), usd(self.idle), usd(self.free_room));
        let round = |x: f64| (x * 1e6).round() / 1e6;
        CostSplit {
            above_bound_usd: round(above),
            booting_usd: round(booting),
            idle_usd: round(idle),
            fragmentation_usd: round(fragmentation),
            premium_usd: round(premium),
            redone_usd: round(redone),
            evicted_usd: round(evicted),
            other_usd: round(above - booting - idle - fragmentation - premium - redone),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR_MS: u64 = 3_600_000;

    #[test]
    fn each_phase_goes_to_its_part_and_the_parts_add_up_to_the_gap() {
        let mut meter = CostMeter::default();
        // $1/h, the cheapest fitting offering $0.50/h: booting 1 h, idle 1 h, 1 h three
        // quarters full.
        meter.add(1_000_000, 500_000, Phase::Booting, HOUR_MS);
        meter.add(1_000_000, 500_000, Phase::Idle, HOUR_MS);
        meter.add(1_000_000, 500_000, Phase::Busy { share: 0.75 }, HOUR_MS);
        let split = meter.split(3.0, 0.25, EvictedCapacity::default());
        assert_eq!(split.above_bound_usd, 2.75);
        assert_eq!(split.booting_usd, 1.0);
        assert_eq!(split.idle_usd, 1.0);
        assert_eq!(split.fragmentation_usd, 0.25);
        assert_eq!(split.premium_usd, 0.375);
        assert_eq!(split.evicted_usd, 0.0);
        assert_eq!(split.redone_usd, 0.0);
        // The pods' capacity at the cheapest price ($0.375) above the bound ($0.25).
        assert_eq!(split.other_usd, 0.125);
    }

    fn evicted(all_usd: f64, redone_usd: f64) -> EvictedCapacity {
        EvictedCapacity {
            all_usd,
            redone_usd,
        }
    }

    #[test]
    fn capacity_used_by_pods_later_evicted_is_shown_beside_the_parts() {
        let mut meter = CostMeter::default();
        meter.add(1_000_000, 1_000_000, Phase::Busy { share: 1.0 }, HOUR_MS);
        let split = meter.split(1.0, 0.5, evicted(0.5, 0.0));
        assert_eq!(split.evicted_usd, 0.5);
        assert_eq!(split.premium_usd, 0.0);
        assert_eq!(split.other_usd, 0.5);
        // Never more than what carried pods.
        assert_eq!(meter.split(1.0, 0.5, evicted(7.0, 0.0)).evicted_usd, 1.0);
    }

    #[test]
    fn work_done_again_is_a_part_of_the_gap() {
        let mut meter = CostMeter::default();
        meter.add(1_000_000, 1_000_000, Phase::Busy { share: 1.0 }, HOUR_MS);
        // $1 paid; a Job's pod ran on $0.40 of it and was evicted, the bound is $0.50.
        let split = meter.split(1.0, 0.5, evicted(0.6, 0.4));
        assert_eq!(split.redone_usd, 0.4);
        assert_eq!(split.evicted_usd, 0.6);
        assert_eq!(split.other_usd, 0.1);
        // Never more than the pods' capacity at the cheapest offering.
        assert_eq!(meter.split(1.0, 0.5, evicted(9.0, 9.0)).redone_usd, 1.0);
    }

    #[test]
    fn an_up_machine_without_workload_is_idle_and_with_it_busy_by_its_dominant_resource() {
        let alloc = Resources {
            cpu_milli: 2_000,
            memory_bytes: 8 << 30,
            ..Resources::default()
        };
        let used = Resources {
            cpu_milli: 500,
            memory_bytes: 6 << 30,
            ..Resources::default()
        };
        assert_eq!(Phase::of_node(0, &used, &alloc), Phase::Idle);
        assert_eq!(
            Phase::of_node(2, &used, &alloc),
            Phase::Busy { share: 0.75 }
        );
        // A GPU machine is as full as its GPUs.
        let gpu = nodewright_core::model::resources::NVIDIA_GPU;
        let mut alloc = alloc;
        alloc.extended.insert(gpu, 8);
        let mut used = used;
        used.extended.insert(gpu, 8);
        assert_eq!(Phase::of_node(1, &used, &alloc), Phase::Busy { share: 1.0 });
    }
}
