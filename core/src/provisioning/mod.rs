//! Provisioning: pending pods → nominations onto existing capacity, or new NodeClaims.

pub mod batcher;
mod domain_pins;
pub mod launch;
pub mod launch_memo;
pub mod overhead;
pub mod pool_shape;
pub mod profile;
pub mod scheduler;
pub mod sibling_hold;
pub mod static_pool;
pub mod topology;

pub use batcher::Batcher;
pub use scheduler::{
    ClusterView, PlannedClaim, SolveResult, launch_offerings, launch_options, solve, solve_without,
};
