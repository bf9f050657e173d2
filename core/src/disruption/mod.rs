//! Disruption: removing machines — emptiness (both consolidation policies), single-node
//! consolidation (delete or replace, with the payback rule), within the NodePool's budgets;
//! and forced expiration.

pub mod budget;
pub mod consolidation;
pub mod drift;
pub mod emptiness;
pub mod eviction_cost;
pub mod expiration;
pub mod schedule;
