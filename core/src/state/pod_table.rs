//! The pods the core knows, each under a dense integer id.
//!
//! A pod is found by its key once, when an event names it; from then on the cluster refers to
//! it by [`PodId`] — a node lists its pods with their ids, so walking a node's pods is an index
//! per pod instead of a search through every pod by `namespace/name`. Iteration is in key
//! order, as the decisions need it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::model::do_not_disrupt::Protection;
use crate::model::pod::{Pod, PodKey};

/// A pod's place in the [`PodTable`]: valid while the pod is in it (a node drops a pod's id
/// when the pod leaves it, so no id outlives its pod).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodId(u32);

impl PodId {
    fn index(self) -> usize {
        self.0 as usize
    }
}

/// Every pod the core knows, by key and by id.
///
/// Its serialized form is the slots alone (an empty slot included), so a restored table gives
/// every pod the id it had; the key index and the free slots are rebuilt from them. A new pod
/// takes the lowest free slot, which depends on the slots alone: a restored table places the
/// next pods exactly where the table that was saved would have.
#[derive(Debug, Clone, Default)]
pub struct PodTable {
    slots: Vec<Option<Held>>,
    by_key: BTreeMap<PodKey, PodId>,
    free: BTreeSet<u32>,
    /// How many of its pods have a required pod anti-affinity term: a solve looks for the
    /// bound ones among every pod only when there are any.
    required_anti_affinity: usize,
}

/// A pod in its slot, with what every disruption pass reads of it, read once when it came in
/// (a pod in the table changes only its node).
#[derive(Debug, Clone, PartialEq)]
struct Held {
    pod: Pod,
    facts: PodFacts,
}

impl Held {
    fn new(pod: Pod) -> Self {
        let facts = PodFacts::of(&pod);
        Held { pod, facts }
    }
}

/// What is read of a pod at every disruption pass, read once: its `karpenter.sh/do-not-disrupt`
/// protection (from its annotations and creation time) and whether it follows its node; and
/// whether it has a required pod anti-affinity term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PodFacts {
    protection: Protection,
    follows_its_node: bool,
    required_anti_affinity: bool,
}

impl PodFacts {
    fn of(pod: &Pod) -> Self {
        PodFacts {
            protection: pod.do_not_disrupt(),
            follows_its_node: pod.follows_its_node(),
            required_anti_affinity: pod.has_required_anti_affinity(),
        }
    }
}

impl PodTable {
    /// How many pods it holds.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether it holds no pod.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// The pod with this key.
    pub fn get(&self, key: &PodKey) -> Option<&Pod> {
        self.by_key.get(key).map(|&id| self.pod(id))
    }

    /// Binds the pod with this key to `node`: the node it was bound to before, `None` when no
    /// pod has this key. (The table hands out no `&mut Pod`: a pod's key must not change.)
    pub fn bind(&mut self, key: &PodKey, node: &str) -> Option<Option<String>> {
        let id = *self.by_key.get(key)?;
        let held = self.slots[id.index()].as_mut()?;
        Some(held.pod.node_name.replace(node.to_string()))
    }

    /// The id of the pod with this key.
    pub fn id(&self, key: &PodKey) -> Option<PodId> {
        self.by_key.get(key).copied()
    }

    /// The pod with this id. The id must be of a pod in the table (ids are dropped with their
    /// pods): anything else is a broken invariant of the cluster state.
    pub fn pod(&self, id: PodId) -> &Pod {
        &self.held(id).pod
    }

    fn held(&self, id: PodId) -> &Held {
        match self.slots.get(id.index()) {
            Some(Some(held)) => held,
            _ => panic!("pod id {} names no pod: an id outlived its pod", id.0),
        }
    }

    /// [`Pod::do_not_disrupt`] of pod `id`, read when it came in.
    pub fn protection(&self, id: PodId) -> Protection {
        self.facts_of(id).protection
    }

    /// [`Pod::follows_its_node`] of pod `id`, read when it came in.
    pub fn follows_its_node(&self, id: PodId) -> bool {
        self.facts_of(id).follows_its_node
    }

    /// What was read of pod `id` when it came in (debug builds read it again to compare).
    fn facts_of(&self, id: PodId) -> PodFacts {
        let held = self.held(id);
        debug_assert_eq!(
            held.facts,
            PodFacts::of(&held.pod),
            "a pod changed in the table"
        );
        held.facts
    }

    /// Whether a pod with this key is in the table.
    pub fn contains_key(&self, key: &PodKey) -> bool {
        self.by_key.contains_key(key)
    }

