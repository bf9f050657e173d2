//! # nodewright-adapters
//!
//! Everything of nodewright that touches the world, around the pure core:
//! - [`eventlog`]: the durable event log — the portable `.nwlog` file and the controller's
//!   redb store, behind one trait;
//! - [`manifest`]: Kubernetes YAML (NodePool, EC2NodeClass, Pod, Deployment, ...) → the core's
//!   model, the one place this translation lives;
//! - [`eventbridge`]: the interruption queue's EventBridge messages → the core's interruption
//!   events; [`interruption_queue`]: a received batch through the driver, and which messages
//!   may be deleted;
//! - [`relist`]: after a restart, the listing of the world → the events the recovered core
//!   missed;
//! - [`driver`]: each event appended to the log, then the core asked, then the commands
//!   dispatched to executors; [`control_loop`]: the controller's loop around it, waiting for
//!   the next input or timer on any runtime's clock.
//!
//! The driver and the event store build without kube and the AWS SDK, so the simulated world
//! runs the very same driver as the controller.

pub mod control_loop;
pub mod driver;
pub mod eventbridge;
pub mod eventlog;
pub mod fuzzing;
pub mod interruption_queue;
pub mod manifest;
pub mod relist;
