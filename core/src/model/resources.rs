//! Resource amounts as exact integers: CPU in milli-cores, memory in bytes, pods as a count, and
//! extended resources (`nvidia.com/gpu`, `aws.amazon.com/neuron`, ...) as counts by name.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use smallvec::SmallVec;

/// The well-known extended resource name for NVIDIA GPUs.
pub const NVIDIA_GPU: &str = "nvidia.com/gpu";
/// The well-known extended resource name for AMD GPUs.
pub const AMD_GPU: &str = "amd.com/gpu";
/// The well-known extended resource name for AWS Neuron devices (Inferentia, Trainium).
pub const AWS_NEURON: &str = "aws.amazon.com/neuron";

/// A bundle of resource amounts. Missing extended resources are zero.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Resources {
    /// CPU in milli-cores.
    pub cpu_milli: i64,
    /// Memory in bytes.
    pub memory_bytes: i64,
    /// Pods.
    pub pods: i64,
    /// Extended resources by name; zero entries are never stored.
    pub extended: Extended,
}

/// Extended resources by name, in name order, each name once. A node has one or two (a GPU,
/// ephemeral storage) and a pod fewer, so they are kept inline, and an amount copied shares its
/// name instead of copying it. Serialized as the map of names to amounts it is.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Extended(SmallVec<[(Arc<str>, i64); 2]>);

impl fmt::Debug for Extended {
    /// As the map it stands for: `{"nvidia.com/gpu": 1}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Extended {
    /// None.
    pub fn new() -> Self {
        Extended(SmallVec::new())
    }

    /// Where `name` is, or where it would go.
    fn position(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(held, _)| (**held).cmp(name))
    }

    /// The amount of `name`, if it is held.
    pub fn get(&self, name: &str) -> Option<&i64> {
        self.position(name).ok().map(|i| &self.0[i].1)
    }

    /// The amount of `name`, to change, if it is held.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut i64> {
        self.position(name).ok().map(|i| &mut self.0[i].1)
    }

    /// Whether `name` is held.
    pub fn contains_key(&self, name: &str) -> bool {
        self.position(name).is_ok()
    }

    /// Holds `amount` of `name`; the amount it held before, if any.
    pub fn insert(&mut self, name: &str, amount: i64) -> Option<i64> {
        self.insert_with(name, amount, || Arc::from(name))
    }

    /// [`Extended::insert`], the name made by `name_of` only when it is new here (a name held
    /// elsewhere is shared, not copied).
    fn insert_with(
        &mut self,
        name: &str,
        amount: i64,
        name_of: impl FnOnce() -> Arc<str>,
    ) -> Option<i64> {
        match self.position(name) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, amount)),
            Err(i) => {
                self.0.insert(i, (name_of(), amount));
                None
            }
        }
    }

    /// Holds `amount` of `name`, or stops holding it at zero (as [`Resources`] keeps them).
    fn set_with(&mut self, name: &str, amount: i64, name_of: impl FnOnce() -> Arc<str>) {
        if amount == 0 {
            self.remove(name);
        } else {
            self.insert_with(name, amount, name_of);
        }
    }

    /// Stops holding `name`; the amount it held, if any.
    pub fn remove(&mut self, name: &str) -> Option<i64> {
        let i = self.position(name).ok()?;
        Some(self.0.remove(i).1)
    }

    /// Each name and its amount, in name order.
    pub fn iter(&self) -> ExtendedIter<'_> {
        ExtendedIter(self.0.iter())
    }

    /// The names, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(name, _)| &**name)
    }

    /// How many names are held.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// [`Extended::iter`].
#[derive(Debug, Clone)]
pub struct ExtendedIter<'a>(std::slice::Iter<'a, (Arc<str>, i64)>);

impl<'a> Iterator for ExtendedIter<'a> {
    type Item = (&'a str, &'a i64);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(name, amount)| (&**name, amount))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for ExtendedIter<'_> {}

impl<'a> IntoIterator for &'a Extended {
    type Item = (&'a str, &'a i64);
    type IntoIter = ExtendedIter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl FromIterator<(String, i64)> for Extended {
    /// In name order whatever the order given; of a name given twice, the last amount.
    fn from_iter<I: IntoIterator<Item = (String, i64)>>(items: I) -> Self {
        let mut out = Extended::new();
        for (name, amount) in items {
            out.insert(&name, amount);
        }
        out
    }
}

impl Serialize for Extended {
    /// As the map `BTreeMap<String, i64>` of the same amounts: the same bytes in every format.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Extended {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(BTreeMap::<String, i64>::deserialize(deserializer)?
            .into_iter()
            .collect())
    }
}

