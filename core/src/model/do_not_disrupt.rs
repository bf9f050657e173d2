//! `karpenter.sh/do-not-disrupt` on a pod or a node: `"true"` protects it for good; a Go
//! duration (`"30m"`, `"2h30m"`) protects it from its start until that much time has passed
//! (Karpenter 1.12's grace period). Any other value protects nothing, as in Karpenter, and is
//! reported so that the typo does not go unnoticed.

use std::collections::BTreeMap;

use super::duration::parse_duration_ms;
use super::labels::DO_NOT_DISRUPT;

/// What the annotation asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// No annotation, or a value that is neither `"true"` nor a duration.
    None,
    /// `"true"`: for as long as it is there.
    Forever,
    /// Protected until this time (ms).
    Until(u64),
}

/// What the annotation asks for, before it is known when its object started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// No annotation, or a value that is neither `"true"` nor a duration.
    Nothing,
    /// `"true"`.
    Forever,
    /// A duration (ms) from the object's start.
    For(u64),
}

impl Asked {
    /// Reads the annotation.
    pub fn of(annotations: &BTreeMap<String, String>) -> Self {
        match annotations.get(DO_NOT_DISRUPT).map(|v| v.trim()) {
            None => Asked::Nothing,
            Some("true") => Asked::Forever,
            Some(value) => match parse_duration_ms(value) {
                Ok(ms) => Asked::For(ms),
                Err(_) => Asked::Nothing,
            },
        }
    }

    /// The protection it gives an object that started at `started_at_ms`.
    pub fn from(self, started_at_ms: u64) -> Protection {
        match self {
            Asked::Nothing => Protection::None,
            Asked::Forever => Protection::Forever,
            Asked::For(ms) => Protection::Until(started_at_ms.saturating_add(ms)),
        }
    }
}

impl Protection {
    /// Reads the annotation of an object that started at `started_at_ms`.
    pub fn of(annotations: &BTreeMap<String, String>, started_at_ms: u64) -> Self {
        Asked::of(annotations).from(started_at_ms)
    }

    /// Whether it protects at `now_ms`.
    pub fn active_at(self, now_ms: u64) -> bool {
        match self {
            Protection::None => false,
            Protection::Forever => true,
            Protection::Until(until) => now_ms < until,
        }
    }

    /// When a protection still in force runs out (`None` when it never does or is not in force).
    pub fn ends_after(self, now_ms: u64) -> Option<u64> {
        match self {
            Protection::Until(until) if until > now_ms => Some(until),
            _ => None,
        }
    }
}

/// Why an annotation value protects nothing, with the fix; `None` when it is valid or absent.
pub fn invalid_value(annotations: &BTreeMap<String, String>) -> Option<String> {
    let value = annotations.get(DO_NOT_DISRUPT)?;
    let trimmed = value.trim();
    if trimmed == "true" || trimmed == "false" || parse_duration_ms(trimmed).is_ok() {
        return None;
    }
    Some(format!(
        "annotation {DO_NOT_DISRUPT}: {value:?} is neither \"true\" nor a Go duration, so it protects nothing; write \"true\" to protect for good or a duration such as \"30m\" to protect from the start for that long"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotated(value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(DO_NOT_DISRUPT.to_string(), value.to_string())])
    }

    #[test]
    fn true_protects_for_good_and_a_duration_until_it_runs_out() {
        assert_eq!(Protection::of(&annotated("true"), 5), Protection::Forever);
        let p = Protection::of(&annotated("30m"), 1_000);
        assert_eq!(p, Protection::Until(1_000 + 1_800_000));
        assert!(p.active_at(1_800_999));
        assert!(!p.active_at(1_801_000));
        assert_eq!(p.ends_after(0), Some(1_801_000));
        assert_eq!(p.ends_after(1_801_000), None);
    }

    #[test]
    fn other_values_protect_nothing_and_are_reported() {
        assert_eq!(Protection::of(&annotated("false"), 0), Protection::None);
        assert_eq!(invalid_value(&annotated("false")), None);
        for value in ["yes", "", "30 minutes"] {
            assert_eq!(Protection::of(&annotated(value), 0), Protection::None);
            assert!(invalid_value(&annotated(value)).is_some(), "{value:?}");
        }
        assert_eq!(invalid_value(&annotated("1h")), None);
        assert_eq!(invalid_value(&BTreeMap::new()), None);
        assert_eq!(Protection::of(&BTreeMap::new(), 0), Protection::None);
    }
}
