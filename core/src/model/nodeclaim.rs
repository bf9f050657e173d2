//! NodeClaims (`karpenter.sh/v1`): one requested machine, from decision to termination.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::pod::PodKey;
use super::requirements::RequirementSpec;
use super::resources::Resources;
use super::shared_name::SharedName;
use super::taints::Taint;
use crate::catalog::{CapacityType, Price};

/// One way to fill a NodeClaim: an instance type in a zone with a capacity type, at a price.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LaunchOption {
    /// Shared with the catalog's names: a launch's options name the same few types and zones
    /// hundreds of times.
    pub instance_type: SharedName,
    /// The zone.
    pub zone: SharedName,
    /// On-demand, spot or reserved.
    pub capacity_type: CapacityType,
    /// Per hour.
    pub price: Price,
}

impl LaunchOption {
    /// The offering it launches into.
    pub fn key(&self) -> OfferingKey {
        OfferingKey {
            instance_type: self.instance_type.to_string(),
            zone: self.zone.to_string(),
            capacity_type: self.capacity_type,
        }
    }
}

/// Identifies one offering: (instance type, zone, capacity type).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OfferingKey {
    /// The instance type.
    pub instance_type: String,
    /// The zone.
    pub zone: String,
    /// On-demand, spot or reserved.
    pub capacity_type: CapacityType,
}

/// An offering's key as borrowed parts, so that a map keyed by [`OfferingKey`] is searched
/// without building one (two strings) per lookup: `map.get(&(type, zone, capacity) as &dyn
/// OfferingParts)`. Ordered and compared as [`OfferingKey`] is, field by field.
pub trait OfferingParts {
    /// The instance type, the zone and the capacity type.
    fn parts(&self) -> (&str, &str, CapacityType);
}

impl OfferingParts for OfferingKey {
    fn parts(&self) -> (&str, &str, CapacityType) {
        (&self.instance_type, &self.zone, self.capacity_type)
    }
}

impl OfferingParts for (&str, &str, CapacityType) {
    fn parts(&self) -> (&str, &str, CapacityType) {
        *self
    }
}

impl<'a> std::borrow::Borrow<dyn OfferingParts + 'a> for OfferingKey {
    fn borrow(&self) -> &(dyn OfferingParts + 'a) {
        self
    }
}

impl PartialEq for dyn OfferingParts + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn OfferingParts + '_ {}

impl PartialOrd for dyn OfferingParts + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn OfferingParts + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl fmt::Display for OfferingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}",
            self.instance_type, self.zone, self.capacity_type
        )
    }
}

/// Why a machine was asked for: the pods it is for and what ruled the choice.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LaunchReason {
    /// The pending pods it is for (none for a static pool's machine).
    pub pods: Vec<PodKey>,
    /// One line a user reads: which pods, which constraints, which price.
    pub summary: String,
}

/// The immutable spec of a NodeClaim, as the core decided it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeClaimSpec {
    /// Its name: the NodePool's, then a suffix from the seeded name generator.
    pub name: String,
    /// The NodePool it belongs to.
    pub nodepool: String,
    /// The EC2NodeClass it launches with.
    pub nodeclass: String,
    /// The labels its node gets (the template's, the requirements' single values, the pool).
    pub labels: BTreeMap<String, String>,
    /// The annotations its node gets, with the NodePool's and EC2NodeClass's hashes drift
    /// compares.
    pub annotations: BTreeMap<String, String>,
    /// The NodePool's taints.
    pub taints: Vec<Taint>,
    /// The NodePool's startup taints (and the sibling hold's, when the machine is held).
    pub startup_taints: Vec<Taint>,
    /// What its machine must meet: the NodePool's and the pods' requirements together.
    pub requirements: Vec<RequirementSpec>,
    /// The sum of the requests of the pods it was launched for.
    pub requests: Resources,
    /// Cheapest first, at most `max_launch_options`. Shared: a spec is copied into the state,
    /// the command and the log, and its options (often hundreds) are never changed after the
    /// decision; serialized as a plain sequence.
    pub options: Arc<[LaunchOption]>,
    /// When it expires after launch (the NodePool's `expireAfter`); `None`: never.
    pub expire_after_ms: Option<u64>,
}

impl NodeClaimSpec {
    /// What one CreateFleet request for this NodeClaim asks for, as EC2 is asked by Karpenter:
    /// one capacity type, the preferred one among the options (reserved, then spot, then
    /// on-demand), and its options cheapest first (ties by type, then zone). None when there
    /// is no option. The simulated cloud and the EC2 adapter both follow it.
    pub fn fleet_request(&self) -> Option<(CapacityType, Vec<&LaunchOption>)> {
        let capacity_type = [
            CapacityType::Reserved,
            CapacityType::Spot,
            CapacityType::OnDemand,
        ]
        .into_iter()
        .find(|ct| self.options.iter().any(|o| o.capacity_type == *ct))?;
        let mut options: Vec<&LaunchOption> = self
            .options
            .iter()
            .filter(|o| o.capacity_type == capacity_type)
            .collect();
        options.sort_by(|a, b| {
            a.price
                .cmp(&b.price)
                .then_with(|| a.instance_type.cmp(&b.instance_type))
                .then_with(|| a.zone.cmp(&b.zone))
        });
        Some((capacity_type, options))
    }

