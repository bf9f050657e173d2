//! Drift: a machine that no longer matches its NodePool or EC2NodeClass is replaced, within the
//! Drifted budgets.

use nodewright_core::EventKind;
use nodewright_core::catalog::Catalog;
use nodewright_core::model::labels;
use nodewright_core::model::nodeclaim::{NodeClaimSpec, TerminationReason};
use nodewright_core::model::nodeclass::{NodeClass, SelectorTerm};
use nodewright_core::model::nodepool::{BudgetNodes, DisruptionBudget, DisruptionReason, NodePool};
use nodewright_core::model::pod::Pod;
use nodewright_core::model::requirements::{Operator, RequirementSpec};
use nodewright_testkit::harness::CoreHarness;

const GIB: i64 = 1 << 30;

fn pool() -> NodePool {
    let mut p = NodePool::new("default", "default");
    p.requirements = vec![
        RequirementSpec::new(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]),
        RequirementSpec::new(labels::INSTANCE_CATEGORY, Operator::In, &["c", "m"]),
    ];
    p.consolidate_after = nodewright_core::model::duration::MaybeNever::Never;
    p
}

fn running(h: &mut CoreHarness) -> (NodeClaimSpec, String) {
    let (claim, _, node) = h.running_machine(vec![Pod::new("default", "app", 1000, GIB)]);
    (claim, node)
}

fn terminations(h: &CoreHarness) -> Vec<(String, TerminationReason, String)> {
    h.terminations()
        .into_iter()
        .map(|t| (t.nodeclaim, t.reason, t.detail))
        .collect()
}

/// Completes the replacement launched last and returns the terminations after it.
fn finish_replacement(h: &mut CoreHarness) -> Vec<(String, TerminationReason, String)> {
    let replacement = h.all_launches().pop().expect("a replacement");
    let instance = h.launch_cheapest(&replacement);
    h.join(&replacement, &instance);
    h.complete_evictions();
    terminations(h)
}

#[test]
fn a_changed_template_label_drifts_and_replaces_the_machine() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let (old, _) = running(&mut h);
    let mut changed = pool();
    changed.template_labels.insert("team".into(), "blue".into());
    h.nodepool(changed);
    h.advance(15_000);
    let launches = h.all_launches();
    assert_eq!(launches.len(), 2, "a replacement is launched first");
    assert_eq!(
        launches[1].labels.get("team").map(String::as_str),
        Some("blue")
    );
    assert!(terminations(&h).is_empty(), "the old machine waits for it");
    let t = finish_replacement(&mut h);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].0, old.name);
    assert_eq!(t[0].1, TerminationReason::Drifted);
    assert!(t[0].2.contains("changed its template"), "{}", t[0].2);
}

#[test]
fn requirements_the_machine_no_longer_meets_drift_it() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let (old, _) = running(&mut h);
    let category = h
        .catalog()
        .get(&old.options[0].instance_type)
        .expect("known")
        .labels[labels::INSTANCE_CATEGORY]
        .clone();
    let other = if category == "c" { "m" } else { "c" };
    let mut changed = pool();
    changed.requirements[1] =
        RequirementSpec::new(labels::INSTANCE_CATEGORY, Operator::In, &[other]);
    h.nodepool(changed);
    h.advance(15_000);
    let t = finish_replacement(&mut h);
    assert_eq!(t.len(), 1);
    assert!(t[0].2.contains("no longer meet"), "{}", t[0].2);
}

#[test]
fn a_new_ami_in_the_node_class_drifts_the_machine() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    running(&mut h);
    let mut nc = NodeClass::new("default");
    nc.ami_selector_terms = vec![SelectorTerm {
        id: Some("ami-0new".into()),
        ..SelectorTerm::default()
    }];
    h.nodeclass(nc);
    h.advance(15_000);
    let t = finish_replacement(&mut h);
    assert_eq!(t.len(), 1);
    assert!(
        t[0].2.contains("EC2NodeClass default changed"),
        "{}",
        t[0].2
    );
}

