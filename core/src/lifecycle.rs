//! NodeClaim lifecycle deadlines: a launch must succeed within the launch timeout, and the
//! instance must register as a node within the registration timeout.

use crate::config::Config;
use crate::model::duration::format_duration_ms;
use crate::model::nodeclaim::TerminationReason;
use crate::state::ClusterState;
use crate::wake::Wake;

/// A NodeClaim that missed a deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overdue {
    /// The NodeClaim.
    pub nodeclaim: String,
    /// The deadline it missed (launch or registration timeout, expiration...).
    pub reason: TerminationReason,
    /// How late, for people.
    pub detail: String,
}

/// NodeClaims past a lifecycle deadline now, and the next deadline to come.
pub fn overdue(state: &ClusterState, config: &Config, now_ms: u64) -> (Vec<Overdue>, Option<u64>) {
    let mut out = Vec::new();
    let mut next = Wake::default();
    for (name, claim) in &state.nodeclaims {
        if claim.terminating.is_some() {
            continue;
        }
        let deadline = match (claim.launched_at_ms, claim.registered_at_ms) {
            (None, _) => Some((
                claim.created_at_ms + config.launch_timeout_ms,
                TerminationReason::LaunchTimeout,
            )),
            (Some(launched), None) => Some((
                launched + config.registration_timeout_ms,
                TerminationReason::RegistrationTimeout,
            )),
            _ => None,
        };
        if let Some((at, reason)) = deadline {
            if at <= now_ms {
                let detail = match reason {
                    TerminationReason::LaunchTimeout => format!(
                        "no launch result {} after the NodeClaim was created",
                        format_duration_ms(config.launch_timeout_ms)
                    ),
                    _ => format!(
                        "the instance did not register as a node within {} of its launch",
                        format_duration_ms(config.registration_timeout_ms)
                    ),
                };
                out.push(Overdue {
                    nodeclaim: name.clone(),
                    reason,
                    detail,
                });
            } else {
                next.offer(at);
            }
        }
    }
    (out, next.ms())
}

/// How long an instance may run without a NodeClaim before it is collected, and how long a
/// NodeClaim's instance may be missing from the listing before the NodeClaim is (Karpenter's
/// 30 s: the cloud's listing lags a fresh launch).
pub const GARBAGE_GRACE_MS: u64 = 30_000;

/// What a listing of the cloud's instances calls for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Garbage {
    /// Running instances no NodeClaim owns: (instance id, its NodeClaim tag, why).
    pub orphans: Vec<(String, Option<String>, String)>,
    /// NodeClaims whose instance is gone: (NodeClaim, why).
    pub vanished: Vec<(String, String)>,
    /// The earliest time an instance or NodeClaim passed over only for being younger than
    /// [`GARBAGE_GRACE_MS`] grows old enough to be collected; `None` when none is. Until then,
    /// the same listing and NodeClaims call for nothing more.
    pub grace_ends_ms: Option<u64>,
}

impl Garbage {
    /// Whether the listing calls for nothing now.
    pub fn is_empty(&self) -> bool {
        self.orphans.is_empty() && self.vanished.is_empty()
    }
}

