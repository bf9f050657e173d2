//! Topology spread, pod (anti-)affinity, preferences and their relaxation, host ports,
//! minValues, DaemonSet overhead and kubelet settings: what a Karpenter user relies on.

use std::collections::{BTreeMap, BTreeSet};

use nodewright_core::config::{Config, MinValuesPolicy, PreferencePolicy};
use nodewright_core::event::DaemonSet;
use nodewright_core::model::affinity::{
    HostPort, InclusionPolicy, LabelSelector, PodAffinityTerm, TopologySpreadConstraint,
    WhenUnsatisfiable,
};
use nodewright_core::model::labels;
use nodewright_core::model::nodeclaim::NodeClaimSpec;
use nodewright_core::model::nodeclass::NodeClass;
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::pod::Pod;
use nodewright_core::model::requirements::{Operator, RequirementSpec};
use nodewright_core::model::resources::AWS_NEURON;
use nodewright_core::model::taints::{Taint, TaintEffect};
use nodewright_core::{Command, EventKind};
use nodewright_testkit::harness::CoreHarness;

const GIB: i64 = 1 << 30;

fn req(key: &str, op: Operator, values: &[&str]) -> RequirementSpec {
    RequirementSpec::new(key, op, values)
}

/// A general-purpose pool: amd64, on-demand, c/m/r, in three zones.
fn pool() -> NodePool {
    let mut p = NodePool::new("default", "default");
    p.requirements = vec![
        req(labels::ARCH, Operator::In, &["amd64"]),
        req(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]),
        req(labels::INSTANCE_CATEGORY, Operator::In, &["c", "m", "r"]),
        req(
            labels::ZONE,
            Operator::In,
            &["us-east-1a", "us-east-1b", "us-east-1c"],
        ),
    ];
    p
}

fn harness(config: Config) -> CoreHarness {
    let mut h = CoreHarness::with_config(config);
    h.nodepool(pool());
    h
}

fn app(name: &str, app: &str) -> Pod {
    let mut p = Pod::new("default", name, 500, GIB);
    p.labels.insert("app".into(), app.into());
    p
}

fn selector(key: &str, value: &str) -> LabelSelector {
    LabelSelector {
        match_labels: [(key.to_string(), value.to_string())].into(),
        match_expressions: Vec::new(),
    }
}

fn spread(
    key: &str,
    max_skew: u32,
    when: WhenUnsatisfiable,
    app: &str,
) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew,
        topology_key: key.to_string(),
        when_unsatisfiable: when,
        selector: selector("app", app),
        min_domains: None,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
        match_label_keys: Vec::new(),
    }
}

fn term(key: &str, app: &str, weight: Option<i32>) -> PodAffinityTerm {
    PodAffinityTerm {
        selector: selector("app", app),
        namespaces: Vec::new(),
        topology_key: key.to_string(),
        weight,
    }
}

fn provision(h: &mut CoreHarness, pods: Vec<Pod>) -> Vec<NodeClaimSpec> {
    for p in pods {
        h.pod(p);
    }
    CoreHarness::launches(&h.advance(11_000))
}

fn unschedulable(h: &CoreHarness) -> BTreeMap<String, String> {
    h.commands
        .iter()
        .filter_map(|(_, c)| match c {
            Command::ReportUnschedulable { pod, reason } => {
                Some((pod.name.clone(), reason.clone()))
            }
            _ => None,
        })
        .collect()
}

fn zone_of(claim: &NodeClaimSpec) -> String {
    let zones: BTreeSet<&str> = claim.options.iter().map(|o| o.zone.as_str()).collect();
    assert_eq!(
        zones.len(),
        1,
        "{} is not pinned to one zone: {zones:?}",
        claim.name
    );
    zones
        .into_iter()
        .next()
        .map(str::to_string)
        .unwrap_or_default()
}

fn pods_per_zone(claims: &[NodeClaimSpec]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for c in claims {
        *out.entry(zone_of(c)).or_insert(0) += c.requests.pods as usize;
    }
    out
}

fn with_spread(name: &str, a: &str, c: TopologySpreadConstraint) -> Pod {
    let mut p = app(name, a);
    p.topology_spread.push(c);
    p
}

#[test]
fn zonal_spread_max_skew_1_over_three_zones_puts_3_pods_in_3_zones() {
    let mut h = harness(Config::default());
    let pods = (0..3)
        .map(|i| {
            with_spread(
                &format!("w{i}"),
                "web",
                spread(labels::ZONE, 1, WhenUnsatisfiable::DoNotSchedule, "web"),
            )
        })
        .collect();
    let claims = provision(&mut h, pods);
    let zones = pods_per_zone(&claims);
    assert_eq!(zones.len(), 3, "{zones:?}");
    assert!(zones.values().all(|n| *n == 1));
}

