//! Determinism, encoding and replay, checked over generated inputs.

use nodewright_adapters::eventlog::{LogHeader, LogRecord, MemoryStore, NwlogReader};
use nodewright_core::{Command, Event};
use nodewright_testkit::harness::commands_per_event;
use nodewright_testkit::scenario::builtin;
use nodewright_testkit::sim;
use nodewright_testkit::strategies::{event_sequence, pod};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any sequence of events gives identical commands on two fresh cores (and never panics).
    #[test]
    fn same_events_same_commands(events in event_sequence(40)) {
        let a = commands_per_event(&events);
        let b = commands_per_event(&events);
        prop_assert_eq!(a, b);
    }

    /// A core handed each event as a log keeps it (an instance listing as its changes since
    /// the last, `Core::compact`) decides exactly what a core handed the events as they came.
    #[test]
    fn listings_logged_as_their_changes_decide_the_same(events in event_sequence(40)) {
        let mut core = nodewright_core::Core::new(nodewright_core::Config::default());
        let compacted: Vec<Event> = events
            .iter()
            .map(|e| {
                let logged = core.compact(e.clone());
                core.handle(&logged);
                logged
            })
            .collect();
        prop_assert_eq!(commands_per_event(&compacted), commands_per_event(&events));
    }

    /// Every event encodes and decodes to itself.
    #[test]
    fn events_round_trip_through_postcard(events in event_sequence(20)) {
        for e in &events {
            let bytes = postcard::to_stdvec(e).expect("encodes");
            let back: Event = postcard::from_bytes(&bytes).expect("decodes");
            prop_assert_eq!(&back, e);
        }
    }

    /// Every command the core produces encodes and decodes to itself.
    #[test]
    fn commands_round_trip_through_postcard(events in event_sequence(40)) {
        for commands in commands_per_event(&events) {
            for c in &commands {
                let bytes = postcard::to_stdvec(c).expect("encodes");
                let back: Command = postcard::from_bytes(&bytes).expect("decodes");
                prop_assert_eq!(&back, c);
            }
        }
    }

    /// The pods of a batch give the same decisions whatever order they arrived in.
    #[test]
    fn batch_decisions_do_not_depend_on_arrival_order(
        pods in prop::collection::btree_map("[a-z]{6}", pod(), 1..12),
        seed in any::<u64>(),
    ) {
        let mut pods: Vec<_> = pods.into_iter().map(|(name, mut p)| { p.key.name = name; p }).collect();
        let forward = decide(&pods);
        // A deterministic shuffle from the seed.
        let mut s = seed;
        for i in (1..pods.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            pods.swap(i, (s >> 33) as usize % (i + 1));
        }
        prop_assert_eq!(forward, decide(&pods));
    }
}

/// Sends pods within one batch window (same creation time), closes it, and returns the
/// decisions of the batch (per-pod warnings come with each pod's own event, not the batch).
fn decide(pods: &[nodewright_core::model::pod::Pod]) -> Vec<Command> {
    use nodewright_core::EventKind;
    use nodewright_core::model::nodepool::NodePool;
    let mut h = nodewright_testkit::harness::CoreHarness::new();
    h.nodepool(NodePool::new("default", "default"));
    for p in pods {
        h.send(EventKind::PodApplied(Box::new(p.clone())));
    }
    h.advance(20_000)
}

/// A simulated log replays to exactly its commands, for many seeds.
#[test]
fn simulated_logs_replay_exactly_across_seeds() {
    let base = builtin("seed-tutorial").expect("built in").expect("loads");
    for seed in 1..=20 {
        let scenario = base.clone().with_seed(seed);
        let store = MemoryStore::new(LogHeader::new(scenario.config.clone(), &scenario.name));
        let (report, store) = sim::run(&scenario, store).expect("runs");
        assert!(report.passed(), "seed {seed}: {}", report.summary());
        let mut bytes = Vec::new();
        store.write_nwlog(&mut bytes).expect("writes");
        // Every instance listing is logged as its changes (the first: all of it new).
        let listings: Vec<&'static str> = NwlogReader::<LogHeader, LogRecord, _>::new(&bytes[..])
            .expect("opens")
            .filter_map(|r| match r.expect("reads") {
                LogRecord::Event(e) => Some(e.kind.name()),
                _ => None,
            })
            .filter(|kind| kind.starts_with("Instances"))
            .collect();
        assert!(listings.len() > 2, "seed {seed}: {listings:?}");
        assert!(
            listings.iter().all(|k| *k == "InstancesRelisted"),
            "seed {seed}: {listings:?}"
        );
        let reader = NwlogReader::<LogHeader, LogRecord, _>::new(&bytes[..]).expect("opens");
        let outcome = nodewright_replay::verify(reader).expect("reads");
        assert!(
            outcome.divergence.is_none(),
            "seed {seed}: {:?}",
            outcome.divergence
        );
        assert_eq!(
            outcome.decision_digest, report.decision_digest,
            "seed {seed}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// No launch ever offers a machine that violates a pod's requirements, taints or resources.
    #[test]
    fn launches_respect_every_pods_constraints_and_resources(
        pods in prop::collection::btree_map("[a-z]{6}", pod(), 1..10),
        pools in prop::collection::vec(nodewright_testkit::strategies::nodepool(), 1..3),
    ) {
        use nodewright_core::model::labels;
        use nodewright_core::model::taints::first_untolerated;
        let mut h = nodewright_testkit::harness::CoreHarness::new();
        let mut by_name = std::collections::BTreeMap::new();
        for pool in pools {
            by_name.insert(pool.name.clone(), pool.clone());
            h.nodepool(pool);
        }
        let mut all = std::collections::BTreeMap::new();
        for (name, mut p) in pods {
            p.key.name = name;
            all.insert(p.key.clone(), p.clone());
            h.pod(p);
        }
        h.advance(20_000);
        for (_, c) in &h.commands {
            let Command::LaunchNodeClaim { nodeclaim, reason } = c else { continue };
            let pool = &by_name[&nodeclaim.nodepool];
            let mut total = nodewright_core::model::resources::Resources::default();
            for key in &reason.pods {
                let pod = &all[key];
                total.add(&pod.requests);
                prop_assert!(first_untolerated(&pool.taints, &pod.tolerations).is_none(), "{key} does not tolerate {}", pool.name);
            }
            prop_assert_eq!(&total, &nodeclaim.requests);
            prop_assert!(!nodeclaim.options.is_empty());
            for o in nodeclaim.options.iter() {
                let it = h.catalog().get(&o.instance_type).expect("known type");
                let alloc = nodewright_core::catalog::capacity(it, &Default::default()).allocatable;
                prop_assert!(total.fits_in(&alloc), "{} cannot hold {}", it.name, total);
                let mut node_labels = it.labels.clone();
                node_labels.extend(nodeclaim.labels.clone());
                node_labels.insert(labels::ZONE.into(), o.zone.to_string());
                node_labels.insert(labels::CAPACITY_TYPE.into(), o.capacity_type.as_str().into());
                prop_assert!(pool.template_requirements().matches_labels(&node_labels), "{} breaks pool {}", it.name, pool.name);
                for key in &reason.pods {
                    let pod = &all[key];
                    prop_assert!(
                        pod.requirement_alternatives().iter().any(|r| r.matches_labels(&node_labels)),
                        "{} in {} does not meet {key}'s requirements", it.name, o.zone
                    );
                }
            }
        }
    }
}
