//! The lower bound on hand-checkable timelines: it equals the cheapest price per unit times
//! the requests times the hours, over the types a pod may use, minus free capacity; a pod that
//! asks for GPUs and one that does not, on machines of their own, each pay their fullest
//! resource; a pod never pays less than a whole machine. And on random pods it never exceeds
//! the cheapest placement found by trying every way to group them onto machines.

use nodewright_core::Config;
use nodewright_core::catalog::CapacityType;
use nodewright_core::model::labels;
use nodewright_core::model::nodeclass::NodeClass;
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::pod::Pod;
use nodewright_core::model::requirements::{Operator, RequirementSpec};
use nodewright_core::model::resources::{NVIDIA_GPU, Resources};
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
    let (price, alloc) = type_of(catalog, "m5.large");
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
fn one_type_pods_pay_the_whole_machines_they_need() {
    let (catalog, pools, classes) = world();
    let input = input(&catalog, &pools, &classes);
    let (price, _) = type_of(&catalog, "m5.large");
    let share = by_hand(&catalog, 500, GIB, 1.0);
    assert!(share < price / 3.0, "{share} vs {price}");
    let pods: Vec<Pod> = (0..5)
        .map(|i| Pod::new("default", &format!("p{i}"), 500, GIB))
        .collect();
    // Alone for an hour: a quarter of the machine's CPU, yet the whole machine runs.
    let alone = lower_bound_usd(&input, one_hour(&pods[..1]));
    assert!((alone - price).abs() < 1e-9, "{alone} vs {price}");
    // The first pod for an hour, the other four from half an hour to two hours. An m5.large
    // holds three of them (1.5 of its 1.93 allocatable CPUs): five or four pods need two
    // machines, where their shares of CPU would pay for one and a quarter.
    let spans = pods.iter().enumerate().map(|(i, pod)| PodSpan {
        pod,
        from_ms: if i == 0 { 0 } else { HOUR / 2 },
        until_ms: if i == 0 { HOUR } else { 2 * HOUR },
    });
    let bound = lower_bound_usd(&input, spans);
    let expected = 0.5 * price + 0.5 * 2.0 * price + 2.0 * price;
    assert!((bound - expected).abs() < 1e-9, "{bound} vs {expected}");
    let shares = 0.5 * price + 0.5 * 5.0 * share + 4.0 * share;
    assert!(bound > shares + price, "{bound} vs {shares}");
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

/// The cheapest on-demand price and the allocatable (default EC2NodeClass) of a type.
fn type_of(catalog: &PreparedCatalog, name: &str) -> (f64, Resources) {
    let index = catalog
        .catalog
        .instance_types
        .iter()
        .position(|t| t.name == name)
        .unwrap_or_else(|| panic!("{name} is in the built-in catalog"));
    let price = catalog.catalog.instance_types[index]
        .offerings
        .iter()
        .filter(|o| o.capacity_type == CapacityType::OnDemand)
        .map(|o| o.price)
        .min()
        .expect("on-demand")
        .usd_per_hour();
    let alloc = catalog
        .node_resources(
            &NodeClass::new("default"),
            &Config::default().capacity_settings(),
        )
        .resources[index]
        .allocatable
        .clone();
    (price, alloc)
}

fn gpu_pod(name: &str, cpu_milli: i64, memory: i64, gpus: i64) -> Pod {
    let mut pod = Pod::new("default", name, cpu_milli, memory);
    pod.requests.set_extended(NVIDIA_GPU, gpus);
    pod
}

fn one_hour<'a>(pods: &'a [Pod]) -> impl Iterator<Item = PodSpan<'a>> {
    pods.iter().map(|pod| PodSpan {
        pod,
        from_ms: 0,
        until_ms: HOUR,
    })
}

