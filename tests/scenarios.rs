//! The example scenarios under `scenarios/`, run through the simulated world.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use nodewright_adapters::eventlog::{LogHeader, LogRecord, MemoryStore};
use nodewright_testkit::scenario::load_file;
use nodewright_testkit::{Report, sim};

fn run(file: &str) -> Report {
    run_with_log(file).0
}

/// A scenario of `scenarios/`, run with its log kept in memory.
fn run_with_log(file: &str) -> (Report, MemoryStore<LogHeader, LogRecord>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(file);
    let scenario = load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let store = MemoryStore::<LogHeader, LogRecord>::new(LogHeader::new(
        scenario.config.clone(),
        &scenario.name,
    ));
    sim::run(&scenario, store).expect("runs")
}

#[test]
fn zonal_spread_scenario_spreads_web_over_three_zones_one_per_machine() {
    let report = run("zonal-spread.yaml");
    assert!(report.passed(), "{}", report.summary());
    let zone_of: BTreeMap<&str, &str> = report
        .machines
        .iter()
        .map(|m| (m.name.as_str(), m.zone.as_str()))
        .collect();
    let web: Vec<&str> = report
        .pod_placements
        .iter()
        .filter(|p| p.pod.starts_with("default/web-"))
        .map(|p| p.node.as_deref().expect("every web pod ran"))
        .collect();
    assert_eq!(web.len(), 6);
    let machines: BTreeSet<&str> = web.iter().copied().collect();
    assert_eq!(
        machines.len(),
        6,
        "hostname anti-affinity: one web pod per machine"
    );
    let mut per_zone: BTreeMap<&str, usize> = BTreeMap::new();
    for m in &web {
        *per_zone.entry(zone_of[m]).or_insert(0) += 1;
    }
    assert_eq!(
        per_zone.values().copied().collect::<Vec<_>>(),
        vec![2, 2, 2],
        "{per_zone:?}"
    );
}

#[test]
fn zonal_spread_scenario_runs_the_daemonset_on_every_launched_machine() {
    let report = run("zonal-spread.yaml");
    let daemon_nodes: BTreeSet<&str> = report
        .pod_placements
        .iter()
        .filter(|p| p.pod.starts_with("logging/fluent-bit-"))
        .filter_map(|p| p.node.as_deref())
        .collect();
    for m in &report.machines {
        assert!(
            daemon_nodes.contains(m.name.as_str()),
            "no fluent-bit pod on {}",
            m.name
        );
    }
    assert!(
        report.unschedulable.is_empty(),
        "{:?}",
        report.unschedulable
    );
}

#[test]
fn requirements_on_labels_of_ones_own_give_nodes_values_they_allow_and_no_replace_loop() {
    let report = run("custom-labels.yaml");
    assert!(report.passed(), "{}", report.summary());
    assert!(
        report.invariant_violations.is_empty(),
        "{:?}",
        report.invariant_violations
    );
    let drifted: Vec<&str> = report
        .machines
        .iter()
        .filter(|m| {
            m.termination_reason
                .as_deref()
                .is_some_and(|r| r.starts_with("Drifted"))
        })
        .map(|m| m.name.as_str())
        .collect();
    assert!(drifted.is_empty(), "replaced as drifted: {drifted:?}");
    // Two machines at most: one for inflate (team a, the first value), one for team b's pods.
    assert!(report.machines.len() <= 2, "{}", report.summary());
    let team_b: Vec<&str> = report
        .pod_placements
        .iter()
        .filter(|p| p.pod.starts_with("default/team-b-"))
        .filter_map(|p| p.node.as_deref())
        .collect();
    assert_eq!(team_b.len(), 3, "{}", report.summary());
}

