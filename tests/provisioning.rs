//! Provisioning behaviours a Karpenter user relies on, driven through the core's event
//! contract.

use nodewright_core::Command;
use nodewright_core::catalog::CapacityType;
use nodewright_core::model::duration::MaybeNever;
use nodewright_core::model::labels;
use nodewright_core::model::nodeclaim::{NodeClaimSpec, OfferingKey};
use nodewright_core::model::nodeclass::{KubeletConfig, NodeClass};
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::pod::Pod;
use nodewright_core::model::requirements::{Operator, RequirementSpec};
use nodewright_core::model::resources::NVIDIA_GPU;
use nodewright_core::model::taints::{Taint, TaintEffect, Toleration, TolerationOperator};
use nodewright_testkit::harness::CoreHarness;

const GIB: i64 = 1 << 30;

fn pool(name: &str) -> NodePool {
    NodePool::new(name, "default")
}

fn req(key: &str, op: Operator, values: &[&str]) -> RequirementSpec {
    RequirementSpec::new(key, op, values)
}

fn tutorial_pool() -> NodePool {
    let mut p = pool("default");
    p.requirements = vec![
        req(labels::ARCH, Operator::In, &["amd64"]),
        req(labels::OS, Operator::In, &["linux"]),
        req(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]),
        req(labels::INSTANCE_CATEGORY, Operator::In, &["c", "m", "r"]),
    ];
    p.limits.insert("cpu".into(), 1_000_000);
    p
}

/// Sends the pods, closes the batch, returns the launches.
fn provision(h: &mut CoreHarness, pods: Vec<Pod>) -> Vec<NodeClaimSpec> {
    for p in pods {
        h.pod(p);
    }
    let commands = h.advance(11_000);
    CoreHarness::launches(&commands)
}

fn unschedulable(commands: &[(u64, Command)]) -> Vec<(String, String)> {
    commands
        .iter()
        .filter_map(|(_, c)| match c {
            Command::ReportUnschedulable { pod, reason } => Some((pod.to_string(), reason.clone())),
            _ => None,
        })
        .collect()
}

fn option_labels<'a>(
    h: &'a CoreHarness,
    claim: &NodeClaimSpec,
) -> Vec<&'a std::collections::BTreeMap<String, String>> {
    claim
        .options
        .iter()
        .map(|o| &h.catalog().get(&o.instance_type).expect("known").labels)
        .collect()
}

#[test]
fn batch_waits_for_one_idle_second() {
    let mut h = CoreHarness::new();
    h.nodepool(tutorial_pool());
    h.pod(Pod::new("default", "a", 1000, GIB));
    assert!(
        CoreHarness::launches(&h.advance(900)).is_empty(),
        "too early"
    );
    h.pod(Pod::new("default", "b", 1000, GIB));
    assert!(
        CoreHarness::launches(&h.advance(900)).is_empty(),
        "a new pod extends the window"
    );
    let launches = CoreHarness::launches(&h.advance(200));
    assert_eq!(launches.len(), 1, "one machine for both pods");
    assert_eq!(launches[0].requests.cpu_milli, 2000);
}

#[test]
fn batch_closes_after_ten_seconds_even_if_pods_keep_coming() {
    let mut h = CoreHarness::new();
    h.nodepool(tutorial_pool());
    let mut launched_at = None;
    for i in 0..40 {
        h.pod(Pod::new("default", &format!("p{i}"), 100, GIB / 4));
        let cmds = h.advance(500);
        if !CoreHarness::launches(&cmds).is_empty() && launched_at.is_none() {
            launched_at = Some(h.now_ms);
        }
    }
    assert_eq!(launched_at, Some(10_000));
}

#[test]
fn tutorial_pool_picks_the_cheapest_on_demand_amd64_c_m_r_type() {
    let mut h = CoreHarness::new();
    h.nodepool(tutorial_pool());
    let launches = provision(
        &mut h,
        (0..5)
            .map(|i| Pod::new("default", &format!("inflate-{i}"), 1000, 0))
            .collect(),
    );
    assert_eq!(launches.len(), 1);
    let claim = &launches[0];
    for (o, l) in claim.options.iter().zip(option_labels(&h, claim)) {
        assert_eq!(o.capacity_type, CapacityType::OnDemand);
        assert_eq!(l[labels::ARCH], "amd64");
        assert!(["c", "m", "r"].contains(&l[labels::INSTANCE_CATEGORY].as_str()));
    }
    // Cheapest first, and nothing cheaper in the whole catalog fits 5 CPU under the pool.
    let cheapest = claim.options[0].price;
    assert!(claim.options.windows(2).all(|w| w[0].price <= w[1].price));
    for it in &h.catalog().instance_types {
        let l = &it.labels;
        if l[labels::ARCH] != "amd64"
            || !["c", "m", "r"].contains(
                &l.get(labels::INSTANCE_CATEGORY)
                    .map(String::as_str)
                    .unwrap_or(""),
            )
        {
            continue;
        }
        let r = nodewright_core::catalog::capacity(it, &KubeletConfig::default());
        if r.allocatable.cpu_milli < 5000 || r.allocatable.pods < 5 {
            continue;
        }
        for o in it
            .offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::OnDemand)
        {
            assert!(
                o.price >= cheapest,
                "{} at {} is cheaper than {}",
                it.name,
                o.price,
                cheapest
            );
        }
    }
}

