//! Interruptions: what the cloud says is about to happen to an instance (Karpenter's SQS queue,
//! fed by EventBridge), and what nodewright does about it.
//!
//! | message | action |
//! |---|---|
//! | spot interruption warning (2-minute notice) | replace and drain now; the offering is unavailable |
//! | rebalance recommendation | recorded and reported only |
//! | scheduled change (AWS Health) | replace and drain |
//! | state change to stopping, stopped, shutting-down, terminated | replace and drain |
//!
//! A message about an instance no NodeClaim runs is recorded and acknowledged, not an error.

use crate::catalog::CapacityType;
pub use crate::model::interruption::Interruption;
use crate::model::nodeclaim::OfferingKey;
use crate::state::ClusterState;

/// How long a spot instance runs after its interruption warning.
pub const SPOT_INTERRUPTION_NOTICE_MS: u64 = 120_000;

/// Instance states that mean the machine is going away.
pub const LEAVING_STATES: [&str; 4] = ["stopping", "stopped", "shutting-down", "terminated"];

/// What to do about one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing but the record: why.
    Record {
        /// The NodeClaim, when one owns the instance.
        nodeclaim: Option<String>,
        /// Why nothing more is done.
        why: String,
    },
    /// A machine already being terminated: only the notice's consequences (the offering, the
    /// drain's deadline).
    Hasten {
        /// The NodeClaim.
        nodeclaim: String,
        /// The drain is forced from then on.
        deadline_ms: Option<u64>,
        /// The offering the interruption proves short of capacity.
        unavailable: Option<OfferingKey>,
        /// What the message said.
        why: String,
    },
    /// Launch replacements for the machine's pods and drain it now.
    ReplaceAndDrain {
        /// The NodeClaim.
        nodeclaim: String,
        /// The drain is forced from then on: the instance is gone anyway.
        deadline_ms: Option<u64>,
        /// The offering the interruption proves short of capacity.
        unavailable: Option<OfferingKey>,
        /// What the message said.
        why: String,
    },
}

/// Decides what a message about `instance_id` calls for.
pub fn decide(
    state: &ClusterState,
    instance_id: &str,
    interruption: &Interruption,
    now_ms: u64,
) -> Action {
    let Some((name, claim)) = state.nodeclaims.iter().find(|(_, c)| {
        c.instance
            .as_ref()
            .is_some_and(|i| i.instance_id == instance_id)
    }) else {
        return Action::Record {
            nodeclaim: None,
            why: format!(
                "no NodeClaim runs instance {instance_id}: acknowledged, nothing to do (a machine nodewright does not manage, or one already gone)"
            ),
        };
    };
    let record = |why: String| Action::Record {
        nodeclaim: Some(name.clone()),
        why,
    };
    match interruption {
        Interruption::RebalanceRecommendation => {
            return record(format!(
                "{interruption} for {name}: recorded only (Karpenter's behaviour; the machine is replaced if a spot interruption warning follows)"
            ));
        }
        Interruption::StateChange { state: s } if !LEAVING_STATES.contains(&s.as_str()) => {
            return record(format!(
                "{interruption} for {name}: not a state that takes the machine away; nothing to do"
            ));
        }
        _ => {}
    }
    let instance = claim.instance.as_ref();
    let (deadline_ms, unavailable) = match interruption {
        Interruption::SpotInterruption { deadline_ms } => (
            Some(*deadline_ms),
            instance
                .filter(|i| i.capacity_type == CapacityType::Spot)
                .map(|i| OfferingKey {
                    instance_type: i.instance_type.clone(),
                    zone: i.zone.clone(),
                    capacity_type: CapacityType::Spot,
                }),
        ),
        // The instance is stopping or gone: nothing on it can wait for a graceful drain.
        Interruption::StateChange { .. } => (Some(now_ms), None),
        _ => (None, None),
    };
    if let Some((reason, _)) = claim.terminating {
        return Action::Hasten {
            nodeclaim: name.clone(),
            deadline_ms,
            unavailable,
            why: format!("{interruption} for {name}: already being terminated ({reason})"),
        };
    }
    Action::ReplaceAndDrain {
        nodeclaim: name.clone(),
        deadline_ms,
        unavailable,
        why: format!("{interruption} for instance {instance_id}"),
    }
}