#[test]
fn reserved_capacity_is_used_first_the_rest_goes_on_demand_and_the_reserved_machines_stay() {
    let report = run("capacity-reservations.yaml");
    assert!(report.passed(), "{}", report.summary());
    let web: Vec<_> = report
        .machines
        .iter()
        .filter(|m| m.nodepool == "web")
        .collect();
    let reserved: Vec<_> = web
        .iter()
        .filter(|m| m.capacity_type == "reserved")
        .collect();
    // The reservation holds two: both used from the start, by the first pods, and kept.
    assert_eq!(reserved.len(), 2, "{}", report.summary());
    for m in &reserved {
        assert_eq!(
            (m.instance_type.as_str(), m.zone.as_str()),
            ("m5.xlarge", "us-east-1a")
        );
        assert!(m.launched_at_seconds < 60.0, "{m:?}");
        assert!(m.terminated_at_seconds.is_none(), "{m:?}");
    }
    // The growth at 10 minutes falls back to on-demand, which goes once the web shrinks.
    let on_demand: Vec<_> = web
        .iter()
        .filter(|m| m.capacity_type == "on-demand")
        .collect();
    assert!(!on_demand.is_empty(), "{}", report.summary());
    for m in &on_demand {
        assert!(m.launched_at_seconds >= 600.0, "{m:?}");
        assert!(
            m.terminated_at_seconds.is_some_and(|t| t >= 1500.0),
            "{m:?}"
        );
    }
    // The batch pool's class selects no reservation.
    assert!(
        report
            .machines
            .iter()
            .filter(|m| m.nodepool == "batch")
            .all(|m| m.capacity_type == "on-demand"),
        "{}",
        report.summary()
    );
}

#[test]
fn a_static_pool_keeps_its_count_takes_pods_first_and_scales_by_its_replicas() {
    let report = run("static-pool.yaml");
    assert!(report.passed(), "{}", report.summary());
    let static_machines: Vec<_> = report
        .machines
        .iter()
        .filter(|m| m.nodepool == "static")
        .collect();
    // Three from the start (before any pod), two more at 15 minutes.
    let at_start = static_machines
        .iter()
        .filter(|m| m.launched_at_seconds < 60.0)
        .count();
    assert_eq!(at_start, 3, "{}", report.summary());
    let scaled_up = static_machines
        .iter()
        .filter(|m| (900.0..960.0).contains(&m.launched_at_seconds))
        .count();
    assert_eq!(scaled_up, 2, "{}", report.summary());
    // Down to two at 30 minutes, only by ScaledDown; never consolidated though consolidateAfter
    // is 0s and two of them ran empty.
    let gone: Vec<_> = static_machines
        .iter()
        .filter(|m| m.terminated_at_seconds.is_some())
        .collect();
    assert_eq!(gone.len(), 3, "{}", report.summary());
    for m in &gone {
        assert!(
            m.terminated_at_seconds.is_some_and(|t| t >= 1800.0),
            "{m:?}"
        );
        assert!(
            m.termination_reason
                .as_deref()
                .is_some_and(|r| r.starts_with("ScaledDown")),
            "{m:?}"
        );
    }
    // Every web pod runs at the end: those of the machines that went moved to the dynamic
    // pool.
    let running = report
        .pod_placements
        .iter()
        .filter(|p| p.pod.starts_with("default/web-"))
        .filter(|p| {
            p.node.as_deref().is_some_and(|node| {
                report
                    .machines
                    .iter()
                    .any(|m| m.name == node && m.terminated_at_seconds.is_none())
            })
        })
        .count();
    assert_eq!(running, 8, "{:?}", report.pod_placements);
}

#[test]
fn deleting_a_nodepool_moves_its_pods_to_another_pool_and_terminates_its_machines() {
    let report = run("nodepool-deletion.yaml");
    assert!(report.passed(), "{}", report.summary());
    let general: Vec<_> = report
        .machines
        .iter()
        .filter(|m| m.nodepool == "general")
        .collect();
    assert!(!general.is_empty());
    for m in &general {
        assert!(m.terminated_at_seconds.is_some(), "{m:?}");
        assert!(
            m.termination_reason
                .as_deref()
                .is_some_and(|r| r.starts_with("NodePoolDeleted")),
            "{m:?}"
        );
    }
    let pool_of: BTreeMap<&str, &str> = report
        .machines
        .iter()
        .map(|m| (m.name.as_str(), m.nodepool.as_str()))
        .collect();
    let running: Vec<&str> = report
        .pod_placements
        .iter()
        .filter(|p| p.pod.starts_with("default/web-"))
        .filter_map(|p| p.node.as_deref())
        .filter(|node| {
            report
                .machines
                .iter()
                .any(|m| m.name == *node && m.terminated_at_seconds.is_none())
        })
        .collect();
    assert_eq!(running.len(), 6, "{:?}", report.pod_placements);
    assert!(
        running.iter().all(|n| pool_of[n] == "fallback"),
        "{running:?}"
    );
}