#[test]
fn zonal_spread_of_six_pods_is_two_per_zone() {
    let mut h = harness(Config::default());
    let pods = (0..6)
        .map(|i| {
            with_spread(
                &format!("w{i}"),
                "web",
                spread(labels::ZONE, 1, WhenUnsatisfiable::DoNotSchedule, "web"),
            )
        })
        .collect();
    let zones = pods_per_zone(&provision(&mut h, pods));
    assert_eq!(
        zones.values().copied().collect::<Vec<_>>(),
        vec![2, 2, 2],
        "{zones:?}"
    );
}

#[test]
fn hostname_spread_max_skew_1_puts_one_pod_per_machine() {
    let mut h = harness(Config::default());
    let pods = (0..4)
        .map(|i| {
            with_spread(
                &format!("w{i}"),
                "web",
                spread(labels::HOSTNAME, 1, WhenUnsatisfiable::DoNotSchedule, "web"),
            )
        })
        .collect();
    let claims = provision(&mut h, pods);
    assert_eq!(claims.len(), 4);
    assert!(claims.iter().all(|c| c.requests.pods == 1));
}

#[test]
fn hostname_spread_max_skew_2_allows_two_per_machine() {
    let mut h = harness(Config::default());
    let pods = (0..4)
        .map(|i| {
            with_spread(
                &format!("w{i}"),
                "web",
                spread(labels::HOSTNAME, 2, WhenUnsatisfiable::DoNotSchedule, "web"),
            )
        })
        .collect();
    let claims = provision(&mut h, pods);
    assert_eq!(claims.len(), 2);
    assert!(claims.iter().all(|c| c.requests.pods == 2));
}

#[test]
fn spread_selectors_only_count_matching_pods() {
    let mut h = harness(Config::default());
    let mut pods: Vec<Pod> = (0..3)
        .map(|i| {
            with_spread(
                &format!("w{i}"),
                "web",
                spread(labels::HOSTNAME, 1, WhenUnsatisfiable::DoNotSchedule, "web"),
            )
        })
        .collect();
    pods.extend((0..6).map(|i| app(&format!("other{i}"), "batch")));
    let claims = provision(&mut h, pods);
    assert_eq!(claims.len(), 3, "other pods join the spread machines");
    assert_eq!(claims.iter().map(|c| c.requests.pods).sum::<i64>(), 9);
}

#[test]
fn do_not_schedule_spread_on_a_key_no_machine_has_is_unschedulable() {
    let mut h = harness(Config::default());
    let pod = with_spread(
        "w",
        "web",
        spread(
            "example.com/rack",
            1,
            WhenUnsatisfiable::DoNotSchedule,
            "web",
        ),
    );
    assert!(provision(&mut h, vec![pod]).is_empty());
    let reasons = unschedulable(&h);
    assert!(
        reasons["w"].contains("topology spread on example.com/rack"),
        "{reasons:?}"
    );
}

#[test]
fn schedule_anyway_spread_is_relaxed_when_it_cannot_be_met() {
    let mut h = harness(Config::default());
    let pod = with_spread(
        "w",
        "web",
        spread(
            "example.com/rack",
            1,
            WhenUnsatisfiable::ScheduleAnyway,
            "web",
        ),
    );
    assert_eq!(provision(&mut h, vec![pod]).len(), 1);
    assert!(unschedulable(&h).is_empty());
}

#[test]
fn min_domains_above_the_zone_count_caps_each_zone_at_max_skew() {
    let mut h = harness(Config::default());
    let pods = (0..4)
        .map(|i| {
            let mut c = spread(labels::ZONE, 1, WhenUnsatisfiable::DoNotSchedule, "web");
            c.min_domains = Some(5);
            with_spread(&format!("w{i}"), "web", c)
        })
        .collect();
    let claims = provision(&mut h, pods);
    assert_eq!(claims.iter().map(|c| c.requests.pods).sum::<i64>(), 3);
    assert_eq!(unschedulable(&h).len(), 1);
}

#[test]
fn node_affinity_policy_honor_spreads_only_over_allowed_zones() {
    let mut h = harness(Config::default());
    let pods = (0..4)
        .map(|i| {
            let mut p = with_spread(
                &format!("w{i}"),
                "web",
                spread(labels::ZONE, 1, WhenUnsatisfiable::DoNotSchedule, "web"),
            );
            p.required_node_affinity = vec![vec![req(
                labels::ZONE,
                Operator::In,
                &["us-east-1a", "us-east-1b"],
            )]];
            p
        })
        .collect();
    let zones = pods_per_zone(&provision(&mut h, pods));
    assert_eq!(
        zones,
        BTreeMap::from([("us-east-1a".to_string(), 2), ("us-east-1b".to_string(), 2)])
    );
}

