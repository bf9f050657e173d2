//! An interruption message: what the cloud says is about to happen to an instance (read out
//! of its EventBridge body). What nodewright does about it is `crate::interruption`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One interruption message, read out of its EventBridge body.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Interruption {
    /// EC2 Spot Instance Interruption Warning: the instance is reclaimed at `deadline_ms`
    /// (the message's time plus two minutes, on the cluster's clock).
    SpotInterruption {
        /// When the instance is reclaimed.
        deadline_ms: u64,
    },
    /// EC2 Instance Rebalance Recommendation: the instance is at elevated risk.
    RebalanceRecommendation,
    /// AWS Health Event of category scheduledChange for EC2 (`event_type`, e.g.
    /// `AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED`).
    ScheduledChange {
        /// The Health event's type.
        event_type: String,
    },
    /// EC2 Instance State-change Notification.
    StateChange {
        /// The new state (`stopping`, `stopped`, `shutting-down`, `terminated`).
        state: String,
    },
}

impl Interruption {
    /// A short name for summaries.
    pub fn name(&self) -> &'static str {
        match self {
            Interruption::SpotInterruption { .. } => "SpotInterruption",
            Interruption::RebalanceRecommendation => "RebalanceRecommendation",
            Interruption::ScheduledChange { .. } => "ScheduledChange",
            Interruption::StateChange { .. } => "StateChange",
        }
    }
}

impl fmt::Display for Interruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Interruption::SpotInterruption { deadline_ms } => write!(
                f,
                "spot interruption warning (reclaimed at {:.0}s)",
                *deadline_ms as f64 / 1000.0
            ),
            Interruption::RebalanceRecommendation => f.write_str("rebalance recommendation"),
            Interruption::ScheduledChange { event_type } => {
                write!(f, "scheduled change {event_type}")
            }
            Interruption::StateChange { state } => write!(f, "instance state changed to {state}"),
        }
    }
}
