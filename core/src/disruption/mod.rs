//! Disruption: removing machines. This first cut covers emptiness (for both consolidation
//! policies) within the NodePool's budgets, and forced expiration.

pub mod budget;
pub mod emptiness;
pub mod expiration;
pub mod schedule;
