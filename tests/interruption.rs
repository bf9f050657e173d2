//! Interruption messages: a spot interruption warning, a scheduled change or an instance that
//! stops replaces and drains the machine at once; a rebalance recommendation is only recorded;
//! a message about an unknown instance is acknowledged.

use nodewright_core::catalog::CapacityType;
use nodewright_core::interruption::Interruption;
use nodewright_core::model::duration::MaybeNever;
use nodewright_core::model::labels;
use nodewright_core::model::nodeclaim::{Instance, NodeClaimSpec, TerminationReason};
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::pod::Pod;
use nodewright_core::model::requirements::{Operator, RequirementSpec};
use nodewright_core::{Command, EventKind};
use nodewright_testkit::harness::{CoreHarness, pdb_of_app};

const GIB: i64 = 1 << 30;

fn spot_pool() -> NodePool {
    let mut p = NodePool::new("default", "default");
    p.requirements = vec![
        RequirementSpec::new(labels::CAPACITY_TYPE, Operator::In, &["spot"]),
        RequirementSpec::new(labels::INSTANCE_CATEGORY, Operator::In, &["c", "m", "r"]),
        RequirementSpec::new(labels::ARCH, Operator::In, &["amd64"]),
    ];
    p.consolidate_after = MaybeNever::Never;
    p
}

fn web(name: &str) -> Pod {
    let mut p = Pod::new("default", name, 1000, GIB);
    p.labels.insert("app".into(), "web".into());
    p
}

/// A spot machine running two web pods.
fn spot_machine(h: &mut CoreHarness) -> (NodeClaimSpec, Instance, String) {
    h.nodepool(spot_pool());
    let (claim, instance, node) = h.running_machine(vec![web("w1"), web("w2")]);
    assert_eq!(instance.capacity_type, CapacityType::Spot);
    (claim, instance, node)
}

fn interrupt(h: &mut CoreHarness, instance_id: &str, interruption: Interruption) -> Vec<Command> {
    h.send(EventKind::InterruptionReceived {
        message_id: "m-1".into(),
        instance_id: instance_id.into(),
        interruption,
    })
}

fn report(commands: &[Command]) -> (Option<String>, String) {
    commands
        .iter()
        .find_map(|c| match c {
            Command::ReportInterruption {
                nodeclaim, action, ..
            } => Some((nodeclaim.clone(), action.clone())),
            _ => None,
        })
        .expect("every message is reported")
}

#[test]
fn a_spot_interruption_launches_a_replacement_then_drains_at_once() {
    let mut h = CoreHarness::new();
    let (claim, instance, node) = spot_machine(&mut h);
    let deadline = h.now_ms + 120_000;
    let out = interrupt(
        &mut h,
        &instance.instance_id,
        Interruption::SpotInterruption {
            deadline_ms: deadline,
        },
    );
    let launch = out
        .iter()
        .position(|c| matches!(c, Command::LaunchNodeClaim { .. }))
        .expect("a replacement is launched");
    let cordon = out
        .iter()
        .position(|c| matches!(c, Command::CordonNode { node: n, .. } if *n == node))
        .expect("the node is tainted");
    let first_eviction = out
        .iter()
        .position(|c| matches!(c, Command::EvictPod { .. }))
        .expect("the drain starts now, without waiting for the replacement");
    assert!(launch < cordon && cordon < first_eviction);
    let Command::LaunchNodeClaim { nodeclaim, reason } = &out[launch] else {
        unreachable!()
    };
    assert!(reason.summary.contains(&format!("replaces {}", claim.name)));
    // The interrupted offering is unavailable: the replacement does not ask for it.
    assert!(
        !nodeclaim
            .options
            .iter()
            .any(|o| o.instance_type == instance.instance_type
                && o.zone == instance.zone
                && o.capacity_type == CapacityType::Spot)
    );
    let (reported_claim, action) = report(&out);
    assert_eq!(reported_claim.as_deref(), Some(claim.name.as_str()));
    assert!(action.contains("replace and drain"), "{action}");
    h.complete_evictions();
    let t = h.terminations();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].reason, TerminationReason::Interrupted);
    assert!(
        t[0].detail.contains("marked unavailable"),
        "{}",
        t[0].detail
    );
}

