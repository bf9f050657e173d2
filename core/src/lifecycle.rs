//! NodeClaim lifecycle deadlines: a launch must succeed within the launch timeout, and the
//! instance must register as a node within the registration timeout.

use crate::config::Config;
use crate::model::duration::format_duration_ms;
use crate::model::nodeclaim::TerminationReason;
use crate::state::ClusterState;

/// A NodeClaim that missed a deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overdue {
    pub nodeclaim: String,
    pub reason: TerminationReason,
    pub detail: String,
}

/// NodeClaims past a lifecycle deadline now, and the next deadline to come.
pub fn overdue(state: &ClusterState, config: &Config, now_ms: u64) -> (Vec<Overdue>, Option<u64>) {
    let mut out = Vec::new();
    let mut next: Option<u64> = None;
    for (name, claim) in &state.nodeclaims {
        if claim.terminating.is_some() {
            continue;
        }
        let deadline = match (claim.launched_at_ms, claim.registered_at_ms) {
            (None, _) => Some((
                claim.created_at_ms + config.launch_timeout_ms,
                TerminationReason::LaunchTimeout,
                format!(
                    "no launch result {} after the NodeClaim was created",
                    format_duration_ms(config.launch_timeout_ms)
                ),
            )),
            (Some(launched), None) => Some((
                launched + config.registration_timeout_ms,
                TerminationReason::RegistrationTimeout,
                format!(
                    "the instance did not register as a node within {} of its launch",
                    format_duration_ms(config.registration_timeout_ms)
                ),
            )),
            _ => None,
        };
        if let Some((at, reason, detail)) = deadline {
            if at <= now_ms {
                out.push(Overdue {
                    nodeclaim: name.clone(),
                    reason,
                    detail,
                });
            } else {
                next = Some(next.map_or(at, |n: u64| n.min(at)));
            }
        }
    }
    (out, next)
}
