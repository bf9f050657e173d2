//! `replay --policy`: the recorded world under another policy.

use std::ops::Not;
use std::path::Path;
use std::process::Command as Process;

use nodewright_adapters::eventlog::{EventStore, LogHeader, LogRecord, MemoryStore};
use nodewright_testkit::scenario::builtin;
use nodewright_testkit::whatif::{Policy, Recording, WhatIfError, what_if};
use nodewright_testkit::{Report, sim};

/// A built-in scenario's run and its log, read back as a recording.
fn recorded(name: &str) -> (Report, Recording) {
    let scenario = builtin(name).expect("built in").expect("loads");
    let store = MemoryStore::new(LogHeader::new(scenario.config.clone(), &scenario.name));
    let (report, store) = sim::run(&scenario, store).expect("runs");
    let records: Vec<LogRecord> = store.read_range(0, store.len()).expect("readable");
    (report, Recording::of(store.header().clone(), records))
}

fn policy(path: &str) -> Policy {
    Policy::load(Path::new(path)).expect("the policy loads")
}

#[test]
fn the_baseline_re_simulation_reproduces_the_tutorial() {
    let (report, recording) = recorded("seed-tutorial");
    let outcome = what_if(
        &recording,
        &policy("tests/policies/seed-tutorial/longer-batches.yaml"),
    )
    .expect("runs");
    // The recorded world, under its own policy, gives the recorded run again.
    assert_eq!(outcome.baseline.machines_launched, report.nodes.launched);
    assert!((outcome.baseline.total_usd - report.cost.total_usd).abs() < 1e-4);
    assert_eq!(
        outcome.baseline.pending_seconds,
        report.pods.pending_seconds
    );
    assert_eq!(outcome.recorded.machines_launched, report.nodes.launched);
    assert!((outcome.recorded.total_usd - report.cost.total_usd).abs() < 1e-4);
}

#[test]
fn a_policy_equal_to_the_recorded_one_is_refused_as_changing_nothing() {
    let (_, recording) = recorded("seed-tutorial");
    let pool =
        std::fs::read_to_string("scenarios/tutorial/nodepool.yaml").expect("the tutorial pool");
    let same = Policy::parse(&pool, "nodepool.yaml").expect("parses");
    let err = what_if(&recording, &same).expect_err("nothing to compare");
    assert!(matches!(err, WhatIfError::Policy { .. }), "{err}");
    assert!(
        err.to_string().starts_with(
            "nodepool.yaml: it changes nothing: its NodePool default as the log recorded them"
        ),
        "{err}"
    );
    // Settings equal to the recorded ones change nothing either; one changed field does.
    let same_settings = Policy::parse(
        &format!("settings:\n  batchIdleDuration: 1s\n---\n{pool}"),
        "s.yaml",
    )
    .expect("parses");
    assert!(what_if(&recording, &same_settings).is_err());
    let changed = Policy::parse(
        &pool.replace("consolidateAfter: 1m", "consolidateAfter: 2m"),
        "changed.yaml",
    )
    .expect("parses");
    assert_ne!(
        pool.replace("consolidateAfter: 1m", "consolidateAfter: 2m"),
        pool,
        "the tutorial consolidates after 1m"
    );
    what_if(&recording, &changed).expect("a change runs");
}

#[test]
fn a_what_if_that_schedules_other_pods_says_it_is_not_like_for_like() {
    let (_, recording) = recorded("mixed");
    let outcome =
        what_if(&recording, &policy("tests/policies/mixed/spot-capped.yaml")).expect("runs");
    assert!(outcome.like_for_like.not(), "{}", outcome.render());
    let b = &outcome.baseline;
    let w = &outcome.what_if;
    assert!(w.scheduled < b.scheduled);
    assert!(w.scheduled_pod_hours < b.scheduled_pod_hours);
    let per = |f: &nodewright_testkit::whatif::Figures| f.total_usd / f.scheduled_pod_hours;
    let shown = w.usd_per_scheduled_pod_hour.expect("pods ran");
    assert!((shown - per(w)).abs() < 1e-3, "{shown} vs {}", per(w));
    let left_out: u64 = w.left_out.iter().map(|l| l.pods).sum();
    assert!(
        left_out > 0 && left_out <= w.never_scheduled,
        "{left_out} of {} pods never scheduled have a reason",
        w.never_scheduled
    );
    let text = outcome.render();
    assert!(text.contains("not like for like"), "{text}");
    assert!(text.contains("cost per pod-hour (USD)"), "{text}");
    assert!(text.contains("left out by the what-if: "), "{text}");
    assert!(text.contains(&w.left_out[0].reason), "{text}");
}

