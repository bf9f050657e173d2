//! The built-in scenarios, compiled into the binary so they run without the source tree.

use super::load::{Embedded, Scenario, ScenarioError, load_str};

const SEED_TUTORIAL: &str = include_str!("../../../scenarios/seed-tutorial.yaml");
const MIXED: &str = include_str!("../../../scenarios/mixed.yaml");
const FILES: &[(&str, &str)] = &[
    (
        "tutorial/nodepool.yaml",
        include_str!("../../../scenarios/tutorial/nodepool.yaml"),
    ),
    (
        "tutorial/ec2nodeclass.yaml",
        include_str!("../../../scenarios/tutorial/ec2nodeclass.yaml"),
    ),
    (
        "tutorial/inflate.yaml",
        include_str!("../../../scenarios/tutorial/inflate.yaml"),
    ),
];

/// The manifest files the built-in scenarios refer to.
pub fn embedded_files() -> Embedded {
    Embedded(FILES)
}

/// Names of the built-in scenarios.
pub const BUILTIN_NAMES: &[&str] = &["seed-tutorial", "mixed"];

/// A built-in scenario by name.
pub fn builtin(name: &str) -> Option<Result<Scenario, ScenarioError>> {
    match name {
        "seed-tutorial" => Some(load_str(
            SEED_TUTORIAL,
            "scenarios/seed-tutorial.yaml",
            &Embedded(FILES),
        )),
        "mixed" => Some(load_str(MIXED, "scenarios/mixed.yaml", &Embedded(FILES))),
        _ => None,
    }
}
