//! The re-list after a restart: what the listing shows and the core does not know is told,
//! what the core knows and the listing lacks is deleted, and nothing else.

use nodewright_adapters::relist::{Listing, relist_events};
use nodewright_core::model::node::Node;
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::pod::{Pod, PodKey};
use nodewright_core::model::resources::Resources;
use nodewright_core::{Config, Core, Event, EventKind};

fn node(name: &str) -> Node {
    Node {
        name: name.to_string(),
        provider_id: None,
        labels: Default::default(),
        annotations: Default::default(),
        taints: Vec::new(),
        allocatable: Resources::default(),
        ready: true,
        unschedulable: false,
    }
}

fn pod(name: &str, node: Option<&str>) -> Pod {
    let mut p = Pod::new("default", name, 100, 1 << 20);
    p.node_name = node.map(str::to_string);
    p
}

/// A core that knows one NodePool, two nodes and three pods.
fn known() -> (Core, Listing) {
    let mut core = Core::new(Config::default());
    let listing = Listing {
        nodepools: vec![NodePool::new("default", "default")],
        nodes: vec![node("n1"), node("n2")],
        pods: Some(vec![
            pod("a", Some("n1")),
            pod("b", Some("n2")),
            pod("c", None),
        ]),
        ..Listing::default()
    };
    for kind in relist_events(core.state(), listing.clone()) {
        core.handle(&Event::new(0, kind));
    }
    (core, listing)
}

fn names(events: &[EventKind]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            EventKind::PodApplied(p) => format!("PodApplied {}", p.key),
            EventKind::PodDeleted { pod } => format!("PodDeleted {pod}"),
            EventKind::NodeApplied(n) => format!("NodeApplied {}", n.name),
            EventKind::NodeDeleted { name } => format!("NodeDeleted {name}"),
            EventKind::NodePoolDeleted { name } => format!("NodePoolDeleted {name}"),
            other => other.name().to_string(),
        })
        .collect()
}

#[test]
fn a_listing_the_core_already_has_tells_nothing_but_the_instances() {
    let (core, mut listing) = known();
    assert!(relist_events(core.state(), listing.clone()).is_empty());
    listing.instances = Some(Vec::new());
    assert_eq!(
        names(&relist_events(core.state(), listing)),
        vec!["InstancesListed"]
    );
}

#[test]
fn changes_and_deletions_missed_while_stopped_are_told_in_order() {
    let (core, mut listing) = known();
    // While the controller was down: pod c was bound, pod b and node n2 went away, a new pod
    // d came, and the NodePool was deleted.
    listing.pods = Some(vec![
        pod("a", Some("n1")),
        pod("c", Some("n1")),
        pod("d", None),
    ]);
    listing.nodes = vec![node("n1")];
    listing.nodepools = Vec::new();
    assert_eq!(
        names(&relist_events(core.state(), listing.clone())),
        vec![
            "PodApplied default/c",
            "PodApplied default/d",
            "PodDeleted default/b",
            "NodeDeleted n2",
            "NodePoolDeleted default",
        ]
    );
    // Told those, the core has the listing.
    let mut core = core;
    for kind in relist_events(core.state(), listing.clone()) {
        core.handle(&Event::new(1_000, kind));
    }
    assert!(relist_events(core.state(), listing).is_empty());
    assert!(core.state().pods.contains_key(&PodKey::new("default", "d")));
    assert!(!core.state().nodes.contains_key("n2"));
}

#[test]
fn a_known_object_applied_again_unchanged_changes_nothing() {
    let (mut core, _) = known();
    let before = postcard::to_stdvec(&core).expect("encodes");
    let commands = core.handle(&Event::new(
        0,
        EventKind::PodApplied(Box::new(pod("c", None))),
    ));
    assert!(commands.is_empty());
    assert_eq!(postcard::to_stdvec(&core).expect("encodes"), before);
    // Not even its batch window opens again: no timer is asked for that was not asked before.
    let commands = core.handle(&Event::new(
        0,
        EventKind::NodeApplied(std::sync::Arc::new(node("n1"))),
    ));
    assert!(commands.is_empty());
    assert_eq!(postcard::to_stdvec(&core).expect("encodes"), before);
}