#[test]
fn launch_options_are_cut_to_the_sixty_cheapest_types() {
    let mut h = CoreHarness::new();
    h.nodepool(pool("default"));
    let claim = &provision(&mut h, vec![Pod::new("default", "a", 500, GIB)])[0];
    let types: std::collections::BTreeSet<&str> = claim
        .options
        .iter()
        .map(|o| o.instance_type.as_str())
        .collect();
    assert_eq!(types.len(), 60);
}

#[test]
fn node_selector_on_arch_is_honoured() {
    let mut h = CoreHarness::new();
    h.nodepool(pool("default"));
    let mut p = Pod::new("default", "arm", 1000, GIB);
    p.node_selector.insert(labels::ARCH.into(), "arm64".into());
    let claim = &provision(&mut h, vec![p])[0];
    assert!(
        option_labels(&h, claim)
            .iter()
            .all(|l| l[labels::ARCH] == "arm64")
    );
}

#[test]
fn required_node_affinity_with_or_terms_uses_an_alternative_that_fits() {
    let mut h = CoreHarness::new();
    h.nodepool(tutorial_pool());
    let mut p = Pod::new("default", "p", 1000, GIB);
    p.required_node_affinity = vec![
        vec![req(labels::ARCH, Operator::In, &["arm64"])],
        vec![req(labels::INSTANCE_FAMILY, Operator::In, &["m5"])],
    ];
    let claim = &provision(&mut h, vec![p])[0];
    assert!(
        option_labels(&h, claim)
            .iter()
            .all(|l| l[labels::INSTANCE_FAMILY] == "m5")
    );
}

#[test]
fn gt_and_lt_on_instance_cpu() {
    let mut h = CoreHarness::new();
    h.nodepool(pool("default"));
    let mut p = Pod::new("default", "p", 100, GIB);
    p.required_node_affinity = vec![vec![
        req(labels::INSTANCE_CPU, Operator::Gt, &["7"]),
        req(labels::INSTANCE_CPU, Operator::Lt, &["17"]),
    ]];
    let claim = &provision(&mut h, vec![p])[0];
    for l in option_labels(&h, claim) {
        let cpu: i64 = l[labels::INSTANCE_CPU].parse().expect("int");
        assert!((8..=16).contains(&cpu), "{cpu}");
    }
}

#[test]
fn not_in_and_does_not_exist_exclude() {
    let mut h = CoreHarness::new();
    let mut p0 = pool("default");
    p0.requirements = vec![
        req(labels::INSTANCE_CATEGORY, Operator::NotIn, &["t", "c"]),
        req(labels::INSTANCE_GPU_NAME, Operator::DoesNotExist, &[]),
    ];
    h.nodepool(p0);
    let claim = &provision(&mut h, vec![Pod::new("default", "p", 100, GIB)])[0];
    for l in option_labels(&h, claim) {
        assert!(!["t", "c"].contains(&l[labels::INSTANCE_CATEGORY].as_str()));
        assert!(!l.contains_key(labels::INSTANCE_GPU_NAME));
    }
}

#[test]
fn a_pod_tolerating_no_taint_never_lands_on_a_tainted_nodepool() {
    let mut h = CoreHarness::new();
    let mut gpu = pool("gpu");
    gpu.weight = Some(100);
    gpu.taints.push(Taint::new(
        "nvidia.com/gpu",
        Some("true"),
        TaintEffect::NoSchedule,
    ));
    h.nodepool(gpu);
    h.nodepool(pool("general"));
    let launches = provision(&mut h, vec![Pod::new("default", "plain", 1000, GIB)]);
    assert_eq!(launches[0].nodepool, "general");
}

