//! Whole machines: the cheapest way to put the pods alive at a moment on machines, each pod
//! whole on one machine of a type it may run on, searched exactly while the search is small.
//!
//! The prices by the unit let a pod take a quarter of a four-GPU machine; one to a few such
//! pods cannot, and at a trace's concurrency (a handful of machines) that is the common case.
//! Packing the live pods exactly — every way to fill one machine that holds a pod of the first
//! class left, the rest packed the same way — is a bin packing over few items, so it is searched
//! by dynamic programming over how many pods of each class are left, remembered across the
//! moments of a sweep (the live pods change one at a time, so most of what a moment needs was
//! solved before). Any placement of those pods costs at least that much at that moment, so it is
//! a bound on its own; where the search would take too long the caller keeps the bound it had.
//!
//! What keeps the search small without changing its answer: pods alike in requests and in the
//! price of every type they may run on are one class; a type another type beats — as much of
//! every resource, a price no higher for every class — is never needed; nor is a filling one
//! more pod could join at no higher price; and a quick floor on what the pods left cost (the
//! hardest one's machine, and per resource what they pay at their cheapest price per unit)
//! passes over every filling that cannot beat the cheapest placement found so far.

use std::collections::{BTreeMap, HashMap};

use super::{Host, RESOURCES};

/// How many machine fillings one moment may look at before it gives up.
const STEPS_PER_MOMENT: usize = 3_000;
/// How many solved counts are remembered; past it the memory starts again empty.
const REMEMBERED: usize = 1 << 20;
/// After a search gave up, moments with as many live pods or more are not searched; every this
/// many of them, one is tried again.
const RETRY_AFTER: u32 = 1024;

/// One pod shape as the packing reads it: its requests (milli-CPU, bytes, GPUs) and the types
/// it may run on, each with the cheapest offering allowed it.
pub(super) struct PackedShape<'a> {
    pub requests: [f64; RESOURCES],
    pub hosts: &'a [(usize, Host)],
}

/// The classes of the pods, how many of each are alive, and the search over those counts.
pub(super) struct Packing {
    /// Per class, its requests.
    requests: Vec<[f64; RESOURCES]>,
    /// Per class, per type column, the price of a machine of that type for the class (infinite
    /// where it may not run).
    price: Vec<Vec<f64>>,
    /// Per type column, its allocatable: the largest any shape's host of the type has (each is
    /// the largest of every NodeClass the pod may run on it under, so no machine of the type
    /// that could hold some of the pods holds more).
    allocatable: Vec<[f64; RESOURCES]>,
    /// Per class, the pods alive now.
    alive: Vec<u32>,
    /// The fewest live pods the last search that gave up had: with as many or more, only one
    /// moment in [`RETRY_AFTER`] is searched.
    gave_up_at: u32,
    /// Moments not searched since the last search.
    skipped: u32,
    /// Per class, the cheapest machine that holds one of its pods alone.
    alone: Vec<f64>,
    /// Per class, per resource, the cheapest price per unit of it among the types it may run on
    /// (0 for a resource it does not ask for).
    per_unit: Vec<[f64; RESOURCES]>,
    solved: HashMap<Vec<u8>, Solved>,
}

