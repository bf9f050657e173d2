//! Values by name, walked in name order and found by the name's hash.
//!
//! The state's nodes and NodeClaims are read by name many times an event (a disruption pass
//! looks up every machine's node and pool; a drain, a bind, a re-list each find theirs). A
//! B-tree compares the name with a dozen others on the way down, and the names of one cluster
//! share long prefixes; a hash finds it with one comparison. Every walk is in name order, as a
//! `BTreeMap`'s, so no decision depends on the hash: the index only answers where one name is
//! (a new or removed name moves the places after it, whatever their order in the index). It
//! serializes as the map it is, with the same bytes as a `BTreeMap`.
//!
//! A lookup costs one hash; a name put in or taken out costs a move of the names after it and a
//! pass over the index (a machine launched or gone, far rarer than its lookups). A map built in
//! name order only appends.

use std::fmt;
use std::hash::BuildHasher;

use foldhash::fast::FixedState;
use hashbrown::HashTable;
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Values by name: in name order for every walk, found by name through a hash index.
pub struct NameMap<V> {
    /// In name order. Each value is boxed, so that a name put in the middle moves pointers, not
    /// the values.
    entries: Vec<(String, Box<V>)>,
    /// The place in `entries` of each name, found by the name's hash.
    index: HashTable<usize>,
}

/// The same seed in every process: what is found never depends on it, and nothing random
/// enters the core.
fn hash_of(name: &str) -> u64 {
    FixedState::default().hash_one(name)
}

impl<V> NameMap<V> {
    /// An empty map.
    pub fn new() -> Self {
        NameMap {
            entries: Vec::new(),
            index: HashTable::new(),
        }
    }

    /// How many names it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The place of `name` in `entries`.
    fn place(&self, name: &str) -> Option<usize> {
        let entries = &self.entries;
        self.index
            .find(hash_of(name), |&at| entries[at].0 == name)
            .copied()
    }

    /// The value under `name`.
    pub fn get(&self, name: &str) -> Option<&V> {
        self.place(name).map(|at| &*self.entries[at].1)
    }

    /// The value under `name`, to change.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut V> {
        self.place(name).map(|at| &mut *self.entries[at].1)
    }

    /// Whether it holds `name`.
    pub fn contains_key(&self, name: &str) -> bool {
        self.place(name).is_some()
    }

    /// Puts `value` under `name`; returns the value it replaces.
    pub fn insert(&mut self, name: String, value: V) -> Option<V> {
        if let Some(at) = self.place(&name) {
            return Some(std::mem::replace(&mut *self.entries[at].1, value));
        }
        let at = self.entries.partition_point(|(held, _)| *held < name);
        if at < self.entries.len() {
            // The names after it move one place on.
            for place in self.index.iter_mut() {
                if *place >= at {
                    *place += 1;
                }
            }
        }
        let hash = hash_of(&name);
        self.entries.insert(at, (name, Box::new(value)));
        let entries = &self.entries;
        self.index
            .insert_unique(hash, at, |&p| hash_of(&entries[p].0));
        debug_assert!(self.holds_around(at));
        None
    }

    /// Takes `name` out; returns its value.
    pub fn remove(&mut self, name: &str) -> Option<V> {
        let entries = &self.entries;
        let found = self
            .index
            .find_entry(hash_of(name), |&at| entries[at].0 == name)
            .ok()?;
        let (at, _) = found.remove();
        if at + 1 < self.entries.len() {
            // The names after it move one place back.
            for place in self.index.iter_mut() {
                if *place > at {
                    *place -= 1;
                }
            }
        }
        let (_, value) = self.entries.remove(at);
        debug_assert!(self.holds_around(at));
        Some(*value)
    }

    /// Keeps the entries `keep` says to keep, in name order.
    pub fn retain(&mut self, mut keep: impl FnMut(&String, &mut V) -> bool) {
        let before = self.entries.len();
        self.entries.retain_mut(|(name, value)| keep(name, value));
        if self.entries.len() != before {
            self.reindex();
        }
    }

    /// The names and their values, in name order.
    pub fn iter(&self) -> Iter<'_, V> {
        Iter(self.entries.iter())
    }

    /// The names, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.entries.iter().map(|(name, _)| name)
    }

    /// The values, in name order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.entries.iter().map(|(_, value)| &**value)
    }

    /// The index made again from `entries`.
    fn reindex(&mut self) {
        self.index.clear();
        let entries = &self.entries;
        for (at, (name, _)) in entries.iter().enumerate() {
            self.index
                .insert_unique(hash_of(name), at, |&p| hash_of(&entries[p].0));
        }
        debug_assert!(self.holds_together());
    }

    /// Entries in name order (any order, a name given twice keeping its last value, as a
    /// `BTreeMap` collects them).
    fn from_entries(mut entries: Vec<(String, Box<V>)>) -> Self {
        // Stable: of equal names, the last given is last.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut kept: Vec<(String, Box<V>)> = Vec::with_capacity(entries.len());
        for (name, value) in entries {
            match kept.last_mut() {
                Some(last) if last.0 == name => last.1 = value,
                _ => kept.push((name, value)),
            }
        }
        let mut map = NameMap {
            entries: kept,
            index: HashTable::new(),
        };
        map.reindex();
        map
    }

    /// The invariants every method keeps: the names in strict order, each found at its place,
    /// and nothing else in the index. A pass over every name: for tests and for whole rebuilds.
    fn holds_together(&self) -> bool {
        self.entries.windows(2).all(|w| w[0].0 < w[1].0)
            && self.index.len() == self.entries.len()
            && self
                .entries
                .iter()
                .enumerate()
                .all(|(at, (name, _))| self.place(name) == Some(at))
    }

    /// [`NameMap::holds_together`] where one name went in or out, at `at`: its neighbours in
    /// order and each found at its place, and the index as long as the entries. A few lookups,
    /// so that debug builds check every change without a pass over every name.
    fn holds_around(&self, at: usize) -> bool {
        let from = at.saturating_sub(1);
        let to = (at + 2).min(self.entries.len());
        self.index.len() == self.entries.len()
            && self.entries[from..to].windows(2).all(|w| w[0].0 < w[1].0)
            && (from..to).all(|p| self.place(&self.entries[p].0) == Some(p))
    }
}