#[test]
fn match_label_keys_spread_each_version_separately() {
    let mut h = harness(Config::default());
    let pods = (0..6)
        .map(|i| {
            let mut c = spread(labels::ZONE, 1, WhenUnsatisfiable::DoNotSchedule, "web");
            c.match_label_keys = vec!["version".to_string()];
            let mut p = with_spread(&format!("w{i}"), "web", c);
            p.labels
                .insert("version".into(), if i < 3 { "v1" } else { "v2" }.into());
            p
        })
        .collect();
    let claims = provision(&mut h, pods);
    // Each version alone is spread 1-1-1; together 2-2-2.
    let zones = pods_per_zone(&claims);
    assert_eq!(
        zones.values().copied().collect::<Vec<_>>(),
        vec![2, 2, 2],
        "{zones:?}"
    );
}

#[test]
fn hostname_anti_affinity_puts_one_pod_per_machine() {
    let mut h = harness(Config::default());
    let pods = (0..5)
        .map(|i| {
            let mut p = app(&format!("n{i}"), "nginx");
            p.pod_anti_affinity
                .push(term(labels::HOSTNAME, "nginx", None));
            p
        })
        .collect();
    let claims = provision(&mut h, pods);
    assert_eq!(claims.len(), 5);
}

#[test]
fn zonal_anti_affinity_allows_one_pod_per_zone() {
    let mut h = harness(Config::default());
    let pods = (0..4)
        .map(|i| {
            let mut p = app(&format!("n{i}"), "db");
            p.pod_anti_affinity.push(term(labels::ZONE, "db", None));
            p
        })
        .collect();
    let claims = provision(&mut h, pods);
    let zones = pods_per_zone(&claims);
    assert_eq!(zones.len(), 3);
    assert_eq!(unschedulable(&h).len(), 1, "the fourth has no zone left");
}

#[test]
fn hostname_self_affinity_packs_the_group_on_one_machine() {
    let mut h = harness(Config::default());
    let pods = (0..4)
        .map(|i| {
            let mut p = app(&format!("c{i}"), "cache");
            p.pod_affinity.push(term(labels::HOSTNAME, "cache", None));
            p
        })
        .collect();
    let claims = provision(&mut h, pods);
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].requests.pods, 4);
}

#[test]
fn zonal_self_affinity_keeps_the_group_in_one_zone() {
    let mut h = harness(Config::default());
    let pods = (0..6)
        .map(|i| {
            let mut p = Pod::new("default", &format!("c{i}"), 150_000, GIB);
            p.labels.insert("app".into(), "cache".into());
            p.pod_affinity.push(term(labels::ZONE, "cache", None));
            p
        })
        .collect();
    let claims = provision(&mut h, pods);
    assert!(claims.len() > 1, "the pods need several machines");
    assert_eq!(pods_per_zone(&claims).len(), 1);
}

#[test]
fn affinity_to_pods_that_do_not_exist_is_unschedulable() {
    let mut h = harness(Config::default());
    let mut p = app("lonely", "web");
    p.pod_affinity.push(term(labels::ZONE, "database", None));
    assert!(provision(&mut h, vec![p]).is_empty());
    assert!(unschedulable(&h)["lonely"].contains("pod affinity"));
}

#[test]
fn affinity_follows_a_running_pod_to_its_zone() {
    let mut h = harness(Config::default());
    h.existing_node("db-node", "m5.large", "us-east-1b");
    let mut db = app("db", "database");
    db.node_name = Some("db-node".into());
    h.send(EventKind::PodApplied(Box::new(db)));
    let mut p = Pod::new("default", "web", 4000, GIB);
    p.pod_affinity.push(term(labels::ZONE, "database", None));
    let claims = provision(&mut h, vec![p]);
    assert_eq!(claims.len(), 1);
    assert_eq!(zone_of(&claims[0]), "us-east-1b");
}

#[test]
fn a_running_pods_anti_affinity_keeps_matching_pods_off_its_node() {
    let mut h = harness(Config::default());
    h.existing_node("big-node", "m5.4xlarge", "us-east-1a");
    let mut loner = app("loner", "loner");
    loner.node_name = Some("big-node".into());
    loner
        .pod_anti_affinity
        .push(term(labels::HOSTNAME, "web", None));
    h.send(EventKind::PodApplied(Box::new(loner)));
    let claims = provision(&mut h, vec![app("web-1", "web")]);
    assert_eq!(claims.len(), 1, "the web pod may not join the loner");
    // A pod the loner does not mind fits the node.
    assert!(provision(&mut h, vec![app("batch-1", "batch")]).is_empty());
}

