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
