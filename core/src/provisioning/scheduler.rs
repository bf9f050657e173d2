//! The provisioning solver: places pending pods on existing nodes, on machines already on their
//! way, on machines planned in this batch, and only then plans new machines.
//!
//! Pods are taken largest first (CPU, then memory, then age, then name), so the result does not
//! depend on the order in which they arrived.

use std::collections::BTreeMap;

use crate::catalog::NodeResources;
use crate::model::labels;
use crate::model::nodeclaim::{LaunchOption, OfferingKey};
use crate::model::nodepool::NodePool;
use crate::model::pod::{Pod, PodKey};
use crate::model::requirements::Requirements;
use crate::model::resources::Resources;
use crate::model::taints::{Taint, first_untolerated};
use crate::state::{ClusterState, PreparedCatalog};

/// A machine this batch wants: the pods it is for and the instance types that can still hold
/// them all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedClaim {
    pub nodepool: String,
    pub requirements: Requirements,
    pub pods: Vec<PodKey>,
    pub requests: Resources,
    /// Catalog indices of the instance types that fit every pod and the requirements.
    pub types: Vec<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SolveResult {
    /// Pods that fit existing or in-flight capacity: (pod, node or NodeClaim name).
    pub nominations: Vec<(PodKey, String)>,
    pub new_claims: Vec<PlannedClaim>,
    /// Pods that fit nowhere, with the reason a user can act on.
    pub unschedulable: Vec<(PodKey, String)>,
}

/// Capacity that exists or is on its way.
struct Target {
    name: String,
    /// One label set per way the machine may turn out (one once launched); the pod must fit
    /// every one of them.
    label_sets: Vec<BTreeMap<String, String>>,
    taints: Vec<Taint>,
    available: Resources,
}

impl Target {
    fn admits(&self, pod: &Pod, alternatives: &[Requirements]) -> bool {
        pod.requests.fits_in(&self.available)
            && first_untolerated(&self.taints, &pod.tolerations).is_none()
            && alternatives.iter().any(|alt| {
                self.label_sets
                    .iter()
                    .all(|labels| alt.matches_labels(labels))
            })
    }
}

fn existing_targets(state: &ClusterState) -> Vec<Target> {
    let mut targets = Vec::new();
    for (name, node_state) in &state.nodes {
        let node = &node_state.node;
        let claim = node_state
            .nodeclaim
            .as_ref()
            .and_then(|c| state.nodeclaims.get(c));
        if node.unschedulable
            || claim.is_some_and(|c| c.terminating.is_some())
            || node.taints.iter().any(|t| t.key == labels::DISRUPTED_TAINT)
        {
            continue;
        }
        // Startup taints and the unregistered taint are expected to go away.
        let taints = node
            .taints
            .iter()
            .filter(|t| t.key != labels::UNREGISTERED_TAINT)
            .filter(|t| !claim.is_some_and(|c| c.spec.startup_taints.contains(t)))
            .cloned()
            .collect();
        targets.push(Target {
            name: name.clone(),
            label_sets: vec![node.labels.clone()],
            taints,
            available: node.allocatable.minus(&state.requests_on_node(name)),
        });
    }
    for (name, claim) in &state.nodeclaims {
        if claim.node_name.is_some() || claim.terminating.is_some() {
            continue;
        }
        let Some(resources) = state.nodeclaim_resources(claim) else {
            continue;
        };
        let label_sets = match &claim.instance {
            Some(_) => vec![state.nodeclaim_labels(claim)],
            None => {
                let Some(prepared) = state.catalog.as_ref() else {
                    continue;
                };
                claim
                    .spec
                    .options
                    .iter()
                    .map(|o| {
                        let mut l = claim.spec.labels.clone();
                        if let Some(it) = prepared.catalog.get(&o.instance_type) {
                            l.extend(it.labels.clone());
                        }
                        l.insert(labels::ZONE.to_string(), o.zone.clone());
                        l.insert(
                            labels::CAPACITY_TYPE.to_string(),
                            o.capacity_type.as_str().to_string(),
                        );
                        l
                    })
                    .collect()
            }
        };
        if label_sets.is_empty() {
            continue;
        }
        targets.push(Target {
            name: name.clone(),
            label_sets,
            taints: claim.spec.taints.clone(),
            available: resources.allocatable,
        });
    }
    targets
}