#[test]
fn anti_affinity_against_a_pod_on_an_existing_node_avoids_that_node() {
    let mut h = harness(Config::default());
    h.existing_node("n1", "m5.4xlarge", "us-east-1a");
    let mut first = app("first", "nginx");
    first.node_name = Some("n1".into());
    h.send(EventKind::PodApplied(Box::new(first)));
    let mut second = app("second", "nginx");
    second
        .pod_anti_affinity
        .push(term(labels::HOSTNAME, "nginx", None));
    assert_eq!(provision(&mut h, vec![second]).len(), 1);
}

#[test]
fn preferred_hostname_anti_affinity_is_honoured_when_possible() {
    let mut h = harness(Config::default());
    let pods = (0..3)
        .map(|i| {
            let mut p = app(&format!("n{i}"), "nginx");
            p.pod_anti_affinity
                .push(term(labels::HOSTNAME, "nginx", Some(50)));
            p
        })
        .collect();
    assert_eq!(provision(&mut h, pods).len(), 3);
}

#[test]
fn preference_policy_ignore_packs_pods_with_preferred_anti_affinity() {
    let mut h = harness(Config {
        preference_policy: PreferencePolicy::Ignore,
        ..Config::default()
    });
    let pods = (0..3)
        .map(|i| {
            let mut p = app(&format!("n{i}"), "nginx");
            p.pod_anti_affinity
                .push(term(labels::HOSTNAME, "nginx", Some(50)));
            p
        })
        .collect();
    assert_eq!(provision(&mut h, pods).len(), 1);
}

#[test]
fn unsatisfiable_preferred_zonal_anti_affinity_is_relaxed_heaviest_first() {
    let mut h = harness(Config::default());
    let pods = (0..5)
        .map(|i| {
            let mut p = app(&format!("n{i}"), "nginx");
            p.pod_anti_affinity
                .push(term(labels::ZONE, "nginx", Some(10)));
            p.pod_anti_affinity
                .push(term(labels::HOSTNAME, "nginx", Some(1)));
            p
        })
        .collect();
    let claims = provision(&mut h, pods);
    assert!(unschedulable(&h).is_empty());
    // Zonal anti-affinity holds for the first three; once relaxed, hostname anti-affinity
    // still gives each pod its own machine.
    assert_eq!(claims.len(), 5);
}

#[test]
fn preferred_node_affinity_steers_to_the_preferred_zone() {
    let mut h = harness(Config::default());
    let mut p = app("p", "web");
    p.preferred_node_affinity
        .push((10, vec![req(labels::ZONE, Operator::In, &["us-east-1c"])]));
    let claims = provision(&mut h, vec![p]);
    assert_eq!(zone_of(&claims[0]), "us-east-1c");
}

#[test]
fn an_unsatisfiable_node_preference_is_dropped() {
    let mut h = harness(Config::default());
    let mut p = app("p", "web");
    p.preferred_node_affinity
        .push((10, vec![req(labels::ZONE, Operator::In, &["us-east-1f"])]));
    assert_eq!(provision(&mut h, vec![p]).len(), 1);
    assert!(unschedulable(&h).is_empty());
}

#[test]
fn heavier_node_preference_wins_and_lighter_one_is_the_fallback() {
    let mut h = harness(Config::default());
    let mut p = app("p", "web");
    p.preferred_node_affinity
        .push((1, vec![req(labels::ZONE, Operator::In, &["us-east-1b"])]));
    p.preferred_node_affinity
        .push((90, vec![req(labels::ZONE, Operator::In, &["us-east-1f"])]));
    let claims = provision(&mut h, vec![p]);
    assert_eq!(
        zone_of(&claims[0]),
        "us-east-1b",
        "the heavy one is impossible, the light one holds"
    );
}

#[test]
fn required_node_affinity_terms_are_tried_in_order() {
    let mut h = harness(Config::default());
    let mut p = app("p", "web");
    p.required_node_affinity = vec![
        vec![req(labels::ZONE, Operator::In, &["us-east-1f"])],
        vec![req(labels::ZONE, Operator::In, &["us-east-1c"])],
    ];
    let claims = provision(&mut h, vec![p]);
    assert_eq!(zone_of(&claims[0]), "us-east-1c");
}

