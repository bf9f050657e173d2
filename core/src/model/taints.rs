//! Taints and tolerations with Kubernetes' matching rules.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What a taint does to pods that do not tolerate it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TaintEffect {
    /// No new pod lands.
    NoSchedule,
    /// New pods land elsewhere when they can.
    PreferNoSchedule,
    /// No new pod lands, and running ones are evicted.
    NoExecute,
}

impl TaintEffect {
    /// The effect as Kubernetes spells it; `None` for any other word.
    pub fn parse(raw: &str) -> Option<TaintEffect> {
        Some(match raw {
            "NoSchedule" => TaintEffect::NoSchedule,
            "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
            "NoExecute" => TaintEffect::NoExecute,
            _ => return None,
        })
    }

    /// Kubernetes' spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Taint {
    /// Its key.
    pub key: String,
    /// Its value, if any.
    pub value: Option<String>,
    /// Its effect.
    pub effect: TaintEffect,
}

impl Taint {
    /// A taint of `key`, `value` and `effect`.
    pub fn new(key: &str, value: Option<&str>, effect: TaintEffect) -> Self {
        Taint {
            key: key.to_string(),
            value: value.map(str::to_string),
            effect,
        }
    }
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(v) => write!(f, "{}={}:{:?}", self.key, v, self.effect),
            None => write!(f, "{}:{:?}", self.key, self.effect),
        }
    }
}

/// How a toleration matches a taint's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TolerationOperator {
    /// The values are equal (the default).
    Equal,
    /// Any value.
    Exists,
}

/// A pod's toleration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Toleration {
    /// Empty with `Exists` tolerates every taint.
    pub key: Option<String>,
    /// How the value is matched.
    pub operator: TolerationOperator,
    /// The value `Equal` compares with.
    pub value: Option<String>,
    /// `None` tolerates every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// Kubernetes' `ToleratesTaint`.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if let Some(effect) = self.effect
            && effect != taint.effect
        {
            return false;
        }
        match &self.key {
            None => self.operator == TolerationOperator::Exists,
            Some(key) if key != &taint.key => false,
            Some(_) => match self.operator {
                TolerationOperator::Exists => true,
                TolerationOperator::Equal => {
                    self.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
                }
            },
        }
    }
}

/// The first taint with a scheduling effect (NoSchedule, NoExecute) no toleration tolerates.
pub fn first_untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints.iter().find(|taint| {
        taint.effect != TaintEffect::PreferNoSchedule
            && !tolerations.iter().any(|t| t.tolerates(taint))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toleration(
        key: Option<&str>,
        op: TolerationOperator,
        value: Option<&str>,
        effect: Option<TaintEffect>,
    ) -> Toleration {
        Toleration {
            key: key.map(str::to_string),
            operator: op,
            value: value.map(str::to_string),
            effect,
        }
    }

    #[test]
    fn matching_rules() {
        let gpu = Taint::new("nvidia.com/gpu", Some("true"), TaintEffect::NoSchedule);
        assert!(
            toleration(
                Some("nvidia.com/gpu"),
                TolerationOperator::Exists,
                None,
                None
            )
            .tolerates(&gpu)
        );
        assert!(
            toleration(
                Some("nvidia.com/gpu"),
                TolerationOperator::Equal,
                Some("true"),
                Some(TaintEffect::NoSchedule)
            )
            .tolerates(&gpu)
        );
        assert!(
            !toleration(
                Some("nvidia.com/gpu"),
                TolerationOperator::Equal,
                Some("false"),
                None
            )
            .tolerates(&gpu)
        );
        assert!(
            !toleration(
                Some("nvidia.com/gpu"),
                TolerationOperator::Exists,
                None,
                Some(TaintEffect::NoExecute)
            )
            .tolerates(&gpu)
        );
        assert!(toleration(None, TolerationOperator::Exists, None, None).tolerates(&gpu));
        assert!(first_untolerated(std::slice::from_ref(&gpu), &[]).is_some());
        let soft = Taint::new("soft", None, TaintEffect::PreferNoSchedule);
        assert!(first_untolerated(&[soft], &[]).is_none());
    }
}