#[test]
fn a_tolerating_pod_may_use_the_tainted_pool_and_its_machine_carries_the_taint() {
    let mut h = CoreHarness::new();
    let mut gpu = pool("gpu");
    gpu.weight = Some(100);
    gpu.taints.push(Taint::new(
        "dedicated",
        Some("gpu"),
        TaintEffect::NoSchedule,
    ));
    h.nodepool(gpu);
    h.nodepool(pool("general"));
    let mut p = Pod::new("default", "tolerant", 1000, GIB);
    p.tolerations.push(Toleration {
        key: Some("dedicated".into()),
        operator: TolerationOperator::Equal,
        value: Some("gpu".into()),
        effect: Some(TaintEffect::NoSchedule),
    });
    let launches = provision(&mut h, vec![p]);
    assert_eq!(launches[0].nodepool, "gpu");
    assert_eq!(launches[0].taints.len(), 1);
}

#[test]
fn prefer_no_schedule_taints_do_not_block() {
    let mut h = CoreHarness::new();
    let mut soft = pool("soft");
    soft.taints
        .push(Taint::new("soft", None, TaintEffect::PreferNoSchedule));
    h.nodepool(soft);
    assert_eq!(
        provision(&mut h, vec![Pod::new("default", "p", 100, GIB)]).len(),
        1
    );
}

#[test]
fn heavier_nodepool_is_tried_first_and_ties_go_by_name() {
    let mut h = CoreHarness::new();
    h.nodepool(pool("b-pool"));
    h.nodepool(pool("a-pool"));
    assert_eq!(
        provision(&mut h, vec![Pod::new("default", "p1", 100, GIB)])[0].nodepool,
        "a-pool"
    );
    let mut heavy = pool("z-pool");
    heavy.weight = Some(50);
    h.nodepool(heavy);
    assert_eq!(
        provision(&mut h, vec![Pod::new("default", "p2", 100, GIB)])[0].nodepool,
        "z-pool"
    );
}

#[test]
fn limits_cpu_stops_launches_at_the_limit() {
    let mut h = CoreHarness::new();
    let mut p = tutorial_pool();
    p.limits.insert("cpu".into(), 16_000);
    h.nodepool(p);
    // Each pod needs a machine of its own (15 CPU); only one 16-vCPU machine fits the limit.
    let launches = provision(
        &mut h,
        (0..3)
            .map(|i| Pod::new("default", &format!("big{i}"), 15_000, GIB))
            .collect(),
    );
    assert_eq!(launches.len(), 1);
    for o in launches[0].options.iter() {
        assert!(h.catalog().get(&o.instance_type).expect("known").vcpu <= 16);
    }
    let reasons = unschedulable(&h.commands);
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(reasons[0].1.contains("limits"), "{}", reasons[0].1);
}

#[test]
fn limits_nodes_counts_machines() {
    let mut h = CoreHarness::new();
    let mut p = tutorial_pool();
    p.limits.insert("nodes".into(), 2);
    // At most 96 vCPU a machine, so each 60-CPU pod needs a machine of its own.
    p.requirements
        .push(req(labels::INSTANCE_CPU, Operator::Lt, &["100"]));
    h.nodepool(p);
    let launches = provision(
        &mut h,
        (0..4)
            .map(|i| Pod::new("default", &format!("big{i}"), 60_000, GIB))
            .collect(),
    );
    assert_eq!(launches.len(), 2);
    assert!(
        unschedulable(&h.commands)
            .iter()
            .all(|(_, r)| r.contains("limits.nodes"))
    );
}

#[test]
fn in_flight_machines_count_against_limits() {
    let mut h = CoreHarness::new();
    let mut p = tutorial_pool();
    p.limits.insert("nodes".into(), 1);
    h.nodepool(p);
    assert_eq!(
        provision(&mut h, vec![Pod::new("default", "a", 60_000, GIB)]).len(),
        1
    );
    // The first machine is still launching; a second batch may not exceed the limit.
    assert!(provision(&mut h, vec![Pod::new("default", "b", 60_000, GIB)]).is_empty());
}

#[test]
fn existing_capacity_is_used_before_new_machines() {
    let mut h = CoreHarness::new();
    h.nodepool(tutorial_pool());
    h.existing_node("system-1", "m5.xlarge", "us-east-1a");
    let launches = provision(&mut h, vec![Pod::new("default", "small", 500, GIB)]);
    assert!(launches.is_empty());
    assert!(
        h.commands
            .iter()
            .any(|(_, c)| matches!(c, Command::NominatePod { target, .. } if target == "system-1"))
    );
}