#[test]
fn prefer_no_schedule_pools_are_used_after_untainted_ones() {
    let mut h = CoreHarness::new();
    let mut soft = pool();
    soft.name = "soft".into();
    soft.weight = Some(100);
    soft.taints
        .push(Taint::new("spare", None, TaintEffect::PreferNoSchedule));
    h.nodepool(soft);
    let mut plain = pool();
    plain.name = "plain".into();
    h.nodepool(plain);
    let claims = provision(&mut h, vec![app("p", "web")]);
    assert_eq!(claims[0].nodepool, "plain");
}

#[test]
fn a_prefer_no_schedule_pool_is_used_when_it_is_the_only_one() {
    let mut h = CoreHarness::new();
    let mut soft = pool();
    soft.taints
        .push(Taint::new("spare", None, TaintEffect::PreferNoSchedule));
    h.nodepool(soft);
    assert_eq!(provision(&mut h, vec![app("p", "web")]).len(), 1);
}

#[test]
fn pods_on_the_same_host_port_need_separate_machines() {
    let mut h = harness(Config::default());
    let pods = (0..3)
        .map(|i| {
            let mut p = app(&format!("ingress-{i}"), "ingress");
            p.host_ports.push(HostPort {
                port: 443,
                protocol: "TCP".into(),
                host_ip: String::new(),
            });
            p
        })
        .collect();
    assert_eq!(provision(&mut h, pods).len(), 3);
}

#[test]
fn different_host_ports_share_a_machine() {
    let mut h = harness(Config::default());
    let pods = [80u16, 443, 8080]
        .iter()
        .map(|port| {
            let mut p = app(&format!("p{port}"), "ingress");
            p.host_ports.push(HostPort {
                port: *port,
                protocol: "TCP".into(),
                host_ip: String::new(),
            });
            p
        })
        .collect();
    assert_eq!(provision(&mut h, pods).len(), 1);
}

#[test]
fn a_host_port_taken_on_an_existing_node_sends_the_pod_elsewhere() {
    let mut h = harness(Config::default());
    h.existing_node("n1", "m5.4xlarge", "us-east-1a");
    let mut taken = app("taken", "ingress");
    taken.node_name = Some("n1".into());
    taken.host_ports.push(HostPort {
        port: 443,
        protocol: "TCP".into(),
        host_ip: String::new(),
    });
    h.send(EventKind::PodApplied(Box::new(taken)));
    let mut p = app("p", "ingress");
    p.host_ports.push(HostPort {
        port: 443,
        protocol: "TCP".into(),
        host_ip: String::new(),
    });
    assert_eq!(provision(&mut h, vec![p]).len(), 1);
}

fn min_values_pool(min: u32) -> NodePool {
    let mut p = pool();
    p.requirements.push(RequirementSpec {
        key: labels::INSTANCE_FAMILY.to_string(),
        operator: Operator::Exists,
        values: vec![],
        min_values: Some(min),
    });
    p
}

#[test]
fn min_values_3_on_instance_family_keeps_3_families_in_the_launch_options() {
    let mut h = CoreHarness::new();
    let mut p = min_values_pool(3);
    p.requirements.push(req(
        labels::INSTANCE_FAMILY,
        Operator::In,
        &["m5", "c5", "r5", "m6i"],
    ));
    h.nodepool(p);
    let claims = provision(&mut h, vec![app("p", "web")]);
    let families: BTreeSet<String> = claims[0]
        .options
        .iter()
        .map(|o| {
            h.catalog().get(&o.instance_type).expect("known").labels[labels::INSTANCE_FAMILY]
                .clone()
        })
        .collect();
    assert!(families.len() >= 3, "{families:?}");
}

#[test]
fn min_values_keeps_families_even_past_the_sixty_type_cut() {
    let mut h = CoreHarness::new();
    h.nodepool(min_values_pool(50));
    let claims = provision(&mut h, vec![app("p", "web")]);
    let families: BTreeSet<String> = claims[0]
        .options
        .iter()
        .map(|o| {
            h.catalog().get(&o.instance_type).expect("known").labels[labels::INSTANCE_FAMILY]
                .clone()
        })
        .collect();
    assert!(families.len() >= 50, "{}", families.len());
}

#[test]
fn strict_min_values_that_cannot_be_met_leave_the_pod_unschedulable() {
    let mut h = CoreHarness::new();
    let mut p = min_values_pool(3);
    p.requirements
        .push(req(labels::INSTANCE_FAMILY, Operator::In, &["m5", "c5"]));
    h.nodepool(p);
    assert!(provision(&mut h, vec![app("p", "web")]).is_empty());
    assert!(
        unschedulable(&h)["p"].contains("minValues"),
        "{:?}",
        unschedulable(&h)
    );
}