/// Whether any offering of type `index` is allowed by `reqs` and not marked unavailable.
fn has_allowed_offering(
    state: &ClusterState,
    prepared: &PreparedCatalog,
    index: usize,
    reqs: &Requirements,
    now_ms: u64,
) -> bool {
    let it = &prepared.catalog.instance_types[index];
    it.offerings.iter().any(|o| {
        offering_allowed(reqs, &o.zone, o.capacity_type.as_str())
            && !state.is_unavailable(
                &OfferingKey {
                    instance_type: it.name.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type,
                },
                now_ms,
            )
    })
}

fn offering_allowed(reqs: &Requirements, zone: &str, capacity_type: &str) -> bool {
    reqs.get(labels::ZONE).is_none_or(|r| r.has(zone))
        && reqs
            .get(labels::CAPACITY_TYPE)
            .is_none_or(|r| r.has(capacity_type))
}

/// The solver's view of one NodePool for this batch.
struct PoolContext<'a> {
    pool: &'a NodePool,
    template: Requirements,
    resources: Vec<NodeResources>,
    /// Capacity in use (live NodeClaims) and their count.
    usage: Resources,
    count: i64,
}

/// Places `pods` (pending, any order) given the cluster state.
pub fn solve(state: &ClusterState, now_ms: u64, pods: &[&Pod]) -> SolveResult {
    let mut result = SolveResult::default();
    let mut pods: Vec<&Pod> = pods.to_vec();
    pods.sort_by(|a, b| Pod::queue_order(a, b));

    let mut targets = existing_targets(state);
    let mut pools: Vec<&NodePool> = state.nodepools.values().collect();
    pools.sort_by(|a, b| NodePool::priority_order(a, b));
    let prepared = state.catalog.as_ref();
    let contexts: Vec<PoolContext> = pools
        .iter()
        .filter_map(|pool| {
            let nodeclass = state.nodeclasses.get(&pool.node_class_ref.name)?;
            let prepared = prepared?;
            let (usage, count) = state.nodepool_usage(&pool.name);
            Some(PoolContext {
                pool,
                template: pool.template_requirements(),
                resources: prepared.node_resources(&nodeclass.kubelet),
                usage,
                count,
            })
        })
        .collect();

    'pods: for pod in pods {
        let alternatives = pod.requirement_alternatives();
        // 1. Existing nodes and machines on their way.
        if let Some(target) = targets.iter_mut().find(|t| t.admits(pod, &alternatives)) {
            target.available.sub(&pod.requests);
            result
                .nominations
                .push((pod.key.clone(), target.name.clone()));
            continue;
        }
        let Some(prepared) = prepared else {
            result.unschedulable.push((
                pod.key.clone(),
                "no instance catalog is known yet".to_string(),
            ));
            continue;
        };
        // 2. Machines planned in this batch, fewest pods first.
        let mut order: Vec<usize> = (0..result.new_claims.len()).collect();
        order.sort_by_key(|i| (result.new_claims[*i].pods.len(), *i));
        for i in order {
            let claim = &result.new_claims[i];
            let Some(ctx) = contexts.iter().find(|c| c.pool.name == claim.nodepool) else {
                continue;
            };
            if first_untolerated(&ctx.pool.taints, &pod.tolerations).is_some() {
                continue;
            }
            let requests = claim.requests.plus(&pod.requests);
            for alt in &alternatives {
                if claim.requirements.compatible(alt).is_err() {
                    continue;
                }
                let reqs = claim.requirements.intersect(alt);
                let types: Vec<usize> = claim
                    .types
                    .iter()
                    .copied()
                    .filter(|&t| {
                        requests.fits_in(&ctx.resources[t].allocatable)
                            && prepared.requirements[t].intersects(&reqs).is_ok()
                            && has_allowed_offering(state, prepared, t, &reqs, now_ms)
                    })
                    .collect();
                if !types.is_empty() {
                    let claim = &mut result.new_claims[i];
                    claim.requirements = reqs;
                    claim.requests = requests;
                    claim.types = types;
                    claim.pods.push(pod.key.clone());
                    continue 'pods;
                }
            }
        }
        // 3. A new machine from the first NodePool that can take the pod.
        let mut reasons = Vec::new();
        for ctx in &contexts {
            match plan_new_claim(
                state,
                prepared,
                ctx,
                &result.new_claims,
                pod,
                &alternatives,
                now_ms,
            ) {
                Ok(claim) => {
                    result.new_claims.push(claim);
                    continue 'pods;
                }
                Err(reason) => reasons.push(format!("nodepool {}: {reason}", ctx.pool.name)),
            }
        }
        for pool in &pools {
            if !state.nodeclasses.contains_key(&pool.node_class_ref.name) {
                reasons.push(format!(
                    "nodepool {}: its nodeClassRef names EC2NodeClass {:?}, which does not exist",
                    pool.name, pool.node_class_ref.name
                ));
            }
        }
        let reason = if pools.is_empty() {
            "no NodePool exists; create one whose requirements the pod meets".to_string()
        } else {
            format!(
                "fits no existing node and no NodePool can launch a machine for it ({}): {}",
                pod.requests,
                reasons.join("; ")
            )
        };
        result.unschedulable.push((pod.key.clone(), reason));
    }
    result
}