#[test]
fn in_flight_capacity_is_used_before_new_machines() {
    let mut h = CoreHarness::new();
    h.nodepool(tutorial_pool());
    let first = provision(&mut h, vec![Pod::new("default", "a", 1000, GIB)]);
    assert_eq!(first.len(), 1);
    let instance = h.launch_cheapest(&first[0]);
    // A second small pod fits the machine on its way: no new launch, a nomination.
    let second = provision(&mut h, vec![Pod::new("default", "b", 100, GIB / 8)]);
    assert!(second.is_empty(), "{second:?}");
    assert!(h.commands.iter().any(
        |(_, c)| matches!(c, Command::NominatePod { target, .. } if *target == first[0].name)
    ));
    let node = h.join(&first[0], &instance);
    assert!(node.contains(&instance.instance_id));
}

#[test]
fn pods_pack_into_one_machine_while_it_can_hold_them() {
    let mut h = CoreHarness::new();
    h.nodepool(tutorial_pool());
    let launches = provision(
        &mut h,
        (0..10)
            .map(|i| Pod::new("default", &format!("p{i}"), 1000, 2 * GIB))
            .collect(),
    );
    assert_eq!(launches.len(), 1);
    assert_eq!(launches[0].requests.cpu_milli, 10_000);
    assert_eq!(launches[0].requests.pods, 10);
}

#[test]
fn a_pod_too_big_for_any_type_gets_a_reason_naming_the_requirements() {
    let mut h = CoreHarness::new();
    h.nodepool(tutorial_pool());
    let mut p = Pod::new("default", "huge", 500_000, GIB);
    p.node_selector.insert(labels::ARCH.into(), "amd64".into());
    assert!(provision(&mut h, vec![p]).is_empty());
    let reasons = unschedulable(&h.commands);
    assert_eq!(reasons.len(), 1);
    let r = &reasons[0].1;
    assert!(r.contains("kubernetes.io/arch In [amd64]"), "{r}");
    assert!(
        r.contains("karpenter.k8s.aws/instance-category In [c,m,r]"),
        "{r}"
    );
    assert!(r.contains("cpu=500"), "{r}");
}

#[test]
fn a_pod_selecting_another_arch_than_the_pool_is_told_which_requirement_conflicts() {
    let mut h = CoreHarness::new();
    h.nodepool(tutorial_pool());
    let mut p = Pod::new("default", "arm", 1000, GIB);
    p.node_selector.insert(labels::ARCH.into(), "arm64".into());
    assert!(provision(&mut h, vec![p]).is_empty());
    let r = &unschedulable(&h.commands)[0].1;
    assert!(r.contains("kubernetes.io/arch"), "{r}");
    assert!(r.contains("nodepool default"), "{r}");
}

#[test]
fn an_unknown_custom_label_is_not_invented() {
    let mut h = CoreHarness::new();
    h.nodepool(pool("default"));
    let mut p = Pod::new("default", "p", 100, GIB);
    p.node_selector.insert("team".into(), "blue".into());
    assert!(provision(&mut h, vec![p]).is_empty());
    assert!(unschedulable(&h.commands)[0].1.contains("team"));
}

#[test]
fn a_custom_label_the_pool_allows_is_set_on_the_machine() {
    let mut h = CoreHarness::new();
    let mut p0 = pool("default");
    p0.requirements
        .push(req("team", Operator::In, &["blue", "red"]));
    h.nodepool(p0);
    let mut p = Pod::new("default", "p", 100, GIB);
    p.node_selector.insert("team".into(), "blue".into());
    let claim = &provision(&mut h, vec![p])[0];
    assert_eq!(claim.labels.get("team").map(String::as_str), Some("blue"));
}

#[test]
fn template_labels_are_selectable() {
    let mut h = CoreHarness::new();
    let mut p0 = pool("default");
    p0.template_labels.insert("workload".into(), "batch".into());
    h.nodepool(p0);
    let mut p = Pod::new("default", "p", 100, GIB);
    p.node_selector.insert("workload".into(), "batch".into());
    let claim = &provision(&mut h, vec![p])[0];
    assert_eq!(claim.labels["workload"], "batch");
    assert_eq!(claim.labels[labels::NODEPOOL], "default");
}

#[test]
fn gpu_requests_get_gpu_machines() {
    let mut h = CoreHarness::new();
    h.nodepool(pool("default"));
    let mut p = Pod::new("default", "train", 4000, 16 * GIB);
    p.requests.set_extended(NVIDIA_GPU, 1);
    let claim = &provision(&mut h, vec![p])[0];
    for o in claim.options.iter() {
        let it = h.catalog().get(&o.instance_type).expect("known");
        assert!(
            it.gpu
                .as_ref()
                .is_some_and(|g| g.count >= 1 && g.manufacturer == "nvidia"),
            "{}",
            it.name
        );
    }
}

