//! The simulated EC2: CreateFleet over a NodeClaim's options with insufficient-capacity windows,
//! instances with prices, launch and registration latency, termination.

use std::collections::{BTreeMap, BTreeSet};

use nodewright_core::catalog::{CapacityType, Price};
use nodewright_core::model::nodeclaim::{Instance, NodeClaimSpec, OfferingKey};

use super::rng::SimRng;
use crate::scenario::CloudSpec;

/// One simulated instance and its billing period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimInstance {
    pub instance: Instance,
    pub nodeclaim: String,
    pub nodepool: String,
    pub launched_at_ms: u64,
    pub terminated_at_ms: Option<u64>,
    /// The capacity reservation it was launched into (`reserved` instances only).
    pub reservation: Option<String>,
}

/// Why CreateFleet launched nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetError {
    pub code: String,
    pub message: String,
    pub unavailable: Vec<OfferingKey>,
}

#[derive(Debug, Clone)]
pub struct SimCloud {
    pub spec: CloudSpec,
    /// Every instance launched, terminated ones included (they are billed up to then).
    instances: BTreeMap<String, SimInstance>,
    /// The instances not terminated (each a copy of its entry in `instances`, which changes
    /// only when it is terminated, and then it leaves here), and what they cost per hour
    /// together: walked after every event, so kept by themselves rather than looked up.
    running: BTreeMap<String, SimInstance>,
    /// The terminated instances by when they were terminated: a listing shows the recently
    /// terminated ones without a walk over every instance ever launched.
    terminated: BTreeSet<(u64, String)>,
    price_now: Price,
    /// Launches by client token: a repeated CreateFleet returns the instance it made.
    pub tokens: BTreeMap<String, String>,
    /// What makes this world's tokens its own (the scenario and its seed).
    pub scope: String,
    /// How many times an instance was launched or terminated: a listing made since it last
    /// moved lists the same instances, as long as none of the terminated ones ages out.
    changes: u64,
}

impl SimCloud {
    /// A cloud with no instance; `scope` makes its client tokens its own (the scenario and
    /// its seed).
    pub fn new(spec: CloudSpec, scope: String) -> Self {
        SimCloud {
            spec,
            instances: BTreeMap::new(),
            running: BTreeMap::new(),
            terminated: BTreeSet::new(),
            price_now: Price(0),
            tokens: BTreeMap::new(),
            scope,
            changes: 0,
        }
    }

    /// CreateFleet (type instant, target capacity 1): the preferred capacity type among the
    /// options (reserved, then spot, then on-demand), cheapest offering first that has capacity.
    pub fn create_fleet(
        &mut self,
        claim: &NodeClaimSpec,
        now_ms: u64,
        rng: &mut SimRng,
    ) -> Result<Instance, FleetError> {
        // Idempotent, as EC2 is for a client token it has seen.
        if let Some(instance) = self
            .tokens
            .get(&claim.client_token(&self.scope))
            .and_then(|id| self.instances.get(id))
        {
            return Ok(instance.instance.clone());
        }
        let Some((capacity_type, options)) = claim.fleet_request() else {
            return Err(FleetError {
                code: "InvalidParameterValue".to_string(),
                message: "the fleet request has no overrides".to_string(),
                unavailable: Vec::new(),
            });
        };
        let mut unavailable = Vec::new();
        for option in options {
            let ice = self.spec.insufficient_capacity.iter().any(|w| {
                w.covers(
                    &option.instance_type,
                    &option.zone,
                    option.capacity_type,
                    now_ms,
                )
            });
            // A reserved instance goes into a reservation of its type and zone with room.
            let reservation = (option.capacity_type == CapacityType::Reserved)
                .then(|| self.reservation_with_room(&option.instance_type, &option.zone));
            if ice || reservation == Some(None) {
                unavailable.push(option.key());
                continue;
            }
            let instance = Instance {
                instance_id: format!("i-{:017x}", rng.next_u64() >> 4),
                instance_type: option.instance_type.to_string(),
                zone: option.zone.to_string(),
                capacity_type: option.capacity_type,
                price: option.price,
            };
            self.tokens.insert(
                claim.client_token(&self.scope),
                instance.instance_id.clone(),
            );
            self.price_now = Price(self.price_now.0 + instance.price.0);
            let launched = SimInstance {
                instance: instance.clone(),
                nodeclaim: claim.name.clone(),
                nodepool: claim.nodepool.clone(),
                launched_at_ms: now_ms,
                terminated_at_ms: None,
                reservation: reservation.flatten(),
            };
            self.changes += 1;
            self.running
                .insert(instance.instance_id.clone(), launched.clone());
            self.instances
                .insert(instance.instance_id.clone(), launched);
            return Ok(instance);
        }
        Err(FleetError {
            code: "InsufficientInstanceCapacity".to_string(),
            message: format!(
                "no capacity for any of the {} {capacity_type} offerings requested",
                unavailable.len()
            ),
            unavailable,
        })
    }

