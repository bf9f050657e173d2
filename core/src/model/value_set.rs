//! A small ordered set of label values.
//!
//! Most requirements hold one value (an instance type's `kubernetes.io/arch In [amd64]`), and the
//! prepared catalog keeps about twenty of them for each of more than a thousand types. A sorted
//! `Vec` stores one value in one allocation where a `BTreeSet` takes a whole tree node; lookups
//! are a binary search. It serializes and hashes exactly as a `BTreeSet<String>` does (a
//! sequence in ascending order), so logs, digests and drift hashes do not change with it.

use std::fmt;

use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

/// Distinct strings in ascending order.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ValueSet(Vec<String>);

impl ValueSet {
    /// No value.
    pub fn new() -> Self {
        ValueSet(Vec::new())
    }

    /// How many values.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no value.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `value` is in it.
    pub fn contains(&self, value: &str) -> bool {
        self.0.binary_search_by(|v| v.as_str().cmp(value)).is_ok()
    }

    /// Adds a value; false when it was already there.
    pub fn insert(&mut self, value: String) -> bool {
        match self.0.binary_search(&value) {
            Ok(_) => false,
            Err(at) => {
                self.0.insert(at, value);
                true
            }
        }
    }

    /// The values, in ascending order.
    pub fn iter(&self) -> std::slice::Iter<'_, String> {
        self.0.iter()
    }

    /// The smallest value.
    pub fn first(&self) -> Option<&String> {
        self.0.first()
    }

    /// Keeps the values `keep` says yes to.
    pub fn retain(&mut self, keep: impl FnMut(&String) -> bool) {
        self.0.retain(keep);
    }

    /// The values in either set.
    pub fn union(&self, other: &ValueSet) -> ValueSet {
        let mut out = Vec::with_capacity(self.len() + other.len());
        let (mut a, mut b) = (self.0.iter().peekable(), other.0.iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => match x.cmp(y) {
                    std::cmp::Ordering::Less => a.next(),
                    std::cmp::Ordering::Greater => b.next(),
                    std::cmp::Ordering::Equal => {
                        b.next();
                        a.next()
                    }
                },
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => break,
            };
            out.extend(next.cloned());
        }
        ValueSet(out)
    }

    /// The values in both sets.
    pub fn intersection(&self, other: &ValueSet) -> ValueSet {
        self.filtered(|v| other.contains(v))
    }

    /// The values of `self` not in `other`.
    pub fn difference(&self, other: &ValueSet) -> ValueSet {
        self.filtered(|v| !other.contains(v))
    }

    fn filtered(&self, mut keep: impl FnMut(&str) -> bool) -> ValueSet {
        ValueSet(self.0.iter().filter(|v| keep(v)).cloned().collect())
    }
}

impl FromIterator<String> for ValueSet {
    fn from_iter<I: IntoIterator<Item = String>>(iter: I) -> Self {
        let mut values: Vec<String> = iter.into_iter().collect();
        values.sort_unstable();
        values.dedup();
        values.shrink_to_fit();
        ValueSet(values)
    }
}

impl<'a> IntoIterator for &'a ValueSet {
    type Item = &'a String;
    type IntoIter = std::slice::Iter<'a, String>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<'de> Deserialize<'de> for ValueSet {
    /// Any sequence of strings; out-of-order or repeated values are put in order, as a
    /// `BTreeSet` would.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Values;
        impl<'de> Visitor<'de> for Values {
            type Value = ValueSet;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence of strings")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ValueSet, A::Error> {
                let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(value) = seq.next_element::<String>()? {
                    values.push(value);
                }
                Ok(values.into_iter().collect())
            }
        }
        deserializer.deserialize_seq(Values)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn set(values: &[&str]) -> ValueSet {
        values.iter().map(|v| v.to_string()).collect()
    }

    #[test]
    fn keeps_values_sorted_and_distinct() {
        let s = set(&["b", "a", "b"]);
        assert_eq!(s.iter().collect::<Vec<_>>(), ["a", "b"]);
        assert!(s.contains("a") && !s.contains("c"));
    }

    proptest! {
        /// Every operation agrees with `BTreeSet`, and the encoding is the same bytes.
        #[test]
        fn behaves_like_a_btreeset(
            a in proptest::collection::vec("[a-e]{1,2}", 0..8),
            b in proptest::collection::vec("[a-e]{1,2}", 0..8),
            extra in "[a-e]{1,2}",
        ) {
            let (sa, sb): (ValueSet, ValueSet) =
                (a.iter().cloned().collect(), b.iter().cloned().collect());
            let (ta, tb): (BTreeSet<String>, BTreeSet<String>) =
                (a.iter().cloned().collect(), b.iter().cloned().collect());
            let list = |s: &ValueSet| s.iter().cloned().collect::<Vec<_>>();
            let tlist = |s: BTreeSet<String>| s.into_iter().collect::<Vec<_>>();
            prop_assert_eq!(list(&sa.union(&sb)), tlist(ta.union(&tb).cloned().collect()));
            prop_assert_eq!(
                list(&sa.intersection(&sb)),
                tlist(ta.intersection(&tb).cloned().collect())
            );
            prop_assert_eq!(
                list(&sa.difference(&sb)),
                tlist(ta.difference(&tb).cloned().collect())
            );
            let (mut sx, mut tx) = (sa.clone(), ta.clone());
            prop_assert_eq!(sx.insert(extra.clone()), tx.insert(extra));
            prop_assert_eq!(list(&sx), tlist(tx.clone()));
            let bytes = postcard::to_allocvec(&sx).unwrap();
            prop_assert_eq!(&bytes, &postcard::to_allocvec(&tx).unwrap());
            prop_assert_eq!(postcard::from_bytes::<ValueSet>(&bytes).unwrap(), sx);
        }
    }
}