/// Compares the listing with the NodeClaims.
pub fn garbage(
    state: &ClusterState,
    instances: &[crate::model::nodeclaim::ListedInstance],
    now_ms: u64,
) -> Garbage {
    use std::collections::{BTreeMap, BTreeSet};
    let mut out = Garbage::default();
    let mut grace_ends = Wake::default();
    // An instance is owned when some NodeClaim has it: nearly always the one its tag names.
    // The map of every NodeClaim's instance is built only for one that is not.
    let mut owned: Option<BTreeSet<&str>> = None;
    // The running instances whose tag names a launched NodeClaim that has them.
    let mut running_of_launched = 0usize;
    let mut is_owned = |i: &crate::model::nodeclaim::ListedInstance| {
        let by_tag = i
            .nodeclaim
            .as_ref()
            .and_then(|n| state.nodeclaims.get(n))
            .filter(|c| {
                c.instance
                    .as_ref()
                    .is_some_and(|x| x.instance_id == i.instance_id)
            });
        if let Some(claim) = by_tag {
            running_of_launched += usize::from(claim.launched_at_ms.is_some());
            return true;
        }
        owned
            .get_or_insert_with(|| {
                state
                    .nodeclaims
                    .values()
                    .filter_map(|c| c.instance.as_ref().map(|x| x.instance_id.as_str()))
                    .collect()
            })
            .contains(i.instance_id.as_str())
    };
    // A listing in id order (as the cloud lists them) is searched as it is; any other through
    // a map (where an id is listed twice, the later one counts).
    let listed_map: Option<BTreeMap<&str, &crate::model::nodeclaim::ListedInstance>> =
        (!crate::model::listing::in_id_order(instances)).then(|| {
            instances
                .iter()
                .map(|i| (i.instance_id.as_str(), i))
                .collect()
        });
    let listed = |id: &str| match &listed_map {
        Some(map) => map.get(id).copied(),
        None => instances
            .binary_search_by(|i| i.instance_id.as_str().cmp(id))
            .ok()
            .map(|k| &instances[k]),
    };
    for i in instances.iter().filter(|i| i.running) {
        if is_owned(i) {
            continue;
        }
        // Its NodeClaim still waits for the launch result (lost in a crash, or slow): the
        // result, or the launch timeout, decides its fate.
        if i.nodeclaim
            .as_ref()
            .and_then(|n| state.nodeclaims.get(n))
            .is_some_and(|c| c.instance.is_none() && c.terminating.is_none())
        {
            continue;
        }
        let age = now_ms.saturating_sub(i.launched_at_ms);
        if age < GARBAGE_GRACE_MS {
            grace_ends.offer(i.launched_at_ms.saturating_add(GARBAGE_GRACE_MS));
            continue;
        }
        let tag = i.nodeclaim.as_deref().unwrap_or("none");
        out.orphans.push((
            i.instance_id.clone(),
            i.nodeclaim.clone(),
            format!(
                "instance {} (NodeClaim tag {tag}) has run {} without a NodeClaim that owns it",
                i.instance_id,
                format_duration_ms(age)
            ),
        ));
    }
    // Each id listed once, and as many launched NodeClaims as running instances that their tags
    // name and that they have: every launched NodeClaim has its instance running, none vanished.
    let launched = state
        .nodeclaims
        .values()
        .filter(|c| c.instance.is_some() && c.launched_at_ms.is_some())
        .count();
    let none_vanished = listed_map.is_none() && running_of_launched == launched;
    if none_vanished && !cfg!(debug_assertions) {
        out.grace_ends_ms = grace_ends.ms();
        return out;
    }
    let before = (out.vanished.len(), grace_ends);
    for (name, claim) in &state.nodeclaims {
        let (Some(instance), Some(launched)) = (&claim.instance, claim.launched_at_ms) else {
            continue;
        };
        let why = match listed(instance.instance_id.as_str()) {
            None => "is not in the cloud's listing",
            Some(l) if !l.running => "is shutting down or terminated",
            Some(_) => continue,
        };
        if now_ms.saturating_sub(launched) < GARBAGE_GRACE_MS {
            grace_ends.offer(launched.saturating_add(GARBAGE_GRACE_MS));
            continue;
        }
        out.vanished.push((
            name.clone(),
            format!("its instance {} {why}", instance.instance_id),
        ));
    }
    debug_assert!(
        !none_vanished || before == (out.vanished.len(), grace_ends),
        "every launched NodeClaim's instance was counted running, yet one vanished"
    );
    out.grace_ends_ms = grace_ends.ms();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{CapacityType, Price};
    use crate::model::nodeclaim::{Instance, ListedInstance, NodeClaimSpec};
    use crate::state::NodeClaimState;

    fn claim(name: &str, instance_id: &str) -> NodeClaimState {
        let mut claim = NodeClaimState::new(
            NodeClaimSpec {
                name: name.to_string(),
                ..NodeClaimSpec::default()
            },
            0,
        );
        claim.instance = Some(Instance {
            instance_id: instance_id.to_string(),
            instance_type: "m5.large".to_string(),
            zone: "us-east-1a".to_string(),
            capacity_type: CapacityType::OnDemand,
            price: Price(96_000),
        });
        claim.launched_at_ms = Some(0);
        claim
    }

    fn listed(id: &str, nodeclaim: &str, running: bool) -> ListedInstance {
        ListedInstance {
            instance_id: id.to_string(),
            nodeclaim: Some(nodeclaim.to_string()),
            launched_at_ms: 0,
            running,
        }
    }

    #[test]
    fn orphans_and_vanished_instances_are_found_and_an_id_listed_twice_reads_as_its_last() {
        let mut state = ClusterState::default();
        for (name, id) in [("a", "i-a"), ("b", "i-b"), ("c", "i-c")] {
            state.nodeclaims.insert(name.to_string(), claim(name, id));
        }
        let now = GARBAGE_GRACE_MS + 1;
        let listing = vec![
            listed("i-a", "a", true),
            // Listed twice: first running, then shutting down (the last one counts).
            listed("i-b", "b", true),
            listed("i-b", "b", false),
            // No NodeClaim owns it.
            listed("i-x", "gone", true),
        ];
        let found = garbage(&state, &listing, now);
        let orphans: Vec<&str> = found.orphans.iter().map(|o| o.0.as_str()).collect();
        assert_eq!(orphans, ["i-x"]);
        let vanished: Vec<(&str, &str)> = found
            .vanished
            .iter()
            .map(|(claim, why)| (claim.as_str(), why.as_str()))
            .collect();
        assert_eq!(
            vanished,
            [
                ("b", "its instance i-b is shutting down or terminated"),
                ("c", "its instance i-c is not in the cloud's listing"),
            ]
        );
        // Within the grace period nothing is collected, until the moment it says.
        let early = garbage(&state, &listing, GARBAGE_GRACE_MS - 1);
        assert!(early.is_empty());
        assert_eq!(early.grace_ends_ms, Some(GARBAGE_GRACE_MS));
        assert!(!garbage(&state, &listing, GARBAGE_GRACE_MS).is_empty());
        // Nothing young and nothing to collect: nothing to come either.
        let settled = [listed("i-a", "a", true)];
        let mut owned = ClusterState::default();
        owned.nodeclaims.insert("a".to_string(), claim("a", "i-a"));
        let quiet = garbage(&owned, &settled, now);
        assert!(quiet.is_empty());
        assert_eq!(quiet.grace_ends_ms, None);
        // A young instance that is owned, or a young claim whose instance runs, is nothing to
        // wait for.
        assert_eq!(garbage(&owned, &settled, 1).grace_ends_ms, None);
    }
}