#[test]
fn a_gpu_pod_and_a_pod_kept_off_gpu_machines_each_pay_their_fullest_resource() {
    let catalog = PreparedCatalog::new(nodewright_testkit::us_east_1_catalog());
    let pools = [pool(&["m5.large", "g4dn.xlarge"])];
    let classes = [NodeClass::new("default")];
    let input = input(&catalog, &pools, &classes);
    let (gpu_price, _) = type_of(&catalog, "g4dn.xlarge");
    let (m5_price, m5) = type_of(&catalog, "m5.large");
    // Its GPU is the whole of a g4dn.xlarge; its CPU three quarters of one.
    let trainer = gpu_pod("trainer", 3000, 4 * GIB, 1);
    // Held to the m5.large; its memory is its fullest resource there.
    let mut cache = Pod::new("default", "cache", 500, 6 * GIB);
    cache
        .node_selector
        .insert(labels::INSTANCE_TYPE.to_string(), "m5.large".to_string());
    let pods = [trainer, cache];
    // The two cannot share a machine: each pays a whole one.
    let bound = lower_bound_usd(&input, one_hour(&pods));
    let expected = gpu_price + m5_price;
    assert!((bound - expected).abs() < 1e-9, "{bound} vs {expected}");
    // With capacity that existed before (a little, of no use to either), whole machines are
    // not counted: each pays its fullest resource by the unit, less what that capacity could
    // hold at the dearest unit prices.
    let mut with_existing = input;
    with_existing.existing = Resources::new(1, 1, 1);
    let shares = lower_bound_usd(&with_existing, one_hour(&pods));
    let cache_share = (500.0 / m5.cpu_milli as f64).max(6.0 * GIB as f64 / m5.memory_bytes as f64);
    let by_the_unit = gpu_price + m5_price * cache_share;
    assert!(
        shares <= by_the_unit + 1e-9 && shares > by_the_unit - 1e-6,
        "{shares} vs {by_the_unit}"
    );
    // Priced by one resource at a time, the GPU alone ($0.526) was the most the two could be
    // shown to need; the cache's share of its machine comes on top.
    assert!(shares > gpu_price + 0.05, "{shares}");
}

#[test]
fn pods_never_pay_less_than_the_machine_the_hardest_of_them_needs() {
    let catalog = PreparedCatalog::new(nodewright_testkit::us_east_1_catalog());
    let pools = [pool(&["g4dn.12xlarge"])];
    let classes = [NodeClass::new("default")];
    let input = input(&catalog, &pools, &classes);
    let (price, alloc) = type_of(&catalog, "g4dn.12xlarge");
    assert_eq!(alloc.extended.get(NVIDIA_GPU), Some(&4));
    let pods: Vec<Pod> = (0..5)
        .map(|i| gpu_pod(&format!("p{i}"), 1000, GIB, 1))
        .collect();
    // One pod: a quarter of the machine's GPUs, yet the whole machine runs.
    let one = lower_bound_usd(&input, one_hour(&pods[..1]));
    assert!((one - price).abs() < 1e-9, "{one} vs {price}");
    // Five: more GPUs than one machine has, so two machines, where their price per GPU would
    // pay for one and a quarter.
    let five = lower_bound_usd(&input, one_hour(&pods));
    assert!(
        (five - price * 2.0).abs() < 1e-9,
        "{five} vs {}",
        price * 2.0
    );
}

#[test]
fn many_pods_alive_at_once_stay_between_their_shares_and_a_placement() {
    // Sixty pods of sixty sizes on one type: too many ways to fill machines to search them all
    // at each moment, so the bound falls back to what the pods pay by the unit (and the whole
    // machine the hardest of them needs), and stays a bound.
    let (catalog, pools, classes) = world();
    let input = input(&catalog, &pools, &classes);
    let (price, alloc) = type_of(&catalog, "m5.large");
    let pods: Vec<Pod> = (0..60)
        .map(|i| Pod::new("default", &format!("p{i}"), 100 + 10 * i, GIB / 8))
        .collect();
    let bound = lower_bound_usd(&input, one_hour(&pods));
    let shares: f64 = pods
        .iter()
        .map(|p| by_hand(&catalog, p.requests.cpu_milli, p.requests.memory_bytes, 1.0))
        .sum();
    // First fit, largest first: a placement, so at least the bound.
    let mut machines: Vec<i64> = Vec::new();
    for pod in pods.iter().rev() {
        let cpu = pod.requests.cpu_milli;
        match machines
            .iter_mut()
            .find(|used| **used + cpu <= alloc.cpu_milli)
        {
            Some(used) => *used += cpu,
            None => machines.push(cpu),
        }
    }
    let placed = machines.len() as f64 * price;
    assert!(bound >= shares - 1e-9, "{bound} vs shares {shares}");
    assert!(bound <= placed + 1e-9, "{bound} vs a placement {placed}");
}