fn plan_new_claim(
    state: &ClusterState,
    prepared: &PreparedCatalog,
    ctx: &PoolContext,
    planned: &[PlannedClaim],
    pod: &Pod,
    alternatives: &[Requirements],
    now_ms: u64,
) -> Result<PlannedClaim, String> {
    if let Some(taint) = first_untolerated(&ctx.pool.taints, &pod.tolerations) {
        return Err(format!("the pod does not tolerate taint {taint}"));
    }
    // What the pool may still take, counting machines planned in this batch at their largest.
    let mut usage = ctx.usage.clone();
    let mut count = ctx.count;
    for claim in planned.iter().filter(|c| c.nodepool == ctx.pool.name) {
        count += 1;
        if !ctx.pool.limits.is_empty() {
            let mut largest = Resources::default();
            for &t in &claim.types {
                largest = largest.max(&ctx.resources[t].capacity);
            }
            usage.add(&largest);
        }
    }
    let remaining = ctx.pool.remaining(&usage, count);
    if let Some(remaining) = &remaining
        && remaining.get("nodes").is_some_and(|n| *n < 1)
    {
        return Err("limits.nodes is reached".to_string());
    }

    let mut last_error = String::new();
    for alt in alternatives {
        if let Err(conflict) = ctx.template.compatible(alt) {
            last_error = format!("incompatible requirements: {conflict}");
            continue;
        }
        let reqs = ctx.template.intersect(alt);
        let mut meets_requirements = 0usize;
        let mut fits = 0usize;
        let mut within_limits = 0usize;
        let mut types = Vec::new();
        for t in 0..prepared.catalog.instance_types.len() {
            if prepared.requirements[t].intersects(&reqs).is_err() {
                continue;
            }
            meets_requirements += 1;
            if !pod.requests.fits_in(&ctx.resources[t].allocatable) {
                continue;
            }
            fits += 1;
            if let Some(remaining) = &remaining {
                let capacity = &ctx.resources[t].capacity;
                let over = remaining
                    .iter()
                    .any(|(name, left)| name != "nodes" && capacity.get(name) > *left);
                if over {
                    continue;
                }
            }
            within_limits += 1;
            if !has_allowed_offering(state, prepared, t, &reqs, now_ms) {
                continue;
            }
            types.push(t);
        }
        if !types.is_empty() {
            return Ok(PlannedClaim {
                nodepool: ctx.pool.name.clone(),
                requirements: reqs,
                pods: vec![pod.key.clone()],
                requests: pod.requests.clone(),
                types,
            });
        }
        let shown = describe_requirements(&reqs);
        last_error = if meets_requirements == 0 {
            format!("no instance type satisfies {shown}")
        } else if fits == 0 {
            format!(
                "no instance type satisfies {shown} with room for {} ({meets_requirements} types meet the requirements, none is large enough)",
                pod.requests
            )
        } else if within_limits == 0 {
            format!(
                "every instance type that fits would exceed the NodePool limits (remaining: {})",
                describe_remaining(remaining.as_ref())
            )
        } else {
            format!(
                "the {within_limits} instance types that fit {shown} have no offering available now (zones, capacity types, or recent insufficient capacity)"
            )
        };
    }
    Err(last_error)
}