/// A NodePool of on-demand g4dn machines (one GPU up to the 8xlarge, four on the 12xlarge).
fn g4dn_pool() -> NodePool {
    let mut gpu = pool("default");
    gpu.requirements = vec![
        req(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]),
        req(labels::INSTANCE_FAMILY, Operator::In, &["g4dn"]),
    ];
    gpu
}

/// A pod asking one GPU and 12 CPUs: alone it takes a g4dn.4xlarge.
fn train(name: &str) -> Pod {
    let mut p = Pod::new("default", name, 12_000, 24 * GIB);
    p.requests.set_extended(NVIDIA_GPU, 1);
    p
}

/// Two one-GPU pods of one decision, on on-demand GPU machines.
fn two_gpu_pods(config: nodewright_core::Config) -> (CoreHarness, Vec<NodeClaimSpec>) {
    let mut h = CoreHarness::with_config(config);
    h.nodepool(g4dn_pool());
    let launches = provision(&mut h, vec![train("train-0"), train("train-1")]);
    (h, launches)
}

fn cheapest_usd(claim: &NodeClaimSpec) -> f64 {
    claim
        .options
        .iter()
        .map(|o| o.price.usd_per_hour())
        .fold(f64::INFINITY, f64::min)
}

#[test]
fn pods_go_on_machines_of_their_own_when_that_costs_less_than_sharing_a_bigger_one() {
    // Karpenter's packing: both pods on one machine, whose cheapest type with two GPUs and
    // room for 24 CPUs is a four-GPU g4dn.12xlarge ($3.912/h).
    let karpenter = nodewright_core::Config {
        separate_when_cheaper: false,
        ..nodewright_core::Config::default()
    };
    let (_, together) = two_gpu_pods(karpenter);
    assert_eq!(together.len(), 1, "{together:?}");
    assert_eq!(together[0].requests.pods, 2);
    // nodewright's: two g4dn.4xlarge ($1.204/h each) cost less, so each pod gets its own.
    let (_, apart) = two_gpu_pods(nodewright_core::Config::default());
    assert_eq!(apart.len(), 2, "{apart:?}");
    assert!(apart.iter().all(|c| c.requests.pods == 1));
    let apart_usd: f64 = apart.iter().map(cheapest_usd).sum();
    assert!(
        apart_usd < cheapest_usd(&together[0]),
        "apart ${apart_usd}/h, together ${}/h",
        cheapest_usd(&together[0])
    );
}

#[test]
fn machines_are_priced_apart_at_the_offerings_a_launch_may_take_now() {
    let mut h = CoreHarness::new();
    h.nodepool(g4dn_pool());
    // Both pods in one zone, where g4dn.4xlarge runs out of capacity (it is still offered in
    // the others, so the NodePool keeps the type).
    let train = |name: &str| {
        let mut p = train(name);
        p.node_selector
            .insert(labels::ZONE.into(), "us-east-1a".into());
        p
    };
    let first = provision(&mut h, vec![train("a")]).remove(0);
    let out: Vec<OfferingKey> = first
        .options
        .iter()
        .filter(|o| o.instance_type.as_ref() == "g4dn.4xlarge")
        .map(|o| o.key())
        .collect();
    assert!(!out.is_empty(), "{first:?}");
    h.fail_launch(&first, out);
    // Apart each pod would now take a g4dn.8xlarge ($2.176/h): two cost more than the
    // g4dn.12xlarge ($3.912/h) both share, so they share it.
    h.pod(train("b"));
    h.advance(11_000);
    let launches = h.all_launches();
    let after: Vec<_> = launches.iter().skip(1).collect();
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0].requests.pods, 2);
}

#[test]
fn pods_asking_ephemeral_storage_are_not_machines_apart() {
    // Ephemeral storage is an extended resource to the solver, not an accelerator: three
    // pods that share one machine keep sharing it, as Karpenter packs them (three c6a.large
    // would cost less at the catalog's prices, and more in root volumes and addresses).
    let mut h = CoreHarness::new();
    let mut unlimited = tutorial_pool();
    unlimited.limits.clear();
    h.nodepool(unlimited);
    let pods = (0..3)
        .map(|i| {
            let mut p = Pod::new("default", &format!("batch-{i}"), 1_500, 2 * GIB);
            p.requests.set_extended("ephemeral-storage", GIB);
            p
        })
        .collect();
    let launches = provision(&mut h, pods);
    assert_eq!(launches.len(), 1, "{launches:?}");
    assert_eq!(launches[0].requests.pods, 3);
}

#[test]
fn pods_that_share_a_machine_at_no_extra_cost_still_share_it() {
    // Small pods: one machine holds all four for what one of them alone would pay.
    let mut h = CoreHarness::new();
    h.nodepool(tutorial_pool());
    let pods = (0..4)
        .map(|i| Pod::new("default", &format!("web-{i}"), 250, GIB / 2))
        .collect();
    let launches = provision(&mut h, pods);
    assert_eq!(launches.len(), 1, "{launches:?}");
    assert_eq!(launches[0].requests.pods, 4);
}