#[test]
fn a_crowd_too_large_to_search_leaves_the_counts_right_for_later() {
    // Three hundred small pods and one large for the first hour, more of one shape than the
    // search counts; then one large pod alone: that hour is exactly one machine.
    let (catalog, pools, classes) = world();
    let input = input(&catalog, &pools, &classes);
    let (price, _) = type_of(&catalog, "m5.large");
    let small: Vec<Pod> = (0..300)
        .map(|i| Pod::new("default", &format!("s{i}"), 5, GIB / 64))
        .collect();
    let large = Pod::new("default", "large", 1500, GIB);
    let later = Pod::new("default", "later", 1500, GIB);
    let first_hour = || {
        small
            .iter()
            .map(|pod| PodSpan {
                pod,
                from_ms: 0,
                until_ms: HOUR,
            })
            .chain(std::iter::once(PodSpan {
                pod: &large,
                from_ms: 0,
                until_ms: HOUR / 2,
            }))
    };
    let without = lower_bound_usd(&input, first_hour());
    let with = lower_bound_usd(
        &input,
        first_hour().chain(std::iter::once(PodSpan {
            pod: &later,
            from_ms: HOUR,
            until_ms: 2 * HOUR,
        })),
    );
    assert!(
        (with - without - price).abs() < 1e-9,
        "the second hour costs {} against one machine at {price}",
        with - without
    );
}

#[test]
fn a_type_holds_what_its_roomiest_node_class_allows() {
    // Two versions of the EC2NodeClass: the first reserves 300m more CPU. Two pods that fit
    // one m5.large only under the second version run on one machine (at the same price), and
    // the bound must not ask for two.
    let catalog = PreparedCatalog::new(nodewright_testkit::us_east_1_catalog());
    let pools = [pool(&["m5.large"])];
    let mut reserving = NodeClass::new("default");
    reserving
        .kubelet
        .system_reserved
        .insert("cpu".to_string(), 300);
    let classes = [reserving, NodeClass::new("default")];
    let input = input(&catalog, &pools, &classes);
    let (price, roomy) = type_of(&catalog, "m5.large");
    let half = roomy.cpu_milli / 2;
    let pods: Vec<Pod> = (0..2)
        .map(|i| Pod::new("default", &format!("p{i}"), half, GIB))
        .collect();
    let bound = lower_bound_usd(&input, one_hour(&pods));
    assert!(
        (bound - price).abs() < 1e-9,
        "{bound} vs one machine at {price}"
    );
}

/// Types of every kind for the random check: general, compute and memory machines of two
/// sizes, and GPU machines of one and four GPUs.
const MIXED_TYPES: [&str; 8] = [
    "m5.large",
    "m5.xlarge",
    "c5.xlarge",
    "r5.large",
    "r5.xlarge",
    "g4dn.xlarge",
    "g4dn.2xlarge",
    "g4dn.12xlarge",
];

