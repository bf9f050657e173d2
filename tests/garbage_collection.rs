//! Garbage collection and idempotency: instances no NodeClaim owns are terminated, NodeClaims
//! whose instance is gone are removed, and a launch carries a client token so that a repeated
//! CreateFleet never makes a second machine.

use nodewright_core::model::nodeclaim::{ListedInstance, TerminationReason};
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::pod::Pod;
use nodewright_core::{Command, EventKind};
use nodewright_testkit::harness::CoreHarness;

const GIB: i64 = 1 << 30;

fn listed(id: &str, tag: Option<&str>, launched_at_ms: u64, running: bool) -> ListedInstance {
    ListedInstance {
        instance_id: id.into(),
        nodeclaim: tag.map(String::from),
        launched_at_ms,
        running,
    }
}

fn orphans(commands: &[Command]) -> Vec<String> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::TerminateOrphanInstance { instance_id, .. } => Some(instance_id.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn an_instance_no_nodeclaim_owns_is_terminated_after_the_grace_period() {
    let mut h = CoreHarness::new();
    h.nodepool(NodePool::new("default", "default"));
    let (_, instance, _) = h.running_machine(vec![Pod::new("default", "a", 1000, GIB)]);
    h.advance(60_000);
    let now = h.now_ms;
    let out = h.send(EventKind::InstancesListed {
        instances: vec![
            listed(&instance.instance_id, Some("whatever"), 0, true),
            // Lost launch results: one old enough, one too fresh to judge.
            listed(
                "i-0aaaaaaaaaaaaaaaa",
                Some("default-lost1"),
                now - 31_000,
                true,
            ),
            listed(
                "i-0bbbbbbbbbbbbbbbb",
                Some("default-lost2"),
                now - 10_000,
                true,
            ),
            // Already terminated: nothing to do.
            listed("i-0cccccccccccccccc", None, 0, false),
        ]
        .into(),
    });
    assert_eq!(orphans(&out), vec!["i-0aaaaaaaaaaaaaaaa"]);
    let detail = out
        .iter()
        .find_map(|c| match c {
            Command::TerminateOrphanInstance {
                detail, nodeclaim, ..
            } => Some((detail.clone(), nodeclaim.clone())),
            _ => None,
        })
        .expect("one");
    assert_eq!(detail.1.as_deref(), Some("default-lost1"));
    assert!(detail.0.contains("without a NodeClaim"), "{}", detail.0);
    assert!(
        !out.iter()
            .any(|c| matches!(c, Command::TerminateNodeClaim { .. })),
        "the machine it owns is fine"
    );
}

#[test]
fn a_nodeclaim_whose_instance_is_gone_is_removed() {
    let mut h = CoreHarness::new();
    h.nodepool(NodePool::new("default", "default"));
    let (claim, instance, _) = h.running_machine(vec![Pod::new("default", "a", 1000, GIB)]);
    // Fresh launches may lag the listing: not yet.
    let out = h.send(EventKind::InstancesListed {
        instances: vec![].into(),
    });
    assert!(out.is_empty(), "{out:?}");
    h.advance(60_000);
    let out = h.send(EventKind::InstancesListed {
        instances: vec![listed(&instance.instance_id, Some(&claim.name), 0, false)].into(),
    });
    let t: Vec<(String, TerminationReason, String)> = out
        .iter()
        .filter_map(|c| match c {
            Command::TerminateNodeClaim {
                nodeclaim,
                reason,
                detail,
                ..
            } => Some((nodeclaim.clone(), *reason, detail.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(t.len(), 1, "{out:?}");
    assert_eq!(t[0].0, claim.name);
    assert_eq!(t[0].1, TerminationReason::InstanceGone);
    assert!(t[0].2.contains("shutting down or terminated"), "{}", t[0].2);
    // Asked once: the next listing does not ask again.
    let again = h.send(EventKind::InstancesListed {
        instances: vec![].into(),
    });
    assert!(
        !again
            .iter()
            .any(|c| matches!(c, Command::TerminateNodeClaim { .. })),
        "{again:?}"
    );
}

#[test]
fn a_machine_being_drained_whose_instance_vanished_is_finished_at_once() {
    let mut h = CoreHarness::new();
    let mut pool = NodePool::new("default", "default");
    pool.expire_after = nodewright_core::model::duration::MaybeNever::After(10 * 60_000);
    h.nodepool(pool);
    let (claim, _, _) = h.running_machine(vec![Pod::new("default", "a", 1000, GIB)]);
    h.advance(11 * 60_000);
    assert!(
        h.terminations().is_empty(),
        "expired, draining: the pod was asked to leave and has not"
    );
    let out = h.send(EventKind::InstancesListed {
        instances: vec![].into(),
    });
    let t = h.terminations();
    assert_eq!(t.len(), 1, "{out:?}");
    assert_eq!(t[0].nodeclaim, claim.name);
    assert_eq!(
        t[0].reason,
        TerminationReason::Expired,
        "keeps the reason it had"
    );
}

#[test]
fn the_client_token_is_stable_per_nodeclaim_and_fits_ec2() {
    let mut h = CoreHarness::new();
    h.nodepool(NodePool::new("default", "default"));
    let (a, _, _) = h.running_machine(vec![Pod::new("default", "a", 1000, GIB)]);
    let (b, _, _) = h.running_machine(vec![Pod::new("default", "b", 60_000, GIB)]);
    let scope = "prod-east/log-7f3a";
    assert_eq!(a.client_token(scope), a.clone().client_token(scope));
    assert_ne!(a.client_token(scope), b.client_token(scope));
    assert_ne!(
        a.client_token(scope),
        a.client_token("staging/log-0001"),
        "another cluster or log never reuses a token"
    );
    let mut long = a.clone();
    long.name = "x".repeat(200);
    assert!(long.client_token(scope).len() <= 64);
    assert!(a.client_token(scope).is_ascii());
}

#[test]
fn a_repeated_launch_with_the_same_token_makes_no_second_machine() {
    use nodewright_testkit::scenario::{CloudSpec, Latency};
    use nodewright_testkit::sim::cloud::SimCloud;
    use nodewright_testkit::sim::rng::SimRng;
    let mut h = CoreHarness::new();
    h.nodepool(NodePool::new("default", "default"));
    h.pod(Pod::new("default", "a", 1000, GIB));
    let claim = CoreHarness::launches(&h.advance(2_000))
        .into_iter()
        .next()
        .expect("a launch");
    let fixed = Latency {
        min_ms: 1_000,
        max_ms: 1_000,
    };
    let mut cloud = SimCloud::new(
        CloudSpec {
            launch_latency: fixed,
            registration_latency: fixed,
            insufficient_capacity: vec![],
            api_error_rate: 0.0,
            launch_latency_spikes: vec![],
            capacity_reservations: vec![],
        },
        String::new(),
    );
    let mut rng = SimRng::new(1);
    let first = cloud.create_fleet(&claim, 0, &mut rng).expect("launches");
    let again = cloud
        .create_fleet(&claim, 5_000, &mut rng)
        .expect("answers");
    assert_eq!(first, again);
    assert_eq!(cloud.running().count(), 1);
}

#[test]
fn the_end_of_run_checks_catch_a_leaked_instance_and_a_silently_stranded_pod() {
    use nodewright_core::catalog::{CapacityType, Price};
    use nodewright_core::model::nodeclaim::Instance;
    use nodewright_core::model::pod::PodKey;
    use nodewright_testkit::invariants::check_end;
    use nodewright_testkit::sim::cloud::SimInstance;
    let leaked = SimInstance {
        instance: Instance {
            instance_id: "i-0aaaaaaaaaaaaaaaa".into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::OnDemand,
            price: Price(96_000),
        },
        nodeclaim: "default-leak".into(),
        nodepool: "default".into(),
        launched_at_ms: 0,
        terminated_at_ms: None,
        reservation: None,
    };
    let quiet = PodKey::new("default", "quiet");
    let told = PodKey::new("default", "told");
    let fresh = PodKey::new("default", "fresh");
    let pending = vec![
        (&quiet, 0, false),
        (&told, 0, true),
        (&fresh, 3_500_000, false),
    ];
    let v = check_end(
        std::iter::once(&leaked),
        |_| false,
        pending.into_iter(),
        1_200_000,
        3_600_000,
    );
    let kinds: Vec<(&str, bool)> = v
        .iter()
        .map(|v| {
            (
                v.kind.as_str(),
                v.detail.contains("quiet") || v.detail.contains("default-leak"),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![("instance-without-node", true), ("pod-stranded", true)]
    );
    // Joined, or young enough: nothing to say.
    let none = check_end(
        std::iter::once(&leaked),
        |_| true,
        std::iter::empty(),
        1_200_000,
        3_600_000,
    );
    assert!(none.is_empty());
}

#[test]
fn an_instance_whose_nodeclaim_waits_for_its_launch_result_is_not_collected() {
    let mut h = CoreHarness::new();
    h.nodepool(NodePool::new("default", "default"));
    h.pod(Pod::new("default", "a", 1000, GIB));
    let claim = CoreHarness::launches(&h.advance(2_000))
        .into_iter()
        .next()
        .expect("a launch");
    // The launch result is slow (or was lost); the instance already shows in the listing.
    h.advance(60_000);
    let out = h.send(EventKind::InstancesListed {
        instances: vec![listed("i-0dddddddddddddddd", Some(&claim.name), 0, true)].into(),
    });
    assert!(orphans(&out).is_empty(), "{out:?}");
}
