//! Capacity reservations (`capacityReservationSelectorTerms`, the `reserved` capacity type),
//! as Karpenter treats them: a reserved offering is chosen before any on-demand or spot one,
//! only as many machines as the reservation holds use it, the next ones fall back to the
//! capacity types the NodePool also allows, and only classes whose terms select a reservation
//! launch into it.

use std::sync::Arc;

use nodewright_core::EventKind;
use nodewright_core::catalog::{CapacityReservation, CapacityType, Catalog, ReservationKind};
use nodewright_core::model::labels;
use nodewright_core::model::nodeclass::{NodeClass, SelectorTerm};
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::pod::Pod;
use nodewright_core::model::requirements::{Operator, RequirementSpec};
use nodewright_testkit::harness::CoreHarness;

const GIB: i64 = 1 << 30;

fn reservation(count: u32) -> CapacityReservation {
    CapacityReservation {
        id: "cr-0a1b2c3d4e5f60001".into(),
        instance_type: "m5.xlarge".into(),
        zone: "us-east-1a".into(),
        count,
        kind: ReservationKind::Default,
        owner_id: "123456789012".into(),
        tags: [("team".to_string(), "web".to_string())].into(),
    }
}

/// A core whose catalog lists the reservation, a class `default` that selects it (by tags, or
/// not at all), and a pool allowing `capacity` on m5.
fn harness(count: u32, selected: bool, capacity: &[&str]) -> CoreHarness {
    let mut h = CoreHarness::new();
    let catalog = Catalog {
        reservations: vec![reservation(count)],
        ..h.catalog().clone()
    };
    h.send(EventKind::CatalogUpdated(Arc::new(catalog)));
    let mut class = NodeClass::new("default");
    if selected {
        class.capacity_reservation_selector_terms = vec![SelectorTerm {
            tags: [("team".to_string(), "web".to_string())].into(),
            ..SelectorTerm::default()
        }];
    }
    h.nodeclass(class);
    let mut pool = NodePool::new("web", "default");
    pool.requirements = vec![
        RequirementSpec::new(labels::CAPACITY_TYPE, Operator::In, capacity),
        RequirementSpec::new(labels::INSTANCE_FAMILY, Operator::In, &["m5"]),
    ];
    h.nodepool(pool);
    h
}

/// One machine's worth of pods (3 CPUs: an m5.xlarge), one batch at a time.
fn provision_one(
    h: &mut CoreHarness,
    name: &str,
) -> Vec<nodewright_core::model::nodeclaim::NodeClaimSpec> {
    h.pod(Pod::new("default", name, 3000, 4 * GIB));
    CoreHarness::launches(&h.advance(11_000))
}

#[test]
fn reserved_capacity_comes_first_as_far_as_the_reservation_holds_then_on_demand() {
    let mut h = harness(2, true, &["reserved", "on-demand"]);
    for (i, expected) in [
        CapacityType::Reserved,
        CapacityType::Reserved,
        CapacityType::OnDemand,
    ]
    .into_iter()
    .enumerate()
    {
        let launched = provision_one(&mut h, &format!("web-{i}"));
        assert_eq!(launched.len(), 1, "{:?}", h.commands);
        let first = &launched[0].options[0];
        assert_eq!(first.capacity_type, expected, "machine {i}: {first:?}");
        if expected == CapacityType::Reserved {
            assert_eq!(
                (first.instance_type.as_str(), first.zone.as_str()),
                ("m5.xlarge", "us-east-1a")
            );
            // Reserved is priced next to nothing: it is already paid for.
            assert!(first.price.0 < 1_000, "{first:?}");
            // The on-demand offerings stay behind it for the fleet to fall back on.
            assert!(
                launched[0]
                    .options
                    .iter()
                    .any(|o| o.capacity_type == CapacityType::OnDemand)
            );
        } else {
            assert!(
                launched[0]
                    .options
                    .iter()
                    .all(|o| o.capacity_type != CapacityType::Reserved),
                "the reservation is full: {:?}",
                launched[0].options
            );
        }
        h.launch_cheapest(&launched[0]);
    }
}

#[test]
fn a_machine_gone_frees_its_place_in_the_reservation() {
    let mut h = harness(1, true, &["reserved", "on-demand"]);
    let first = provision_one(&mut h, "a");
    h.launch_cheapest(&first[0]);
    let second = provision_one(&mut h, "b");
    assert_eq!(second[0].options[0].capacity_type, CapacityType::OnDemand);
    h.send(EventKind::NodeClaimTerminated {
        nodeclaim: first[0].name.clone(),
    });
    h.delete_pod("default", "a");
    let third = provision_one(&mut h, "c");
    assert_eq!(third[0].options[0].capacity_type, CapacityType::Reserved);
}

#[test]
fn a_class_that_selects_no_reservation_never_launches_into_one() {
    let mut h = harness(2, false, &["reserved", "on-demand"]);
    let launched = provision_one(&mut h, "a");
    assert!(
        launched[0]
            .options
            .iter()
            .all(|o| o.capacity_type == CapacityType::OnDemand),
        "{:?}",
        launched[0].options
    );
    // A pool that allows reserved capacity only launches nothing through it.
    let mut h = harness(2, false, &["reserved"]);
    assert!(provision_one(&mut h, "b").is_empty());
}

#[test]
fn a_reserved_only_pool_waits_when_the_reservation_is_full() {
    let mut h = harness(1, true, &["reserved"]);
    let first = provision_one(&mut h, "a");
    assert_eq!(first[0].options.len(), 1, "{:?}", first[0].options);
    h.launch_cheapest(&first[0]);
    assert!(provision_one(&mut h, "b").is_empty());
    let reasons: Vec<String> = h
        .commands
        .iter()
        .filter_map(|(_, c)| match c {
            nodewright_core::Command::ReportUnschedulable { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect();
    assert!(!reasons.is_empty());
}
