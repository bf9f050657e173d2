//! The lower bound on hand-checkable timelines: it equals the cheapest price per unit times
//! the requests times the hours, over the types a pod may use, minus free capacity.

use nodewright_core::Config;
use nodewright_core::catalog::CapacityType;
use nodewright_core::model::labels;
use nodewright_core::model::nodeclass::NodeClass;
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::pod::Pod;
use nodewright_core::model::requirements::{Operator, RequirementSpec};
use nodewright_core::model::resources::Resources;
use nodewright_core::state::PreparedCatalog;
use nodewright_testkit::lower_bound::{BoundInput, PodSpan, lower_bound_usd};

const HOUR: u64 = 3_600_000;
const GIB: i64 = 1 << 30;

fn pool(types: &[&str]) -> NodePool {
    let mut p = NodePool::new("default", "default");
    p.requirements = vec![
        RequirementSpec::new(labels::INSTANCE_TYPE, Operator::In, types),
        RequirementSpec::new(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]),
    ];
    p
}

/// The bound by hand for pods of `cpu`/`memory` on the one type `m5.large`, on-demand.
fn by_hand(catalog: &PreparedCatalog, cpu_milli: i64, memory: i64, hours: f64) -> f64 {
    let config = Config::default();
    let index = catalog
        .catalog
        .instance_types
        .iter()
        .position(|t| t.name == "m5.large")
        .expect("m5.large");
    let it = &catalog.catalog.instance_types[index];
    let price = it
        .offerings
        .iter()
        .filter(|o| o.capacity_type == CapacityType::OnDemand)
        .map(|o| o.price)
        .min()
        .expect("on-demand")
        .usd_per_hour();
    let alloc = catalog.node_resources(&NodeClass::new("default"), &config.capacity_settings())
        [index]
        .allocatable
        .clone();
    let per_cpu = price / alloc.cpu_milli as f64 * cpu_milli as f64;
    let per_memory = price / alloc.memory_bytes as f64 * memory as f64;
    per_cpu.max(per_memory) * hours
}

/// The built-in catalog, one NodePool of m5.large on-demand, the default EC2NodeClass.
fn world() -> (PreparedCatalog, [NodePool; 1], [NodeClass; 1]) {
    (
        PreparedCatalog::new(nodewright_testkit::us_east_1_catalog()),
        [pool(&["m5.large"])],
        [NodeClass::new("default")],
    )
}

fn input<'a>(
    catalog: &'a PreparedCatalog,
    pools: &'a [NodePool],
    classes: &'a [NodeClass],
) -> BoundInput<'a> {
    BoundInput {
        catalog,
        settings: Config::default().capacity_settings(),
        nodepools: pools,
        nodeclasses: classes,
        existing: Resources::default(),
        min_latency_ms: 0,
    }
}

#[test]
fn one_type_one_pod_one_hour() {
    let (catalog, pools, classes) = world();
    let input = input(&catalog, &pools, &classes);
    let pod = Pod::new("default", "a", 1000, GIB);
    let span = || PodSpan {
        pod: &pod,
        from_ms: 0,
        until_ms: HOUR,
    };
    let bound = lower_bound_usd(&input, std::iter::once(span()));
    let expected = by_hand(&catalog, 1000, GIB, 1.0);
    assert!((bound - expected).abs() < 1e-9, "{bound} vs {expected}");
    // A second pod from half an hour to two hours: 2.5 pod-hours in all.
    let b = Pod::new("default", "b", 1000, GIB);
    let spans = [
        span(),
        PodSpan {
            pod: &b,
            from_ms: HOUR / 2,
            until_ms: 2 * HOUR,
        },
    ];
    let bound = lower_bound_usd(&input, spans.into_iter());
    assert!(
        (bound - 2.5 * expected).abs() < 1e-9,
        "{bound} vs {}",
        2.5 * expected
    );
}

#[test]
fn a_pod_no_pool_allows_counts_nothing_and_free_capacity_is_taken_off() {
    let (catalog, pools, classes) = world();
    let mut input = input(&catalog, &pools, &classes);
    // Larger than any m5.large: no type may host it.
    let huge = Pod::new("default", "huge", 64_000, 4 * GIB);
    let spans = || {
        std::iter::once(PodSpan {
            pod: &huge,
            from_ms: 0,
            until_ms: HOUR,
        })
    };
    assert_eq!(lower_bound_usd(&input, spans()), 0.0);
    // Free capacity larger than the demand: nothing to pay.
    let pod = Pod::new("default", "a", 1000, GIB);
    input.existing = Resources::new(4000, 16 * GIB, 110);
    let bound = lower_bound_usd(
        &input,
        std::iter::once(PodSpan {
            pod: &pod,
            from_ms: 0,
            until_ms: HOUR,
        }),
    );
    assert_eq!(bound, 0.0);
}

// The cost above the bound, split by cause (`cost.above_bound`).

fn scenario_report(
    name: &str,
    change: impl FnOnce(&mut nodewright_testkit::scenario::Scenario),
) -> nodewright_testkit::Report {
    let mut scenario = nodewright_testkit::scenario::builtin(name)
        .expect("built in")
        .expect("loads");
    change(&mut scenario);
    let store = nodewright_adapters::eventlog::MemoryStore::new(
        nodewright_adapters::eventlog::LogHeader::new(scenario.config.clone(), &scenario.name),
    );
    nodewright_testkit::sim::run(&scenario, store)
        .expect("runs")
        .0
}

#[test]
fn the_parts_of_the_cost_above_the_bound_add_up_to_it() {
    for name in ["seed-tutorial", "mixed", "zonal-spread"] {
        let report = scenario_report(name, |_| {});
        let cost = &report.cost;
        let c = &cost.above_bound;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-5;
        assert!(
            close(c.above_bound_usd, cost.total_usd - cost.lower_bound_usd),
            "{name}: {c:?}"
        );
        let parts = c.booting_usd + c.idle_usd + c.fragmentation_usd + c.premium_usd + c.other_usd;
        assert!(close(parts, c.above_bound_usd), "{name}: {c:?}");
        for part in [
            c.booting_usd,
            c.idle_usd,
            c.fragmentation_usd,
            c.premium_usd,
        ] {
            assert!(part >= 0.0, "{name}: {c:?}");
        }
        // Every machine boots for its launch and registration latency (20 s and more).
        assert!(c.booting_usd > 0.0, "{name}: {c:?}");
        assert!(c.booting_usd + c.idle_usd + c.fragmentation_usd <= cost.total_usd);
        assert!(c.evicted_usd <= cost.total_usd, "{name}: {c:?}");
        let html = nodewright_testkit::html::render(&report);
        assert!(html.contains("Cost above the lower bound"), "{name}");
    }
    // The mixed scenario drains machines: the pods it evicts had run on capacity first.
    assert!(
        scenario_report("mixed", |_| {})
            .cost
            .above_bound
            .evicted_usd
            > 0.0
    );
}

#[test]
fn machines_held_for_their_siblings_count_as_booting() {
    let held = scenario_report("spread-lands", |_| {});
    let unheld = scenario_report("spread-lands", |s| s.config.sibling_hold_ms = 0);
    // Same seed, same launch latencies: the held machines wait for the slowest sibling.
    assert!(
        held.cost.above_bound.booting_usd > unheld.cost.above_bound.booting_usd,
        "held {:?}, unheld {:?}",
        held.cost.above_bound,
        unheld.cost.above_bound
    );
}
