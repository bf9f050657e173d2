//! Node selector requirements and their set algebra, as Karpenter models them.
//!
//! A [`Requirement`] is the set of values a label key may take: a finite set (`In`,
//! `DoesNotExist` = the empty set) or the complement of one (`NotIn`, `Exists`), optionally
//! bounded by integer bounds (`Gt`, `Lt`). [`Requirements`] holds one requirement per key; two
//! requirement sets intersect key by key.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::labels;
use super::value_set::ValueSet;

/// A node selector operator as users write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Operator {
    /// One of `values`.
    In,
    /// None of `values` (or no label at all).
    NotIn,
    /// Any value.
    Exists,
    /// No label.
    DoesNotExist,
    /// An integer greater than the one value.
    Gt,
    /// An integer less than the one value.
    Lt,
    /// An integer at least the one value.
    Gte,
    /// An integer at most the one value.
    Lte,
}

impl Operator {
    /// The operator as written (`In`, `NotIn`...); `None` for any other word.
    pub fn parse(raw: &str) -> Option<Operator> {
        Some(match raw {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            "Gte" => Operator::Gte,
            "Lte" => Operator::Lte,
            _ => return None,
        })
    }

    /// Every operator as written, for an error that names them.
    pub const NAMES: &'static str = "In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte";
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// One requirement as written in YAML: `{key, operator, values, minValues}`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RequirementSpec {
    /// The label key.
    pub key: String,
    /// How the values are read.
    pub operator: Operator,
    /// The values, as written.
    pub values: Vec<String>,
    /// `minValues`: a machine's options must span at least this many values of the key.
    pub min_values: Option<u32>,
}

/// Why a requirement as written cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RequirementError {
    /// `In`/`NotIn` without values.
    #[error("operator {operator} on key {key:?} needs at least one value in `values`")]
    MissingValues {
        /// The key.
        key: String,
        /// The operator.
        operator: Operator,
    },
    /// `Exists`/`DoesNotExist` with values.
    #[error("operator {operator} on key {key:?} takes no values; remove `values`")]
    UnexpectedValues {
        /// The key.
        key: String,
        /// The operator.
        operator: Operator,
    },
    /// `Gt`/`Lt`/`Gte`/`Lte` without exactly one integer.
    #[error("operator {operator} on key {key:?} takes exactly one integer value, got {values:?}")]
    NotOneInteger {
        /// The key.
        key: String,
        /// The operator.
        operator: Operator,
        /// The values given.
        values: Vec<String>,
    },
    /// An empty key.
    #[error("key must not be empty")]
    EmptyKey,
}

impl RequirementSpec {
    /// A requirement as written, without `minValues`.
    pub fn new(key: &str, operator: Operator, values: &[&str]) -> Self {
        RequirementSpec {
            key: key.to_string(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        }
    }

    /// Checks the operator/values shape (In and NotIn need values, Exists takes none, Gt and Lt
    /// take one integer).
    pub fn validate(&self) -> Result<(), RequirementError> {
        if self.key.is_empty() {
            return Err(RequirementError::EmptyKey);
        }
        match self.operator {
            Operator::In | Operator::NotIn if self.values.is_empty() => {
                Err(RequirementError::MissingValues {
                    key: self.key.clone(),
                    operator: self.operator,
                })
            }
            Operator::Exists | Operator::DoesNotExist if !self.values.is_empty() => {
                Err(RequirementError::UnexpectedValues {
                    key: self.key.clone(),
                    operator: self.operator,
                })
            }
            Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte
                if self.values.len() != 1 || self.values[0].parse::<i64>().is_err() =>
            {
                Err(RequirementError::NotOneInteger {
                    key: self.key.clone(),
                    operator: self.operator,
                    values: self.values.clone(),
                })
            }
            _ => Ok(()),
        }
    }

    /// The set this requirement allows. Call [`RequirementSpec::validate`] first; an invalid
    /// integer bound is read as "no value allowed".
    pub fn to_requirement(&self) -> Requirement {
        let key = self.key.clone();
        let bound = || self.values.first().and_then(|v| v.parse::<i64>().ok());
        let mut r = match self.operator {
            Operator::In => Requirement::values_in(&key, self.values.iter().cloned()),
            Operator::NotIn => Requirement::values_not_in(&key, self.values.iter().cloned()),
            Operator::Exists => Requirement::exists(&key),
            Operator::DoesNotExist => Requirement::does_not_exist(&key),
            Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte => match bound() {
                None => Requirement::does_not_exist(&key),
                Some(n) => {
                    let mut r = Requirement::exists(&key);
                    match self.operator {
                        Operator::Gt => r.greater_than = Some(n),
                        Operator::Gte => r.greater_than = Some(n.saturating_sub(1)),
                        Operator::Lt => r.less_than = Some(n),
                        _ => r.less_than = Some(n.saturating_add(1)),
                    }
                    r
                }
            },
        };
        r.min_values = self.min_values;
        r
    }
}

impl fmt::Display for RequirementSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.to_requirement().fmt(f)
    }
}

