//! Expiration with `expirationWaitsForJobs` (default on): a machine past its `expireAfter` is
//! cordoned and drained as in Karpenter, but a Job's pod (any pod no replicating controller
//! makes again) is left to finish, until it ends or `terminationGracePeriod` runs out; while
//! only such pods keep the machine, it counts against no disruption budget. With the setting
//! off, Karpenter's way: every pod is evicted.

use std::path::Path;

use nodewright_adapters::eventlog::{LogHeader, LogRecord, MemoryStore};
use nodewright_core::interruption::Interruption;
use nodewright_core::model::duration::MaybeNever;
use nodewright_core::model::nodeclaim::TerminationReason;
use nodewright_core::model::nodepool::{BudgetNodes, DisruptionBudget, NodePool};
use nodewright_core::model::pod::{OwnerRef, Pod};
use nodewright_core::{Command, Config, EventKind};
use nodewright_testkit::harness::{CoreHarness, expiring_pool, pdb_of_app, replicated};
use nodewright_testkit::scenario::load_file;
use nodewright_testkit::{Report, sim};

const GIB: i64 = 1 << 30;
const MIN: u64 = 60_000;
const HOUR: u64 = 60 * MIN;

fn job_pod(name: &str) -> Pod {
    let mut p = Pod::new("default", name, 1_000, GIB);
    p.owner = Some(OwnerRef {
        kind: "Job".into(),
        name: name.into(),
    });
    p
}

fn evicted(h: &CoreHarness) -> Vec<(String, bool)> {
    h.commands
        .iter()
        .filter_map(|(_, c)| match c {
            Command::EvictPod { pod, forced, .. } => Some((pod.name.clone(), *forced)),
            _ => None,
        })
        .collect()
}

fn terminated(h: &CoreHarness) -> Vec<(u64, TerminationReason, String)> {
    h.terminations()
        .into_iter()
        .map(|t| (t.at_ms, t.reason, t.detail))
        .collect()
}

#[test]
fn an_expired_machine_evicts_its_web_pod_and_leaves_its_jobs_pod_to_finish() {
    let mut h = CoreHarness::new();
    h.nodepool(expiring_pool(None));
    h.running_machine(vec![
        job_pod("train"),
        replicated(Pod::new("default", "web", 500, GIB / 2)),
    ]);
    h.run_until(31 * MIN);
    assert!(
        h.commands
            .iter()
            .any(|(_, c)| matches!(c, Command::CordonNode { .. })),
        "cordoned: nothing new lands on it"
    );
    assert_eq!(evicted(&h), vec![("web".to_string(), false)]);
    h.complete_evictions();
    // Hours later the job still runs there, and the machine with it.
    h.run_until(5 * HOUR);
    assert_eq!(evicted(&h).len(), 1);
    assert!(terminated(&h).is_empty(), "{:?}", terminated(&h));
    // It ends: the machine goes, for its expiry, naming the pod it waited for.
    h.delete_pod("default", "train");
    let t = terminated(&h);
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!(t[0].1, TerminationReason::Expired);
    assert!(
        t[0].2
            .contains("left to finish (expirationWaitsForJobs): default/train"),
        "{}",
        t[0].2
    );
}

/// A Job's pod left to finish beside a web pod its PodDisruptionBudget holds: when the budget
/// goes (no pod changes), the drain looks again and evicts the web pod; the job runs on.
#[test]
fn a_pod_held_by_its_budget_beside_a_jobs_pod_is_evicted_when_the_budget_goes() {
    let mut h = CoreHarness::new();
    h.nodepool(expiring_pool(None));
    let mut web = replicated(Pod::new("default", "web", 500, GIB / 2));
    web.labels.insert("app".into(), "web".into());
    h.send(EventKind::PodDisruptionBudgetApplied(Box::new(pdb_of_app(
        "web",
        Some(1),
        None,
    ))));
    h.running_machine(vec![job_pod("train"), web]);
    h.run_until(40 * MIN);
    assert!(
        evicted(&h).is_empty(),
        "the budget holds web, train is left"
    );
    h.send(EventKind::PodDisruptionBudgetDeleted {
        namespace: "default".into(),
        name: "web".into(),
    });
    h.run_until(41 * MIN);
    assert_eq!(evicted(&h), vec![("web".to_string(), false)]);
    h.complete_evictions();
    h.run_until(3 * HOUR);
    assert_eq!(evicted(&h).len(), 1, "train is left to finish");
    assert!(terminated(&h).is_empty());
}

