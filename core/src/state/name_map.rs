//! Values by name, walked in name order and found by the name's hash.
//!
//! The state's nodes and NodeClaims are read by name many times an event (a disruption pass
//! looks up every machine's node and pool; a drain, a bind, a re-list each find theirs). A
//! B-tree compares the name with a dozen others on the way down, and the names of one cluster
//! share long prefixes; a hash finds it with one comparison. Every walk is in name order, as a
//! `BTreeMap`'s, so no decision depends on the hash: the index is only ever asked for one name,
//! never walked. It serializes as the map it is, with the same bytes as a `BTreeMap`.

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
    index: HashTable<u32>,
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
            .find(hash_of(name), |&at| entries[at as usize].0 == name)
            .map(|&at| at as usize)
    }

    /// The value under `name`.
    pub fn get(&self, name: &str) -> Option<&V> {
        self.place(name).map(|at| &*self.entries[at].1)
    }

    /// The value under `name`, to change.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut V> {
        self.place(name).map(|at| &mut *self.entries[at].1)
    }

    /// The name as held and its value.
    pub fn get_key_value(&self, name: &str) -> Option<(&String, &V)> {
        self.place(name).map(|at| {
            let (name, value) = &self.entries[at];
            (name, &**value)
        })
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
        // The names after it move one place on.
        for place in self.index.iter_mut() {
            if *place as usize >= at {
                *place += 1;
            }
        }
        let hash = hash_of(&name);
        self.entries.insert(at, (name, Box::new(value)));
        let entries = &self.entries;
        self.index
            .insert_unique(hash, as_place(at), |&p| hash_of(&entries[p as usize].0));
        debug_assert!(self.holds_together());
        None
    }

    /// Takes `name` out; returns its value.
    pub fn remove(&mut self, name: &str) -> Option<V> {
        self.remove_entry(name).map(|(_, value)| value)
    }

    /// Takes `name` out; returns the name as held and its value.
    pub fn remove_entry(&mut self, name: &str) -> Option<(String, V)> {
        let entries = &self.entries;
        let found = self
            .index
            .find_entry(hash_of(name), |&at| entries[at as usize].0 == name)
            .ok()?;
        let (at, _) = found.remove();
        let at = at as usize;
        // The names after it move one place back.
        for place in self.index.iter_mut() {
            if *place as usize > at {
                *place -= 1;
            }
        }
        let (name, value) = self.entries.remove(at);
        debug_assert!(self.holds_together());
        Some((name, *value))
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

    /// The names and their values to change, in name order.
    pub fn iter_mut(&mut self) -> IterMut<'_, V> {
        IterMut(self.entries.iter_mut())
    }

    /// The names, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.entries.iter().map(|(name, _)| name)
    }

    /// The values, in name order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.entries.iter().map(|(_, value)| &**value)
    }

    /// The values to change, in name order.
    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> + ExactSizeIterator {
        self.entries.iter_mut().map(|(_, value)| &mut **value)
    }

    /// The first name in order and its value.
    pub fn first_key_value(&self) -> Option<(&String, &V)> {
        self.entries.first().map(|(name, value)| (name, &**value))
    }

    /// The index made again from `entries`.
    fn reindex(&mut self) {
        self.index.clear();
        for (at, (name, _)) in self.entries.iter().enumerate() {
            let entries = &self.entries;
            self.index.insert_unique(hash_of(name), as_place(at), |&p| {
                hash_of(&entries[p as usize].0)
            });
        }
        debug_assert!(self.holds_together());
    }

    /// The invariants every method keeps: the names in strict order, each found at its place.
    fn holds_together(&self) -> bool {
        self.entries.windows(2).all(|w| w[0].0 < w[1].0)
            && self.index.len() == self.entries.len()
            && self
                .entries
                .iter()
                .enumerate()
                .all(|(at, (name, _))| self.place(name) == Some(at))
    }
}

/// A place in `entries` as the index holds it. A state holds far fewer than 2³² nodes or
/// NodeClaims (each is a machine): one more would be a broken state, not a larger one.
fn as_place(at: usize) -> u32 {
    u32::try_from(at).expect("fewer than 2^32 names")
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
    /// As a `BTreeMap` collects: a name given twice keeps its last value.
    fn from_iter<I: IntoIterator<Item = (String, V)>>(items: I) -> Self {
        let mut sorted: Vec<(String, V)> = items.into_iter().collect();
        // Stable: of equal names, the last given is last, and is kept.
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let mut entries: Vec<(String, Box<V>)> = Vec::with_capacity(sorted.len());
        for (name, value) in sorted {
            match entries.last_mut() {
                Some(last) if last.0 == name => *last.1 = value,
                _ => entries.push((name, Box::new(value))),
            }
        }
        let mut map = NameMap {
            entries,
            index: HashTable::new(),
        };
        map.reindex();
        map
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

/// The names and values of a [`NameMap`] to change, in name order.
pub struct IterMut<'a, V>(std::slice::IterMut<'a, (String, Box<V>)>);

impl<'a, V> Iterator for IterMut<'a, V> {
    type Item = (&'a String, &'a mut V);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(name, value)| (&*name, &mut **value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<V> ExactSizeIterator for IterMut<'_, V> {}

impl<'a, V> IntoIterator for &'a NameMap<V> {
    type Item = (&'a String, &'a V);
    type IntoIter = Iter<'a, V>;

    fn into_iter(self) -> Iter<'a, V> {
        self.iter()
    }
}

impl<'a, V> IntoIterator for &'a mut NameMap<V> {
    type Item = (&'a String, &'a mut V);
    type IntoIter = IterMut<'a, V>;

    fn into_iter(self) -> IterMut<'a, V> {
        self.iter_mut()
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
                // A bound on what is set aside before a single entry is read: a declared
                // length is not yet a promise.
                let mut items = Vec::with_capacity(access.size_hint().unwrap_or(0).min(4096));
                while let Some(item) = access.next_entry::<String, V>()? {
                    items.push(item);
                }
                Ok(items.into_iter().collect())
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

    #[test]
    fn a_name_given_twice_keeps_its_last_value_as_a_btree_map_does() {
        let items = vec![
            ("b".to_string(), 1),
            ("a".to_string(), 2),
            ("b".to_string(), 3),
        ];
        let map: NameMap<u32> = items.clone().into_iter().collect();
        let model: BTreeMap<String, u32> = items.into_iter().collect();
        assert!(map.iter().eq(model.iter()));
        assert!(map.holds_together());
        let json = serde_json::to_string(&map).expect("encodes");
        assert_eq!(json, serde_json::to_string(&model).expect("encodes"));
        let back: NameMap<u32> = serde_json::from_str(&json).expect("decodes");
        assert!(back == map);
    }
}