impl<V> Default for NameMap<V> {
    fn default() -> Self {
        NameMap::new()
    }
}

impl<V: Clone> Clone for NameMap<V> {
    fn clone(&self) -> Self {
        NameMap {
            entries: self.entries.clone(),
            index: self.index.clone(),
        }
    }
}

impl<V: PartialEq> PartialEq for NameMap<V> {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
    }
}

impl<V: fmt::Debug> fmt::Debug for NameMap<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V> std::ops::Index<&str> for NameMap<V> {
    type Output = V;

    /// The value under `name`; panics when it holds none (as a `BTreeMap`'s index does).
    fn index(&self, name: &str) -> &V {
        match self.get(name) {
            Some(value) => value,
            None => panic!("no entry named {name:?}"),
        }
    }
}

impl<V> std::ops::Index<&String> for NameMap<V> {
    type Output = V;

    fn index(&self, name: &String) -> &V {
        &self[name.as_str()]
    }
}

impl<V> FromIterator<(String, V)> for NameMap<V> {
    /// As a `BTreeMap` collects: in any order, a name given twice keeping its last value.
    fn from_iter<I: IntoIterator<Item = (String, V)>>(items: I) -> Self {
        NameMap::from_entries(
            items
                .into_iter()
                .map(|(name, value)| (name, Box::new(value)))
                .collect(),
        )
    }
}

/// The names and values of a [`NameMap`], in name order.
pub struct Iter<'a, V>(std::slice::Iter<'a, (String, Box<V>)>);

impl<'a, V> Iterator for Iter<'a, V> {
    type Item = (&'a String, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(name, value)| (name, &**value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<V> DoubleEndedIterator for Iter<'_, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(name, value)| (name, &**value))
    }
}

impl<V> ExactSizeIterator for Iter<'_, V> {}

impl<'a, V> IntoIterator for &'a NameMap<V> {
    type Item = (&'a String, &'a V);
    type IntoIter = Iter<'a, V>;

    fn into_iter(self) -> Iter<'a, V> {
        self.iter()
    }
}

impl<V: Serialize> Serialize for NameMap<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (name, value) in self {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for NameMap<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Names<V>(std::marker::PhantomData<V>);