/// The set of values one label key may take.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// When true the set is "every value except `values`"; when false it is exactly `values`.
    pub complement: bool,
    /// The values the set holds, or leaves out when `complement`.
    pub values: ValueSet,
    /// Only integer values strictly greater than this are allowed.
    pub greater_than: Option<i64>,
    /// Only integer values strictly less than this are allowed.
    pub less_than: Option<i64>,
    /// `minValues` of the requirement it came from.
    pub min_values: Option<u32>,
}

impl Requirement {
    /// `key In values`.
    pub fn values_in<I: IntoIterator<Item = String>>(key: &str, values: I) -> Self {
        Requirement {
            key: key.to_string(),
            complement: false,
            values: values.into_iter().collect(),
            greater_than: None,
            less_than: None,
            min_values: None,
        }
    }

    /// `key In [value]`.
    pub fn single(key: &str, value: &str) -> Self {
        Requirement::values_in(key, [value.to_string()])
    }

    /// `key NotIn values`.
    pub fn values_not_in<I: IntoIterator<Item = String>>(key: &str, values: I) -> Self {
        Requirement {
            complement: true,
            ..Requirement::values_in(key, values)
        }
    }

    /// `key Exists`.
    pub fn exists(key: &str) -> Self {
        Requirement::values_not_in(key, [])
    }

    /// `key DoesNotExist`.
    pub fn does_not_exist(key: &str) -> Self {
        Requirement::values_in(key, [])
    }

