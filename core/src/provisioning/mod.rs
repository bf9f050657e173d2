//! Provisioning: pending pods → nominations onto existing capacity, or new NodeClaims.

pub mod batcher;
pub mod scheduler;

pub use batcher::Batcher;
pub use scheduler::{PlannedClaim, SolveResult, solve};