    /// Adds the pod, or replaces the pod with its key (which keeps its id). Returns its id and
    /// the pod it replaced.
    pub fn insert(&mut self, pod: Pod) -> (PodId, Option<Pod>) {
        let held = Held::new(pod);
        self.required_anti_affinity += usize::from(held.facts.required_anti_affinity);
        if let Some(&id) = self.by_key.get(&held.pod.key) {
            let old = self.slots[id.index()].replace(held);
            debug_assert!(old.is_some(), "a key in the index names a filled slot");
            if let Some(old) = &old {
                self.required_anti_affinity -= usize::from(old.facts.required_anti_affinity);
            }
            return (id, old.map(|held| held.pod));
        }
        let id = match self.free.pop_first() {
            Some(free) => PodId(free),
            None => {
                let next = u32::try_from(self.slots.len())
                    .expect("fewer than 2^32 pods: a cluster holds at most a few hundred thousand");
                self.slots.push(None);
                PodId(next)
            }
        };
        self.by_key.insert(held.pod.key.clone(), id);
        self.slots[id.index()] = Some(held);
        (id, None)
    }

    /// Takes the pod with this key out; its id is free for the next pod.
    pub fn remove(&mut self, key: &PodKey) -> Option<Pod> {
        let id = self.by_key.remove(key)?;
        let held = self.slots[id.index()].take();
        debug_assert!(held.is_some(), "a key in the index names a filled slot");
        if let Some(held) = &held {
            self.required_anti_affinity -= usize::from(held.facts.required_anti_affinity);
        }
        let pod = held.map(|held| held.pod);
        if id.index() + 1 == self.slots.len() {
            // The last slot: shrink instead of remembering it, with any free slots before it.
            self.slots.pop();
            while self.slots.last().is_some_and(Option::is_none) {
                self.slots.pop();
                self.free.remove(&(self.slots.len() as u32));
            }
        } else {
            self.free.insert(id.0);
        }
        pod
    }

    /// Whether some pod has a required pod anti-affinity term (bound or not).
    pub fn any_with_required_anti_affinity(&self) -> bool {
        debug_assert_eq!(
            self.required_anti_affinity,
            self.slots
                .iter()
                .flatten()
                .filter(|held| PodFacts::of(&held.pod).required_anti_affinity)
                .count(),
            "the pods with a required anti-affinity term are miscounted"
        );
        self.required_anti_affinity > 0
    }

    /// The pods in key order.
    pub fn values(&self) -> impl Iterator<Item = &Pod> + '_ {
        self.by_key.values().map(|&id| self.pod(id))
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &PodKey> + '_ {
        self.by_key.keys()
    }

    /// Keys and pods in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&PodKey, &Pod)> + '_ {
        self.by_key.iter().map(|(key, &id)| (key, self.pod(id)))
    }

    /// Rebuilds the table from its slots, refusing slots that are not a table's.
    fn from_slots(slots: Vec<Option<Pod>>) -> Result<Self, String> {
        if slots.last().is_some_and(Option::is_none) {
            return Err("the pod table ends in an empty slot, which a table never keeps".into());
        }
        let u32_len = u32::try_from(slots.len())
            .map_err(|_| format!("the pod table has {} slots, over 2^32", slots.len()))?;
        let mut by_key = BTreeMap::new();
        let mut free = BTreeSet::new();
        for (index, slot) in (0..u32_len).zip(&slots) {
            match slot {
                Some(pod) => {
                    if by_key.insert(pod.key.clone(), PodId(index)).is_some() {
                        return Err(format!("pod {} is in the pod table twice", pod.key));
                    }
                }
                None => {
                    free.insert(index);
                }
            }
        }
        let slots: Vec<Option<Held>> = slots.into_iter().map(|slot| slot.map(Held::new)).collect();
        let required_anti_affinity = slots
            .iter()
            .flatten()
            .filter(|held| held.facts.required_anti_affinity)
            .count();
        Ok(PodTable {
            slots,
            by_key,
            free,
            required_anti_affinity,
        })
    }
}

impl<'a> IntoIterator for &'a PodTable {
    type Item = (&'a PodKey, &'a Pod);
    type IntoIter = Box<dyn Iterator<Item = (&'a PodKey, &'a Pod)> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl FromIterator<Pod> for PodTable {
    fn from_iter<I: IntoIterator<Item = Pod>>(pods: I) -> Self {
        let mut table = PodTable::default();
        for pod in pods {
            table.insert(pod);
        }
        table
    }
}

impl Serialize for PodTable {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // As the `Vec<Option<Pod>>` of the slots.
        s.collect_seq(
            self.slots
                .iter()
                .map(|slot| slot.as_ref().map(|held| &held.pod)),
        )
    }
}