#[test]
fn best_effort_min_values_launch_with_what_there_is() {
    let mut h = CoreHarness::with_config(Config {
        min_values_policy: MinValuesPolicy::BestEffort,
        ..Config::default()
    });
    let mut p = min_values_pool(3);
    p.requirements
        .push(req(labels::INSTANCE_FAMILY, Operator::In, &["m5", "c5"]));
    h.nodepool(p);
    assert_eq!(provision(&mut h, vec![app("p", "web")]).len(), 1);
}

fn daemonset(name: &str, cpu: i64) -> DaemonSet {
    DaemonSet {
        namespace: "kube-system".into(),
        name: name.into(),
        template: Pod::new("kube-system", "", cpu, 256 << 20),
    }
}

#[test]
fn daemonset_overhead_is_reserved_on_new_machines() {
    let mut with = harness(Config::default());
    with.send(EventKind::DaemonSetApplied(Box::new(daemonset(
        "agent", 2000,
    ))));
    let claim = provision(&mut with, vec![Pod::new("default", "p", 3000, GIB)]).remove(0);
    for o in claim.options.iter() {
        let it = with.catalog().get(&o.instance_type).expect("known");
        let alloc = nodewright_core::catalog::capacity(it, &Default::default()).allocatable;
        assert!(
            alloc.cpu_milli >= 5000,
            "{} has {}m for 3 + 2 CPU",
            it.name,
            alloc.cpu_milli
        );
    }
}

#[test]
fn a_daemonset_that_does_not_tolerate_the_pool_taint_adds_no_overhead() {
    let mut h = CoreHarness::new();
    let mut tainted = pool();
    tainted.taints.push(Taint::new(
        "dedicated",
        Some("batch"),
        TaintEffect::NoSchedule,
    ));
    h.nodepool(tainted);
    h.send(EventKind::DaemonSetApplied(Box::new(daemonset(
        "agent", 60_000,
    ))));
    let mut p = Pod::new("default", "p", 1000, GIB);
    p.tolerations
        .push(nodewright_core::model::taints::Toleration {
            key: Some("dedicated".into()),
            operator: nodewright_core::model::taints::TolerationOperator::Exists,
            value: None,
            effect: None,
        });
    let claim = provision(&mut h, vec![p]).remove(0);
    let it = h
        .catalog()
        .get(&claim.options[0].instance_type)
        .expect("known");
    assert!(
        it.vcpu < 60,
        "{} would only be needed with the overhead",
        it.name
    );
}

#[test]
fn a_daemonset_for_arm64_only_adds_no_overhead_on_amd64() {
    let mut h = harness(Config::default());
    let mut ds = daemonset("arm-agent", 60_000);
    ds.template
        .node_selector
        .insert(labels::ARCH.into(), "arm64".into());
    h.send(EventKind::DaemonSetApplied(Box::new(ds)));
    let claim = provision(&mut h, vec![Pod::new("default", "p", 1000, GIB)]).remove(0);
    let it = h
        .catalog()
        .get(&claim.options[0].instance_type)
        .expect("known");
    assert!(it.vcpu < 60);
}

#[test]
fn startup_taints_are_ignored_for_fit() {
    let mut h = CoreHarness::new();
    let mut p = pool();
    p.startup_taints.push(Taint::new(
        "node.cilium.io/agent-not-ready",
        Some("true"),
        TaintEffect::NoExecute,
    ));
    h.nodepool(p);
    let claims = provision(&mut h, vec![app("p", "web")]);
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].startup_taints.len(), 1);
}

#[test]
fn reserved_enis_lower_pod_density() {
    let pods = |n: usize| {
        (0..n)
            .map(|i| Pod::new("default", &format!("p{i}"), 10, 1 << 20))
            .collect::<Vec<_>>()
    };
    let m5_large_pool = || {
        let mut p = pool();
        p.requirements
            .push(req(labels::INSTANCE_TYPE, Operator::In, &["m5.large"]));
        p
    };
    let mut plain = CoreHarness::new();
    plain.nodepool(m5_large_pool());
    assert_eq!(
        provision(&mut plain, pods(25)).len(),
        1,
        "29 pods fit an m5.large"
    );
    let mut reserved = CoreHarness::with_config(Config {
        reserved_enis: 1,
        ..Config::default()
    });
    reserved.nodepool(m5_large_pool());
    assert_eq!(
        provision(&mut reserved, pods(25)).len(),
        2,
        "20 pods fit with one ENI reserved"
    );
}

#[test]
fn system_reserved_cpu_pushes_to_a_larger_type() {
    let mut h = CoreHarness::new();
    let mut nc = NodeClass::new("default");
    nc.kubelet.system_reserved.insert("cpu".into(), 1000);
    h.nodeclass(nc);
    let mut p = pool();
    p.requirements
        .push(req(labels::INSTANCE_FAMILY, Operator::In, &["m5"]));
    h.nodepool(p);
    let claim = provision(&mut h, vec![Pod::new("default", "p", 1500, GIB)]).remove(0);
    assert_ne!(
        claim.options[0].instance_type, "m5.large",
        "m5.large keeps 930m after 1 CPU reserved"
    );
}

