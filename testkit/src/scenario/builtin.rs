//! The scenarios of `scenarios/`, compiled into the binary so they run by name without the
//! source tree (`nodewright simulate zonal-spread`). A test keeps this list equal to the
//! folder's files.

use super::load::{Embedded, load_str};
use super::model::{Scenario, ScenarioError};

/// Each scenario's name (its file name without `.yaml`) and text, the default first.
pub const SCENARIOS: &[(&str, &str)] = &[
    (
        "seed-tutorial",
        include_str!("../../../scenarios/seed-tutorial.yaml"),
    ),
    ("mixed", include_str!("../../../scenarios/mixed.yaml")),
    (
        "cloud-faults",
        include_str!("../../../scenarios/cloud-faults.yaml"),
    ),
    (
        "capacity-reservations",
        include_str!("../../../scenarios/capacity-reservations.yaml"),
    ),
    (
        "crash-recovery",
        include_str!("../../../scenarios/crash-recovery.yaml"),
    ),
    (
        "custom-labels",
        include_str!("../../../scenarios/custom-labels.yaml"),
    ),
    (
        "graceful-drain",
        include_str!("../../../scenarios/graceful-drain.yaml"),
    ),
    (
        "long-jobs-expire",
        include_str!("../../../scenarios/long-jobs-expire.yaml"),
    ),
    (
        "nodepool-deletion",
        include_str!("../../../scenarios/nodepool-deletion.yaml"),
    ),
    (
        "spot-interruption",
        include_str!("../../../scenarios/spot-interruption.yaml"),
    ),
    (
        "spot-storm",
        include_str!("../../../scenarios/spot-storm.yaml"),
    ),
    (
        "spread-lands",
        include_str!("../../../scenarios/spread-lands.yaml"),
    ),
    (
        "static-pool",
        include_str!("../../../scenarios/static-pool.yaml"),
    ),
    (
        "steady-state",
        include_str!("../../../scenarios/steady-state.yaml"),
    ),
    (
        "volume-topology",
        include_str!("../../../scenarios/volume-topology.yaml"),
    ),
    (
        "zonal-spread",
        include_str!("../../../scenarios/zonal-spread.yaml"),
    ),
];

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

/// Names of the built-in scenarios, the default first.
pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    SCENARIOS.iter().map(|(name, _)| *name)
}

/// A built-in scenario by name.
pub fn builtin(name: &str) -> Option<Result<Scenario, ScenarioError>> {
    let (name, text) = SCENARIOS.iter().find(|(n, _)| *n == name)?;
    Some(load_str(
        text,
        &format!("scenarios/{name}.yaml"),
        &Embedded(FILES),
    ))
}
