//! The disruption pass runs Karpenter's way: at most once per poll interval (10 s), and only
//! when the cluster changed since the last pass or a time that pass named has come.

use nodewright_core::EventKind;
use nodewright_core::model::duration::MaybeNever;
use nodewright_core::model::nodeclaim::TerminationReason;
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::pod::Pod;
use nodewright_testkit::harness::CoreHarness;

const GIB: i64 = 1 << 30;
const POLL_MS: u64 = 10_000;

fn pool(consolidate_after_ms: u64) -> NodePool {
    let mut p = NodePool::new("default", "default");
    p.consolidate_after = MaybeNever::After(consolidate_after_ms);
    p
}

#[test]
fn a_node_emptied_between_passes_goes_at_the_next_pass_not_at_once() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(0));
    h.running_machine(vec![Pod::new("default", "a", 1000, GIB)]);
    // A pass runs at the first event after its interval: let one run with the machine busy.
    h.advance(POLL_MS + 1_000);
    let emptied = h.now_ms;
    let said = h.delete_pod("default", "a");
    assert!(
        !said
            .iter()
            .any(|c| matches!(c, nodewright_core::Command::TerminateNodeClaim { .. })),
        "not at the event that empties it: the last pass was under 10 s ago"
    );
    h.advance(POLL_MS);
    let t = h.terminations();
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!(t[0].reason, TerminationReason::Empty);
    assert!(
        t[0].at_ms > emptied && t[0].at_ms <= emptied + POLL_MS,
        "at the next pass: {} after {emptied}",
        t[0].at_ms
    );
}

#[test]
fn a_quiet_cluster_asks_for_no_pass_and_a_node_ripening_wakes_one() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(60_000));
    h.running_machine(vec![Pod::new("default", "a", 1000, GIB)]);
    h.delete_pod("default", "a");
    let emptied = h.now_ms;
    // Nothing changes: the next timer is the moment the node is old enough, not every poll.
    h.advance(POLL_MS);
    let next = h.core.next_timer_ms().expect("a timer for the empty node");
    assert_eq!(next, emptied + 60_000);
    h.run_until(emptied + 60_000);
    let t = h.terminations();
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!(t[0].at_ms, emptied + 60_000);
}

#[test]
fn a_burst_of_pod_events_between_passes_leaves_a_busy_node_alone() {
    let mut h = CoreHarness::new();
    h.nodepool(pool(0));
    let (_, _, node) = h.running_machine(vec![Pod::new("default", "keep", 100, GIB)]);
    let last_pass = h.now_ms;
    // A burst of pods bound and deleted within one poll interval.
    for i in 0..50 {
        let name = format!("burst-{i}");
        h.pod(Pod::new("default", &name, 10, 1 << 20));
        h.send(EventKind::PodBound {
            pod: nodewright_core::model::pod::PodKey::new("default", &name),
            node: node.clone(),
        });
        h.delete_pod("default", &name);
    }
    assert!(h.terminations().is_empty());
    // The machine still runs `keep`: the pass after the burst finds nothing.
    h.run_until(last_pass + 5 * POLL_MS);
    assert!(h.terminations().is_empty(), "{:?}", h.terminations());
    h.delete_pod("default", "keep");
    h.advance(POLL_MS);
    assert_eq!(h.terminations().len(), 1);
}