#[test]
fn allowing_spot_moves_the_launch_to_spot_and_costs_less() {
    let (_, recording) = recorded("seed-tutorial");
    let outcome = what_if(
        &recording,
        &policy("tests/policies/seed-tutorial/spot-allowed.yaml"),
    )
    .expect("runs");
    assert!(
        outcome.what_if.total_usd < outcome.baseline.total_usd,
        "{}",
        outcome.render()
    );
    let moved: Vec<(&str, u64, u64)> = outcome
        .launched
        .iter()
        .map(|c| (c.what.as_str(), c.baseline, c.what_if))
        .collect();
    assert!(
        moved
            .iter()
            .any(|(w, b, _)| w.ends_with(" on-demand") && *b > 0)
    );
    assert!(moved.iter().any(|(w, _, n)| w.ends_with(" spot") && *n > 0));
    assert_eq!(outcome.changes, "NodePool default");
}

#[test]
fn a_longer_batch_window_makes_pods_wait_longer() {
    let (_, recording) = recorded("seed-tutorial");
    let outcome = what_if(
        &recording,
        &policy("tests/policies/seed-tutorial/longer-batches.yaml"),
    )
    .expect("runs");
    assert!(
        outcome.what_if.pending_seconds.p50 > outcome.baseline.pending_seconds.p50,
        "{}",
        outcome.render()
    );
    assert_eq!(outcome.changes, "settings");
}

#[test]
fn capping_the_spot_pool_leaves_web_pods_pending_in_mixed() {
    let (_, recording) = recorded("mixed");
    let outcome =
        what_if(&recording, &policy("tests/policies/mixed/spot-capped.yaml")).expect("runs");
    assert_eq!(outcome.baseline.never_scheduled, 0, "{}", outcome.render());
    assert!(outcome.what_if.never_scheduled > 0, "{}", outcome.render());
    assert!(outcome.what_if.machines_launched < outcome.baseline.machines_launched);
}

#[test]
fn bad_policies_are_refused_before_anything_runs() {
    let (_, recording) = recorded("seed-tutorial");
    let unknown = Policy::parse(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: defualt}\nspec:\n  template:\n    spec:\n      requirements: []\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n",
        "typo.yaml",
    )
    .expect("parses");
    let err = what_if(&recording, &unknown).expect_err("an unknown NodePool");
    assert!(matches!(err, WhatIfError::UnknownObject { .. }));
    assert_eq!(
        err.to_string(),
        "typo.yaml: NodePool \"defualt\" is not in the recording (it has default); a policy changes recorded objects only: check the name"
    );

    let workload = Policy::parse(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: i}]\n",
        "pod.yaml",
    )
    .expect_err("a pod is not policy");
    assert!(
        workload.to_string().contains("it holds a Pod"),
        "{workload}"
    );

    let yaml =
        Policy::parse("settings:\n  batchIdleDuration: [\n", "broken.yaml").expect_err("not YAML");
    assert!(
        yaml.to_string()
            .starts_with("broken.yaml: the settings document"),
        "{yaml}"
    );

    let setting = Policy::parse("settings:\n  batchIdleDuration: soon\n", "s.yaml")
        .expect_err("not a duration");
    assert!(
        setting.to_string().contains("settings.batchIdleDuration"),
        "{setting}"
    );

    let empty = Policy::parse("# nothing\n", "empty.yaml").expect_err("changes nothing");
    assert!(empty.to_string().contains("it changes nothing"), "{empty}");
}

