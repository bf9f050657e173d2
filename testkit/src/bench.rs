//! Karpenter's scheduling benchmark, rebuilt: 400 synthetic instance types, one NodePool, and
//! the five pod classes (plain, zonal spread, hostname spread, zonal self-affinity, hostname
//! anti-affinity), or the 4,000-pod preference case. See `docs/benchmarks.md`.

use std::collections::BTreeMap;
use std::time::Instant;

use nodewright_core::catalog::{CapacityType, Catalog, InstanceType, Offering, Price};
use nodewright_core::config::{Config, PreferencePolicy};
use nodewright_core::model::affinity::{
    InclusionPolicy, LabelSelector, PodAffinityTerm, TopologySpreadConstraint, WhenUnsatisfiable,
};
use nodewright_core::model::labels;
use nodewright_core::model::nodeclass::NodeClass;
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::model::pod::Pod;
use nodewright_core::model::requirements::{Operator, RequirementSpec};
use nodewright_core::provisioning::pool_shape::PoolShapes;
use nodewright_core::provisioning::{launch_options, solve};
use nodewright_core::state::{ClusterState, PreparedCatalog};
use serde::Serialize;

use crate::sim::rng::SimRng;

pub const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];
const GIB: i64 = 1 << 30;
const MIB: i64 = 1 << 20;

/// The 400 types of Karpenter's fake cloud: type i has i vCPU, 2i GiB, 10i pods; spot in two
/// zones, on-demand in three, all at 0.1 × vCPU + 0.1 × memory in GB per hour.
pub fn catalog() -> Catalog {
    let instance_types = (1..=400u32)
        .map(|i| {
            let memory_bytes = 2 * i as i64 * GIB;
            let usd = 0.1 * i as f64 + 0.1 * memory_bytes as f64 / 1e9;
            let price = Price((usd * 1e6).round() as u64);
            let mut offerings: Vec<Offering> = ZONES[..2]
                .iter()
                .map(|z| Offering {
                    zone: z.to_string(),
                    capacity_type: CapacityType::Spot,
                    price,
                })
                .collect();
            offerings.extend(ZONES.iter().map(|z| Offering {
                zone: z.to_string(),
                capacity_type: CapacityType::OnDemand,
                price,
            }));
            let name = format!("fake-it-{i}");
            let labels: BTreeMap<String, String> = [
                (labels::ARCH, "amd64".to_string()),
                (labels::OS, "linux".to_string()),
                (labels::INSTANCE_TYPE, name.clone()),
                (labels::INSTANCE_CPU, i.to_string()),
                (labels::INSTANCE_MEMORY, (2048 * i).to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            InstanceType {
                name,
                architecture: "amd64".to_string(),
                vcpu: i,
                memory_mib: 2048 * i as u64,
                gpu: None,
                neuron_count: 0,
                // One ENI with 10i − 1 addresses: 1 × (10i − 2) + 2 = 10i pods.
                max_enis: 1,
                ipv4_per_eni: 10 * i - 1,
                labels,
                offerings,
            }
        })
        .collect();
    Catalog {
        region: "benchmark".to_string(),
        instance_types,
        nested_virtualization: Default::default(),
        reservations: Vec::new(),
        ..Catalog::default()
    }
    .normalized()
}

/// The fake cloud's overhead: 100m CPU and 10Mi memory kube-reserved, nothing else.
fn node_class() -> NodeClass {
    let mut nc = NodeClass::new("default");
    nc.kubelet.kube_reserved.insert("cpu".into(), 100);
    nc.kubelet.kube_reserved.insert("memory".into(), 10 * MIB);
    nc.kubelet.eviction_hard_memory_bytes = Some(0);
    nc
}

/// The NodePool of Karpenter's benchmark: no requirements, limits so large that no solve the
/// benchmark runs reaches them. A planned machine counts against the limits with its largest
/// instance-type option (800 GiB here, as Karpenter counts it), so limits of 10M GiB — enough
/// for Karpenter's 20,000 pods — stop a solve at 12,500 machines; a billion leaves the 100,000-pod
/// solve its 20,000 hostname-anti-affinity machines while keeping the limit accounting measured.
fn node_pool() -> NodePool {
    let mut pool = NodePool::new("default", "default");
    pool.limits.insert("cpu".into(), 1_000_000_000 * 1000);
    pool.limits.insert("memory".into(), 1_000_000_000 * GIB);
    pool
}

const CPU: [i64; 5] = [100, 250, 500, 1000, 1500];
const MEMORY_MIB: [i64; 6] = [100, 256, 512, 1024, 2048, 4096];
const VALUES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];

fn pick<T: Copy>(rng: &mut SimRng, items: &[T]) -> T {
    items[(rng.next_u64() % items.len() as u64) as usize]
}

fn selector(key: &str, value: &str) -> LabelSelector {
    LabelSelector {
        match_labels: [(key.to_string(), value.to_string())].into(),
        match_expressions: Vec::new(),
    }
}

fn spread(key: &str, value: &str, topology_key: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew: 1,
        topology_key: topology_key.to_string(),
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        selector: selector(key, value),
        min_domains: None,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
        match_label_keys: Vec::new(),
    }
}

