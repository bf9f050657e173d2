//! # nodewright-core
//!
//! The decision core of nodewright: a pure, synchronous, deterministic state machine. It takes
//! [`Event`]s (a pod went pending, a node became ready, a launch failed, a timer fired) and
//! returns [`Command`]s (launch a NodeClaim, nominate a pod, terminate a machine), each with the
//! reason a user can read.
//!
//! The promise, which every test and every replay relies on: **the same events give the same
//! commands, byte for byte, on any machine.** So the core does no I/O, reads no clock (time
//! arrives inside events as `at_ms`), starts no thread, holds no global state, draws no
//! unseeded randomness, and never lets the iteration order of a hash map reach a decision.
//!
//! The surface, in the style of sans-IO protocol cores:
//! - [`Core::handle`] applies one event and returns the commands it calls for;
//! - [`Core::next_timer_ms`] says when the core next needs a [`EventKind::Tick`].
//!
//! What this crate must never depend on: tokio, kube, the AWS SDK, redb, or anything else that
//! touches the world. Adapters own the world.

pub mod catalog;
pub mod command;
pub mod config;
mod decider;
pub mod disruption;
pub mod event;
pub mod interruption;
pub mod lifecycle;
pub mod model;
pub mod names;
pub mod provisioning;
pub mod state;
pub mod wake;

pub use crate::command::Command;
pub use crate::config::Config;
pub use crate::decider::{Core, Replacing};
pub use crate::event::{Event, EventKind};
