//! Graceful pod termination in the simulated cluster: an evicted pod keeps its node until it
//! exits at the end of its terminationGracePeriodSeconds, its Deployment replaces it at once,
//! and the machine goes only when its pods are gone, DaemonSet pods last.

use std::path::Path;

use nodewright_adapters::eventlog::{EventStore, LogHeader, LogRecord, MemoryStore};
use nodewright_core::model::nodeclaim::TerminationReason;
use nodewright_core::{Command, EventKind};
use nodewright_testkit::scenario::load_file;
use nodewright_testkit::sim;

/// (time, record) of the whole run.
fn run(file: &str) -> (nodewright_testkit::Report, Vec<(u64, LogRecord)>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(file);
    let scenario = load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let store = MemoryStore::<LogHeader, LogRecord>::new(LogHeader::new(
        scenario.config.clone(),
        &scenario.name,
    ));
    let (report, store) = sim::run(&scenario, store).expect("runs");
    let records = store.read_range(0, store.len()).expect("records");
    let mut at = 0;
    let timed = records
        .into_iter()
        .map(|r| {
            if let LogRecord::Event(e) = &r {
                at = e.at_ms;
            }
            (at, r)
        })
        .collect();
    (report, timed)
}

fn commands(records: &[(u64, LogRecord)]) -> Vec<(u64, Command)> {
    records
        .iter()
        .flat_map(|(t, r)| match r {
            LogRecord::Commands(cs) => cs.iter().map(|c| (*t, c.clone())).collect(),
            LogRecord::CommandsPart { commands: cs, .. } => {
                cs.iter().map(|c| (*t, c.clone())).collect()
            }
            LogRecord::Event(_)
            | LogRecord::Snapshot(_)
            | LogRecord::SnapshotPart(_)
            | LogRecord::Term(_) => Vec::new(),
        })
        .collect()
}

#[test]
fn an_evicted_pod_keeps_its_node_for_its_grace_period_and_is_replaced_at_once() {
    let (report, records) = run("graceful-drain.yaml");
    assert!(report.passed(), "{}", report.summary());
    let cmds = commands(&records);
    let (evicted_at, pod, node) = cmds
        .iter()
        .find_map(|(t, c)| match c {
            Command::EvictPod {
                pod,
                node,
                forced: false,
                ..
            } if pod.name.starts_with("web-") => Some((*t, pod.clone(), node.clone())),
            _ => None,
        })
        .expect("expiration drains a web pod");
    let deleted_at = records
        .iter()
        .find_map(|(t, r)| match r {
            LogRecord::Event(e) if matches!(&e.kind, EventKind::PodDeleted { pod: p } if *p == pod) => {
                Some(*t)
            }
            _ => None,
        })
        .expect("the pod exits");
    assert_eq!(deleted_at, evicted_at + 45_000, "it shuts down for 45 s");
    let replaced_at = records
        .iter()
        .find_map(|(t, r)| match r {
            LogRecord::Event(e) if *t >= evicted_at => match &e.kind {
                EventKind::PodApplied(p)
                    if p.key.name.starts_with("web-") && p.created_at_ms == evicted_at =>
                {
                    Some(*t)
                }
                _ => None,
            },
            _ => None,
        })
        .expect("the Deployment replaces it");
    assert_eq!(
        replaced_at, evicted_at,
        "replaced while the old pod shuts down"
    );
    let terminated_at = cmds
        .iter()
        .find_map(|(t, c)| match c {
            Command::TerminateNodeClaim {
                node: Some(n),
                reason: TerminationReason::Expired,
                ..
            } if *n == node => Some(*t),
            _ => None,
        })
        .expect("the expired machine goes");
    assert!(
        terminated_at >= deleted_at,
        "terminated at {terminated_at}, before its pod exited at {deleted_at}"
    );
}

#[test]
fn daemonset_pods_are_evicted_after_the_workload_pods_have_left() {
    let (_, records) = run("graceful-drain.yaml");
    let cmds = commands(&records);
    let (node, agent_evicted_at) = cmds
        .iter()
        .find_map(|(t, c)| match c {
            Command::EvictPod { pod, node, .. } if pod.name.starts_with("node-agent-") => {
                Some((node.clone(), *t))
            }
            _ => None,
        })
        .expect("the DaemonSet pod is drained too");
    let web_on_node: Vec<(u64, nodewright_core::model::pod::PodKey)> = cmds
        .iter()
        .filter_map(|(t, c)| match c {
            Command::EvictPod { pod, node: n, .. }
                if *n == node && pod.name.starts_with("web-") =>
            {
                Some((*t, pod.clone()))
            }
            _ => None,
        })
        .collect();
    assert!(!web_on_node.is_empty());
    for (evicted_at, pod) in &web_on_node {
        assert!(*evicted_at < agent_evicted_at);
        let exited_at = records
            .iter()
            .find_map(|(t, r)| match r {
                LogRecord::Event(e) => match &e.kind {
                    EventKind::PodDeleted { pod: p } if p == pod => Some(*t),
                    _ => None,
                },
                _ => None,
            })
            .expect("the web pod exits");
        assert!(
            exited_at <= agent_evicted_at,
            "{pod} exited at {exited_at}, after the agent was evicted at {agent_evicted_at}"
        );
    }
}