    /// The operator that best describes this set (Karpenter's `Operator()`).
    pub fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (true, true) if self.greater_than.is_some() => Operator::Gt,
            (true, true) if self.less_than.is_some() => Operator::Lt,
            (true, true) => Operator::Exists,
            (true, false) => Operator::NotIn,
            (false, true) => Operator::DoesNotExist,
            (false, false) => Operator::In,
        }
    }

    fn within_bounds(&self, value: &str) -> bool {
        if self.greater_than.is_none() && self.less_than.is_none() {
            return true;
        }
        let Ok(n) = value.parse::<i64>() else {
            return false;
        };
        self.greater_than.is_none_or(|gt| n > gt) && self.less_than.is_none_or(|lt| n < lt)
    }

    /// A value this requirement allows, for a label a node must carry (Karpenter's `Any()`,
    /// made deterministic): the first of an `In` set; for `Exists`, `NotIn`, `Gt` and `Lt` the
    /// smallest non-negative integer allowed (Karpenter draws a random one). None for
    /// `DoesNotExist`, or bounds that allow no integer.
    pub fn any_value(&self) -> Option<String> {
        if !self.complement {
            return self.values.iter().find(|v| self.within_bounds(v)).cloned();
        }
        let from = self
            .greater_than
            .map_or(0, |gt| gt.saturating_add(1))
            .max(0);
        let until = self.less_than.unwrap_or(i64::MAX);
        // The excluded values are finite: one of the first `len + 1` candidates is free.
        (from..until)
            .take(self.values.len() + 1)
            .map(|n| n.to_string())
            .find(|v| !self.values.contains(v))
    }

    /// Whether a label with this value satisfies the requirement.
    pub fn has(&self, value: &str) -> bool {
        let listed = self.values.contains(value);
        (listed != self.complement) && self.within_bounds(value)
    }

    /// Whether a node without this label satisfies the requirement (NotIn and DoesNotExist do,
    /// as in Kubernetes node affinity).
    pub fn allows_absence(&self) -> bool {
        matches!(self.operator(), Operator::NotIn | Operator::DoesNotExist)
    }

    /// Whether a node's labels satisfy this requirement.
    pub fn matches_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_value(labels.get(&self.key).map(String::as_str))
    }

    /// Whether a node whose label for this key has `value` (none: absent) satisfies it.
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        match value {
            Some(value) => self.has(value),
            None => self.allows_absence(),
        }
    }

    /// No value at all can satisfy it (the finite empty set).
    pub fn is_empty_set(&self) -> bool {
        if self.complement {
            matches!((self.greater_than, self.less_than), (Some(gt), Some(lt)) if gt.saturating_add(1) >= lt)
        } else {
            self.values.is_empty()
        }
    }

    /// The number of values, `None` when unbounded.
    pub fn len(&self) -> Option<usize> {
        if self.complement {
            None
        } else {
            Some(self.values.len())
        }
    }

    /// Whether no value satisfies it (`DoesNotExist`, or an intersection that left nothing).
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// Whether some value satisfies both requirements (the intersection is not empty), without
    /// building the intersection.
    pub fn overlaps(&self, other: &Requirement) -> bool {
        match (self.complement, other.complement) {
            (true, true) => {
                let gt = match (self.greater_than, other.greater_than) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                let lt = match (self.less_than, other.less_than) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                !matches!((gt, lt), (Some(g), Some(l)) if g.saturating_add(1) >= l)
            }
            (false, _) => self
                .values
                .iter()
                .any(|v| self.within_bounds(v) && other.has(v)),
            (true, false) => other
                .values
                .iter()
                .any(|v| other.within_bounds(v) && self.has(v)),
        }
    }

    /// The set of values both requirements allow.
    pub fn intersect(&self, other: &Requirement) -> Requirement {
        let greater_than = match (self.greater_than, other.greater_than) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let less_than = match (self.less_than, other.less_than) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let min_values = match (self.min_values, other.min_values) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let mut out = match (self.complement, other.complement) {
            (true, true) => Requirement {
                values: self.values.union(&other.values),
                ..self.clone()
            },
            (true, false) => Requirement {
                values: other.values.difference(&self.values),
                ..other.clone()
            },
            (false, true) => Requirement {
                values: self.values.difference(&other.values),
                ..self.clone()
            },
            (false, false) => Requirement {
                values: self.values.intersection(&other.values),
                ..self.clone()
            },
        };
        out.greater_than = greater_than;
        out.less_than = less_than;
        out.min_values = min_values;
        if !out.complement {
            // A finite set applies its bounds now.
            let bounded = out.clone();
            out.values.retain(|v| bounded.within_bounds(v));
            out.greater_than = None;
            out.less_than = None;
        }
        out
    }

    /// Values to show a user; a complement shows what is excluded.
    fn describe_values(&self) -> String {
        let list: Vec<&str> = self.values.iter().map(String::as_str).collect();
        format!("[{}]", list.join(","))
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.operator() {
            Operator::In => write!(f, "{} In {}", self.key, self.describe_values()),
            Operator::NotIn => write!(f, "{} NotIn {}", self.key, self.describe_values()),
            Operator::Exists => write!(f, "{} Exists", self.key),
            Operator::DoesNotExist => write!(f, "{} DoesNotExist", self.key),
            _ => {
                write!(f, "{}", self.key)?;
                if let Some(gt) = self.greater_than {
                    write!(f, " Gt {gt}")?;
                }
                if let Some(lt) = self.less_than {
                    write!(f, " Lt {lt}")?;
                }
                Ok(())
            }
        }
    }
}

/// Why two requirement sets cannot both hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The key they disagree on.
    pub key: String,
    /// What the incoming set asks of it.
    pub wanted: String,
    /// What the other set allows (empty: the key is not allowed at all).
    pub allowed: String,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.allowed.is_empty() {
            write!(
                f,
                "label {:?} has no known values ({} cannot be met)",
                self.key, self.wanted
            )
        } else {
            write!(f, "{} conflicts with {}", self.wanted, self.allowed)
        }
    }
}

/// One requirement per label key.
///
/// Stored as a `Vec` sorted by key (one allocation per set, binary search on lookup); it is
/// encoded as the map from key to requirement it stands for, so logs and drift hashes read the
/// same as when it was a `BTreeMap`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Requirements {
    #[serde(with = "by_key_map")]
    by_key: Vec<Requirement>,
}

