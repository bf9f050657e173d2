//! Karpenter's own `examples/v1` files (copied unchanged into `tests/karpenter-examples/`)
//! given to `nodewright simulate` as they are: "your NodePool and EC2NodeClass YAML works
//! unchanged", tested literally.

use std::path::{Path, PathBuf};

use nodewright_adapters::eventlog::{LogHeader, MemoryStore};
use nodewright_testkit::scenario::load_path;
use nodewright_testkit::sim;

/// The one example Karpenter's own CRD refuses (`nodeClassRef.group` with a version).
const REFUSED_BY_KARPENTERS_CRD: &str = "windows-custom-userdata.yaml";

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/karpenter-examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the examples folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_example_karpenter_accepts_loads_and_runs_unchanged() {
    let files = examples();
    assert_eq!(files.len(), 22, "{files:?}");
    for file in files {
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name == REFUSED_BY_KARPENTERS_CRD {
            continue;
        }
        let scenario = load_path(&file).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            scenario
                .manifests
                .iter()
                .any(|m| matches!(m, nodewright_adapters::manifest::Manifest::NodePool(_))),
            "{name}: a NodePool"
        );
        let store = MemoryStore::new(LogHeader::new(scenario.config.clone(), &scenario.name));
        let (report, _) = sim::run(&scenario, store).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(report.passed(), "{name}: {}", report.summary());
    }
}

#[test]
fn the_example_karpenters_crd_refuses_is_refused_with_the_field_and_the_fix() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/karpenter-examples")
        .join(REFUSED_BY_KARPENTERS_CRD);
    let error = load_path(&file).expect_err("refused").to_string();
    assert!(
        error.contains("spec.template.spec.nodeClassRef") && error.contains("fix: "),
        "{error}"
    );
}

#[test]
fn the_windows_example_runs_windows_pods_on_amd64_machines_and_linux_pods_nowhere() {
    let dir = tempfile::tempdir().expect("a folder");
    let example = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/karpenter-examples/windows-2022.yaml"),
    )
    .expect("the example");
    let workload = |name: &str, os: &str| {
        format!(
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\nspec:\n  replicas: 3\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      nodeSelector: {{kubernetes.io/os: {os}}}\n      containers:\n        - name: c\n          image: i\n          resources: {{requests: {{cpu: '1', memory: 2Gi}}}}\n"
        )
    };
    let file = dir.path().join("windows.yaml");
    std::fs::write(
        &file,
        format!(
            "{example}\n{}{}",
            workload("iis", "windows"),
            workload("nginx", "linux")
        ),
    )
    .expect("written");
    let scenario = load_path(&file).unwrap_or_else(|e| panic!("{e}"));
    let store = MemoryStore::new(LogHeader::new(scenario.config.clone(), &scenario.name));
    let (report, _) = sim::run(&scenario, store).unwrap_or_else(|e| panic!("{e}"));
    let catalog = nodewright_core::catalog::builtin::us_east_1();
    assert!(!report.machines.is_empty());
    for machine in &report.machines {
        let it = catalog.get(&machine.instance_type).expect("known");
        assert_eq!(it.architecture, "amd64", "{}", machine.instance_type);
    }
    let placed = |app: &str| {
        report
            .pod_placements
            .iter()
            .filter(|p| p.pod.contains(app) && p.node.is_some())
            .count()
    };
    assert_eq!(placed("iis"), 3, "{}", report.summary());
    // The machines are Windows for good: nothing is replaced as drifted off the OS.
    assert!(
        report
            .machines
            .iter()
            .all(|m| m.terminated_at_seconds.is_none()),
        "{}",
        report.summary()
    );
    // The only NodePool runs Windows: the Linux pods are never scheduled, for a reason.
    assert_eq!(placed("nginx"), 0, "{}", report.summary());
    assert!(
        report.unschedulable.iter().any(|u| u.pod.contains("nginx")),
        "{}",
        report.summary()
    );
}