impl Resources {
    /// CPU, memory and pods, no extended resource.
    pub fn new(cpu_milli: i64, memory_bytes: i64, pods: i64) -> Self {
        Resources {
            cpu_milli,
            memory_bytes,
            pods,
            extended: Extended::new(),
        }
    }

    /// Sets an extended resource; zero removes it.
    pub fn with_extended(mut self, name: &str, amount: i64) -> Self {
        self.set_extended(name, amount);
        self
    }

    /// Sets an extended resource (zero removes it).
    pub fn set_extended(&mut self, name: &str, amount: i64) {
        self.extended.set_with(name, amount, || Arc::from(name));
    }

    /// [`Resources::set_extended`] of a name held elsewhere (shared, not copied).
    fn set_extended_shared(&mut self, name: &Arc<str>, amount: i64) {
        self.extended.set_with(name, amount, || Arc::clone(name));
    }

    /// An extended resource's amount (zero when absent).
    pub fn extended(&self, name: &str) -> i64 {
        self.extended.get(name).copied().unwrap_or(0)
    }

    /// Reads a resource by its Kubernetes name (`cpu` in milli-cores, `memory` in bytes, `pods`,
    /// or an extended resource).
    pub fn get(&self, name: &str) -> i64 {
        match name {
            "cpu" => self.cpu_milli,
            "memory" => self.memory_bytes,
            "pods" => self.pods,
            other => self.extended(other),
        }
    }

    /// Sets a resource by its Kubernetes name.
    pub fn set(&mut self, name: &str, amount: i64) {
        match name {
            "cpu" => self.cpu_milli = amount,
            "memory" => self.memory_bytes = amount,
            "pods" => self.pods = amount,
            other => self.set_extended(other, amount),
        }
    }

    /// The names of every resource with a non-zero amount, in a stable order.
    pub fn names(&self) -> Vec<String> {
        let mut names = Vec::new();
        if self.cpu_milli != 0 {
            names.push("cpu".to_string());
        }
        if self.memory_bytes != 0 {
            names.push("memory".to_string());
        }
        if self.pods != 0 {
            names.push("pods".to_string());
        }
        names.extend(self.extended.keys().map(str::to_string));
        names
    }

    /// Adds `other` (saturating: absurd amounts never wrap around into "fits").
    pub fn add(&mut self, other: &Resources) {
        self.cpu_milli = self.cpu_milli.saturating_add(other.cpu_milli);
        self.memory_bytes = self.memory_bytes.saturating_add(other.memory_bytes);
        self.pods = self.pods.saturating_add(other.pods);
        for (name, amount) in &other.extended.0 {
            let sum = self.extended(name).saturating_add(*amount);
            self.set_extended_shared(name, sum);
        }
    }

    /// Subtracts `other` (saturating).
    pub fn sub(&mut self, other: &Resources) {
        self.cpu_milli = self.cpu_milli.saturating_sub(other.cpu_milli);
        self.memory_bytes = self.memory_bytes.saturating_sub(other.memory_bytes);
        self.pods = self.pods.saturating_sub(other.pods);
        for (name, amount) in &other.extended.0 {
            let diff = self.extended(name).saturating_sub(*amount);
            self.set_extended_shared(name, diff);
        }
    }

    /// The sum.
    pub fn plus(&self, other: &Resources) -> Resources {
        let mut sum = self.clone();
        sum.add(other);
        sum
    }

    /// The difference (it may go below zero).
    pub fn minus(&self, other: &Resources) -> Resources {
        let mut diff = self.clone();
        diff.sub(other);
        diff
    }

    /// The largest share of `allocatable` these requests take, over CPU, memory and the
    /// extended resources (GPUs) the node has, in 0..=1: a machine is as full as its fullest
    /// resource.
    pub fn dominant_share_of(&self, allocatable: &Resources) -> f64 {
        let ratio = |used: i64, alloc: i64| {
            if alloc > 0 {
                (used as f64 / alloc as f64).clamp(0.0, 1.0)
            } else {
                0.0
            }
        };
        // In the extended resources' name order (a BTreeMap): the same sum on every machine.
        // Both maps are in that order, so one walk over `self`'s finds each amount.
        let mut used = self.extended.iter().peekable();
        allocatable
            .extended
            .iter()
            .map(|(name, alloc)| {
                while used.next_if(|(n, _)| *n < name).is_some() {}
                let amount = used.next_if(|(n, _)| *n == name).map_or(0, |(_, a)| *a);
                ratio(amount, *alloc)
            })
            .fold(
                ratio(self.cpu_milli, allocatable.cpu_milli)
                    .max(ratio(self.memory_bytes, allocatable.memory_bytes)),
                f64::max,
            )
    }

    /// Every amount of `self` is at most the same amount of `capacity`.
    pub fn fits_in(&self, capacity: &Resources) -> bool {
        self.first_excess(capacity).is_none()
    }

