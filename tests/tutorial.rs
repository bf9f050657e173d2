//! The seed tutorial, end to end: the guide's NodePool and EC2NodeClass, inflate scaled to 5,
//! then deleted.

use nodewright_adapters::eventlog::{EventStore, LogHeader, LogRecord, MemoryStore};
use nodewright_core::model::labels;
use nodewright_core::{Command, Event};
use nodewright_testkit::scenario::{Scenario, builtin};
use nodewright_testkit::{Report, sim};

fn tutorial() -> Scenario {
    builtin("seed-tutorial")
        .expect("the seed tutorial is built in")
        .expect("the seed tutorial loads")
}

fn run(scenario: &Scenario) -> (Report, MemoryStore<LogHeader, LogRecord>) {
    let store = MemoryStore::new(LogHeader::new(scenario.config.clone(), &scenario.name));
    sim::run(scenario, store).expect("the run completes")
}

#[test]
fn inflate_pods_land_on_on_demand_amd64_c_m_r_machines_and_are_scheduled() {
    let scenario = tutorial();
    let (report, _) = run(&scenario);
    assert!(report.passed(), "{}", report.summary());
    assert!(report.nodes.launched >= 1);
    for m in &report.machines {
        assert_eq!(m.capacity_type, "on-demand", "{m:?}");
        let it = scenario.catalog.get(&m.instance_type).expect("known type");
        assert_eq!(it.labels[labels::ARCH], "amd64");
        assert!(
            ["c", "m", "r"].contains(&it.labels[labels::INSTANCE_CATEGORY].as_str()),
            "{m:?}"
        );
    }
    let inflate: Vec<_> = report
        .pod_placements
        .iter()
        .filter(|p| p.pod.starts_with("default/inflate-"))
        .collect();
    assert_eq!(inflate.len(), 5);
    let machine_names: Vec<&str> = report.machines.iter().map(|m| m.name.as_str()).collect();
    for p in inflate {
        let node = p.node.as_deref().expect("every inflate pod ran");
        assert!(
            machine_names.contains(&node),
            "{} ran on {node}, not a launched machine",
            p.pod
        );
        let waited = p.bound_at_seconds.expect("bound") - p.created_at_seconds;
        assert!(waited < 180.0, "{} waited {waited}s", p.pod);
    }
}

#[test]
fn deleting_inflate_removes_every_emptied_machine() {
    let (report, _) = run(&tutorial());
    assert_eq!(report.nodes.final_count, 0, "{}", report.summary());
    assert_eq!(report.nodes.terminated, report.nodes.launched);
    assert_eq!(report.disruptions.empty, report.nodes.launched);
    for m in &report.machines {
        let at = m.terminated_at_seconds.expect("terminated");
        // Deleted at 10m, empty after consolidateAfter 1m, a pass every 10s, 10s to terminate.
        assert!(
            (660.0..=700.0).contains(&at),
            "{} terminated at {at}s",
            m.name
        );
        assert!(
            m.termination_reason
                .as_deref()
                .unwrap_or("")
                .starts_with("Empty")
        );
    }
    assert_eq!(report.cost.final_usd_per_hour, 0.0);
}

#[test]
fn the_same_seed_gives_the_same_digest_and_another_seed_another() {
    let a = run(&tutorial()).0;
    let b = run(&tutorial()).0;
    assert_eq!(a.decision_digest, b.decision_digest);
    assert_eq!(a, b);
    let c = run(&tutorial().with_seed(2)).0;
    assert_ne!(
        a.decision_digest, c.decision_digest,
        "seeds name NodeClaims differently"
    );
    assert!(c.passed(), "{}", c.summary());
}

#[test]
fn the_log_replays_to_the_same_commands() {
    let (report, store) = run(&tutorial());
    let mut bytes = Vec::new();
    store.write_nwlog(&mut bytes).expect("the log serialises");
    let reader =
        nodewright_adapters::eventlog::NwlogReader::<LogHeader, LogRecord, _>::new(&bytes[..])
            .expect("the log opens");
    let outcome = nodewright_replay::verify(reader).expect("the log reads");
    assert!(outcome.divergence.is_none(), "{:?}", outcome.divergence);
    assert_eq!(outcome.events, report.events);
    assert_eq!(outcome.commands, report.commands);
    assert_eq!(outcome.decision_digest, report.decision_digest);
}