#[test]
fn zone_requirement_limits_offerings() {
    let mut h = CoreHarness::new();
    h.nodepool(pool("default"));
    let mut p = Pod::new("default", "p", 100, GIB);
    p.node_selector
        .insert(labels::ZONE.into(), "us-east-1b".into());
    let claim = &provision(&mut h, vec![p])[0];
    assert!(claim.options.iter().all(|o| o.zone == "us-east-1b"));
    assert_eq!(claim.labels[labels::ZONE], "us-east-1b");
}

#[test]
fn spot_and_on_demand_pool_offers_spot_first_by_price() {
    let mut h = CoreHarness::new();
    let mut p0 = pool("default");
    p0.requirements.push(req(
        labels::CAPACITY_TYPE,
        Operator::In,
        &["spot", "on-demand"],
    ));
    h.nodepool(p0);
    let claim = &provision(&mut h, vec![Pod::new("default", "p", 1000, GIB)])[0];
    assert_eq!(claim.options[0].capacity_type, CapacityType::Spot);
    assert!(
        claim
            .options
            .iter()
            .any(|o| o.capacity_type == CapacityType::OnDemand)
    );
}

#[test]
fn an_offering_that_ran_out_of_capacity_is_avoided_for_three_minutes() {
    let mut h = CoreHarness::new();
    h.nodepool(tutorial_pool());
    let claim = provision(&mut h, vec![Pod::new("default", "a", 1000, GIB)]).remove(0);
    let failed: Vec<OfferingKey> = claim
        .options
        .iter()
        .filter(|o| o.instance_type == claim.options[0].instance_type)
        .map(|o| o.key())
        .collect();
    let cmds = h.fail_launch(&claim, failed.clone());
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::TerminateNodeClaim { .. }))
    );
    let retry = CoreHarness::launches(&h.advance(2_000));
    assert_eq!(retry.len(), 1, "the pod is provisioned again");
    assert!(
        retry[0]
            .options
            .iter()
            .all(|o| o.instance_type != claim.options[0].instance_type)
    );
    // After three minutes the offering is tried again.
    h.advance(181_000);
    h.fail_launch(&retry[0], vec![]);
    h.advance(2_000);
    let later: Vec<NodeClaimSpec> = h.all_launches();
    let last = later.last().expect("a launch");
    assert_eq!(
        last.options[0].instance_type,
        claim.options[0].instance_type
    );
}

#[test]
fn a_pod_without_requests_is_scheduled_and_flagged() {
    let mut h = CoreHarness::new();
    h.nodepool(tutorial_pool());
    let mut p = Pod::new("default", "lazy", 0, 0);
    p.missing_requests = true;
    let cmds = h.pod(p);
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::WarnMissingRequests { .. }))
    );
    assert_eq!(CoreHarness::launches(&h.advance(2_000)).len(), 1);
}

#[test]
fn max_pods_from_the_node_class_limits_packing() {
    let mut h = CoreHarness::new();
    let mut nc = NodeClass::new("default");
    nc.kubelet.max_pods = Some(4);
    h.nodeclass(nc);
    h.nodepool(tutorial_pool());
    let launches = provision(
        &mut h,
        (0..10)
            .map(|i| Pod::new("default", &format!("p{i}"), 10, 1 << 20))
            .collect(),
    );
    assert_eq!(launches.len(), 3, "4 + 4 + 2 pods");
}

/// The Windows example's NodePool: windows, amd64, on-demand, c/m/r.
fn windows_pool() -> NodePool {
    let mut p = NodePool::new("windows2022", "windows2022");
    p.requirements = vec![
        req(labels::OS, Operator::In, &["windows"]),
        req(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]),
        req(labels::INSTANCE_CATEGORY, Operator::In, &["c", "m", "r"]),
    ];
    p
}

fn windows_pod(name: &str) -> Pod {
    let mut pod = Pod::new("default", name, 1000, GIB);
    pod.node_selector
        .insert(labels::OS.to_string(), "windows".to_string());
    pod
}