/// `Requirements::by_key` on the wire: a map from each key to its requirement.
mod by_key_map {
    use std::collections::BTreeMap;

    use serde::ser::SerializeMap;
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Requirement;

    pub(super) fn serialize<S: Serializer>(
        by_key: &[Requirement],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(by_key.len()))?;
        for r in by_key {
            map.serialize_entry(&r.key, r)?;
        }
        map.end()
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<Requirement>, D::Error> {
        let map = BTreeMap::<String, Requirement>::deserialize(d)?;
        Ok(map
            .into_iter()
            .map(|(key, mut r)| {
                // The map's key names the requirement, as it did when the map was the storage.
                r.key = key;
                r
            })
            .collect())
    }
}

impl Requirements {
    /// No requirement: every label set meets it.
    pub fn new() -> Self {
        Requirements::default()
    }

    /// The requirements as written, those on one key intersected.
    pub fn from_specs(specs: &[RequirementSpec]) -> Self {
        let mut out = Requirements::new();
        for spec in specs {
            out.add(spec.to_requirement());
        }
        out
    }

    /// `key In [value]` for every label.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Self {
        let mut out = Requirements::new();
        for (k, v) in labels {
            out.add(Requirement::single(k, v));
        }
        out
    }

    /// Adds a requirement, intersecting with any existing one on the same key.
    pub fn add(&mut self, requirement: Requirement) {
        match self.position(&requirement.key) {
            Ok(at) => self.by_key[at] = self.by_key[at].intersect(&requirement),
            Err(at) => self.by_key.insert(at, requirement),
        }
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.by_key.binary_search_by(|r| r.key.as_str().cmp(key))
    }

    /// The requirement on `key`.
    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.position(key).ok().map(|at| &self.by_key[at])
    }

    /// [`Requirements::get`], trying position `hint` first: sets built alike (every instance
    /// type's) keep a key at the same position, so one comparison usually finds it.
    pub fn get_hinted(&self, key: &str, hint: usize) -> Option<&Requirement> {
        match self.by_key.get(hint) {
            Some(r) if r.key == key => Some(r),
            _ => self.get(key),
        }
    }

    /// Where `key` is, for [`Requirements::get_hinted`].
    pub fn position_of(&self, key: &str) -> Option<usize> {
        self.position(key).ok()
    }

    /// Whether there is a requirement on `key`.
    pub fn has_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// The requirements, by key.
    pub fn iter(&self) -> impl Iterator<Item = &Requirement> {
        self.by_key.iter()
    }

    /// How many keys have a requirement.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Gives back the spare room of the storage (for sets kept long).
    pub fn shrink_to_fit(&mut self) {
        self.by_key.shrink_to_fit();
    }

    /// Whether no key has a requirement.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// The intersection of both sets, key by key.
    pub fn intersect(&self, other: &Requirements) -> Requirements {
        let mut out = self.clone();
        for r in other.iter() {
            out.add(r.clone());
        }
        out
    }

    /// Karpenter's `Intersects`: on every key both define, some value must be allowed by both,
    /// unless both allow the label to be absent.
    pub fn intersects(&self, incoming: &Requirements) -> Result<(), Conflict> {
        match self.first_conflict(incoming) {
            None => Ok(()),
            Some((ours, theirs)) => Err(Conflict {
                key: theirs.key.clone(),
                wanted: theirs.to_string(),
                allowed: ours.to_string(),
            }),
        }
    }

    /// Whether [`Requirements::intersects`] holds, without describing the conflict (what the
    /// filters over a whole catalog ask: most types are refused, and a refusal's text is
    /// never read there).
    pub fn meets(&self, incoming: &Requirements) -> bool {
        self.first_conflict(incoming).is_none()
    }

    /// The first key both define (in key order) on which no value is allowed by both, and
    /// absence not by both: ours, then theirs.
    fn first_conflict<'a>(
        &'a self,
        incoming: &'a Requirements,
    ) -> Option<(&'a Requirement, &'a Requirement)> {
        // Both lists are in key order: one walk pairs the keys they share.
        let mut ours_iter = self.by_key.iter().peekable();
        for theirs in incoming.iter() {
            while ours_iter
                .next_if(|ours| ours.key.as_str() < theirs.key.as_str())
                .is_some()
            {}
            let Some(ours) = ours_iter.next_if(|ours| ours.key == theirs.key) else {
                continue;
            };
            let absent_allowed = theirs.allows_absence() && ours.allows_absence();
            if !(ours.overlaps(theirs) || absent_allowed) {
                return Some((ours, theirs));
            }
        }
        None
    }

    /// Karpenter's `Compatible`: like [`Requirements::intersects`], and a key `incoming` needs
    /// that `self` does not define is refused unless it is well-known (the instance types
    /// define it) or it only asks for absence.
    pub fn compatible(&self, incoming: &Requirements) -> Result<(), Conflict> {
        if let Some(theirs) = self.first_unknown_key(incoming) {
            return Err(Conflict {
                key: theirs.key.clone(),
                wanted: theirs.to_string(),
                allowed: String::new(),
            });
        }
        self.intersects(incoming)
    }

    /// Whether [`Requirements::compatible`] holds, without describing the conflict.
    pub fn admits(&self, incoming: &Requirements) -> bool {
        self.first_unknown_key(incoming).is_none() && self.meets(incoming)
    }

    /// The first key `incoming` needs that `self` does not define, is not well-known and
    /// does not only ask for absence.
    fn first_unknown_key<'a>(&self, incoming: &'a Requirements) -> Option<&'a Requirement> {
        incoming.iter().find(|theirs| {
            !self.has_key(&theirs.key)
                && !theirs.allows_absence()
                && !labels::is_well_known(&theirs.key)
        })
    }

    /// Whether a node with exactly these labels satisfies every requirement.
    pub fn matches_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.by_key.iter().all(|r| r.matches_labels(labels))
    }

    /// The first requirement a node with these labels fails.
    pub fn first_unmet(&self, labels: &BTreeMap<String, String>) -> Option<&Requirement> {
        self.by_key.iter().find(|r| !r.matches_labels(labels))
    }

    /// [`Requirements::first_unmet`] over labels read through `label` (key to value), for
    /// labels that are not kept in one map.
    pub fn first_unmet_with<'a>(
        &self,
        label: impl Fn(&str) -> Option<&'a str>,
    ) -> Option<&Requirement> {
        self.by_key.iter().find(|r| !r.matches_value(label(&r.key)))
    }

    /// The labels a machine launched for these requirements carries, as Karpenter gives them:
    /// a single-valued `In` gives its value on any key, and a requirement on a key outside the
    /// restricted domains ([`labels::is_restricted`]) gives a value it allows
    /// ([`Requirement::any_value`]), so that the node meets its NodePool's requirements and is
    /// not found drifted for lacking the label.
    pub fn node_labels(&self) -> BTreeMap<String, String> {
        self.by_key
            .iter()
            .filter_map(|r| {
                let value = if !r.complement && r.values.len() == 1 {
                    r.values.first().cloned()
                } else if labels::is_restricted(&r.key) {
                    None
                } else {
                    r.any_value()
                };
                value.map(|v| (r.key.clone(), v))
            })
            .collect()
    }
}

impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.by_key.iter().map(|r| r.to_string()).collect();
        write!(f, "{}", parts.join(" AND "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(key: &str, op: Operator, values: &[&str]) -> Requirement {
        RequirementSpec::new(key, op, values).to_requirement()
    }

    #[test]
    fn a_node_gets_a_value_each_requirement_allows() {
        // Karpenter's Any(): a value of an In set, an integer for Exists, NotIn, Gt and Lt.
        assert_eq!(
            spec("k", Operator::In, &["b", "a"]).any_value().as_deref(),
            Some("a")
        );
        assert_eq!(
            spec("k", Operator::Exists, &[]).any_value().as_deref(),
            Some("0")
        );
        assert_eq!(
            spec("k", Operator::NotIn, &["0", "1"])
                .any_value()
                .as_deref(),
            Some("2")
        );
        assert_eq!(
            spec("k", Operator::Gt, &["7"]).any_value().as_deref(),
            Some("8")
        );
        assert_eq!(spec("k", Operator::Lt, &["0"]).any_value(), None);
        assert_eq!(spec("k", Operator::DoesNotExist, &[]).any_value(), None);
        for r in [
            spec("k", Operator::In, &["x", "y"]),
            spec("k", Operator::Exists, &[]),
            spec("k", Operator::NotIn, &["0"]),
            spec("k", Operator::Gt, &["-5"]),
        ] {
            let value = r.any_value().expect("a value");
            assert!(r.has(&value), "{r}: {value}");
        }

        // Custom keys get one; restricted domains and the hostname get none unless single-valued.
        let reqs = Requirements::from_specs(&[
            RequirementSpec::new("example.com/team", Operator::In, &["b", "a"]),
            RequirementSpec::new("example.com/gpu", Operator::Exists, &[]),
            RequirementSpec::new(
                "karpenter.k8s.aws/instance-category",
                Operator::In,
                &["c", "m"],
            ),
            RequirementSpec::new("karpenter.sh/capacity-type", Operator::In, &["spot"]),
            RequirementSpec::new("kubernetes.io/hostname", Operator::Exists, &[]),
            RequirementSpec::new("node.kubernetes.io/lifecycle", Operator::In, &["x", "y"]),
        ]);
        let labels = reqs.node_labels();
        assert_eq!(
            labels,
            [
                ("example.com/gpu", "0"),
                ("example.com/team", "a"),
                ("karpenter.sh/capacity-type", "spot"),
                ("node.kubernetes.io/lifecycle", "x"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>()
        );
        // What the node lacks is only what the instance gives it (the category).
        assert_eq!(
            reqs.first_unmet(&labels).map(|r| r.key.as_str()),
            Some("karpenter.k8s.aws/instance-category")
        );
    }

    #[test]
    fn every_operator_has_the_right_set() {
        let in_ab = spec("k", Operator::In, &["a", "b"]);
        assert!(in_ab.has("a") && !in_ab.has("c") && !in_ab.allows_absence());
        let not_in = spec("k", Operator::NotIn, &["a"]);
        assert!(!not_in.has("a") && not_in.has("z") && not_in.allows_absence());
        let exists = spec("k", Operator::Exists, &[]);
        assert!(exists.has("anything") && !exists.allows_absence());
        let dne = spec("k", Operator::DoesNotExist, &[]);
        assert!(!dne.has("x") && dne.allows_absence());
        let gt = spec("k", Operator::Gt, &["4"]);
        assert!(gt.has("5") && !gt.has("4") && !gt.has("x"));
        let lt = spec("k", Operator::Lt, &["4"]);
        assert!(lt.has("3") && !lt.has("4"));
        let gte = spec("k", Operator::Gte, &["4"]);
        assert!(gte.has("4") && !gte.has("3"));
        let lte = spec("k", Operator::Lte, &["4"]);
        assert!(lte.has("4") && !lte.has("5"));
    }

    #[test]
    fn overlaps_agrees_with_intersect() {
        let cases = [
            spec("k", Operator::In, &["a", "b"]),
            spec("k", Operator::In, &["c"]),
            spec("k", Operator::NotIn, &["a"]),
            spec("k", Operator::Exists, &[]),
            spec("k", Operator::DoesNotExist, &[]),
            spec("k", Operator::Gt, &["2"]),
            spec("k", Operator::Lt, &["3"]),
            spec("k", Operator::In, &["1", "5"]),
        ];
        for a in &cases {
            for b in &cases {
                assert_eq!(a.overlaps(b), !a.intersect(b).is_empty_set(), "{a} / {b}");
            }
        }
    }

    #[test]
    fn intersections() {
        let in_abc = spec("k", Operator::In, &["a", "b", "c"]);
        let not_b = spec("k", Operator::NotIn, &["b"]);
        let both = in_abc.intersect(&not_b);
        assert_eq!(both.operator(), Operator::In);
        assert_eq!(both.values.len(), 2);
        let in_d = spec("k", Operator::In, &["d"]);
        assert!(in_abc.intersect(&in_d).is_empty_set());
        let gt = spec("k", Operator::Gt, &["2"]);
        let lt = spec("k", Operator::Lt, &["3"]);
        assert!(gt.intersect(&lt).is_empty_set());
        let nums = spec("k", Operator::In, &["1", "2", "3", "8"]);
        assert_eq!(nums.intersect(&gt).values.len(), 2);
    }

    #[test]
    fn compatible_refuses_unknown_custom_labels_but_not_well_known() {
        let pool =
            Requirements::from_specs(&[RequirementSpec::new("team", Operator::In, &["a", "b"])]);
        let pod_team =
            Requirements::from_specs(&[RequirementSpec::new("team", Operator::In, &["a"])]);
        assert!(pool.compatible(&pod_team).is_ok());
        let pod_other =
            Requirements::from_specs(&[RequirementSpec::new("team", Operator::In, &["c"])]);
        assert!(pool.compatible(&pod_other).is_err());
        let pod_custom =
            Requirements::from_specs(&[RequirementSpec::new("gpu", Operator::In, &["x"])]);
        assert!(pool.compatible(&pod_custom).is_err());
        let pod_zone = Requirements::from_specs(&[RequirementSpec::new(
            labels::ZONE,
            Operator::In,
            &["us-east-1a"],
        )]);
        assert!(pool.compatible(&pod_zone).is_ok());
        let pod_absent =
            Requirements::from_specs(&[RequirementSpec::new("gpu", Operator::DoesNotExist, &[])]);
        assert!(pool.compatible(&pod_absent).is_ok());
    }

    #[test]
    fn does_not_exist_meets_does_not_exist() {
        let a = Requirements::from_specs(&[RequirementSpec::new("k", Operator::DoesNotExist, &[])]);
        let b = Requirements::from_specs(&[RequirementSpec::new("k", Operator::NotIn, &["x"])]);
        assert!(a.intersects(&b).is_ok());
        let c = Requirements::from_specs(&[RequirementSpec::new("k", Operator::In, &["x"])]);
        assert!(a.intersects(&c).is_err());
    }

    #[test]
    fn validation_names_the_problem() {
        assert!(
            RequirementSpec::new("k", Operator::In, &[])
                .validate()
                .is_err()
        );
        assert!(
            RequirementSpec::new("k", Operator::Exists, &["a"])
                .validate()
                .is_err()
        );
        assert!(
            RequirementSpec::new("k", Operator::Gt, &["x"])
                .validate()
                .is_err()
        );
        assert!(
            RequirementSpec::new("k", Operator::Gt, &["3"])
                .validate()
                .is_ok()
        );
    }

    mod intersects_walk {
        use super::*;
        use proptest::prelude::*;

        /// `intersects` as Karpenter defines it: per shared key, the built intersection.
        fn by_definition(ours: &Requirements, incoming: &Requirements) -> Result<(), String> {
            for theirs in incoming.iter() {
                if let Some(o) = ours.get(&theirs.key)
                    && o.intersect(theirs).is_empty_set()
                    && !(theirs.allows_absence() && o.allows_absence())
                {
                    return Err(theirs.key.clone());
                }
            }
            Ok(())
        }

        fn requirement() -> impl Strategy<Value = Requirement> {
            let op = prop_oneof![
                Just(Operator::In),
                Just(Operator::NotIn),
                Just(Operator::Exists),
                Just(Operator::DoesNotExist),
                Just(Operator::Gt),
                Just(Operator::Lt),
            ];
            (
                prop::sample::select(vec!["a", "b", "c", "d"]),
                op,
                prop::collection::vec(prop::sample::select(vec!["1", "2", "5", "x"]), 0..3),
            )
                .prop_map(|(key, op, values)| {
                    let values: Vec<&str> = match op {
                        Operator::Exists | Operator::DoesNotExist => Vec::new(),
                        Operator::Gt | Operator::Lt => vec!["2"],
                        _ => values,
                    };
                    spec(key, op, &values)
                })
        }

        fn requirements() -> impl Strategy<Value = Requirements> {
            prop::collection::vec(requirement(), 0..4).prop_map(|rs| {
                let mut out = Requirements::new();
                for r in rs {
                    out.add(r);
                }
                out
            })
        }

        proptest! {
            #[test]
            fn the_walk_agrees_with_the_definition(ours in requirements(), incoming in requirements()) {
                prop_assert_eq!(
                    ours.intersects(&incoming).map_err(|c| c.key),
                    by_definition(&ours, &incoming)
                );
                prop_assert_eq!(ours.meets(&incoming), ours.intersects(&incoming).is_ok());
                prop_assert_eq!(ours.admits(&incoming), ours.compatible(&incoming).is_ok());
            }
        }
    }
}
