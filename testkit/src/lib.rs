//! # nodewright-testkit
//!
//! The deterministic simulated world: a simulated EC2 (catalog, capacity windows, launch and
//! registration latency) and a simulated cluster (a kube-scheduler-like binder, Deployments,
//! DaemonSets), both seeded; the scenario format; the invariant checks; the run report.
//!
//! It runs the very driver the controller runs (log → core → dispatch), over simulated
//! adapters. It depends on no runtime and no cloud SDK.

pub mod expect;
pub mod invariants;
pub mod report;
pub mod scenario;
pub mod sim;

pub use report::Report;
pub use scenario::Scenario;
