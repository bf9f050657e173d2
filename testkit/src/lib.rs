//! # nodewright-testkit
//!
//! The deterministic simulated world: a simulated EC2 (catalog, capacity windows, launch and
//! registration latency) and a simulated cluster (a kube-scheduler-like binder, Deployments,
//! DaemonSets), both seeded; the scenario format; the invariant checks; the run report.
//!
//! It runs the very driver the controller runs (log → core → dispatch), over simulated
//! adapters. It depends on no runtime and no cloud SDK.

pub mod bench;
pub mod expect;
pub mod harness;
pub mod html;
pub mod invariants;
pub mod lower_bound;
pub mod report;
pub mod scenario;
pub mod seeds;
pub mod sim;
#[cfg(feature = "strategies")]
pub mod strategies;
pub mod whatif;

/// Real services the tests start themselves (test-only: the `services` feature).
#[cfg(feature = "services")]
pub mod services;

pub use report::Report;
pub use scenario::Scenario;

/// The built-in us-east-1 catalog, parsed once per process (tests build many cores).
/// Shared: every scenario, world and core of the process holds this one copy (a copy is 4 MB).
pub fn us_east_1_catalog() -> std::sync::Arc<nodewright_core::catalog::Catalog> {
    static CATALOG: std::sync::OnceLock<std::sync::Arc<nodewright_core::catalog::Catalog>> =
        std::sync::OnceLock::new();
    CATALOG
        .get_or_init(|| {
            std::sync::Arc::new(nodewright_core::catalog::builtin::us_east_1().normalized())
        })
        .clone()
}
