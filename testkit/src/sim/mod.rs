//! The simulated world: EC2, the cluster, and the loop that runs the real driver over them.

pub mod cloud;
pub mod cluster;
pub mod eventbridge;
pub mod faults;
pub mod jobs;
#[cfg(madsim)]
pub mod madsim_world;
pub mod meter;
pub mod queue;
pub mod rng;
pub mod world;

pub use world::{
    Crash, PlantedBug, RunError, RunOptions, logged_records, run, run_with, run_with_crash,
};