fn term(key: &str, value: &str, topology_key: &str, weight: Option<i32>) -> PodAffinityTerm {
    PodAffinityTerm {
        selector: selector(key, value),
        namespaces: Vec::new(),
        topology_key: topology_key.to_string(),
        weight,
    }
}

fn sized(rng: &mut SimRng, name: String) -> Pod {
    let cpu = pick(rng, &CPU);
    let memory = pick(rng, &MEMORY_MIB) * MIB;
    Pod::new("default", &name, cpu, memory)
}

/// The five-class mix of `n` pods (n/5 of each class, the remainder plain), from seed 42.
pub fn mix(n: usize) -> Vec<Pod> {
    let mut rng = SimRng::new(42);
    let k = n / 5;
    let mut pods = Vec::with_capacity(n);
    let plain = |rng: &mut SimRng, i: usize| {
        let value = pick(rng, &VALUES);
        let mut p = sized(rng, format!("plain-{i}"));
        p.labels.insert("my-label".into(), value.into());
        p
    };
    for i in 0..k {
        pods.push(plain(&mut rng, i));
    }
    for (class, key) in [
        ("zone-spread", labels::ZONE),
        ("host-spread", labels::HOSTNAME),
    ] {
        for i in 0..k {
            let own = pick(&mut rng, &VALUES);
            let selected = pick(&mut rng, &VALUES);
            let mut p = sized(&mut rng, format!("{class}-{i}"));
            p.labels.insert("my-label".into(), own.into());
            p.topology_spread.push(spread("my-label", selected, key));
            pods.push(p);
        }
    }
    for i in 0..k {
        let group = pick(&mut rng, &VALUES);
        let mut p = sized(&mut rng, format!("zone-affinity-{i}"));
        p.labels.insert("my-affininity".into(), group.into());
        p.pod_affinity
            .push(term("my-affininity", group, labels::ZONE, None));
        pods.push(p);
    }
    for i in 0..k {
        let mut p = sized(&mut rng, format!("host-anti-affinity-{i}"));
        p.labels.insert("app".into(), "nginx".into());
        p.pod_anti_affinity
            .push(term("app", "nginx", labels::HOSTNAME, None));
        pods.push(p);
    }
    for i in 5 * k..n {
        pods.push(plain(&mut rng, i));
    }
    pods
}