    /// Every amount of `self` fits in `capacity` beside `used` (what `capacity` already
    /// holds): `self + used ≤ capacity`, amount by amount, as `self.fits_in(capacity - used)`
    /// without building the difference.
    pub fn fits_beside(&self, used: &Resources, capacity: &Resources) -> bool {
        self.cpu_milli + used.cpu_milli <= capacity.cpu_milli
            && self.memory_bytes + used.memory_bytes <= capacity.memory_bytes
            && self.pods + used.pods <= capacity.pods
            && self
                .extended
                .iter()
                .all(|(name, amount)| amount + used.extended(name) <= capacity.extended(name))
    }

    /// The first resource (in a stable order) whose amount exceeds `capacity`, if any.
    pub fn first_excess<'a>(&'a self, capacity: &Resources) -> Option<&'a str> {
        if self.cpu_milli > capacity.cpu_milli {
            return Some("cpu");
        }
        if self.memory_bytes > capacity.memory_bytes {
            return Some("memory");
        }
        if self.pods > capacity.pods {
            return Some("pods");
        }
        for (name, amount) in &self.extended {
            if *amount > capacity.extended(name) {
                return Some(name);
            }
        }
        None
    }

    /// Component-wise maximum.
    pub fn max(&self, other: &Resources) -> Resources {
        let mut out = Resources::new(
            self.cpu_milli.max(other.cpu_milli),
            self.memory_bytes.max(other.memory_bytes),
            self.pods.max(other.pods),
        );
        for (name, _) in self.extended.0.iter().chain(&other.extended.0) {
            out.set_extended_shared(name, self.extended(name).max(other.extended(name)));
        }
        out
    }

    /// Raises every amount to at least `other`'s, in place.
    pub fn max_assign(&mut self, other: &Resources) {
        self.cpu_milli = self.cpu_milli.max(other.cpu_milli);
        self.memory_bytes = self.memory_bytes.max(other.memory_bytes);
        self.pods = self.pods.max(other.pods);
        for (name, amount) in &other.extended.0 {
            // One lookup, and the name is shared only when it is new here.
            match self.extended.get_mut(name) {
                Some(mine) => *mine = (*mine).max(*amount),
                None if *amount > 0 => {
                    self.extended
                        .insert_with(name, *amount, || Arc::clone(name));
                }
                None => {}
            }
        }
    }

    /// Component-wise minimum.
    pub fn min(&self, other: &Resources) -> Resources {
        let mut out = Resources::new(
            self.cpu_milli.min(other.cpu_milli),
            self.memory_bytes.min(other.memory_bytes),
            self.pods.min(other.pods),
        );
        for (name, _) in self.extended.0.iter().chain(&other.extended.0) {
            out.set_extended_shared(name, self.extended(name).min(other.extended(name)));
        }
        out
    }

    /// Whether every amount is zero.
    pub fn is_zero(&self) -> bool {
        self.cpu_milli == 0 && self.memory_bytes == 0 && self.pods == 0 && self.extended.is_empty()
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cpu={} memory={} pods={}",
            format_milli_cpu(self.cpu_milli),
            format_bytes(self.memory_bytes),
            self.pods
        )?;
        for (name, amount) in &self.extended {
            if is_bytes(name) {
                write!(f, " {name}={}", format_bytes(*amount))?;
            } else {
                write!(f, " {name}={amount}")?;
            }
        }
        Ok(())
    }
}

/// Resources counted in bytes besides memory: `ephemeral-storage` and `hugepages-<size>`.
pub fn is_bytes(name: &str) -> bool {
    name == "ephemeral-storage" || name.starts_with("hugepages-")
}

/// "1500m" → "1500m", "2000m" → "2".
pub fn format_milli_cpu(milli: i64) -> String {
    if milli % 1000 == 0 {
        format!("{}", milli / 1000)
    } else {
        format!("{milli}m")
    }
}