/// A Job's pod left to finish beside a web pod protected by `karpenter.sh/do-not-disrupt:
/// 45m`: nothing happens on the node when the protection runs out, yet the drain evicts the
/// web pod within its retry interval of it.
#[test]
fn a_protection_that_runs_out_beside_a_jobs_pod_lets_the_drain_go_on() {
    let mut h = CoreHarness::new();
    h.nodepool(expiring_pool(None));
    let mut web = replicated(Pod::new("default", "web", 500, GIB / 2));
    web.annotations
        .insert("karpenter.sh/do-not-disrupt".into(), "45m".into());
    h.running_machine(vec![job_pod("train"), web]);
    h.run_until(44 * MIN);
    assert!(evicted(&h).is_empty(), "web is protected, train is left");
    h.run_until(46 * MIN);
    assert_eq!(evicted(&h), vec![("web".to_string(), false)]);
}

/// A machine whose drain waits only for its Job's pod: what changes the drain itself — a spot
/// interruption bringing its deadline forward, a refused eviction, its node deleted — makes it
/// look again, though other events leave such a drain alone.
fn waiting_for_train(h: &mut CoreHarness) -> (String, String) {
    h.nodepool(expiring_pool(None));
    let (claim, instance, _node) = h.running_machine(vec![
        job_pod("train"),
        replicated(Pod::new("default", "web", 500, GIB / 2)),
    ]);
    h.run_until(31 * MIN);
    assert_eq!(evicted(h), vec![("web".to_string(), false)]);
    (claim.name, instance.instance_id)
}

#[test]
fn a_spot_interruption_forces_a_drain_that_waits_for_its_jobs_pod() {
    let mut h = CoreHarness::new();
    let (_, instance_id) = waiting_for_train(&mut h);
    h.complete_evictions();
    h.run_until(2 * HOUR);
    assert_eq!(evicted(&h).len(), 1, "train is left to finish");
    let deadline = h.now_ms + 2 * MIN;
    h.send(EventKind::InterruptionReceived {
        message_id: "m-1".into(),
        instance_id,
        interruption: Interruption::SpotInterruption {
            deadline_ms: deadline,
        },
    });
    h.run_until(deadline + MIN);
    assert_eq!(
        evicted(&h),
        vec![("web".to_string(), false), ("train".to_string(), true)],
        "the instance is reclaimed at the deadline: the job's pod is evicted then, forced"
    );
}

#[test]
fn a_refused_eviction_beside_a_jobs_pod_is_asked_again() {
    let mut h = CoreHarness::new();
    waiting_for_train(&mut h);
    // Web's eviction is refused: the drain, waiting for train otherwise, asks again.
    h.send(EventKind::EvictionRefused {
        pod: nodewright_core::model::pod::PodKey::new("default", "web"),
        reason: "Cannot evict pod as it would violate the pod's disruption budget.".into(),
    });
    h.run_until(40 * MIN);
    assert_eq!(
        evicted(&h),
        vec![("web".to_string(), false), ("web".to_string(), false)]
    );
}

#[test]
fn a_node_deleted_under_a_drain_that_waits_for_its_jobs_pod_ends_the_drain() {
    let mut h = CoreHarness::new();
    let (claim, _) = waiting_for_train(&mut h);
    h.complete_evictions();
    h.run_until(HOUR);
    assert!(terminated(&h).is_empty());
    let node = h.core.state().nodeclaims[&claim]
        .node_name
        .clone()
        .expect("its node joined");
    h.send(EventKind::NodeDeleted { name: node });
    let t = terminated(&h);
    assert_eq!(t.len(), 1, "the machine goes with its node: {t:?}");
    assert_eq!(t[0].1, TerminationReason::Expired);
}