#[test]
fn neuron_requests_get_inferentia_or_trainium_machines() {
    let mut h = CoreHarness::new();
    h.nodepool(NodePool::new("default", "default"));
    let mut p = Pod::new("default", "infer", 1000, GIB);
    p.requests.set_extended(AWS_NEURON, 1);
    let claim = provision(&mut h, vec![p]).remove(0);
    for o in claim.options.iter() {
        let it = h.catalog().get(&o.instance_type).expect("known");
        assert!(it.neuron_count >= 1, "{}", it.name);
    }
}

#[test]
fn pods_with_constraints_and_plain_pods_share_machines_where_allowed() {
    let mut h = harness(Config::default());
    let mut pods: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = app(&format!("n{i}"), "nginx");
            p.pod_anti_affinity
                .push(term(labels::HOSTNAME, "nginx", None));
            p
        })
        .collect();
    pods.extend((0..9).map(|i| app(&format!("plain{i}"), "batch")));
    let claims = provision(&mut h, pods);
    assert_eq!(
        claims.len(),
        3,
        "plain pods fill the anti-affinity machines"
    );
    assert_eq!(claims.iter().map(|c| c.requests.pods).sum::<i64>(), 12);
}

fn tainted_zone_c_pools(h: &mut CoreHarness) {
    let mut ab = pool();
    ab.requirements.retain(|r| r.key != labels::ZONE);
    ab.requirements.push(req(
        labels::ZONE,
        Operator::In,
        &["us-east-1a", "us-east-1b"],
    ));
    h.nodepool(ab);
    let mut c = pool();
    c.name = "zone-c-reserved".into();
    c.requirements.retain(|r| r.key != labels::ZONE);
    c.requirements
        .push(req(labels::ZONE, Operator::In, &["us-east-1c"]));
    c.taints.push(Taint::new(
        "reserved",
        Some("true"),
        TaintEffect::NoSchedule,
    ));
    h.nodepool(c);
}

#[test]
fn node_taints_policy_honor_leaves_out_zones_only_tainted_pools_offer() {
    let mut h = CoreHarness::new();
    tainted_zone_c_pools(&mut h);
    let pods = (0..4)
        .map(|i| {
            let mut c = spread(labels::ZONE, 1, WhenUnsatisfiable::DoNotSchedule, "web");
            c.node_taints_policy = InclusionPolicy::Honor;
            with_spread(&format!("w{i}"), "web", c)
        })
        .collect();
    let zones = pods_per_zone(&provision(&mut h, pods));
    assert_eq!(
        zones,
        BTreeMap::from([("us-east-1a".to_string(), 2), ("us-east-1b".to_string(), 2)])
    );
}

#[test]
fn node_taints_policy_ignore_counts_the_tainted_zone_and_holds_the_skew() {
    let mut h = CoreHarness::new();
    tainted_zone_c_pools(&mut h);
    let pods = (0..4)
        .map(|i| {
            with_spread(
                &format!("w{i}"),
                "web",
                spread(labels::ZONE, 1, WhenUnsatisfiable::DoNotSchedule, "web"),
            )
        })
        .collect();
    let claims = provision(&mut h, pods);
    assert_eq!(
        claims.iter().map(|c| c.requests.pods).sum::<i64>(),
        2,
        "zone c stays empty, so a and b hold one each"
    );
    assert_eq!(unschedulable(&h).len(), 2);
}

#[test]
fn a_machine_on_its_way_keeps_room_for_its_daemonsets() {
    let mut h = harness(Config::default());
    h.send(EventKind::DaemonSetApplied(Box::new(daemonset(
        "agent", 1000,
    ))));
    let first = provision(&mut h, vec![Pod::new("default", "a", 2500, GIB)]);
    assert_eq!(first.len(), 1);
    h.launch_cheapest(&first[0]);
    // The machine is launching; a pod that fits only if the DaemonSet's CPU is ignored needs
    // another machine.
    let it = h
        .catalog()
        .get(&first[0].options[0].instance_type)
        .expect("known")
        .clone();
    let alloc = nodewright_core::catalog::capacity(&it, &Default::default()).allocatable;
    let squeeze = alloc.cpu_milli - 2500 - 500;
    let second = provision(&mut h, vec![Pod::new("default", "b", squeeze, GIB / 4)]);
    assert_eq!(
        second.len(),
        1,
        "{} left after the DaemonSet is less than {squeeze}m",
        alloc.cpu_milli - 3500
    );
}