#[test]
fn the_drain_is_forced_when_the_spot_notice_runs_out() {
    let mut h = CoreHarness::new();
    let (_, instance, _) = spot_machine(&mut h);
    // A budget that allows no eviction would hold the drain for good.
    h.send(EventKind::PodDisruptionBudgetApplied(Box::new(pdb_of_app(
        "web",
        Some(2),
        None,
    ))));
    let deadline = h.now_ms + 120_000;
    let out = interrupt(
        &mut h,
        &instance.instance_id,
        Interruption::SpotInterruption {
            deadline_ms: deadline,
        },
    );
    assert!(
        !out.iter().any(|c| matches!(c, Command::EvictPod { .. })),
        "the budget holds the graceful drain"
    );
    h.run_until(deadline);
    let forced: Vec<u64> = h
        .commands
        .iter()
        .filter_map(|(t, c)| match c {
            Command::EvictPod { forced: true, .. } => Some(*t),
            _ => None,
        })
        .collect();
    assert_eq!(
        forced.len(),
        2,
        "both pods leave before the cloud takes the machine"
    );
    assert!(forced.iter().all(|t| *t == deadline), "{forced:?}");
}

#[test]
fn a_rebalance_recommendation_is_recorded_only() {
    let mut h = CoreHarness::new();
    let (claim, instance, _) = spot_machine(&mut h);
    let out = interrupt(
        &mut h,
        &instance.instance_id,
        Interruption::RebalanceRecommendation,
    );
    assert_eq!(out.len(), 1, "{out:?}");
    let (reported_claim, action) = report(&out);
    assert_eq!(reported_claim, Some(claim.name));
    assert!(action.contains("recorded only"), "{action}");
    h.advance(10 * 60_000);
    assert!(h.terminations().is_empty());
    assert_eq!(h.all_launches().len(), 1);
}

#[test]
fn a_message_about_an_unknown_instance_is_acknowledged_not_an_error() {
    let mut h = CoreHarness::new();
    spot_machine(&mut h);
    let deadline_ms = h.now_ms + 120_000;
    let out = interrupt(
        &mut h,
        "i-0123456789abcdef0",
        Interruption::SpotInterruption { deadline_ms },
    );
    assert_eq!(out.len(), 1, "{out:?}");
    let (claim, action) = report(&out);
    assert_eq!(claim, None);
    assert!(
        action.contains("no NodeClaim runs instance i-0123456789abcdef0"),
        "{action}"
    );
}

#[test]
fn instance_state_changes_replace_only_when_the_machine_goes_away() {
    let mut h = CoreHarness::new();
    let (_, instance, _) = spot_machine(&mut h);
    let out = interrupt(
        &mut h,
        &instance.instance_id,
        Interruption::StateChange {
            state: "running".into(),
        },
    );
    assert_eq!(out.len(), 1);
    assert!(report(&out).1.contains("nothing to do"));
    let out = interrupt(
        &mut h,
        &instance.instance_id,
        Interruption::StateChange {
            state: "stopping".into(),
        },
    );
    assert!(
        out.iter()
            .any(|c| matches!(c, Command::LaunchNodeClaim { .. }))
    );
    assert!(out.iter().any(|c| matches!(c, Command::EvictPod { .. })));
    // A second message about the same machine changes nothing.
    let again = interrupt(
        &mut h,
        &instance.instance_id,
        Interruption::StateChange {
            state: "stopped".into(),
        },
    );
    assert_eq!(again.len(), 1, "{again:?}");
    assert!(report(&again).1.contains("already being terminated"));
}

