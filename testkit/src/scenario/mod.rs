//! Scenarios: a simulated world and what should happen in it, read from one YAML file.

mod builtin;
mod format;
pub mod fuzzing;
mod load;
mod model;
mod plain;
mod references;
pub mod trace;

pub use builtin::{SCENARIOS, builtin, builtin_names};
pub use format::SettingsFile;
pub use load::{ManifestFiles, NoFiles, apply_settings, load_file, load_str};
pub use model::{
    Action, CloudSpec, DeleteKind, ExistingNodeGroup, Expectation, IceWindow, InterruptKind,
    InterruptTarget, Latency, Scenario, ScenarioError, Storm, TimelineAction,
};
pub use plain::{PLAIN_DURATION, load_path, load_paths};