impl Packing {
    /// The classes of `shapes`; returns the packing and each shape's class.
    pub(super) fn new(shapes: &[PackedShape]) -> (Packing, Vec<usize>) {
        let mut columns: BTreeMap<usize, [f64; RESOURCES]> = BTreeMap::new();
        for shape in shapes {
            for (t, host) in shape.hosts {
                let most = columns.entry(*t).or_insert(host.allocatable);
                for (m, a) in most.iter_mut().zip(&host.allocatable) {
                    *m = m.max(*a);
                }
            }
        }
        let column_of: BTreeMap<usize, usize> =
            columns.keys().enumerate().map(|(c, t)| (*t, c)).collect();
        let allocatable: Vec<[f64; RESOURCES]> = columns.values().copied().collect();
        let mut class_of_key: BTreeMap<Vec<u64>, usize> = BTreeMap::new();
        let mut requests = Vec::new();
        let mut price = Vec::new();
        let mut class_of = Vec::with_capacity(shapes.len());
        for shape in shapes {
            let mut row = vec![f64::INFINITY; allocatable.len()];
            for (t, host) in shape.hosts {
                row[column_of[t]] = host.usd;
            }
            let key: Vec<u64> = shape
                .requests
                .iter()
                .chain(&row)
                .map(|x| x.to_bits())
                .collect();
            let next = requests.len();
            let class = *class_of_key.entry(key).or_insert(next);
            if class == next {
                requests.push(shape.requests);
                price.push(row);
            }
            class_of.push(class);
        }
        let kept = undominated_columns(&allocatable, &price);
        let price: Vec<Vec<f64>> = price
            .iter()
            .map(|row| kept.iter().map(|&c| row[c]).collect())
            .collect();
        let allocatable: Vec<[f64; RESOURCES]> = kept.iter().map(|&c| allocatable[c]).collect();
        let alone = requests
            .iter()
            .zip(&price)
            .map(|(asks, row)| {
                (0..allocatable.len())
                    .filter(|&c| (0..RESOURCES).all(|r| asks[r] <= allocatable[c][r]))
                    .map(|c| row[c])
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        let per_unit = requests
            .iter()
            .zip(&price)
            .map(|(asks, row)| {
                let mut unit = [0.0; RESOURCES];
                for r in 0..RESOURCES {
                    if asks[r] > 0.0 {
                        unit[r] = (0..allocatable.len())
                            .filter(|&c| allocatable[c][r] > 0.0)
                            .map(|c| row[c] / allocatable[c][r])
                            .fold(f64::INFINITY, f64::min);
                    }
                }
                unit
            })
            .collect();
        let packing = Packing {
            alive: vec![0; requests.len()],
            requests,
            price,
            allocatable,
            gave_up_at: u32::MAX,
            skipped: 0,
            alone,
            per_unit,
            solved: HashMap::new(),
        };
        (packing, class_of)
    }

    /// One pod of `class` starts (`sign` 1) or ends (-1).
    pub(super) fn count(&mut self, class: usize, sign: i32) {
        let n = &mut self.alive[class];
        *n = n.saturating_add_signed(sign);
    }

    /// The cheapest placement of the live pods on whole machines, if the search finished.
    pub(super) fn cheapest_now(&mut self) -> Option<f64> {
        // The search counts pods per class in a byte.
        let alive: Vec<u8> = self
            .alive
            .iter()
            .map(|&n| u8::try_from(n).ok())
            .collect::<Option<_>>()?;
        let live: u32 = self.alive.iter().sum();
        if live >= self.gave_up_at {
            // Tried again now and then: the pods alive may be easier to place by then.
            self.skipped += 1;
            if self.skipped < RETRY_AFTER {
                return None;
            }
        }
        self.skipped = 0;
        if self.solved.len() > REMEMBERED {
            self.solved.clear();
        }
        let mut steps = STEPS_PER_MOMENT;
        let found = self.cheapest(&alive, f64::INFINITY, &mut steps);
        self.gave_up_at = if found.is_some() {
            self.gave_up_at.max(live + 1)
        } else {
            live
        };
        found.filter(|usd| usd.is_finite())
    }

    /// The cheapest placement of `left` (pods per class) if it costs less than `limit`, or else
    /// some amount at least `limit` that it costs no less than; `None` once `steps` run out.
    fn cheapest(&mut self, left: &[u8], limit: f64, steps: &mut usize) -> Option<f64> {
        if left.iter().all(|&n| n == 0) {
            return Some(0.0);
        }
        match self.solved.get(left) {
            Some(Solved::Exactly(usd)) => return Some(*usd),
            Some(Solved::AtLeast(usd)) if *usd >= limit => return Some(*usd),
            _ => {}
        }
        let floor = self.at_least(left);
        if floor >= limit {
            return Some(floor);
        }
        let first = left.iter().position(|&n| n > 0).unwrap_or(0);
        // Some machine holds a pod of the first class left: every filling of one, with its
        // cheapest type, and the rest placed the same way. The fillings that waste least
        // (their price over what their pods are sure to cost) go first, so a cheap placement is
        // found early and the others are cut short by it.
        let mut machines = Fillings::default();
        let mut taken = vec![0u8; left.len()];
        let columns = self.allocatable.len();
        let mut open = vec![0.0; columns];
        self.fillings(
            left,
            first,
            &mut taken,
            [0.0; RESOURCES],
            &mut open,
            &mut machines,
            steps,
        )?;
        let mut order: Vec<(f64, usize)> = (0..machines.usd.len())
            .map(|i| {
                (
                    machines.usd[i] - self.at_least(machines.taken(i, left.len())),
                    i,
                )
            })
            .collect();
        order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut best = limit;
        let mut exact = false;
        let mut rest = vec![0u8; left.len()];
        for (_, i) in order {
            let (taken, usd) = (machines.taken(i, left.len()), machines.usd[i]);
            for ((r, l), t) in rest.iter_mut().zip(left).zip(taken) {
                *r = l - t;
            }
            if usd + self.at_least(&rest) >= best {
                continue;
            }
            let placed = self.cheapest(&rest, best - usd, steps)?;
            if usd + placed < best {
                best = usd + placed;
                exact = true;
            }
        }
        let solved = if exact {
            Solved::Exactly(best)
        } else {
            Solved::AtLeast(best)
        };
        self.solved.insert(left.to_vec(), solved);
        Some(best)
    }

    /// What `pods` (per class) cost at least, quickly: the cheapest machine the hardest of them
    /// needs alone, and per resource what they pay at their cheapest price per unit of it.
    fn at_least(&self, pods: &[u8]) -> f64 {
        let mut machine = 0.0f64;
        let mut by_resource = [0.0f64; RESOURCES];
        for (class, &n) in pods.iter().enumerate() {
            if n == 0 {
                continue;
            }
            machine = machine.max(self.alone[class]);
            let asks = self.requests[class].iter().zip(&self.per_unit[class]);
            for (paid, (amount, unit)) in by_resource.iter_mut().zip(asks) {
                *paid += f64::from(n) * amount * unit;
            }
        }
        by_resource.into_iter().fold(machine, f64::max)
    }

    /// Every filling of one machine that adds pods of class `from` or later to `taken`, with
    /// the cheapest type that holds it. At the top (`taken` empty) only a pod of `from`, the
    /// first class left, starts a filling, so each is a filling of the machine holding that
    /// pod, and each is found once. A filling that one more pod could join at no higher price
    /// is left out: placing that pod too costs no more and leaves less to place (the placement
    /// of fewer pods never costs more). `open` ends with the price per type column of what is
    /// taken so far (infinite where it no longer fits or some pod may not run); each level
    /// pushes its own after it.
    #[allow(clippy::too_many_arguments)]
    fn fillings(
        &self,
        left: &[u8],
        from: usize,
        taken: &mut Vec<u8>,
        load: [f64; RESOURCES],
        open: &mut Vec<f64>,
        machines: &mut Fillings,
        steps: &mut usize,
    ) -> Option<()> {
        let columns = self.allocatable.len();
        let last = if taken.iter().all(|&n| n == 0) {
            from
        } else {
            left.len() - 1
        };
        let below = open.len() - columns;
        for class in from..=last {
            if taken[class] >= left[class] {
                continue;
            }
            *steps = steps.checked_sub(1)?;
            let mut added = load;
            for (a, r) in added.iter_mut().zip(&self.requests[class]) {
                *a += r;
            }
            let mut usd = f64::INFINITY;
            for c in 0..columns {
                let price = if self.holds(c, &added) {
                    open[below + c].max(self.price[class][c])
                } else {
                    f64::INFINITY
                };
                usd = usd.min(price);
                open.push(price);
            }
            if usd.is_finite() {
                taken[class] += 1;
                let now = open.len() - columns;
                let grows_free = (0..left.len()).any(|other| {
                    taken[other] < left[other]
                        && self.joins_within(other, &added, &open[now..], usd)
                });
                if !grows_free {
                    machines.taken.extend_from_slice(taken);
                    machines.usd.push(usd);
                }
                self.fillings(left, class, taken, added, open, machines, steps)?;
                taken[class] -= 1;
            }
            open.truncate(below + columns);
        }
        Some(())
    }

    /// Whether type column `c` holds `load`.
    fn holds(&self, c: usize, load: &[f64; RESOURCES]) -> bool {
        (0..RESOURCES).all(|r| load[r] <= self.allocatable[c][r])
    }

    /// Whether a pod of `class` can join a machine loaded with `load` at prices `open` per type
    /// column and the machine still cost at most `usd` (only a column at most at that price
    /// already can).
    fn joins_within(&self, class: usize, load: &[f64; RESOURCES], open: &[f64], usd: f64) -> bool {
        let mut added = *load;
        for (a, r) in added.iter_mut().zip(&self.requests[class]) {
            *a += r;
        }
        (0..open.len())
            .any(|c| open[c] <= usd && self.price[class][c] <= usd && self.holds(c, &added))
    }
}

/// The fillings of one machine a search found: each one's pods per class, one after the other
/// (as many bytes each as there are classes), and its price.
#[derive(Default)]
struct Fillings {
    taken: Vec<u8>,
    usd: Vec<f64>,
}

impl Fillings {
    /// Filling `i`'s pods per class, of `classes` classes.
    fn taken(&self, i: usize, classes: usize) -> &[u8] {
        &self.taken[i * classes..(i + 1) * classes]
    }
}

/// What the search knows of a count of pods left.
#[derive(Debug, Clone, Copy)]
enum Solved {
    /// Their cheapest placement.
    Exactly(f64),
    /// Every placement of them costs at least this much.
    AtLeast(f64),
}

/// The type columns no other column beats: one with at least as much of every resource and, for
/// every class, a price no higher (of two alike, the first is kept). A machine of a beaten type
/// could be one of the beating type at no higher price, so the cheapest placement never needs it.
fn undominated_columns(allocatable: &[[f64; RESOURCES]], price: &[Vec<f64>]) -> Vec<usize> {
    let beats = |d: usize, c: usize| {
        (0..RESOURCES).all(|r| allocatable[d][r] >= allocatable[c][r])
            && price.iter().all(|row| row[d] <= row[c])
    };
    (0..allocatable.len())
        .filter(|&c| {
            !(0..allocatable.len()).any(|d| d != c && beats(d, c) && (d < c || !beats(c, d)))
        })
        .collect()
}
