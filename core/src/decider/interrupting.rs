//! What the core does with an interruption message (the decision itself is
//! [`crate::interruption::decide`]): mark the offering, launch replacements, drain.

use super::Core;
use crate::command::Command;
use crate::interruption::{Action, Interruption};
use crate::model::duration::format_duration_ms;
use crate::model::nodeclaim::{OfferingKey, TerminationReason};
use crate::state::UNAVAILABLE_OFFERING_TTL_MS;
use crate::wake::Wake;

impl Core {
    /// An interruption message: replace and drain the machine now, or record why not.
    pub(super) fn interrupt(
        &mut self,
        message_id: &str,
        instance_id: &str,
        interruption: &Interruption,
        commands: &mut Vec<Command>,
    ) {
        self.refresh_pool_shapes();
        let now = self.now_ms;
        let report = |nodeclaim: Option<String>, action: String| Command::ReportInterruption {
            message_id: message_id.to_string(),
            instance_id: instance_id.to_string(),
            nodeclaim,
            interruption: interruption.name().to_string(),
            action,
        };
        match crate::interruption::decide(&self.state, instance_id, interruption, now) {
            Action::Record { nodeclaim, why } => commands.push(report(nodeclaim, why)),
            Action::Hasten {
                nodeclaim,
                deadline_ms,
                unavailable,
                why,
            } => {
                let mut action = why;
                if let Some(key) = unavailable {
                    action.push_str(&format!("; offering {key} marked unavailable"));
                    self.mark_unavailable(key);
                }
                if let Some(deadline) = deadline_ms
                    && self.force_drain_by(&nodeclaim, deadline)
                {
                    action.push_str(&format!(
                        "; its drain is forced at {:.0}s",
                        deadline as f64 / 1000.0
                    ));
                }
                commands.push(report(Some(nodeclaim.clone()), action));
                let mut evicting_now = self.evicting_now();
                self.drain_step(&nodeclaim, &mut evicting_now, commands);
            }
            Action::ReplaceAndDrain {
                nodeclaim,
                deadline_ms,
                unavailable,
                why,
            } => {
                let mut detail = why;
                if let Some(key) = unavailable {
                    detail.push_str(&format!(
                        "; offering {key} marked unavailable for {}",
                        format_duration_ms(UNAVAILABLE_OFFERING_TTL_MS)
                    ));
                    self.mark_unavailable(key);
                }
                // Where its pods go: the rest of the cluster, plus new machines launched now,
                // before the drain (there is no time to wait for them to come up).
                let node = self
                    .state
                    .nodeclaims
                    .get(&nodeclaim)
                    .and_then(|c| c.node_name.clone());
                let (pods, result) = self.solve_moving_out(&nodeclaim, node.as_deref());
                let launched = self.launch_planned(
                    &result.new_claims,
                    &format!("replaces {nodeclaim}: interrupted ({detail})"),
                    commands,
                );
                let action = format!(
                    "replace and drain now: {} pod(s) move, {}{}",
                    pods.len(),
                    if launched.is_empty() {
                        "no new machine needed".to_string()
                    } else {
                        format!("replacements launched: {}", launched.join(", "))
                    },
                    deadline_ms.map_or(String::new(), |d| format!(
                        "; the drain is forced at {:.0}s",
                        d as f64 / 1000.0
                    ))
                );
                commands.push(report(Some(nodeclaim.clone()), action));
                // A replacement already on its way for this machine is now moot.
                self.disruptor.replacements.remove(&nodeclaim);
                self.terminate(&nodeclaim, TerminationReason::Interrupted, detail, commands);
                if let Some(deadline) = deadline_ms {
                    self.force_drain_by(&nodeclaim, deadline);
                }
            }
        }
    }

    /// The offering is avoided for the insufficient-capacity period.
    fn mark_unavailable(&mut self, key: OfferingKey) {
        self.state
            .unavailable
            .insert(key, self.now_ms + UNAVAILABLE_OFFERING_TTL_MS);
    }

    /// The machine's drain is forced from `deadline` on (or earlier, if it already was);
    /// whether it is draining.
    fn force_drain_by(&mut self, nodeclaim: &str, deadline: u64) -> bool {
        let Some(drain) = self.terminator.draining.get_mut(nodeclaim) else {
            return false;
        };
        let mut wake = Wake::default();
        wake.offer_some(drain.deadline_ms);
        wake.offer(deadline);
        drain.deadline_ms = wake.ms();
        self.touch_drain(nodeclaim);
        true
    }
}