/// Bytes in the largest binary unit that divides them exactly ("1Gi", "512Mi", "100").
pub fn format_bytes(bytes: i64) -> String {
    for (unit, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
        if bytes != 0 && bytes % (1i64 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources(cpu: i64, memory: i64, pods: i64, gpus: i64) -> Resources {
        let mut r = Resources::new(cpu, memory, pods);
        r.set_extended(NVIDIA_GPU, gpus);
        r
    }

    proptest::proptest! {
        /// Fitting beside what a capacity already holds is fitting in what it has left.
        #[test]
        fn fitting_beside_is_fitting_in_what_is_left(
            req in (0i64..8, 0i64..8, 0i64..3, 0i64..3),
            used in (0i64..8, 0i64..8, 0i64..3, 0i64..3),
            cap in (0i64..12, 0i64..12, 0i64..4, 0i64..4),
        ) {
            let req = resources(req.0, req.1, req.2, req.3);
            let used = resources(used.0, used.1, used.2, used.3);
            let capacity = resources(cap.0, cap.1, cap.2, cap.3);
            let mut left = capacity.clone();
            left.sub(&used);
            proptest::prop_assert_eq!(req.fits_beside(&used, &capacity), req.fits_in(&left));
        }

        /// The dominant share is the largest of each amount over what the machine has, an
        /// extended resource the pods use but the machine lacks left out.
        #[test]
        fn the_dominant_share_is_the_fullest_resource(
            used in proptest::collection::vec(0i64..6, 5),
            has in proptest::collection::vec(0i64..6, 5),
        ) {
            let names = ["a.io/x", "b.io/y", NVIDIA_GPU];
            let mut u = Resources::new(used[0], used[1], 1);
            let mut a = Resources::new(has[0] + 1, has[1] + 1, 110);
            for (i, name) in names.iter().enumerate().skip(1) {
                u.set_extended(name, used[i + 1]);
            }
            for (i, name) in names.iter().enumerate().take(2) {
                a.set_extended(name, has[i + 2]);
            }
            let ratio = |x: i64, of: i64| if of > 0 { (x as f64 / of as f64).min(1.0) } else { 0.0 };
            let mut expected = ratio(u.cpu_milli, a.cpu_milli).max(ratio(u.memory_bytes, a.memory_bytes));
            for (name, of) in &a.extended {
                expected = expected.max(ratio(u.extended.get(name).copied().unwrap_or(0), *of));
            }
            proptest::prop_assert_eq!(u.dominant_share_of(&a), expected);
        }
    }

    proptest::proptest! {
        /// Extended resources are written (and shown) as the map of names to amounts they are,
        /// byte for byte in the log's format and in JSON, and read back the same, whatever
        /// order the names were set in.
        #[test]
        fn extended_resources_serialize_as_their_map(
            amounts in proptest::collection::vec(
                (proptest::sample::select(vec!["nvidia.com/gpu", "ephemeral-storage", "a.io/x", "amd.com/gpu"]), -3i64..9),
                0..6,
            ),
        ) {
            let map: BTreeMap<String, i64> = amounts.iter().map(|(n, a)| (n.to_string(), *a)).collect();
            let mut extended = Extended::new();
            for (name, amount) in &amounts {
                extended.insert(name, *amount);
            }
            proptest::prop_assert!(extended.keys().collect::<Vec<_>>().is_sorted());
            let as_map = postcard::to_stdvec(&map).expect("a map serializes");
            proptest::prop_assert_eq!(&postcard::to_stdvec(&extended).expect("serializes"), &as_map);
            proptest::prop_assert_eq!(
                serde_json::to_string(&extended).expect("serializes"),
                serde_json::to_string(&map).expect("a map serializes")
            );
            proptest::prop_assert_eq!(format!("{extended:?}"), format!("{map:?}"));
            let back: Extended = postcard::from_bytes(&as_map).expect("reads back");
            proptest::prop_assert_eq!(back, extended);
        }
    }

    #[test]
    fn arithmetic_keeps_extended_resources_exact() {
        let a = Resources::new(1000, 1 << 30, 1).with_extended(NVIDIA_GPU, 1);
        let b = Resources::new(500, 1 << 29, 1).with_extended(NVIDIA_GPU, 1);
        let sum = a.plus(&b);
        assert_eq!(sum.cpu_milli, 1500);
        assert_eq!(sum.extended(NVIDIA_GPU), 2);
        let back = sum.minus(&b);
        assert_eq!(back, a);
        assert_eq!(a.minus(&a).extended.len(), 0);
    }

    #[test]
    fn fit_names_the_first_short_resource() {
        let capacity = Resources::new(2000, 8 << 30, 29);
        assert!(Resources::new(2000, 8 << 30, 29).fits_in(&capacity));
        assert_eq!(
            Resources::new(2001, 0, 0).first_excess(&capacity),
            Some("cpu")
        );
        let gpu = Resources::new(1, 1, 1).with_extended(NVIDIA_GPU, 1);
        assert_eq!(gpu.first_excess(&capacity), Some(NVIDIA_GPU));
        let huge = Resources::new(1, 1, 1).with_extended("hugepages-2Mi", 1 << 30);
        assert_eq!(huge.first_excess(&capacity), Some("hugepages-2Mi"));
        assert_eq!(huge.to_string(), "cpu=1m memory=1 pods=1 hugepages-2Mi=1Gi");
    }

    #[test]
    fn display_is_readable() {
        let r = Resources::new(1500, 512 << 20, 3);
        assert_eq!(r.to_string(), "cpu=1500m memory=512Mi pods=3");
    }
}