#[test]
fn pods_with_volumes_go_back_to_their_volume_s_zone_on_every_replacement() {
    use nodewright_adapters::eventlog::EventStore;
    use nodewright_core::EventKind;
    let (report, store) = run_with_log("volume-topology.yaml");
    assert!(report.passed(), "{}", report.summary());
    let records = store.read_range(0, store.len()).expect("the log");
    let mut zone_of_node: BTreeMap<String, String> = BTreeMap::new();
    // Each StatefulSet ordinal (and the reports Deployment) with the zones it ran in.
    let mut zones: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for record in &records {
        let LogRecord::Event(event) = record else {
            continue;
        };
        match &event.kind {
            EventKind::NodeApplied(node) => {
                if let Some(z) = node.labels.get("topology.kubernetes.io/zone") {
                    zone_of_node.insert(node.name.clone(), z.clone());
                }
            }
            EventKind::PodBound { pod, node } => {
                let owner = if pod.name.starts_with("reports-") {
                    "reports".to_string()
                } else {
                    pod.name.clone()
                };
                zones
                    .entry(owner)
                    .or_default()
                    .push(zone_of_node[node].clone());
            }
            _ => {}
        }
    }
    assert_eq!(
        zones.keys().map(String::as_str).collect::<Vec<_>>(),
        ["db-0", "db-1", "db-2", "reports"],
        "a StatefulSet keeps its ordinals: {zones:?}"
    );
    for (owner, bound) in &zones {
        assert!(bound.len() >= 3, "{owner} was replaced twice: {bound:?}");
        assert!(
            bound.iter().all(|z| *z == bound[0]),
            "{owner} ran in one zone, its volume's: {bound:?}"
        );
    }
    assert_eq!(zones["reports"][0], "us-east-1c", "the bound volume's zone");
    let db: BTreeSet<&str> = ["db-0", "db-1", "db-2"]
        .iter()
        .map(|o| zones[*o][0].as_str())
        .collect();
    assert_eq!(db.len(), 3, "spread over three zones first: {zones:?}");
}

#[test]
fn a_volume_naming_a_claim_no_manifest_defines_is_refused_at_load() {
    let yaml = "name: x\nduration: 5m\nmanifests:\n  - file: tutorial/ec2nodeclass.yaml\n  - file: tutorial/nodepool.yaml\n  - |\n    apiVersion: v1\n    kind: PersistentVolumeClaim\n    metadata: {name: data}\n  - |\n    apiVersion: v1\n    kind: Pod\n    metadata: {name: p}\n    spec:\n      containers: [{name: c, resources: {requests: {cpu: 100m}}}]\n      volumes: [{name: v, persistentVolumeClaim: {claimName: dta}}]\n";
    let dir = tempfile::tempdir().expect("a folder");
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, yaml).expect("written");
    std::fs::create_dir_all(dir.path().join("tutorial")).expect("folder");
    for name in ["ec2nodeclass.yaml", "nodepool.yaml"] {
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("scenarios/tutorial")
                .join(name),
            dir.path().join("tutorial").join(name),
        )
        .expect("copied");
    }
    let error = load_file(&file).expect_err("refused").to_string();
    assert!(
        error.contains("PersistentVolumeClaim \"dta\"") && error.contains("did you mean \"data\"?"),
        "{error}"
    );
}

#[test]
fn every_scenario_in_the_folder_runs_by_name() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut in_folder: Vec<String> = std::fs::read_dir(&dir)
        .expect("scenarios folder")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".yaml")
                .map(String::from)
        })
        .collect();
    in_folder.sort();
    let mut built_in: Vec<String> = nodewright_testkit::scenario::builtin_names()
        .map(String::from)
        .collect();
    built_in.sort();
    assert_eq!(
        built_in, in_folder,
        "fix: list each scenarios/*.yaml in testkit/src/scenario/builtin.rs"
    );
    for name in &built_in {
        let scenario = nodewright_testkit::scenario::builtin(name)
            .expect("built in")
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&scenario.name, name, "a scenario's name is its file's");
    }
}