        impl<'de, V: Deserialize<'de>> Visitor<'de> for Names<V> {
            type Value = NameMap<V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of names to values")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<NameMap<V>, A::Error> {
                // A declared length is not yet a promise: at most a mebibyte is set aside
                // before the entries are read (serde's own bound).
                let most = (1 << 20) / std::mem::size_of::<(String, Box<V>)>();
                let mut entries = Vec::with_capacity(access.size_hint().unwrap_or(0).min(most));
                while let Some((name, value)) = access.next_entry::<String, V>()? {
                    entries.push((name, Box::new(value)));
                }
                Ok(NameMap::from_entries(entries))
            }
        }

        deserializer.deserialize_map(Names(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    /// One change of a map, as the state makes them.
    #[derive(Debug, Clone)]
    enum Change {
        Insert(String, u32),
        Remove(String),
        Retain(u32),
    }

    fn change() -> impl Strategy<Value = Change> {
        // Few names, sharing a prefix, so that changes meet the same names often.
        let name = (0u8..24).prop_map(|n| format!("default-{n:02}"));
        prop_oneof![
            4 => (name.clone(), any::<u32>()).prop_map(|(n, v)| Change::Insert(n, v)),
            2 => name.prop_map(Change::Remove),
            1 => (2u32..5).prop_map(Change::Retain),
        ]
    }

    proptest! {
        /// Whatever changes come, it answers as a `BTreeMap` does: every lookup, every walk,
        /// and its bytes.
        #[test]
        fn answers_as_a_btree_map(changes in proptest::collection::vec(change(), 0..80)) {
            let mut map: NameMap<u32> = NameMap::new();
            let mut model: BTreeMap<String, u32> = BTreeMap::new();
            for change in changes {
                match change {
                    Change::Insert(name, value) => {
                        prop_assert_eq!(map.insert(name.clone(), value), model.insert(name, value));
                    }
                    Change::Remove(name) => {
                        prop_assert_eq!(map.remove(&name), model.remove(&name));
                    }
                    Change::Retain(modulus) => {
                        map.retain(|_, v| *v % modulus != 0);
                        model.retain(|_, v| *v % modulus != 0);
                    }
                }
                prop_assert!(map.holds_together());
                prop_assert_eq!(map.len(), model.len());
                prop_assert!(map.iter().eq(model.iter()));
                for n in 0u8..24 {
                    let name = format!("default-{n:02}");
                    prop_assert_eq!(map.get(&name), model.get(&name));
                    prop_assert_eq!(map.contains_key(&name), model.contains_key(&name));
                }
            }
            let bytes = postcard::to_stdvec(&map).expect("encodes");
            prop_assert_eq!(&bytes, &postcard::to_stdvec(&model).expect("encodes"));
            let back: NameMap<u32> = postcard::from_bytes(&bytes).expect("decodes");
            prop_assert!(back == map);
            prop_assert!(back.holds_together());
        }
    }

    proptest! {
        /// Decoded from entries in any order, names given twice among them, it holds what a
        /// `BTreeMap` decoded from the same bytes holds (postcard encodes a list of pairs as it
        /// encodes a map), and so does one collected from them.
        #[test]
        fn decodes_and_collects_as_a_btree_map(
            pairs in proptest::collection::vec(((0u8..40).prop_map(|n| format!("n-{n}")), any::<u32>()), 0..120)
        ) {
            let bytes = postcard::to_stdvec(&pairs).expect("encodes");
            let map: NameMap<u32> = postcard::from_bytes(&bytes).expect("decodes");
            let model: BTreeMap<String, u32> = postcard::from_bytes(&bytes).expect("decodes");
            prop_assert!(map.holds_together());
            prop_assert!(map.iter().eq(model.iter()));
            let json = format!(
                "{{{}}}",
                pairs
                    .iter()
                    .map(|(name, value)| format!("{name:?}:{value}"))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            let map: NameMap<u32> = serde_json::from_str(&json).expect("decodes");
            let model: BTreeMap<String, u32> = serde_json::from_str(&json).expect("decodes");
            prop_assert!(map.iter().eq(model.iter()));
            let collected: NameMap<u32> = pairs.iter().cloned().collect();
            let model: BTreeMap<String, u32> = pairs.into_iter().collect();
            prop_assert!(collected.iter().eq(model.iter()));
            prop_assert_eq!(
                serde_json::to_string(&collected).expect("encodes"),
                serde_json::to_string(&model).expect("encodes")
            );
        }
    }

    #[test]
    fn a_length_declared_past_the_input_is_an_error_not_a_reservation() {
        // A map of 2^32 entries declared, none given.
        let bytes = [0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(postcard::from_bytes::<NameMap<u32>>(&bytes).is_err());
    }
}