#[test]
fn a_windows_class_launches_amd64_machines_labelled_windows_with_the_build() {
    let mut h = CoreHarness::new();
    let mut class = NodeClass::new("windows2022");
    // As Karpenter's example: the family comes from the alias.
    class.ami_family = None;
    class.ami_selector_terms = vec![nodewright_core::model::nodeclass::SelectorTerm {
        alias: Some("windows2022@latest".to_string()),
        ..Default::default()
    }];
    h.nodeclass(class);
    h.nodepool(windows_pool());
    let launches = provision(&mut h, vec![windows_pod("iis")]);
    assert_eq!(launches.len(), 1, "{:?}", unschedulable(&h.commands));
    let claim = &launches[0];
    assert_eq!(claim.labels[labels::OS], "windows");
    assert_eq!(claim.labels[labels::WINDOWS_BUILD], "10.0.20348");
    assert!(!claim.options.is_empty());
    for option in claim.options.iter() {
        let it = h.catalog().get(&option.instance_type).expect("known");
        assert_eq!(
            it.architecture, "amd64",
            "{}: Windows runs on amd64 only",
            it.name
        );
    }
    // The node registers as Windows; a Linux pod does not go there, a Windows one does.
    let instance = h.launch_cheapest(claim);
    let node = h.join(claim, &instance);
    let labels_of_node = &h.core.state().nodes[&node].node.labels;
    assert_eq!(labels_of_node[labels::OS], "windows");
    assert_eq!(labels_of_node[labels::WINDOWS_BUILD], "10.0.20348");
}

#[test]
fn a_windows_pool_on_a_linux_class_launches_nothing_and_says_why() {
    let mut h = CoreHarness::new();
    let mut pool = windows_pool();
    pool.node_class_ref.name = "default".to_string();
    h.nodepool(pool);
    assert!(provision(&mut h, vec![windows_pod("iis")]).is_empty());
    let reasons = unschedulable(&h.commands);
    assert_eq!(reasons.len(), 1);
    assert!(
        reasons[0].1.contains("no instance type satisfies"),
        "{reasons:?}"
    );
}

#[test]
fn a_linux_pod_selecting_a_windows_build_gets_no_linux_machine() {
    let mut h = CoreHarness::new();
    h.nodepool(tutorial_pool());
    let mut pod = Pod::new("default", "p", 100, GIB);
    pod.node_selector
        .insert(labels::WINDOWS_BUILD.to_string(), "10.0.20348".to_string());
    assert!(provision(&mut h, vec![pod]).is_empty());
}

#[test]
fn nested_virtualization_keeps_only_the_types_that_support_it() {
    let mut h = CoreHarness::new();
    let mut class = NodeClass::new("default");
    class.nested_virtualization = true;
    h.nodeclass(class);
    h.nodepool(tutorial_pool());
    let launches = provision(&mut h, vec![Pod::new("default", "vm", 1000, GIB)]);
    assert_eq!(launches.len(), 1, "{:?}", unschedulable(&h.commands));
    let supported = &h.catalog().nested_virtualization;
    assert!(!launches[0].options.is_empty());
    for option in launches[0].options.iter() {
        assert!(
            supported.contains(option.instance_type.as_str()),
            "{} does not support nested virtualization",
            option.instance_type
        );
    }
    // Without it the cheapest choice is a type that does not support it: the option narrowed
    // the choice, it did not happen to agree with it.
    let mut plain = CoreHarness::new();
    plain.nodepool(tutorial_pool());
    let launches = provision(&mut plain, vec![Pod::new("default", "vm", 1000, GIB)]);
    assert!(
        !supported.contains(launches[0].options[0].instance_type.as_str()),
        "{}",
        launches[0].options[0].instance_type
    );
}

#[test]
fn no_nodepool_means_no_launch_and_a_reason() {
    let mut h = CoreHarness::new();
    assert!(provision(&mut h, vec![Pod::new("default", "p", 100, GIB)]).is_empty());
    assert!(unschedulable(&h.commands)[0].1.contains("no NodePool"));
}

#[test]
fn a_nodepool_whose_node_class_is_missing_says_so() {
    let mut h = CoreHarness::new();
    h.nodepool(NodePool::new("default", "missing"));
    assert!(provision(&mut h, vec![Pod::new("default", "p", 100, GIB)]).is_empty());
    assert!(unschedulable(&h.commands)[0].1.contains("\"missing\""));
}

#[test]
fn expire_after_is_copied_to_the_claim() {
    let mut h = CoreHarness::new();
    let mut p = tutorial_pool();
    p.expire_after = MaybeNever::Never;
    h.nodepool(p);
    assert_eq!(
        provision(&mut h, vec![Pod::new("default", "a", 100, GIB)])[0].expire_after_ms,
        None
    );
}