#[test]
fn the_cli_prints_the_diff_writes_json_and_exits_2_on_a_bad_policy() {
    let dir = tempfile::tempdir().expect("temp dir");
    let report = dir.path().join("what-if.json");
    let nodewright = |args: &[&str]| {
        Process::new(env!("CARGO_BIN_EXE_nodewright"))
            .args(args)
            .output()
            .expect("runs")
    };
    let out = nodewright(&[
        "replay",
        "tests/logs/seed-tutorial.nwlog",
        "--policy",
        "tests/policies/seed-tutorial/spot-allowed.yaml",
        "--report",
        report.to_str().expect("utf-8"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("machines launched (nodepool/type capacity"),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("written")).expect("JSON");
    for key in ["recorded", "baseline", "what_if", "launched", "removed"] {
        assert!(json.get(key).is_some(), "no {key} in {json}");
    }
    assert!(json["what_if"]["total_usd"].as_f64() < json["baseline"]["total_usd"].as_f64());
    assert_eq!(json["like_for_like"], true);

    // --log writes the what-if run's log: it replays, and explain reads it.
    let run_log = dir.path().join("what-if.nwlog");
    let out = nodewright(&[
        "replay",
        "tests/logs/seed-tutorial.nwlog",
        "--policy",
        "tests/policies/seed-tutorial/spot-allowed.yaml",
        "--log",
        run_log.to_str().expect("utf-8"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = nodewright(&["replay", run_log.to_str().expect("utf-8"), "--verify"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = nodewright(&[
        "explain",
        "--command",
        "0",
        run_log.to_str().expect("utf-8"),
    ]);
    let story = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        story.contains("spot"),
        "the what-if's launch is on spot: {story}"
    );

    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: nope}\nspec:\n  template:\n    spec:\n      requirements: []\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n").expect("written");
    let refused_report = dir.path().join("refused.json");
    let out = nodewright(&[
        "replay",
        "tests/logs/seed-tutorial.nwlog",
        "--policy",
        bad.to_str().expect("utf-8"),
        "--report",
        refused_report.to_str().expect("utf-8"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("NodePool \"nope\" is not in the recording")
    );
    assert!(!refused_report.exists(), "nothing ran");
}

/// Two Jobs of the openb trace's format on one machine: when the first ends (at 3 h), the
/// second (7 vCPU and 14 GiB, about half the machine, for 10 h) alone could go to a machine
/// that costs 44 % less: less than the share it holds, so over the 3 hours it has run the
/// saving does not pay for the work it would lose.
const TWO_JOBS: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
short,6000,1024,0,0,,BE,Succeeded,0,10800,0
long,7000,14336,0,0,,BE,Succeeded,0,36000,0";

#[test]
fn jobs_of_the_recording_are_made_again_as_jobs_and_the_karpenter_rule_restarts_one() {
    use nodewright_testkit::scenario::trace::{TraceOptions, alibaba_openb, alibaba_openb_base};
    let base = alibaba_openb_base().expect("the base loads");
    let (scenario, _) =
        alibaba_openb(TWO_JOBS, "jobs.csv", TraceOptions::default(), base).expect("loads");
    let store = MemoryStore::new(LogHeader::new(scenario.config.clone(), &scenario.name));
    let (report, store) = sim::run(&scenario, store).expect("runs");
    assert_eq!(report.disruptions.evictions, 0, "{}", report.summary());
    let records: Vec<LogRecord> = store.read_range(0, store.len()).expect("readable");
    let recording = Recording::of(store.header().clone(), records);

    let karpenter = Policy::parse("settings:\n  countLostWork: false\n", "karpenter-rule.yaml")
        .expect("parses");
    let outcome = what_if(&recording, &karpenter).expect("runs");
    // The baseline (the recorded policy, re-simulated): the Jobs run as recorded.
    assert_eq!(outcome.baseline.evictions, 0, "{}", outcome.render());
    assert_eq!(outcome.baseline.machines_launched, report.nodes.launched);
    assert!(
        (outcome.baseline.total_usd - report.cost.total_usd).abs() < 0.01 * report.cost.total_usd,
        "baseline {} recorded {}",
        outcome.baseline.total_usd,
        report.cost.total_usd
    );
    // Karpenter's rule moves the long Job's pod to a smaller machine: it starts over, and its
    // 3 hours of work are paid again.
    assert_eq!(outcome.what_if.evictions, 1, "{}", outcome.render());
    assert!(
        outcome.what_if.scheduled > outcome.baseline.scheduled,
        "the Job made its pod again: {}",
        outcome.render()
    );
}

#[test]
fn the_baseline_re_simulation_keeps_a_statefulset_whose_pods_come_back_under_their_names() {
    // `db`'s machines expire every 15 minutes: each of its pods is evicted and made again
    // under the same name, by a StatefulSet (a replicated owner: its pods serve on).
    let (report, recording) = recorded("volume-topology");
    assert!(report.disruptions.expired > 0, "{}", report.summary());
    let outcome = what_if(
        &recording,
        &Policy::parse("settings:\n  batchIdleDuration: 2s\n", "batch.yaml").expect("parses"),
    )
    .expect("runs");
    // The recorded world under its own policy: as many machines and the same pods scheduled
    // (10 machines against 11 when the StatefulSet was made again as a Deployment, whose pods
    // lost their owner and their names). Not the same cost to the cent: the StatefulSet is
    // made again from one recorded pod, whose volume's zone its every ordinal then carries
    // (0.3337 against 0.3417 USD when this was written).
    assert_eq!(outcome.baseline.machines_launched, report.nodes.launched);
    assert_eq!(outcome.baseline.scheduled, report.pods.scheduled);
    let off = (outcome.baseline.total_usd - report.cost.total_usd).abs() / report.cost.total_usd;
    assert!(
        off < 0.05,
        "{} against {}",
        outcome.baseline.total_usd,
        report.cost.total_usd
    );
}

#[test]
fn a_static_pods_mirror_in_the_recording_is_left_to_its_node() {
    use nodewright_core::model::pod::{OwnerRef, Pod};
    use nodewright_core::{Event, EventKind};
    let scenario = builtin("seed-tutorial").expect("built in").expect("loads");
    let store = MemoryStore::new(LogHeader::new(scenario.config.clone(), &scenario.name));
    let (report, store) = sim::run(&scenario, store).expect("runs");
    // The recording with a mirror pod on the first node that registered, as a controller
    // records one (owned by the node; the kubelet runs it from a file).
    let mut records: Vec<LogRecord> = store.read_range(0, store.len()).expect("readable");
    let (at, node) = records
        .iter()
        .find_map(|r| match r {
            LogRecord::Event(Event {
                at_ms,
                kind: EventKind::NodeApplied(node),
            }) => Some((*at_ms, node.name.clone())),
            _ => None,
        })
        .expect("a node registered");
    let mut mirror = Pod::new("kube-system", &format!("exporter-{node}"), 50, 64 << 20);
    mirror.owner = Some(OwnerRef {
        kind: "Node".into(),
        name: node.clone(),
    });
    mirror.node_name = Some(node);
    let at_index = records
        .iter()
        .position(|r| matches!(r, LogRecord::Event(e) if e.at_ms > at))
        .expect("events after it");
    records.insert(
        at_index,
        LogRecord::Event(Event {
            at_ms: at,
            kind: EventKind::PodApplied(Box::new(mirror)),
        }),
    );
    let recording = Recording::of(store.header().clone(), records);
    let outcome = what_if(
        &recording,
        &policy("tests/policies/seed-tutorial/longer-batches.yaml"),
    )
    .expect("runs");
    // Not a workload of its own: the baseline schedules the recorded pods, no more.
    assert_eq!(outcome.baseline.scheduled, report.pods.scheduled);
    assert_eq!(outcome.baseline.machines_launched, report.nodes.launched);
}
