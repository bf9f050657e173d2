//! The sibling hold: the machines of one provisioning decision whose pods spread or keep apart
//! start tainted [`SIBLING_HOLD_TAINT`] (`NoSchedule`, a startup taint the kubelet registers
//! with), and are released together once every one of them has registered — or, so that one
//! slow machine cannot stall the rest, `Config::sibling_hold_ms` after the first one did.
//!
//! Without it, kube-scheduler binds each pending pod to whichever planned machine is ready
//! first, and counts topology domains only among the nodes that exist: a plan of 2/2/2 over
//! three zones lands 3/3/0, a hostname spread over three machines lands on one. Held, the
//! machines appear to kube-scheduler at once, and its own filters then place the pods as the
//! plan did. Why this mechanism and what it costs: `docs/decisions/0005-sibling-hold.md`.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::model::affinity::WhenUnsatisfiable;
use crate::model::duration::format_duration_ms;
use crate::model::labels::SIBLING_HOLD_TAINT;
use crate::model::pod::Pod;
use crate::model::taints::{Taint, TaintEffect};
use crate::state::{NameMap, NodeClaimState};
use crate::wake::Wake;

/// The taint a held machine starts with.
pub fn hold_taint() -> Taint {
    Taint::new(SIBLING_HOLD_TAINT, None, TaintEffect::NoSchedule)
}

/// Whether where the pod may land depends on where its siblings landed first: a
/// `DoNotSchedule` topology spread, or a required anti-affinity.
pub fn constrains(pod: &Pod) -> bool {
    pod.topology_spread
        .iter()
        .any(|c| c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
        || pod.has_required_anti_affinity()
}

/// The held machines, and the groups each is released with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiblingHolds {
    /// NodeClaims launched with the hold taint, not released yet.
    held: BTreeSet<String>,
    /// NodeClaims released together, each group the machines one decision counted on.
    groups: Vec<BTreeSet<String>>,
    /// NodeClaims released whose node has not yet been seen without the taint.
    releasing: BTreeSet<String>,
}

/// A machine to release: take the hold taint off its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// The NodeClaim.
    pub nodeclaim: String,
    /// Its node.
    pub node: String,
    /// Why now: its siblings registered, or the hold ran out.
    pub reason: String,
}

impl SiblingHolds {
    /// Whether the NodeClaim's machine is held for its siblings.
    pub fn is_held(&self, nodeclaim: &str) -> bool {
        self.held.contains(nodeclaim)
    }

    /// Released machines whose node has not yet been seen without the taint: asked again
    /// after a restart.
    pub fn releasing(&self) -> impl Iterator<Item = &String> {
        self.releasing.iter()
    }

    /// The node of `nodeclaim` was seen, with the hold taint or without. True when it must be
    /// released (again): it carries the taint, and is neither held nor being released — the
    /// taint came back after its release (put back by a registration that raced it), or a
    /// controller stopped before it took the taint off.
    pub fn observe(&mut self, nodeclaim: &str, tainted: bool) -> bool {
        if !tainted {
            self.releasing.remove(nodeclaim);
            return false;
        }
        if self.held.contains(nodeclaim) || self.releasing.contains(nodeclaim) {
            return false;
        }
        self.releasing.insert(nodeclaim.to_string());
        true
    }

    /// The NodeClaim is gone.
    pub fn forget(&mut self, nodeclaim: &str) {
        self.held.remove(nodeclaim);
        self.releasing.remove(nodeclaim);
    }

    /// `launched` are launched held; they and `joining` (held machines already on their way
    /// that the same decision counted on) are released together. Groups that share a machine
    /// become one.
    pub fn hold(&mut self, launched: &[String], joining: &BTreeSet<String>) {
        self.held.extend(launched.iter().cloned());
        let mut group: BTreeSet<String> = launched.iter().cloned().collect();
        group.extend(joining.iter().filter(|c| self.held.contains(*c)).cloned());
        let (overlapping, apart): (Vec<_>, Vec<_>) = std::mem::take(&mut self.groups)
            .into_iter()
            .partition(|g| !g.is_disjoint(&group));
        for g in overlapping {
            group.extend(g);
        }
        self.groups = apart;
        self.groups.push(group);
    }