#[test]
fn when_every_offering_ran_out_of_capacity_the_pod_is_told_so_until_they_return() {
    let mut h = CoreHarness::new();
    let mut p = tutorial_pool();
    p.requirements
        .push(req(labels::INSTANCE_TYPE, Operator::In, &["m5.large"]));
    h.nodepool(p);
    let claim = provision(&mut h, vec![Pod::new("default", "a", 1000, GIB)]).remove(0);
    // CreateFleet found no capacity in any of the claim's offerings.
    let every: Vec<OfferingKey> = claim.options.iter().map(|o| o.key()).collect();
    h.fail_launch(&claim, every);
    h.advance(11_000);
    let reasons = unschedulable(&h.commands);
    let (_, reason) = reasons.last().expect("the pod is told why it waits");
    assert!(
        reason.contains("recent insufficient capacity"),
        "the reason names the capacity shortage: {reason}"
    );
    assert_eq!(h.all_launches().len(), 1, "no launch into what just failed");
    // Three minutes later the offerings may be tried again.
    h.advance(3 * 60_000);
    assert_eq!(h.all_launches().len(), 2);
}

/// What the cloud resolved an EC2NodeClass to: subnets in these zones.
fn resolved(zones: &[&str]) -> nodewright_core::EventKind {
    use nodewright_core::model::nodeclass::{ResolvedNodeClass, ResolvedSubnet};
    nodewright_core::EventKind::NodeClassResolved(Box::new(ResolvedNodeClass {
        name: "default".into(),
        subnets: zones
            .iter()
            .enumerate()
            .map(|(i, z)| ResolvedSubnet {
                id: format!("subnet-{i}"),
                zone: (*z).into(),
                zone_id: None,
                available_ip_addresses: 250,
            })
            .collect(),
        ..ResolvedNodeClass::default()
    }))
}

#[test]
fn machines_launch_only_in_zones_where_the_node_class_has_a_subnet() {
    let mut h = CoreHarness::new();
    h.nodepool(tutorial_pool());
    // Never resolved (the simulated world): every zone of the catalog.
    let before = provision(&mut h, vec![Pod::new("default", "a", 1000, GIB)]);
    let zones: std::collections::BTreeSet<&str> =
        before[0].options.iter().map(|o| o.zone.as_str()).collect();
    assert!(zones.len() > 2, "{zones:?}");

    // Resolved to subnets in two zones: options there only.
    assert!(h.send(resolved(&["us-east-1b", "us-east-1d"])).is_empty());
    let after = provision(&mut h, vec![Pod::new("default", "b", 1000, GIB)]);
    assert_eq!(after.len(), 1);
    let zones: std::collections::BTreeSet<&str> =
        after[0].options.iter().map(|o| o.zone.as_str()).collect();
    assert_eq!(
        zones,
        std::collections::BTreeSet::from(["us-east-1b", "us-east-1d"])
    );

    // Resolved to the same zones again (a refresh): nothing changes, nothing is asked.
    assert!(h.send(resolved(&["us-east-1d", "us-east-1b"])).is_empty());

    // No subnet at all: the pod fits nowhere nodewright may launch, and says so.
    h.send(resolved(&[]));
    let commands = {
        h.pod(Pod::new("default", "c", 1000, GIB));
        h.advance(11_000)
    };
    assert!(CoreHarness::launches(&commands).is_empty());
    assert!(
        commands
            .iter()
            .any(|c| matches!(c, Command::ReportUnschedulable { pod, .. } if pod.to_string() == "default/c")),
        "{commands:?}"
    );
}

#[test]
fn why_a_pod_fits_nowhere_is_typed_with_one_reason_per_nodepool() {
    use nodewright_core::provisioning::scheduler::Unplaceable;
    let mut h = CoreHarness::new();
    h.nodepool(tutorial_pool());
    let mut small = pool("small");
    small.requirements = vec![req(labels::INSTANCE_SIZE, Operator::In, &["large"])];
    h.nodepool(small);
    let huge = Pod::new("default", "huge", 1_000_000, GIB);
    let result = h.core.solve_alone(0, &[&huge]);
    let [(pod, why)] = &result.unschedulable[..] else {
        panic!("{:?}", result.unschedulable)
    };
    assert_eq!(pod.name, "huge");
    let Unplaceable::FitsNowhere { ruled_out, .. } = why else {
        panic!("{why:?}")
    };
    assert_eq!(ruled_out.len(), 2, "{ruled_out:?}");
    assert!(
        ruled_out.iter().any(|r| r.contains("nodepool small")),
        "{ruled_out:?}"
    );
    // The text a person reads joins them, as the command has always said it.
    let text = why.to_string();
    assert!(
        text.starts_with(
            "fits no existing node and no NodePool can launch a machine for it (cpu=1000 "
        ),
        "{text}"
    );
    assert!(text.contains(&ruled_out.join("; ")), "{text}");
    assert_eq!(why.ruled_out(), *ruled_out);
}
