//! Capacity reservations (On-Demand Capacity Reservations and Capacity Blocks) as the cloud
//! lists them: what a node class's `capacityReservationSelectorTerms` select, and what the
//! catalog offers as `reserved` capacity.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One capacity reservation: `count` instances of one type in one zone, paid for whether they
/// run or not.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacityReservation {
    /// `cr-0123...`.
    pub id: String,
    /// The instance type it holds.
    pub instance_type: String,
    /// Its zone.
    pub zone: String,
    /// The instances it holds for this cluster.
    pub count: u32,
    /// On-Demand Capacity Reservation or Capacity Block.
    pub kind: ReservationKind,
    /// The account that owns it.
    pub owner_id: String,
    /// Its tags (what selector terms by tags match).
    pub tags: BTreeMap<String, String>,
}

/// Karpenter's `karpenter.k8s.aws/capacity-reservation-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReservationKind {
    /// An On-Demand Capacity Reservation.
    #[serde(rename = "default")]
    Default,
    /// A Capacity Block for ML: reserved for a time window.
    #[serde(rename = "capacity-block")]
    CapacityBlock,
}