    /// The first reservation (by id) of this type and zone that holds fewer running instances
    /// than its count.
    fn reservation_with_room(&self, instance_type: &str, zone: &str) -> Option<String> {
        let mut reservations: Vec<_> = self
            .spec
            .capacity_reservations
            .iter()
            .filter(|r| r.instance_type == instance_type && r.zone == zone)
            .collect();
        reservations.sort_by(|a, b| a.id.cmp(&b.id));
        reservations
            .into_iter()
            .find(|r| {
                let used = self
                    .running
                    .values()
                    .filter(|i| i.reservation.as_deref() == Some(r.id.as_str()))
                    .count();
                used < r.count as usize
            })
            .map(|r| r.id.clone())
    }

    /// TerminateInstances; idempotent.
    pub fn terminate(&mut self, instance_id: &str, now_ms: u64) {
        if let Some(i) = self.instances.get_mut(instance_id)
            && i.terminated_at_ms.is_none()
        {
            i.terminated_at_ms = Some(now_ms);
            self.changes += 1;
            self.running.remove(instance_id);
            self.terminated.insert((now_ms, instance_id.to_string()));
            self.price_now = Price(self.price_now.0 - i.instance.price.0);
        }
    }

    /// Every instance launched, in id order.
    pub fn instances(&self) -> impl Iterator<Item = &SimInstance> {
        self.instances.values()
    }

    pub fn instance(&self, instance_id: &str) -> Option<&SimInstance> {
        self.instances.get(instance_id)
    }

    /// The instances running or terminated at or after `since_ms`, in id order.
    pub fn listed(&self, since_ms: u64) -> Vec<&SimInstance> {
        let mut recent: Vec<&String> = self
            .terminated
            .range((since_ms, String::new())..)
            .map(|(_, id)| id)
            .collect();
        recent.sort_unstable();
        // An id drawn again after its instance was terminated is one instance in the map,
        // listed once.
        recent.dedup();
        // The running instances (in id order, each a copy of its entry in `instances`) merged
        // with the few recently terminated ones.
        let mut recent = recent.into_iter().peekable();
        let mut listed = Vec::with_capacity(self.running.len() + recent.len());
        for (id, running) in &self.running {
            while let Some(gone) = recent.next_if(|gone| *gone < id) {
                listed.extend(self.instances.get(gone));
            }
            recent.next_if(|gone| *gone == id);
            listed.push(running);
        }
        for gone in recent {
            listed.extend(self.instances.get(gone));
        }
        let seen = |i: &&SimInstance| {
            (
                i.instance.instance_id.clone(),
                i.nodeclaim.clone(),
                i.launched_at_ms,
                i.terminated_at_ms,
            )
        };
        debug_assert!(
            listed
                .iter()
                .map(seen)
                .eq(self.listed_by_lookup(since_ms).iter().map(seen)),
            "the merged listing lists other instances than a lookup of every id"
        );
        listed
    }

    /// [`SimCloud::listed`] by looking every id up: what the merge must list.
    fn listed_by_lookup(&self, since_ms: u64) -> Vec<&SimInstance> {
        let recent = self
            .terminated
            .range((since_ms, String::new())..)
            .map(|(_, id)| id);
        let mut ids: Vec<&String> = self.running.keys().chain(recent).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter()
            .filter_map(|id| self.instances.get(id))
            .collect()
    }

    /// How many times an instance was launched or terminated so far.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// When the earliest instance terminated at or after `since_ms` was terminated.
    pub fn first_terminated_since(&self, since_ms: u64) -> Option<u64> {
        self.terminated
            .range((since_ms, String::new())..)
            .next()
            .map(|(at, _)| *at)
    }

    /// The instances not terminated, in id order.
    pub fn running(&self) -> impl Iterator<Item = &SimInstance> {
        self.running.values()
    }

    /// How many instances run (each in `running` is one of `instances`: launched into both,
    /// removed from `running` when terminated).
    pub fn running_count(&self) -> usize {
        self.running.len()
    }

    /// USD per hour of the running instances.
    pub fn price_now(&self) -> Price {
        self.price_now
    }
}