/// The cheapest way to put `pods` on machines of `types`: every split of them into groups, each
/// group on the cheapest type that holds it whole. A pod no type holds is left out (as the bound
/// leaves it out).
fn cheapest_placement(types: &[(f64, Resources)], pods: &[Pod]) -> f64 {
    let placeable: Vec<&Pod> = pods
        .iter()
        .filter(|p| types.iter().any(|(_, a)| p.requests.fits_in(a)))
        .collect();
    fn machine(types: &[(f64, Resources)], group: &[&Pod]) -> Option<f64> {
        let mut sum = Resources::default();
        for pod in group {
            sum.add(&pod.requests);
        }
        types
            .iter()
            .filter(|(_, a)| sum.fits_in(a))
            .map(|(price, _)| *price)
            .min_by(f64::total_cmp)
    }
    // Each pod joins one of the groups so far, or starts one.
    fn split<'a>(
        types: &[(f64, Resources)],
        rest: &[&'a Pod],
        groups: &mut Vec<Vec<&'a Pod>>,
        best: &mut f64,
    ) {
        let Some((pod, rest)) = rest.split_first() else {
            let cost: Option<f64> = groups.iter().map(|g| machine(types, g)).sum();
            if let Some(cost) = cost {
                *best = best.min(cost);
            }
            return;
        };
        for i in 0..groups.len() {
            groups[i].push(pod);
            split(types, rest, groups, best);
            groups[i].pop();
        }
        groups.push(vec![pod]);
        split(types, rest, groups, best);
        groups.pop();
    }
    let mut best = f64::INFINITY;
    split(types, &placeable, &mut Vec::new(), &mut best);
    if placeable.is_empty() { 0.0 } else { best }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    #[test]
    fn the_bound_is_the_cheapest_placement_of_pods_alive_together(
        pods in proptest::collection::vec((1u32..32, 1u32..64, 0i64..3), 1..6)
    ) {
        let catalog = PreparedCatalog::new(nodewright_testkit::us_east_1_catalog());
        let pools = [pool(&MIXED_TYPES)];
        let classes = [NodeClass::new("default")];
        let input = input(&catalog, &pools, &classes);
        let types: Vec<(f64, Resources)> =
            MIXED_TYPES.iter().map(|t| type_of(&catalog, t)).collect();
        let pods: Vec<Pod> = pods
            .iter()
            .enumerate()
            .map(|(i, &(quarter_cpus, half_gib, gpus))| {
                gpu_pod(&format!("p{i}"), 250 * i64::from(quarter_cpus), GIB / 2 * i64::from(half_gib), gpus)
            })
            .collect();
        let bound = lower_bound_usd(&input, one_hour(&pods));
        let best = cheapest_placement(&types, &pods);
        // Never above it (a bound), and with few pods alive at once the bound places them
        // exactly, so not below it either.
        proptest::prop_assert!(bound <= best + 1e-9, "bound {} above the cheapest placement {}", bound, best);
        proptest::prop_assert!(bound >= best - 1e-9, "bound {} below the cheapest placement {}", bound, best);
    }

    /// Over a timeline the search remembers what it solved from one moment to the next: the
    /// bound is, interval by interval, the cheapest placement of the pods alive then.
    #[test]
    fn over_a_timeline_the_bound_places_each_moments_pods(
        pods in proptest::collection::vec((1u32..32, 1u32..64, 0i64..3, 0u64..4, 1u64..4), 1..7)
    ) {
        let catalog = PreparedCatalog::new(nodewright_testkit::us_east_1_catalog());
        let pools = [pool(&MIXED_TYPES)];
        let classes = [NodeClass::new("default")];
        let input = input(&catalog, &pools, &classes);
        let types: Vec<(f64, Resources)> =
            MIXED_TYPES.iter().map(|t| type_of(&catalog, t)).collect();
        // Each pod from hour `from` for `hours` hours.
        let spans: Vec<(Pod, u64, u64)> = pods
            .iter()
            .enumerate()
            .map(|(i, &(quarter_cpus, half_gib, gpus, from, hours))| {
                let pod = gpu_pod(&format!("p{i}"), 250 * i64::from(quarter_cpus), GIB / 2 * i64::from(half_gib), gpus);
                (pod, from * HOUR, (from + hours) * HOUR)
            })
            .collect();
        let bound = lower_bound_usd(
            &input,
            spans.iter().map(|(pod, from_ms, until_ms)| PodSpan { pod, from_ms: *from_ms, until_ms: *until_ms }),
        );
        let mut by_hand = 0.0;
        for hour in 0..8 {
            let alive: Vec<Pod> = spans
                .iter()
                .filter(|(_, from, until)| *from <= hour * HOUR && hour * HOUR < *until)
                .map(|(pod, _, _)| pod.clone())
                .collect();
            if !alive.is_empty() {
                by_hand += cheapest_placement(&types, &alive);
            }
        }
        proptest::prop_assert!((bound - by_hand).abs() < 1e-9, "bound {} against the placements hour by hour {}", bound, by_hand);
    }
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
        let parts = c.booting_usd
            + c.idle_usd
            + c.fragmentation_usd
            + c.premium_usd
            + c.redone_usd
            + c.other_usd;
        assert!(close(parts, c.above_bound_usd), "{name}: {c:?}");
        for part in [
            c.booting_usd,
            c.idle_usd,
            c.fragmentation_usd,
            c.premium_usd,
            c.redone_usd,
        ] {
            assert!(part >= 0.0, "{name}: {c:?}");
        }
        assert!(c.redone_usd <= c.evicted_usd, "{name}: {c:?}");
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

/// A Job's pod placed on a machine that expires before the pod ends: the Job makes it again.
const EXPIRED_JOB: &str = r#"
name: expired-job
region: us-east-1
seed: 1
duration: 2h
# Karpenter's expiration, which evicts a Job's pod (nodewright's default lets it finish).
settings: {expirationWaitsForJobs: false}
cloud:
  launchLatency: 30s
  registrationLatency: 15s
manifests:
  - |
    apiVersion: karpenter.k8s.aws/v1
    kind: EC2NodeClass
    metadata: {name: default}
    spec:
      amiSelectorTerms: [{alias: al2023@latest}]
      role: KarpenterNodeRole
      subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
      securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  - |
    apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: default}
    spec:
      template:
        spec:
          expireAfter: 40m
          requirements:
            - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
            - {key: node.kubernetes.io/instance-type, operator: In, values: ["m5.xlarge"]}
          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 1m}