/// The preference case: `n` identical pods (one size draw), `app=nginx`, preferring zone
/// test-zone-1 (weight 1), zonal anti-affinity to each other (weight 10, unsatisfiable beyond
/// three pods) and hostname anti-affinity (weight 1).
pub fn preferences(n: usize) -> Vec<Pod> {
    let mut rng = SimRng::new(42);
    let template = sized(&mut rng, String::new());
    (0..n)
        .map(|i| {
            let mut p = template.clone();
            p.key.name = format!("preferring-{i}");
            p.labels.insert("app".into(), "nginx".into());
            p.preferred_node_affinity.push((
                1,
                vec![RequirementSpec::new(
                    labels::ZONE,
                    Operator::In,
                    &[ZONES[0]],
                )],
            ));
            p.pod_anti_affinity
                .push(term("app", "nginx", labels::ZONE, Some(10)));
            p.pod_anti_affinity
                .push(term("app", "nginx", labels::HOSTNAME, Some(1)));
            p
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    Mix,
    Preferences(PreferencePolicy),
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BenchReport {
    pub case: String,
    pub pods: usize,
    pub pods_placed: usize,
    pub unschedulable: usize,
    pub machines: usize,
    pub total_usd_per_hour: f64,
    pub seconds: f64,
    pub pods_per_second: f64,
    /// Hostname anti-affinity needs one machine per such pod.
    pub lower_bound_machines: usize,
    /// Fractional packing of CPU and memory into the cheapest capacity per unit.
    pub lower_bound_usd_per_hour: f64,
}

/// The state the solver starts from: the catalog, the node class and the NodePool.
pub fn state(config: &Config) -> ClusterState {
    let mut state = ClusterState {
        capacity_settings: config.capacity_settings(),
        ..ClusterState::default()
    };
    state.catalog = Some(std::sync::Arc::new(PreparedCatalog::new(catalog())));
    let nc = node_class();
    state.nodeclasses.insert(nc.name.clone(), nc);
    let pool = node_pool();
    state.nodepools.insert(pool.name.clone(), pool);
    state
}

/// The configuration of the benchmark: the fake cloud keeps no VM memory overhead.
pub fn config(policy: PreferencePolicy) -> Config {
    Config {
        vm_memory_overhead_per_mille: 0,
        preference_policy: policy,
        ..Config::default()
    }
}

/// One full solve of the case with `n` pods.
pub fn run(case: Case, n: usize) -> BenchReport {
    let (pods, policy, name) = match case {
        Case::Mix => (mix(n), PreferencePolicy::Respect, "mix".to_string()),
        Case::Preferences(policy) => (
            preferences(n),
            policy,
            format!(
                "preferences-{}",
                if policy == PreferencePolicy::Respect {
                    "respect"
                } else {
                    "ignore"
                }
            ),
        ),
    };
    let config = config(policy);
    let state = state(&config);
    let refs: Vec<&Pod> = pods.iter().collect();
    let started = Instant::now();
    let result = solve(&state, &PoolShapes::default(), &config, 0, &refs);
    let seconds = started.elapsed().as_secs_f64();
    let mut total_micro: u64 = 0;
    for claim in &result.new_claims {
        if let Some(o) = launch_options(&state, claim, 0, config.max_instance_types).first() {
            total_micro += o.price.0;
        }
    }
    let placed = result
        .new_claims
        .iter()
        .map(|c| c.pods.len())
        .sum::<usize>()
        + result.nominations.len();
    let anti = pods
        .iter()
        .filter(|p| {
            p.pod_anti_affinity
                .iter()
                .any(|t| t.weight.is_none() && t.topology_key == labels::HOSTNAME)
        })
        .count();
    BenchReport {
        case: name,
        pods: n,
        pods_placed: placed,
        unschedulable: result.unschedulable.len(),
        machines: result.new_claims.len(),
        total_usd_per_hour: total_micro as f64 / 1e6,
        seconds,
        pods_per_second: if seconds > 0.0 {
            n as f64 / seconds
        } else {
            f64::INFINITY
        },
        lower_bound_machines: anti,
        lower_bound_usd_per_hour: fractional_bound(&state, &config, &pods),
    }
}

/// max over CPU and memory of (total requested) × (cheapest price per allocatable unit).
fn fractional_bound(state: &ClusterState, config: &Config, pods: &[Pod]) -> f64 {
    let Some(prepared) = state.catalog.as_deref() else {
        return 0.0;
    };
    let resources = prepared.node_resources(&node_class(), &config.capacity_settings());
    let mut best_cpu = f64::INFINITY;
    let mut best_mem = f64::INFINITY;
    for (it, r) in prepared
        .catalog
        .instance_types
        .iter()
        .zip(&resources.resources)
    {
        let Some(price) = it.cheapest_price() else {
            continue;
        };
        let usd = price.usd_per_hour();
        if r.allocatable.cpu_milli > 0 {
            best_cpu = best_cpu.min(usd / r.allocatable.cpu_milli as f64);
        }
        if r.allocatable.memory_bytes > 0 {
            best_mem = best_mem.min(usd / r.allocatable.memory_bytes as f64);
        }
    }
    let cpu: i64 = pods.iter().map(|p| p.requests.cpu_milli).sum();
    let mem: i64 = pods.iter().map(|p| p.requests.memory_bytes).sum();
    (cpu as f64 * best_cpu).max(mem as f64 * best_mem)
}

impl BenchReport {
    pub fn text(&self) -> String {
        format!(
            "case {}: {} pods in {:.3}s = {:.0} pods/s; placed {}, unschedulable {}; machines {} (lower bound {}), ${:.2}/h (fractional lower bound ${:.2}/h)",
            self.case,
            self.pods,
            self.seconds,
            self.pods_per_second,
            self.pods_placed,
            self.unschedulable,
            self.machines,
            self.lower_bound_machines,
            self.total_usd_per_hour,
            self.lower_bound_usd_per_hour
        )
    }
}

/// A cluster of `nodes` initialized machines (m5.2xlarge, on-demand, three zones) running
/// `pods` pods of 500m / 1Gi spread evenly: half full, so consolidation has work to do. With
/// `pdbs` > 0 the pods belong to that many services (`app=svc-<i>`, round robin), each with a
/// PodDisruptionBudget of `maxUnavailable: 1`.
pub fn consolidation_state(nodes: usize, pods: usize, pdbs: usize) -> (Config, ClusterState) {
    use nodewright_core::model::node::Node;
    use nodewright_core::model::nodeclaim::{Instance, NodeClaimSpec};
    use nodewright_core::state::{NodeClaimState, NodeState};
    let config = Config::default();
    let mut state = ClusterState {
        capacity_settings: config.capacity_settings(),
        ..ClusterState::default()
    };
    let catalog = crate::us_east_1_catalog();
    let it = catalog.get("m5.2xlarge").cloned();
    state.catalog = Some(std::sync::Arc::new(PreparedCatalog::new(catalog)));
    let nc = NodeClass::new("default");
    state.nodeclasses.insert(nc.name.clone(), nc);
    let mut pool = NodePool::new("default", "default");
    pool.requirements = vec![
        RequirementSpec::new(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]),
        RequirementSpec::new(labels::INSTANCE_CATEGORY, Operator::In, &["c", "m", "r"]),
    ];
    pool.budgets = vec![nodewright_core::model::nodepool::DisruptionBudget {
        nodes: nodewright_core::model::nodepool::BudgetNodes::Percent(100),
        schedule: None,
        duration_ms: None,
        reasons: vec![],
    }];
    state.nodepools.insert(pool.name.clone(), pool);
    let Some(it) = it else {
        return (config, state);
    };
    let resources = nodewright_core::catalog::capacity(&it, &Default::default());
    for n in 0..nodes {
        let zone = ZONES_US_EAST_1[n % 3];
        let name = format!("node-{n:05}");
        let claim_name = format!("default-{n:05}");
        let instance = Instance {
            instance_id: format!("i-{n:017x}"),
            instance_type: it.name.clone(),
            zone: zone.to_string(),
            capacity_type: CapacityType::OnDemand,
            price: it
                .offerings
                .iter()
                .find(|o| o.capacity_type == CapacityType::OnDemand)
                .map(|o| o.price)
                .unwrap_or_default(),
        };
        let mut node_labels = it.labels.clone();
        node_labels.insert(labels::ZONE.into(), zone.into());
        node_labels.insert(labels::CAPACITY_TYPE.into(), "on-demand".into());
        node_labels.insert(labels::HOSTNAME.into(), name.clone());
        node_labels.insert(labels::NODEPOOL.into(), "default".into());
        state.nodes.insert(
            name.clone(),
            NodeState::new(
                Node {
                    name: name.clone(),
                    provider_id: Some(instance.provider_id()),
                    labels: node_labels,
                    annotations: Default::default(),
                    taints: Vec::new(),
                    allocatable: resources.allocatable.clone(),
                    ready: true,
                    unschedulable: false,
                },
                Some(claim_name.clone()),
                0,
            ),
        );
        state.nodeclaims.insert(
            claim_name.clone(),
            NodeClaimState {
                spec: NodeClaimSpec {
                    name: claim_name,
                    nodepool: "default".into(),
                    nodeclass: "default".into(),
                    labels: Default::default(),
                    annotations: Default::default(),
                    taints: Vec::new(),
                    startup_taints: Vec::new(),
                    requirements: Vec::new(),
                    requests: Default::default(),
                    options: Vec::new().into(),
                    expire_after_ms: Some(720 * 3_600_000),
                },
                created_at_ms: 0,
                instance: Some(instance),
                launched_at_ms: Some(0),
                node_name: Some(name),
                registered_at_ms: Some(0),
                initialized_at_ms: Some(0),
                terminating: None,
            },
        );
    }
    for p in 0..pods {
        let node = format!("node-{:05}", p % nodes.max(1));
        let mut pod = Pod::new("default", &format!("pod-{p:06}"), 500, GIB);
        pod.node_name = Some(node.clone());
        if pdbs > 0 {
            pod.labels.insert("app".into(), format!("svc-{}", p % pdbs));
        }
        let key = pod.key.clone();
        let (id, _) = state.pods.insert(pod);
        if let Some(n) = state.nodes.get_mut(&node) {
            n.pods.insert(key, id);
            n.pods_changed();
        }
    }
    for i in 0..pdbs {
        use nodewright_core::model::affinity::LabelSelector;
        use nodewright_core::model::pdb::{IntOrPercent, PodDisruptionBudget};
        let name = format!("svc-{i}");
        state.pdbs.insert(
            ("default".into(), name.clone()),
            PodDisruptionBudget {
                namespace: "default".into(),
                name: name.clone(),
                selector: LabelSelector {
                    match_labels: [("app".to_string(), name)].into(),
                    match_expressions: vec![],
                },
                min_available: None,
                max_unavailable: Some(IntOrPercent::Int(1)),
            },
        );
    }
    (config, state)
}

const ZONES_US_EAST_1: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

/// One consolidation search over the cluster (what a disruption pass does): multi-node, then
/// single-node. Returns (seconds, nodes the decision removes).
pub fn consolidation_pass(nodes: usize, pods: usize, pdbs: usize) -> (f64, usize) {
    let (config, state) = consolidation_state(nodes, pods, pdbs);
    let started = Instant::now();
    let removed = consolidation_search(&config, &state);
    (started.elapsed().as_secs_f64(), removed)
}

/// The search itself, on a prepared cluster: how many nodes the decision removes.
pub fn consolidation_search(config: &Config, state: &ClusterState) -> usize {
    use nodewright_core::disruption::consolidation;
    let nominated = Default::default();
    consolidation::search(
        state,
        &PoolShapes::default(),
        config,
        &nominated,
        &Default::default(),
        3_600_000,
    )
    .0
    .map(|d| d.nodeclaims.len())
    .unwrap_or(0)
}