    /// The machines to release now, and when to look again (the earliest hold that runs out).
    /// A group is released once each of its machines has registered or is gone (failed,
    /// terminating); or, `hold_ms` after its first machine registered, the machines registered
    /// by then are released and the rest are released as they register.
    pub fn due(
        &mut self,
        claims: &NameMap<NodeClaimState>,
        now_ms: u64,
        hold_ms: u64,
    ) -> (Vec<Release>, Option<u64>) {
        if !self.releasing.is_empty() {
            self.releasing.retain(|name| claims.contains_key(name));
        }
        if self.held.is_empty() {
            return (Vec::new(), None);
        }
        let live = |name: &String| claims.get(name).filter(|c| c.terminating.is_none());
        self.held.retain(|name| live(name).is_some());
        let mut releases = Vec::new();
        let mut wake = Wake::default();
        let held = &self.held;
        let mut kept = Vec::new();
        for group in std::mem::take(&mut self.groups) {
            let members: Vec<(&String, &NodeClaimState)> = group
                .iter()
                .filter(|name| held.contains(*name))
                .filter_map(|name| live(name).map(|c| (name, c)))
                .collect();
            let registered: Vec<&(&String, &NodeClaimState)> = members
                .iter()
                .filter(|(_, c)| c.node_name.is_some())
                .collect();
            let Some(first_ms) = registered
                .iter()
                .filter_map(|(_, c)| c.registered_at_ms)
                .min()
            else {
                if !members.is_empty() {
                    kept.push(group);
                }
                continue;
            };
            let names = |pick: &dyn Fn(&NodeClaimState) -> bool| -> String {
                members
                    .iter()
                    .filter(|(_, c)| pick(c))
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let deadline = first_ms.saturating_add(hold_ms);
            let reason = if registered.len() == members.len() {
                format!(
                    "every machine of its provisioning decision has registered ({})",
                    names(&|_| true)
                )
            } else if now_ms >= deadline {
                format!(
                    "held {} for its siblings; {} still not registered (they are released as they register)",
                    format_duration_ms(hold_ms),
                    names(&|c| c.node_name.is_none())
                )
            } else {
                wake.offer(deadline);
                kept.push(group);
                continue;
            };
            for (name, claim) in &registered {
                if let Some(node) = &claim.node_name {
                    releases.push(Release {
                        nodeclaim: (*name).clone(),
                        node: node.clone(),
                        reason: reason.clone(),
                    });
                }
            }
        }
        self.groups = kept;
        for r in &releases {
            self.held.remove(&r.nodeclaim);
        }
        // A held machine in no group any more (its group's hold ran out) goes as it registers.
        let groups = &self.groups;
        let ungrouped = self
            .held
            .iter()
            .filter(|name| !groups.iter().any(|g| g.contains(*name)))
            .filter_map(|name| {
                let node = live(name)?.node_name.clone()?;
                Some(Release {
                    nodeclaim: name.clone(),
                    node,
                    reason: "registered after its siblings' hold ran out".to_string(),
                })
            })
            .collect::<Vec<_>>();
        for r in &ungrouped {
            self.held.remove(&r.nodeclaim);
        }
        releases.extend(ungrouped);
        self.releasing
            .extend(releases.iter().map(|r| r.nodeclaim.clone()));
        (releases, wake.ms())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::nodeclaim::NodeClaimSpec;

    fn claim(name: &str, registered_at_ms: Option<u64>) -> (String, NodeClaimState) {
        let mut state = NodeClaimState::new(
            NodeClaimSpec {
                name: name.to_string(),
                nodepool: "default".to_string(),
                nodeclass: "default".to_string(),
                labels: std::collections::BTreeMap::new(),
                annotations: std::collections::BTreeMap::new(),
                taints: Vec::new(),
                startup_taints: vec![hold_taint()],
                requirements: Vec::new(),
                requests: Default::default(),
                options: Vec::new().into(),
                expire_after_ms: None,
            },
            0,
        );
        if let Some(at) = registered_at_ms {
            state.node_name = Some(format!("node-{name}"));
            state.registered_at_ms = Some(at);
        }
        (name.to_string(), state)
    }

    fn names(releases: &[Release]) -> Vec<&str> {
        releases.iter().map(|r| r.nodeclaim.as_str()).collect()
    }

    #[test]
    fn a_group_is_released_once_every_machine_has_registered() {
        let mut holds = SiblingHolds::default();
        holds.hold(&["a".into(), "b".into(), "c".into()], &BTreeSet::new());
        let mut claims: NameMap<_> = [claim("a", Some(10)), claim("b", None), claim("c", Some(20))]
            .into_iter()
            .collect();
        let (releases, wake) = holds.due(&claims, 30, 120_000);
        assert!(releases.is_empty());
        assert_eq!(wake, Some(120_010));
        claims.insert("b".into(), claim("b", Some(40)).1);
        let (releases, wake) = holds.due(&claims, 40, 120_000);
        assert_eq!(names(&releases), ["a", "b", "c"]);
        assert_eq!(wake, None);
        assert!(
            releases[0].reason.contains("a, b, c"),
            "{}",
            releases[0].reason
        );
        assert!(!holds.is_held("a"));
        // Nothing is released twice.
        assert!(holds.due(&claims, 50, 120_000).0.is_empty());
    }

    #[test]
    fn one_slow_machine_holds_the_rest_no_longer_than_the_bound() {
        let mut holds = SiblingHolds::default();
        holds.hold(&["a".into(), "b".into()], &BTreeSet::new());
        let mut claims: NameMap<_> = [claim("a", Some(1_000)), claim("b", None)]
            .into_iter()
            .collect();
        assert!(holds.due(&claims, 120_999, 120_000).0.is_empty());
        let (releases, wake) = holds.due(&claims, 121_000, 120_000);
        assert_eq!(names(&releases), ["a"]);
        assert!(releases[0].reason.contains("b still not registered"));
        assert_eq!(wake, None);
        claims.insert("b".into(), claim("b", Some(200_000)).1);
        let (releases, _) = holds.due(&claims, 200_000, 120_000);
        assert_eq!(names(&releases), ["b"]);
    }

    #[test]
    fn a_machine_that_failed_is_not_waited_for() {
        let mut holds = SiblingHolds::default();
        holds.hold(&["a".into(), "b".into()], &BTreeSet::new());
        let claims: NameMap<_> = [claim("a", Some(5))].into_iter().collect();
        let (releases, _) = holds.due(&claims, 6, 120_000);
        assert_eq!(names(&releases), ["a"]);
    }

    #[test]
    fn a_taint_put_back_after_the_release_is_released_again_once() {
        let mut holds = SiblingHolds::default();
        holds.hold(&["a".into(), "b".into()], &BTreeSet::new());
        let claims: NameMap<_> = [claim("a", Some(1)), claim("b", Some(2))]
            .into_iter()
            .collect();
        // Held and registered: seen tainted, nothing to do yet.
        assert!(!holds.observe("a", true));
        assert_eq!(names(&holds.due(&claims, 3, 120_000).0), ["a", "b"]);
        // Seen tainted again before the release lands: asked already.
        assert!(!holds.observe("a", true));
        assert_eq!(holds.releasing().count(), 2);
        // Seen without it, then with it again: released again.
        assert!(!holds.observe("a", false));
        assert!(holds.observe("a", true));
        assert!(!holds.observe("a", true));
        holds.forget("a");
        assert_eq!(holds.releasing().collect::<Vec<_>>(), ["b"]);
    }

    #[test]
    fn a_later_decision_that_counts_on_a_held_machine_joins_its_group() {
        let mut holds = SiblingHolds::default();
        holds.hold(&["a".into(), "b".into()], &BTreeSet::new());
        holds.hold(&["c".into()], &["b".to_string()].into_iter().collect());
        let claims: NameMap<_> = [claim("a", Some(1)), claim("b", Some(2)), claim("c", None)]
            .into_iter()
            .collect();
        assert!(holds.due(&claims, 3, 120_000).0.is_empty());
        let claims: NameMap<_> = [
            claim("a", Some(1)),
            claim("b", Some(2)),
            claim("c", Some(3)),
        ]
        .into_iter()
        .collect();
        assert_eq!(names(&holds.due(&claims, 4, 120_000).0), ["a", "b", "c"]);
    }
}