#[test]
fn termination_grace_period_bounds_the_wait() {
    let mut h = CoreHarness::new();
    h.nodepool(expiring_pool(Some(10 * MIN)));
    h.running_machine(vec![job_pod("train")]);
    h.run_until(35 * MIN);
    assert!(evicted(&h).is_empty(), "left to finish");
    h.run_until(45 * MIN);
    assert_eq!(evicted(&h), vec![("train".to_string(), true)]);
}

#[test]
fn with_the_setting_off_the_jobs_pod_is_evicted_as_in_karpenter() {
    let mut h = CoreHarness::with_config(Config {
        expiration_waits_for_jobs: false,
        ..Config::default()
    });
    h.nodepool(expiring_pool(None));
    h.running_machine(vec![job_pod("train")]);
    h.run_until(31 * MIN);
    assert_eq!(evicted(&h), vec![("train".to_string(), false)]);
    h.complete_evictions();
    let t = terminated(&h);
    assert_eq!(t.len(), 1, "{t:?}");
    assert!(!t[0].2.contains("left to finish"), "{}", t[0].2);
}

/// Machines that expire after an hour and are removed a minute after they empty, one at a
/// time (a budget of one node).
fn one_at_a_time_pool() -> NodePool {
    let mut p = expiring_pool(None);
    p.expire_after = MaybeNever::After(HOUR);
    p.consolidate_after = MaybeNever::After(MIN);
    p.budgets = vec![DisruptionBudget {
        nodes: BudgetNodes::Count(1),
        schedule: None,
        duration_ms: None,
        reasons: vec![],
    }];
    p
}

/// Two machines expire one after the other while their jobs run on, and a machine empties
/// after each: as each pass counts again which machines only wait for their jobs, none of them
/// takes the pool's one disruption, and both empty machines go.
#[test]
fn machines_that_expire_one_after_the_other_both_leave_the_budget_to_the_others() {
    let mut h = CoreHarness::new();
    h.nodepool(one_at_a_time_pool());
    h.running_machine(vec![job_pod("train-a")]);
    h.run_until(20 * MIN);
    h.running_machine(vec![job_pod("train-b")]);
    // The first waits for its job from 60 minutes on, the second from 80; a machine empties
    // after each.
    let mut emptied = Vec::new();
    for (web, at) in [("web-1", 65 * MIN), ("web-2", 85 * MIN)] {
        h.run_until(at);
        let (claim, _, node) =
            h.running_machine(vec![replicated(Pod::new("default", web, 500, GIB / 2))]);
        h.run_until(at + 3 * MIN);
        h.delete_pod("default", web);
        h.run_until(at + 10 * MIN);
        // Its instance and node are gone: it no longer takes the budget.
        h.send(EventKind::NodeClaimTerminated {
            nodeclaim: claim.name.clone(),
        });
        h.send(EventKind::NodeDeleted { name: node });
        emptied.push(claim.name);
    }
    assert!(evicted(&h).is_empty(), "{:?}", evicted(&h));
    let t = h.terminations();
    assert_eq!(
        t.iter().map(|t| &t.nodeclaim).collect::<Vec<_>>(),
        emptied.iter().collect::<Vec<_>>(),
        "{t:?}"
    );
    for (t, waiting) in t.iter().zip(["1 expired", "2 expired"]) {
        assert_eq!(t.reason, TerminationReason::Empty);
        let counted = format!("({waiting}, waiting only for Jobs' pods to finish, not counted)");
        assert!(t.detail.contains(&counted), "{}", t.detail);
    }
}