/// Requirements as a user wrote them (without the NodePool's own name label).
fn describe_requirements(reqs: &Requirements) -> String {
    let parts: Vec<String> = reqs
        .iter()
        .filter(|r| r.key != labels::NODEPOOL)
        .map(|r| r.to_string())
        .collect();
    if parts.is_empty() {
        "no requirements".to_string()
    } else {
        parts.join(" AND ")
    }
}

fn describe_remaining(remaining: Option<&BTreeMap<String, i64>>) -> String {
    match remaining {
        None => "unlimited".to_string(),
        Some(map) => map
            .iter()
            .map(|(k, v)| match k.as_str() {
                "cpu" => format!("cpu={}", crate::model::resources::format_milli_cpu(*v)),
                "memory" => format!("memory={}", crate::model::resources::format_bytes(*v)),
                _ => format!("{k}={v}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// The launch options of a planned machine: every allowed, available offering of its types,
/// cheapest first, cut to the `max_types` cheapest instance types.
pub fn launch_options(
    state: &ClusterState,
    claim: &PlannedClaim,
    now_ms: u64,
    max_types: usize,
) -> Vec<LaunchOption> {
    let Some(prepared) = state.catalog.as_ref() else {
        return Vec::new();
    };
    let mut per_type: Vec<(crate::catalog::Price, &str, Vec<LaunchOption>)> = Vec::new();
    for &t in &claim.types {
        let it = &prepared.catalog.instance_types[t];
        let mut options: Vec<LaunchOption> = it
            .offerings
            .iter()
            .filter(|o| offering_allowed(&claim.requirements, &o.zone, o.capacity_type.as_str()))
            .filter(|o| {
                !state.is_unavailable(
                    &OfferingKey {
                        instance_type: it.name.clone(),
                        zone: o.zone.clone(),
                        capacity_type: o.capacity_type,
                    },
                    now_ms,
                )
            })
            .map(|o| LaunchOption {
                instance_type: it.name.clone(),
                zone: o.zone.clone(),
                capacity_type: o.capacity_type,
                price: o.price,
            })
            .collect();
        if let Some(cheapest) = options.iter().map(|o| o.price).min() {
            options.sort_by(|a, b| {
                a.price
                    .cmp(&b.price)
                    .then(a.zone.cmp(&b.zone))
                    .then(a.capacity_type.cmp(&b.capacity_type))
            });
            per_type.push((cheapest, it.name.as_str(), options));
        }
    }
    per_type.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(b.1)));
    let mut out: Vec<LaunchOption> = per_type
        .into_iter()
        .take(max_types)
        .flat_map(|(_, _, options)| options)
        .collect();
    out.sort_by(|a, b| {
        a.price
            .cmp(&b.price)
            .then(a.instance_type.cmp(&b.instance_type))
            .then(a.zone.cmp(&b.zone))
            .then(a.capacity_type.cmp(&b.capacity_type))
    });
    out
}