#[test]
fn plain_kubernetes_yaml_runs_as_a_scenario_a_file_or_a_folder() {
    let tutorial = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/tutorial");
    let dir = tempfile::tempdir().expect("a folder");
    for file in ["nodepool.yaml", "ec2nodeclass.yaml"] {
        std::fs::copy(tutorial.join(file), dir.path().join(file)).expect("copied");
    }
    // The guide's inflate, at 5 replicas, as a user's file with two documents.
    let inflate = std::fs::read_to_string(tutorial.join("inflate.yaml"))
        .expect("inflate")
        .replace("replicas: 0", "replicas: 5");
    let pdb = "---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: inflate}\nspec:\n  maxUnavailable: 1\n  selector: {matchLabels: {app: inflate}}\n";
    std::fs::write(dir.path().join("workload.yml"), format!("{inflate}{pdb}")).expect("written");
    std::fs::write(dir.path().join("README.md"), "not YAML").expect("written");

    let scenario =
        nodewright_testkit::scenario::load_path(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        scenario.manifests.len(),
        4,
        "NodePool, EC2NodeClass, Deployment, PDB"
    );
    assert_eq!(scenario.duration_ms, 30 * 60_000);
    let store = MemoryStore::<LogHeader, LogRecord>::new(LogHeader::new(
        scenario.config.clone(),
        &scenario.name,
    ));
    let report = sim::run(&scenario, store).expect("runs").0;
    assert!(report.passed(), "{}", report.summary());
    let placed = report
        .pod_placements
        .iter()
        .filter(|p| p.pod.starts_with("default/inflate-") && p.node.is_some())
        .count();
    assert_eq!(placed, 5, "{}", report.summary());

    // One file of them works too, and a scenario file still loads as a scenario.
    let one = nodewright_testkit::scenario::load_path(&dir.path().join("workload.yml"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((one.name.as_str(), one.manifests.len()), ("workload", 2));
    let scenario = nodewright_testkit::scenario::load_path(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/mixed.yaml"),
    )
    .expect("a scenario");
    assert_eq!(scenario.name, "mixed");

    let empty = tempfile::tempdir().expect("a folder");
    let error = nodewright_testkit::scenario::load_path(empty.path())
        .expect_err("nothing to run")
        .to_string();
    assert!(error.contains("holds no .yaml or .yml file"), "{error}");
}

#[test]
fn every_scenario_in_the_folder_loads_and_passes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut ran = 0;
    for entry in std::fs::read_dir(&dir).expect("scenarios folder") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let report = run(path.file_name().and_then(|n| n.to_str()).expect("name"));
        assert!(report.passed(), "{}: {}", path.display(), report.summary());
        ran += 1;
    }
    assert!(ran >= 2);
}

#[test]
fn steady_state_has_no_voluntary_disruption_after_the_first_consolidation_round() {
    let report = run("steady-state.yaml");
    assert!(report.passed(), "{}", report.summary());
    let voluntary: Vec<(f64, &str)> = report
        .machines
        .iter()
        .filter_map(|m| {
            let reason = m.termination_reason.as_deref()?;
            (reason.starts_with("Empty") || reason.starts_with("Underutilized"))
                .then(|| (m.terminated_at_seconds.unwrap_or(0.0), m.name.as_str()))
        })
        .collect();
    // The scale-down at 20 minutes is followed by one round of consolidation; from an hour on
    // the workload is settled and nothing moves for six hours.
    assert!(
        voluntary.iter().all(|(t, _)| *t < 3600.0),
        "disruptions after settling: {voluntary:?}"
    );
    let launched_late: Vec<&str> = report
        .machines
        .iter()
        .filter(|m| m.launched_at_seconds > 3600.0)
        .map(|m| m.name.as_str())
        .collect();
    assert!(
        launched_late.is_empty(),
        "machines launched after settling: {launched_late:?}"
    );
}

#[test]
fn every_example_scenario_costs_at_least_its_lower_bound() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("scenarios/")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "{files:?}");
    for file in files {
        let report = run(&file);
        let cost = &report.cost;
        assert!(
            cost.lower_bound_usd > 0.0 && cost.lower_bound_usd <= cost.total_usd,
            "{file}: bound {} against cost {}",
            cost.lower_bound_usd,
            cost.total_usd
        );
    }
}