// The sibling hold (`docs/decisions/0005-sibling-hold.md`): the machines one decision placed
// spreading pods on start tainted, and are released together.

fn held(claim: &NodeClaimSpec) -> bool {
    claim
        .startup_taints
        .iter()
        .any(|t| t.key == labels::SIBLING_HOLD_TAINT)
}

fn released_nodes(commands: &[Command]) -> BTreeSet<String> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::ReleaseNode { node, .. } => Some(node.clone()),
            _ => None,
        })
        .collect()
}

fn zonal_web(n: usize) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            with_spread(
                &format!("web-{i}"),
                "web",
                spread(labels::ZONE, 1, WhenUnsatisfiable::DoNotSchedule, "web"),
            )
        })
        .collect()
}

#[test]
fn the_machines_of_one_spread_decision_start_held_and_are_released_together() {
    let mut h = harness(Config::default());
    let claims = provision(&mut h, zonal_web(3));
    assert_eq!(claims.len(), 3);
    assert!(claims.iter().all(held), "{claims:#?}");
    let mut nodes = BTreeSet::new();
    for c in &claims[..2] {
        let instance = h.launch_cheapest(c);
        nodes.insert(h.join(c, &instance));
    }
    assert!(
        released_nodes(
            &h.commands
                .iter()
                .map(|(_, c)| c.clone())
                .collect::<Vec<_>>()
        )
        .is_empty()
    );
    // Registered but held: not initialized, so nothing counts on it as up.
    let state = h.core.state();
    assert!(!state.nodeclaims[&claims[0].name].is_initialized());
    let instance = h.launch_cheapest(&claims[2]);
    let before = h.commands.len();
    nodes.insert(h.join(&claims[2], &instance));
    let after: Vec<Command> = h.commands[before..]
        .iter()
        .map(|(_, c)| c.clone())
        .collect();
    assert_eq!(released_nodes(&after), nodes);
    let reason = after
        .iter()
        .find_map(|c| match c {
            Command::ReleaseNode { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .unwrap_or_default();
    assert!(
        reason.contains("every machine of its provisioning decision has registered"),
        "{reason}"
    );
    for c in &claims {
        assert!(
            h.core.state().nodeclaims[&c.name].is_initialized(),
            "{}",
            c.name
        );
    }
}

#[test]
fn one_slow_sibling_holds_the_others_no_longer_than_the_bound() {
    let mut h = harness(Config::default());
    let claims = provision(&mut h, zonal_web(3));
    for c in &claims[..2] {
        let instance = h.launch_cheapest(c);
        h.join(c, &instance);
    }
    let slow = h.launch_cheapest(&claims[2]);
    let early = h.advance(119_000);
    assert!(released_nodes(&early).is_empty());
    let late = h.advance(1_000);
    assert_eq!(released_nodes(&late).len(), 2, "{late:#?}");
    // The slow one is released as it registers.
    let before = h.commands.len();
    let node = h.join(&claims[2], &slow);
    let after: Vec<Command> = h.commands[before..]
        .iter()
        .map(|(_, c)| c.clone())
        .collect();
    assert_eq!(released_nodes(&after), [node].into_iter().collect());
}

#[test]
fn no_hold_without_spreading_pods_for_a_lone_machine_or_when_turned_off() {
    // Unconstrained pods over several machines (one zone each, by node selector).
    let mut h = harness(Config::default());
    let big: Vec<Pod> = ["us-east-1a", "us-east-1b", "us-east-1c"]
        .iter()
        .enumerate()
        .map(|(i, zone)| {
            let mut p = app(&format!("batch-{i}"), "batch");
            p.node_selector
                .insert(labels::ZONE.into(), zone.to_string());
            p
        })
        .collect();
    let claims = provision(&mut h, big);
    assert!(claims.len() >= 2, "{claims:#?} {:?}", unschedulable(&h));
    assert!(!claims.iter().any(held));
    // One machine for every spreading pod: nobody to wait for.
    let mut h = harness(Config::default());
    let lone = provision(
        &mut h,
        vec![with_spread(
            "web-0",
            "web",
            spread(labels::ZONE, 1, WhenUnsatisfiable::DoNotSchedule, "web"),
        )],
    );
    assert_eq!(lone.len(), 1);
    assert!(!held(&lone[0]));
    // Turned off: Karpenter's behaviour.
    let mut h = harness(Config {
        sibling_hold_ms: 0,
        ..Config::default()
    });
    let claims = provision(&mut h, zonal_web(3));
    assert_eq!(claims.len(), 3);
    assert!(!claims.iter().any(held));
}