impl<'de> Deserialize<'de> for PodTable {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let slots = Vec::<Option<Pod>>::deserialize(d)?;
        PodTable::from_slots(slots).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pod(name: u8) -> Pod {
        Pod::new("default", &format!("p{name}"), 100, 1 << 20)
    }

    #[test]
    fn a_replaced_pod_keeps_its_id_and_a_freed_id_is_taken_lowest_first() {
        let mut table: PodTable = [pod(1), pod(2), pod(3), pod(4)].into_iter().collect();
        let id3 = table.id(&pod(3).key).unwrap();
        let mut changed = pod(3);
        changed.node_name = Some("n".into());
        let (id, old) = table.insert(changed);
        assert_eq!(id, id3);
        assert_eq!(old.unwrap().node_name, None);
        table.remove(&pod(2).key);
        table.remove(&pod(1).key);
        let (id, _) = table.insert(pod(9));
        assert_eq!(id, PodId(0));
        // Removing the last slot shrinks the table past the free slots before it.
        table.remove(&pod(4).key);
        table.remove(&pod(3).key);
        assert_eq!(table.slots.len(), 1);
        assert!(table.free.is_empty());
    }

    #[test]
    fn pods_with_a_required_anti_affinity_term_are_counted_as_they_come_and_go() {
        use crate::model::affinity::{LabelSelector, PodAffinityTerm};
        let apart = |name: u8, weight: Option<i32>| {
            let mut p = pod(name);
            p.pod_anti_affinity.push(PodAffinityTerm {
                selector: LabelSelector::default(),
                namespaces: Vec::new(),
                topology_key: "kubernetes.io/hostname".into(),
                weight,
            });
            p
        };
        let mut table: PodTable = [pod(1), apart(2, Some(10))].into_iter().collect();
        assert!(
            !table.any_with_required_anti_affinity(),
            "a preferred term is not one"
        );
        table.insert(apart(3, None));
        assert!(table.any_with_required_anti_affinity());
        // Replaced by a pod without it, then with it again, then gone.
        table.insert(pod(3));
        assert!(!table.any_with_required_anti_affinity());
        table.insert(apart(3, None));
        let restored: PodTable =
            postcard::from_bytes(&postcard::to_allocvec(&table).unwrap()).unwrap();
        assert!(
            restored.any_with_required_anti_affinity(),
            "counted again on restore"
        );
        table.remove(&pod(3).key);
        assert!(!table.any_with_required_anti_affinity());
    }

    #[test]
    fn refuses_slots_no_table_holds() {
        let twice = vec![Some(pod(1)), Some(pod(1))];
        let bytes = postcard::to_allocvec(&twice).unwrap();
        let err = postcard::from_bytes::<PodTable>(&bytes).unwrap_err();
        assert!(matches!(err, postcard::Error::SerdeDeCustom), "{err:?}");
        assert!(PodTable::from_slots(twice).unwrap_err().contains("twice"));
        assert!(
            PodTable::from_slots(vec![Some(pod(1)), None])
                .unwrap_err()
                .contains("empty slot")
        );
    }

    proptest! {
        /// Any sequence of inserts and removals: the table holds what a map by key holds, in
        /// the same order, and a table restored from its bytes is the same table and places
        /// the next pod where the original does.
        #[test]
        fn behaves_as_a_map_and_restores_exactly(ops in proptest::collection::vec((any::<bool>(), 0u8..24), 0..120)) {
            let mut table = PodTable::default();
            let mut model: BTreeMap<PodKey, Pod> = BTreeMap::new();
            for (add, name) in ops {
                let p = pod(name);
                if add {
                    table.insert(p.clone());
                    model.insert(p.key.clone(), p);
                } else {
                    prop_assert_eq!(table.remove(&p.key), model.remove(&p.key));
                }
                prop_assert_eq!(table.len(), model.len());
                prop_assert!(table.values().eq(model.values()));
                for key in model.keys() {
                    let id = table.id(key).unwrap();
                    prop_assert_eq!(&table.pod(id).key, key);
                }
            }
            let bytes = postcard::to_allocvec(&table).unwrap();
            let mut restored: PodTable = postcard::from_bytes(&bytes).unwrap();
            prop_assert_eq!(&restored.slots, &table.slots);
            prop_assert_eq!(&restored.free, &table.free);
            prop_assert_eq!(restored.insert(pod(200)).0, table.insert(pod(200)).0);
        }
    }
}
