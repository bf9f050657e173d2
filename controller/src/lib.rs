//! # nodewright-controller
//!
//! `nodewright controller`: the driver and control loop that `nodewright simulate` runs, over
//! the Kubernetes and AWS adapters instead of the simulated world, so that the same code
//! decides in both.
//!
//! - [`settings`]: what it runs with, in Karpenter's names;
//! - [`run`]: the event store and its recovery, the watchers and the loop;
//! - [`executor`]: the core's commands on Kubernetes and EC2, results back as events;
//! - [`nodeclasses`]: EC2NodeClass resolution and status;
//! - [`nodepools`]: NodePool status;
//! - [`registration`]: Nodes linked to their NodeClaims;
//! - [`observation`]: what every start observes (NodeClaims and their instances, adopted);
//! - [`set_aside`]: an event store that cannot go on set aside, never a crash loop;
//! - [`deletions`]: NodeClaims deleted by hand, drained and terminated;
//! - [`leadership`]: the Lease one replica holds while the others stand by;
//! - [`metrics`] and [`serve`]: Prometheus metrics and the health probes;
//! - [`log_export`] and [`log_access`]: the log, to callers the API server allows.

pub mod cache;
pub mod clock;
pub mod deletions;
pub mod executor;
pub mod launch_classes;
pub mod leadership;
pub mod log_access;
pub mod log_export;
pub mod metrics;
pub mod nodeclasses;
pub mod nodepools;
pub mod observation;
pub mod registration;
pub mod run;
pub mod serve;
pub mod set_aside;
pub mod settings;
pub mod shipping;

pub use run::{Connections, ControllerError, run};
pub use settings::{SettingError, Settings};