/// One line per command: what a reviewer reads in a diff.
fn transcript(records: &[LogRecord]) -> String {
    let mut out = String::new();
    let mut last_event: Option<Event> = None;
    for record in records {
        match record {
            LogRecord::Event(e) => last_event = Some(e.clone()),
            LogRecord::Commands(commands) => {
                let at = last_event.as_ref().map(|e| e.at_ms).unwrap_or(0);
                let cause = last_event.as_ref().map(|e| e.kind.name()).unwrap_or("?");
                for c in commands {
                    let line = match c {
                        Command::LaunchNodeClaim { nodeclaim, reason } => {
                            let types: std::collections::BTreeSet<&str> = nodeclaim
                                .options
                                .iter()
                                .map(|o| o.instance_type.as_str())
                                .collect();
                            let cheapest: Vec<String> = nodeclaim
                                .options
                                .iter()
                                .take(3)
                                .map(|o| {
                                    format!(
                                        "{}/{}/{} {}",
                                        o.instance_type, o.zone, o.capacity_type, o.price
                                    )
                                })
                                .collect();
                            format!(
                                "LaunchNodeClaim {} pool={} requests=[{}] options={} types={} cheapest=[{}]\n    reason: {}",
                                nodeclaim.name,
                                nodeclaim.nodepool,
                                nodeclaim.requests,
                                nodeclaim.options.len(),
                                types.len(),
                                cheapest.join(", "),
                                reason.summary
                            )
                        }
                        Command::TerminateNodeClaim {
                            nodeclaim,
                            reason,
                            detail,
                            ..
                        } => {
                            format!("TerminateNodeClaim {nodeclaim} {reason}: {detail}")
                        }
                        Command::NominatePod { pod, target, .. } => {
                            format!("NominatePod {pod} -> {target}")
                        }
                        Command::ReportUnschedulable { pod, reason } => {
                            format!("ReportUnschedulable {pod}: {reason}")
                        }
                        Command::WarnMissingRequests { pod } => {
                            format!("WarnMissingRequests {pod}")
                        }
                        Command::DisruptionBlocked { nodepool, reason } => {
                            format!("DisruptionBlocked {nodepool}: {reason}")
                        }
                        Command::CordonNode { node, .. } => format!("CordonNode {node}"),
                        Command::EvictPod { pod, forced, .. } => {
                            format!("EvictPod {pod} forced={forced}")
                        }
                        Command::UncordonNode { node, .. } => format!("UncordonNode {node}"),
                        Command::ReleaseNode { node, reason, .. } => {
                            format!("ReleaseNode {node}: {reason}")
                        }
                        Command::WarnInvalidAnnotation { object, reason } => {
                            format!("WarnInvalidAnnotation {object}: {reason}")
                        }
                        Command::ReportInterruption {
                            instance_id,
                            interruption,
                            action,
                            ..
                        } => format!("ReportInterruption {instance_id} {interruption}: {action}"),
                        Command::TerminateOrphanInstance {
                            instance_id,
                            detail,
                            ..
                        } => format!("TerminateOrphanInstance {instance_id}: {detail}"),
                    };
                    out.push_str(&format!(
                        "t={:.3}s after {cause}: {line}\n",
                        at as f64 / 1000.0
                    ));
                }
            }
            LogRecord::Snapshot(_) | LogRecord::SnapshotPart(_) => {}
            LogRecord::CommandsPart { .. } => panic!("the tutorial's commands fit one record"),
            LogRecord::Term(_) => panic!("a simulation writes one log"),
        }
    }
    out
}

#[test]
fn tutorial_command_stream_snapshot() {
    let (report, store) = run(&tutorial());
    let records = store.read_range(0, store.len()).expect("records");
    let text = format!(
        "{}decision_digest: {}\n",
        transcript(&records),
        report.decision_digest
    );
    insta::assert_snapshot!("seed_tutorial_commands", text);
}