#[test]
fn a_scheduled_change_replaces_without_marking_the_offering_unavailable() {
    let mut h = CoreHarness::new();
    let (claim, instance, _) = spot_machine(&mut h);
    let out = interrupt(
        &mut h,
        &instance.instance_id,
        Interruption::ScheduledChange {
            event_type: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED".into(),
        },
    );
    let replacement = out
        .iter()
        .find_map(|c| match c {
            Command::LaunchNodeClaim { nodeclaim, .. } => Some(nodeclaim.clone()),
            _ => None,
        })
        .expect("a replacement");
    assert!(
        replacement
            .options
            .iter()
            .any(|o| o.instance_type == instance.instance_type && o.zone == instance.zone),
        "the same offering may be used again: a retirement says nothing about capacity"
    );
    h.complete_evictions();
    let t = h.terminations();
    assert_eq!(t[0].nodeclaim, claim.name);
    assert_eq!(t[0].reason, TerminationReason::Interrupted);
    assert!(
        t[0].detail
            .contains("AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED")
    );
}

fn run_scenario(file: &str, seed: Option<u64>) -> nodewright_testkit::Report {
    use nodewright_adapters::eventlog::{LogHeader, LogRecord, MemoryStore};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(file);
    let mut scenario =
        nodewright_testkit::scenario::load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    if let Some(seed) = seed {
        scenario = scenario.with_seed(seed);
    }
    let store = MemoryStore::<LogHeader, LogRecord>::new(LogHeader::new(
        scenario.config.clone(),
        &scenario.name,
    ));
    nodewright_testkit::sim::run(&scenario, store)
        .expect("runs")
        .0
}

#[test]
fn the_spot_interruption_scenario_replaces_the_machine_before_the_cloud_takes_it() {
    for seed in [7, 8, 9, 10, 11] {
        let report = run_scenario("spot-interruption.yaml", Some(seed));
        assert!(report.passed(), "seed {seed}: {}", report.summary());
        assert_eq!(report.disruptions.interrupted, 1, "seed {seed}");
        let interrupted = report
            .machines
            .iter()
            .find(|m| {
                m.termination_reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("Interrupted"))
            })
            .expect("the interrupted machine");
        let replacement = report
            .machines
            .iter()
            .find(|m| {
                m.launch_reason
                    .starts_with(&format!("replaces {}", interrupted.name))
            })
            .expect("its replacement");
        // Asked for with the warning at 300 s; the fleet call takes a second.
        assert!(
            (300.0..=301.0).contains(&replacement.launched_at_seconds),
            "seed {seed}: launched at {}",
            replacement.launched_at_seconds
        );
        assert!(
            (
                replacement.instance_type.as_str(),
                replacement.zone.as_str()
            ) != (
                interrupted.instance_type.as_str(),
                interrupted.zone.as_str()
            ),
            "seed {seed}: not the offering that was just interrupted"
        );
        // Gone by the end of the two-minute notice.
        assert!(
            interrupted
                .terminated_at_seconds
                .is_some_and(|t| t <= 300.0 + 120.0 + 5.0),
            "seed {seed}: {:?}",
            interrupted.terminated_at_seconds
        );
        assert!(report.unschedulable.is_empty(), "seed {seed}");
    }
}

#[test]
fn an_interruption_storm_during_a_capacity_shortage_leaves_no_pod_behind() {
    for seed in [11, 12, 13, 14] {
        let report = run_scenario("spot-storm.yaml", Some(seed));
        assert!(report.passed(), "seed {seed}: {}", report.summary());
        assert!(
            report.invariant_violations.is_empty(),
            "seed {seed}: {:?}",
            report.invariant_violations
        );
        // 30 % of 20 machines, within two minutes.
        assert_eq!(report.disruptions.interrupted, 6, "seed {seed}");
        let interrupted: Vec<&nodewright_testkit::report::MachineReport> = report
            .machines
            .iter()
            .filter(|m| {
                m.termination_reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("Interrupted"))
            })
            .collect();
        assert_eq!(interrupted.len(), 6, "seed {seed}");
        for m in &interrupted {
            let gone = m.terminated_at_seconds.expect("terminated");
            assert!(
                (600.0..=600.0 + 120.0 + 120.0 + 5.0).contains(&gone),
                "seed {seed}: {} gone at {gone}",
                m.name
            );
            assert!(
                report
                    .machines
                    .iter()
                    .any(|r| r.launch_reason.starts_with(&format!("replaces {}", m.name))),
                "seed {seed}: {} has a replacement",
                m.name
            );
        }
        let live_at_end = report
            .machines
            .iter()
            .filter(|m| m.terminated_at_seconds.is_none())
            .count();
        assert_eq!(live_at_end, 20, "seed {seed}: one machine per pod again");
        assert_eq!(
            report.disruptions.empty, 0,
            "seed {seed}: no machine launched twice for the same pod"
        );
        assert!(report.unschedulable.is_empty(), "seed {seed}");
    }
}