/// A pool of two machines whose budget lets one go at a time: the first expires while its
/// job runs on; the second, empty, is still removed — the waiting machine disrupts nothing.
#[test]
fn a_machine_that_only_waits_for_its_jobs_leaves_the_budget_to_the_others() {
    for waits in [true, false] {
        let mut h = CoreHarness::with_config(Config {
            expiration_waits_for_jobs: waits,
            ..Config::default()
        });
        h.nodepool(one_at_a_time_pool());
        h.running_machine(vec![job_pod("train")]);
        h.run_until(59 * MIN);
        let (empty_claim, _, _) =
            h.running_machine(vec![replicated(Pod::new("default", "web", 500, GIB / 2))]);
        h.run_until(62 * MIN);
        h.delete_pod("default", "web");
        h.run_until(70 * MIN);
        if !waits {
            // Karpenter's way: the job is evicted, and while it leaves (it has not yet: the
            // harness runs no kubelet) the expired machine is being deleted, which takes the
            // pool's one disruption: the empty machine stays.
            assert_eq!(evicted(&h), vec![("train".to_string(), false)]);
            assert!(terminated(&h).is_empty(), "{:?}", terminated(&h));
            continue;
        }
        assert!(evicted(&h).is_empty());
        let t = terminated(&h);
        assert_eq!(t.len(), 1, "{t:?}");
        assert_eq!((t[0].1, &t[0].2[..5]), (TerminationReason::Empty, "node "));
        assert!(
            t[0].2
                .contains("(1 expired, waiting only for Jobs' pods to finish, not counted)"),
            "{}",
            t[0].2
        );
        assert_eq!(
            h.terminations()[0].nodeclaim,
            empty_claim.name,
            "the empty one, not the one waiting"
        );
    }
}

/// An expired machine still holding a pod its drain evicts is being disrupted: it takes the
/// pool's one disruption, and the empty machine beside it stays until that pod has left.
#[test]
fn an_expired_machine_whose_web_pod_is_still_leaving_takes_the_budget() {
    let mut h = CoreHarness::new();
    h.nodepool(one_at_a_time_pool());
    h.running_machine(vec![
        job_pod("train"),
        replicated(Pod::new("default", "web-a", 500, GIB / 2)),
    ]);
    h.run_until(59 * MIN);
    let (empty_claim, _, _) =
        h.running_machine(vec![replicated(Pod::new("default", "web-b", 500, GIB / 2))]);
    h.run_until(62 * MIN);
    h.delete_pod("default", "web-b");
    h.run_until(70 * MIN);
    // web-a is asked to leave and has not (the harness runs no kubelet).
    assert_eq!(evicted(&h), vec![("web-a".to_string(), false)]);
    assert!(terminated(&h).is_empty(), "{:?}", terminated(&h));
    h.complete_evictions();
    h.run_until(80 * MIN);
    let t = h.terminations();
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!(t[0].nodeclaim, empty_claim.name);
    assert_eq!(t[0].reason, TerminationReason::Empty);
    assert!(
        t[0].detail
            .contains("(1 expired, waiting only for Jobs' pods to finish, not counted)"),
        "{}",
        t[0].detail
    );
}

fn run(config: impl FnOnce(&mut Config)) -> Report {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/long-jobs-expire.yaml");
    let mut scenario = load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    config(&mut scenario.config);
    let store = MemoryStore::<LogHeader, LogRecord>::new(LogHeader::new(
        scenario.config.clone(),
        &scenario.name,
    ));
    sim::run(&scenario, store).expect("runs").0
}

fn train_pods(report: &Report) -> usize {
    report
        .pod_placements
        .iter()
        .filter(|p| p.pod.starts_with("default/train-"))
        .count()
}

/// `scenarios/long-jobs-expire.yaml`: machines expire after an hour, the job runs three.
#[test]
fn a_job_longer_than_expire_after_finishes_where_karpenter_restarts_it_every_hour() {
    let nodewright = run(|_| {});
    assert!(nodewright.passed(), "{}", nodewright.summary());
    assert_eq!(train_pods(&nodewright), 1, "{}", nodewright.summary());
    assert_eq!(
        nodewright.cost.above_bound.redone_usd,
        0.0,
        "{}",
        nodewright.summary()
    );
    assert!(
        nodewright.disruptions.expired >= 4,
        "the web pods' machines expire too"
    );

    let karpenter = run(|c| c.expiration_waits_for_jobs = false);
    assert!(karpenter.passed(), "{}", karpenter.summary());
    // Evicted at each expiry, the job starts over on a new machine: four restarts in five
    // hours, and it never runs three hours in one go.
    assert!(train_pods(&karpenter) >= 4, "{}", karpenter.summary());
    assert!(
        karpenter.cost.above_bound.redone_usd > 0.3,
        "{}",
        karpenter.summary()
    );
    assert!(karpenter.disruptions.evictions > nodewright.disruptions.evictions);
}