timeline:
  - at: 0s
    apply: |
      apiVersion: batch/v1
      kind: Job
      metadata:
        name: train
        annotations: {nodewright.dev/run-time: 30m}
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [{name: c, image: x, resources: {requests: {cpu: 2, memory: 4Gi}}}]
  - at: 20m
    apply: |
      apiVersion: batch/v1
      kind: Job
      metadata:
        name: late
        annotations: {nodewright.dev/run-time: 30m}
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [{name: c, image: x, resources: {requests: {cpu: 1, memory: 2Gi}}}]
"#;

#[test]
fn a_jobs_pod_evicted_before_its_end_is_work_done_again_above_the_bound() {
    let scenario = nodewright_testkit::scenario::load_str(
        EXPIRED_JOB,
        "expired-job.yaml",
        &nodewright_testkit::scenario::NoFiles,
    )
    .expect("loads");
    let store = nodewright_adapters::eventlog::MemoryStore::new(
        nodewright_adapters::eventlog::LogHeader::new(scenario.config.clone(), &scenario.name),
    );
    let report = nodewright_testkit::sim::run(&scenario, store)
        .expect("runs")
        .0;
    assert!(
        report.invariant_violations.is_empty(),
        "{}",
        report.summary()
    );
    // `late` joined `train`'s machine at 20 min and was evicted when it expired, at about 41.
    assert_eq!(report.disruptions.expired, 1, "{}", report.summary());
    assert!(report.disruptions.evictions >= 1, "{}", report.summary());
    let late: Vec<_> = report
        .pod_placements
        .iter()
        .filter(|p| p.pod.starts_with("default/late-"))
        .collect();
    assert_eq!(late.len(), 2, "made again: {late:?}");
    let c = &report.cost.above_bound;
    // Its first run (about 20 min of a quarter of an m5.xlarge at $0.192/h) is work done again.
    assert!(c.redone_usd > 0.01 && c.redone_usd < 0.05, "{c:?}");
    assert!(
        (c.redone_usd - c.evicted_usd).abs() < 1e-9,
        "only a Job's pod was evicted: {c:?}"
    );
    // The bound counts each Job's work once: both ran 30 minutes in the end, so it is at least
    // what their requests cost for that long, and less than the run cost.
    let parts = c.booting_usd + c.idle_usd + c.fragmentation_usd + c.premium_usd + c.redone_usd;
    assert!(
        (parts + c.other_usd - c.above_bound_usd).abs() < 1e-5,
        "{c:?}"
    );
    assert!(report.cost.lower_bound_usd < report.cost.total_usd);
}