#[test]
fn throttled_cloud_calls_latency_spikes_and_a_capacity_shortage_leave_no_pod_behind() {
    for seed in [31, 32, 33, 34] {
        let report = run_scenario("cloud-faults.yaml", Some(seed));
        assert!(report.passed(), "seed {seed}: {}", report.summary());
        assert!(report.unschedulable.is_empty(), "seed {seed}");
    }
    // Throttled so often that launches give up: the pods still get machines, none twice.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/cloud-faults.yaml");
    for seed in [41, 42] {
        let mut scenario = nodewright_testkit::scenario::load_file(&path)
            .unwrap_or_else(|e| panic!("{e}"))
            .with_seed(seed);
        scenario.cloud.api_error_rate = 0.9;
        let store = nodewright_adapters::eventlog::MemoryStore::new(
            nodewright_adapters::eventlog::LogHeader::new(scenario.config.clone(), &scenario.name),
        );
        let (report, store) = nodewright_testkit::sim::run(&scenario, store).expect("runs");
        assert!(
            report.invariant_violations.is_empty(),
            "seed {seed}: {:?}",
            report.invariant_violations
        );
        assert!(
            report.unschedulable.is_empty(),
            "seed {seed}: {:?}",
            report.unschedulable
        );
        assert_eq!(report.pods.never_scheduled, 0, "seed {seed}");
        use nodewright_adapters::eventlog::EventStore;
        let gave_up = store
            .read_range(0, store.len())
            .expect("records")
            .iter()
            .filter(|r| {
                matches!(r, nodewright_adapters::eventlog::LogRecord::Event(e)
                    if matches!(&e.kind, EventKind::LaunchFailed { code, .. } if code == "RequestLimitExceeded"))
            })
            .count();
        assert!(
            gave_up > 0,
            "seed {seed}: some launch was throttled five times"
        );
    }
}

#[test]
fn a_spot_warning_for_a_machine_already_draining_marks_its_offering_and_hastens_the_drain() {
    let mut h = CoreHarness::new();
    let mut pool = spot_pool();
    pool.expire_after = MaybeNever::After(10 * 60_000);
    h.nodepool(pool);
    h.send(EventKind::PodDisruptionBudgetApplied(Box::new(pdb_of_app(
        "web",
        Some(2),
        None,
    ))));
    let (_, instance, _) = h.running_machine(vec![web("w1"), web("w2")]);
    // Expired: draining, held by the budget.
    h.advance(11 * 60_000);
    assert!(h.terminations().is_empty());
    let deadline = h.now_ms + 120_000;
    let out = interrupt(
        &mut h,
        &instance.instance_id,
        Interruption::SpotInterruption {
            deadline_ms: deadline,
        },
    );
    let (_, action) = report(&out);
    assert!(action.contains("already being terminated"), "{action}");
    assert!(action.contains("marked unavailable"), "{action}");
    assert!(action.contains("forced at"), "{action}");
    h.run_until(deadline);
    let forced = h
        .commands
        .iter()
        .filter(|(_, c)| matches!(c, Command::EvictPod { forced: true, .. }))
        .count();
    assert_eq!(
        forced, 2,
        "both pods leave before the cloud takes the machine"
    );
}