#[test]
fn an_instance_type_no_longer_offered_drifts_the_machine() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let (old, _) = running(&mut h);
    let gone = old.options[0].instance_type.clone();
    let catalog = h.catalog().clone();
    h.send(EventKind::CatalogUpdated(std::sync::Arc::new(Catalog {
        region: catalog.region,
        instance_types: catalog
            .instance_types
            .into_iter()
            .filter(|it| it.name != gone)
            .collect(),
        nested_virtualization: catalog.nested_virtualization,
        reservations: catalog.reservations,
        ..Catalog::default()
    })));
    h.advance(15_000);
    let t = finish_replacement(&mut h);
    assert_eq!(t.len(), 1);
    assert!(
        t[0].2
            .contains(&format!("instance type {gone} is no longer offered")),
        "{}",
        t[0].2
    );
}

#[test]
fn a_drifted_budget_of_zero_holds_drift_back() {
    let mut h = CoreHarness::new();
    let mut p = pool();
    p.budgets = vec![DisruptionBudget {
        nodes: BudgetNodes::Count(0),
        schedule: None,
        duration_ms: None,
        reasons: vec![DisruptionReason::Drifted],
    }];
    h.nodepool(p.clone());
    running(&mut h);
    p.template_labels.insert("team".into(), "blue".into());
    h.nodepool(p);
    h.advance(10 * 60_000);
    assert_eq!(h.all_launches().len(), 1);
    assert!(terminations(&h).is_empty());
}

#[test]
fn an_unchanged_nodepool_reapplied_does_not_drift() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    running(&mut h);
    h.nodepool(pool());
    h.advance(10 * 60_000);
    assert_eq!(h.all_launches().len(), 1);
}

#[test]
fn a_do_not_disrupt_duration_delays_drift_until_it_runs_out() {
    let mut h = CoreHarness::new();
    h.nodepool(pool());
    let mut keeper = Pod::new("default", "keeper", 1000, GIB);
    keeper
        .annotations
        .insert(labels::DO_NOT_DISRUPT.into(), "10m".into());
    let started = h.now_ms;
    h.running_machine(vec![keeper]);
    let mut changed = pool();
    changed.template_labels.insert("team".into(), "blue".into());
    h.nodepool(changed);
    h.run_until(started + 9 * 60_000);
    assert_eq!(h.all_launches().len(), 1, "drifted but protected");
    h.run_until(started + 10 * 60_000 + 20_000);
    assert_eq!(
        h.all_launches().len(),
        2,
        "replaced once the protection ran out"
    );
}

#[test]
fn a_drift_replacement_does_not_count_on_a_machine_meant_for_pending_pods() {
    let mut h = CoreHarness::new();
    // A budget that lets the drifted machine go while the other one is still on its way.
    let wide = |mut p: NodePool| {
        p.budgets = vec![DisruptionBudget {
            nodes: BudgetNodes::Count(2),
            schedule: None,
            duration_ms: None,
            reasons: Vec::new(),
        }];
        p
    };
    h.nodepool(wide(pool()));
    let (claim, _, _) = h.running_machine(vec![Pod::new("default", "app", 1500, GIB)]);
    // A pod of the same size is pending, and a machine is on its way for it.
    h.pod(Pod::new("default", "waiting", 1500, GIB));
    h.advance(15_000);
    let launches = h.all_launches();
    assert_eq!(launches.len(), 2, "a machine for the pending pod");
    let in_flight = launches[1].clone();
    assert_ne!(claim.name, in_flight.name);
    // The drifted machine's pod does not fit on that machine with the pending one: the drift
    // launches its own replacement instead of taking the pending pod's place.
    let mut changed = wide(pool());
    changed.template_labels.insert("team".into(), "blue".into());
    h.nodepool(changed);
    h.advance(15_000);
    let launches = h.all_launches();
    let names: Vec<&str> = launches.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(launches.len(), 3, "{names:?}");
    assert_eq!(
        launches[2].labels.get("team").map(String::as_str),
        Some("blue")
    );
}