    /// The idempotency token of its launch (EC2 `ClientToken`, at most 64 ASCII characters): the
    /// same for every attempt, so a launch repeated after a crash never makes a second machine.
    /// EC2 remembers tokens per account and region, and NodeClaim names repeat between clusters
    /// and logs (they come from a seeded generator), so `scope` must name the cluster and the
    /// log: the EC2 adapter passes the cluster name and the log's creation nonce.
    pub fn client_token(&self, scope: &str) -> String {
        // FNV-1a: stable across versions and platforms, which a std hasher is not.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in scope.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        let token = format!("nw-{hash:016x}-{}", self.name);
        token
            .chars()
            .filter(|c| c.is_ascii_graphic())
            .take(64)
            .collect()
    }
}

/// One instance of this cluster as the cloud lists it (the garbage collector's view).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ListedInstance {
    /// The instance id.
    pub instance_id: String,
    /// Its `karpenter.sh/nodeclaim` tag.
    pub nodeclaim: Option<String>,
    /// When it was launched.
    pub launched_at_ms: u64,
    /// False once it is shutting down or terminated.
    pub running: bool,
}

/// The machine the cloud gave for a NodeClaim.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Instance {
    /// The instance id.
    pub instance_id: String,
    /// The instance type it is.
    pub instance_type: String,
    /// The zone it runs in.
    pub zone: String,
    /// On-demand, spot or reserved.
    pub capacity_type: CapacityType,
    /// What it costs per hour.
    pub price: Price,
}

impl Instance {
    /// `aws:///<zone>/<instance-id>`, what the node's `spec.providerID` says.
    pub fn provider_id(&self) -> String {
        format!("aws:///{}/{}", self.zone, self.instance_id)
    }

    /// Whether `provider_id` is this instance's ([`Instance::provider_id`]), without writing
    /// it out.
    pub fn has_provider_id(&self, provider_id: &str) -> bool {
        provider_id
            .strip_prefix("aws:///")
            .and_then(|rest| rest.strip_prefix(self.zone.as_str()))
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|id| id == self.instance_id)
    }
}

/// Why a NodeClaim is being removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TerminationReason {
    /// Voluntary: the node ran no workload pod for `consolidateAfter`.
    Empty,
    /// Forced: older than `expireAfter`.
    Expired,
    /// The launch did not succeed within the launch timeout.
    LaunchTimeout,
    /// The instance did not register as a node within the registration timeout.
    RegistrationTimeout,
    /// The launch failed for every option.
    LaunchFailed,
    /// Voluntary: its pods fit elsewhere, or on one cheaper machine.
    Underutilized,
    /// Its node was deleted from outside nodewright.
    NodeDeleted,
    /// Voluntary: it no longer matches its NodePool or EC2NodeClass.
    Drifted,
    /// Forced: the cloud is taking the instance away (spot interruption, scheduled change,
    /// the instance stopping or terminating).
    Interrupted,
    /// Its instance no longer exists in the cloud's listing.
    InstanceGone,
    /// Forced: its NodeClaim was deleted from outside nodewright. Appended last: the
    /// variants' order is the log's format.
    Deleted,
    /// Forced: its NodePool was deleted (Kubernetes deletes the NodeClaims a NodePool owns).
    NodePoolDeleted,
    /// Its static NodePool's replicas were lowered below the machines it has.
    ScaledDown,
}

impl TerminationReason {
    /// Whether nodewright chose it to save money (emptiness or consolidation); drift and the
    /// forced reasons are not.
    pub fn is_voluntary(self) -> bool {
        matches!(
            self,
            TerminationReason::Empty | TerminationReason::Underutilized
        )
    }
}

impl fmt::Display for TerminationReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn instance(zone: &str, instance_id: &str) -> Instance {
        Instance {
            instance_id: instance_id.to_string(),
            instance_type: "m5.large".to_string(),
            zone: zone.to_string(),
            capacity_type: CapacityType::OnDemand,
            price: Price(96_000),
        }
    }

    proptest! {
        /// An instance knows a provider id exactly when it is the one it writes.
        #[test]
        fn an_instance_has_exactly_the_provider_id_it_writes(
            zone in "[a-z0-9/-]{0,12}",
            id in "[a-z0-9/-]{0,12}",
            other_zone in "[a-z0-9/-]{0,12}",
            other_id in "[a-z0-9/-]{0,12}",
        ) {
            let it = instance(&zone, &id);
            prop_assert!(it.has_provider_id(&it.provider_id()));
            let other = instance(&other_zone, &other_id).provider_id();
            prop_assert_eq!(it.has_provider_id(&other), other == it.provider_id());
            let two_slashes = format!("aws://{zone}/{id}");
            prop_assert!(!it.has_provider_id(&two_slashes));
        }
    }
}
