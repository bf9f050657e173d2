//! Consolidation: nodes whose pods fit elsewhere are deleted, or replaced by one cheaper
//! machine, when the saving pays for the disruption (the payback rule). Multi-node first (the
//! largest group of the cheapest-to-disrupt candidates that can go together), then single-node.
//!
//! The decision is a simulation: the node's pods are rescheduled with the provisioning solver
//! onto the other nodes, machines on their way, and at most one new machine. It is taken only
//! if every pod fits, the result is cheaper, and
//! `saving per hour × payback horizon > evicted pods × cost per evicted pod + work lost`
//! (the work lost counted when `Config::count_lost_work`, see [`super::eviction_cost`]; both
//! other settings zero: any saving, Karpenter's rule). It is re-checked after the validation
//! period before it acts.

use std::collections::{BTreeMap, BTreeSet};

use super::budget::allowed_disruptions;
use super::eviction_cost::EvictionCost;
use crate::catalog::{CapacityType, Price};
use crate::config::Config;
use crate::model::duration::format_duration_ms;
use crate::model::nodepool::{ConsolidationPolicy, DisruptionReason, NodePool};
use crate::model::pod::{Pod, PodKey};
use crate::provisioning::launch::OfferingAt;
use crate::provisioning::pool_shape::PoolShapes;
use crate::provisioning::scheduler::Unplaceable;
use crate::provisioning::{ClusterView, PlannedClaim, launch_offerings};
use crate::state::ClusterState;
use crate::wake::Wake;

/// Karpenter's consolidation validation period.
pub const VALIDATION_MS: u64 = 15_000;
/// Multi-node consolidation looks at this many candidates at most (Karpenter's limit).
pub const MAX_MULTI_NODE_CANDIDATES: usize = 100;
/// Spot-to-spot replacement needs this many cheaper spot instance types (Karpenter's rule).
pub const MIN_SPOT_TO_SPOT_OPTIONS: usize = 15;

/// A consolidation found: which machines go, and what (if anything) replaces them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Decision {
    /// The NodeClaims taken away.
    pub nodeclaims: Vec<String>,
    /// Their nodes.
    pub nodes: Vec<String>,
    /// The machine that takes the pods that do not fit elsewhere; `None` deletes.
    pub replacement: Option<PlannedClaim>,
    /// Per hour.
    pub saving: Price,
    /// The pods moved.
    pub evictions: usize,
    /// Why it is allowed: the pods, the prices, the payback rule, the budget.
    pub detail: String,
}

/// A node that may be consolidated now.
struct Candidate<'a> {
    /// Karpenter's disruption cost of its pods, scaled by the lifetime its machine has left:
    /// the search tries the cheapest first.
    disruption_cost: f64,
    nodeclaim: &'a str,
    /// Its price and what evicting its pods costs.
    cost: CandidateCost,
}

/// The NodeClaims whose nodes may be consolidated now (cheapest to disrupt first) with their
/// costs, in the same order, and the earliest time another becomes eligible.
fn candidates<'a>(
    state: &'a ClusterState,
    config: &Config,
    nominated: &BTreeSet<String>,
    now_ms: u64,
) -> (Vec<&'a str>, Vec<CandidateCost>, Option<u64>) {
    let mut out = Vec::with_capacity(state.nodeclaims.len());
    let mut next = Wake::default();
    let exhausted = state.exhausted_pdbs();
    for (name, claim) in &state.nodeclaims {
        let Some(pool) = state.nodepools.get(&claim.spec.nodepool) else {
            continue;
        };
        // A static pool's machines are never consolidated: it keeps its count.
        if pool.consolidation_policy != ConsolidationPolicy::WhenEmptyOrUnderutilized
            || pool.is_static()
            || claim.terminating.is_some()
            || !claim.is_initialized()
        {
            continue;
        }
        let Some(instance) = &claim.instance else {
            continue;
        };
        let Some(after_ms) = pool.consolidate_after.as_ms() else {
            continue;
        };
        let Some(node_name) = &claim.node_name else {
            continue;
        };
        let Some(node) = state.nodes.get(node_name) else {
            continue;
        };
        if let Some(ends) = state.do_not_disrupt_among((name, claim), node, now_ms) {
            // A protection with a duration makes the node a candidate again once it runs out.
            if let Some(at) = ends {
                next.offer(at);
            }
            continue;
        }
        if state.workload_on(node).pods == 0 {
            continue;
        }
        if nominated.contains(node_name)
            || nominated.contains(name)
            || (!exhausted.is_empty()
                && state
                    .workload_pods_of(node)
                    .any(|p| exhausted.iter().any(|pdb| pdb.selects(p))))
        {
            continue;
        }
        let eligible_at = node.last_pod_event_ms + after_ms;
        if eligible_at > now_ms {
            next.offer(eligible_at);
            continue;
        }
        let lifetime_left = match claim.spec.expire_after_ms {
            Some(expire) if expire > 0 => {
                let age = now_ms.saturating_sub(claim.created_at_ms);
                (expire.saturating_sub(age)) as f64 / expire as f64
            }
            _ => 1.0,
        };
        let priced = state.priced_pods_on(node, config.count_lost_work);
        let disruption_cost = priced.disruption_cost * lifetime_left;
        let mut eviction_cost = EvictionCost::default();
        for pod in &priced.pods {
            eviction_cost.add_priced(config, pod, instance.price, now_ms);
        }
        out.push(Candidate {
            disruption_cost,
            nodeclaim: name,
            cost: CandidateCost {
                price: instance.price,
                eviction_cost,
            },
        });
    }
    // NodeClaim names are unique: no two candidates compare equal, so the unstable sort gives
    // the one order there is. Their places are sorted, not the candidates themselves (each
    // carries its costs).
    let mut order: Vec<(f64, usize)> = out
        .iter()
        .enumerate()
        .map(|(i, c)| (c.disruption_cost, i))
        .collect();
    order.sort_unstable_by(|&(a, i), &(b, j)| {
        a.total_cmp(&b)
            .then_with(|| out[i].nodeclaim.cmp(out[j].nodeclaim))
    });
    let names = order.iter().map(|&(_, i)| out[i].nodeclaim).collect();
    let costs = order.iter().map(|&(_, i)| out[i].cost).collect();
    (names, costs, next.ms())
}

/// Why taking nodes away is not a consolidation now: typed, said in words only where it is
/// shown.
#[derive(Debug, Clone, PartialEq)]
pub enum Rejection {
    /// A NodeClaim is gone, or it has no node or no instance (yet or any more).
    Gone {
        /// The NodeClaim.
        nodeclaim: String,
        /// What is missing.
        what: &'static str,
    },
    /// A NodeClaim's NodePool is gone.
    NodePoolGone {
        /// The NodePool.
        nodepool: String,
    },
    /// A NodePool's disruption budget allows fewer disruptions than the nodes it would lose.
    Budget {
        /// The NodePool.
        nodepool: String,
        /// How many disruptions its budgets allow now.
        allowed: u32,
        /// The budget as the NodePool states it; `None` when its schedule does not parse.
        why: String,
    },
    /// A pod would fit nowhere else.
    NoRoom {
        /// The pod.
        pod: PodKey,
        /// What ruled out each place.
        reason: Box<Unplaceable>,
    },
    /// Their pods would need more than one new machine.
    NeedsMachines(usize),
    /// No replacement is cheaper than the nodes together.
    NotCheaper {
        /// What the nodes cost together, per hour.
        price: Price,
    },
    /// Spot replaced by spot needs enough cheaper spot instance types to choose from.
    TooFewSpotTypes {
        /// How many there were.
        found: usize,
    },
    /// The saving over the payback horizon does not pay for the evictions.
    PaybackNotMet {
        /// The saving per hour.
        saving: Price,
        /// The horizon the saving is counted over.
        horizon_ms: u64,
        /// The saving over the horizon.
        earned_usd: f64,
        /// The pods moved.
        evictions: usize,
        /// What one eviction is priced at.
        per_eviction_usd: f64,
        /// Set when the work lost is counted.
        lost_work_usd: Option<f64>,
        /// What the evictions cost together.
        cost_usd: f64,
    },
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::Gone { nodeclaim, what } => write!(f, "NodeClaim {nodeclaim}: {what}"),
            Rejection::NodePoolGone { nodepool } => write!(f, "NodePool {nodepool} is gone"),
            Rejection::Budget {
                nodepool,
                allowed,
                why,
            } => write!(
                f,
                "NodePool {nodepool} allows {allowed} disruptions now: {why}"
            ),
            Rejection::NoRoom { pod, reason } => {
                write!(f, "pod {pod} would not fit elsewhere: {reason}")
            }
            Rejection::NeedsMachines(n) => write!(f, "their pods would need {n} new machines"),
            Rejection::NotCheaper { price } => write!(f, "no replacement is cheaper than {price}"),
            Rejection::TooFewSpotTypes { found } => write!(
                f,
                "spot-to-spot replacement needs {MIN_SPOT_TO_SPOT_OPTIONS} cheaper spot instance types, {found} exist"
            ),
            Rejection::PaybackNotMet {
                saving,
                horizon_ms,
                earned_usd,
                evictions,
                per_eviction_usd,
                lost_work_usd,
                cost_usd,
            } => {
                write!(
                    f,
                    "saving {saving} over {} is ${earned_usd:.4}, not more than {evictions} evictions × ${per_eviction_usd:.4}",
                    format_duration_ms(*horizon_ms)
                )?;
                if let Some(lost) = lost_work_usd {
                    write!(f, " + work lost ${lost:.4}")?;
                }
                write!(f, " = ${cost_usd:.4}")
            }
        }
    }
}

/// Simulates removing one node: its pods onto the rest of the cluster and at most one new
/// machine. `Err` says why it cannot be consolidated.
pub fn simulate(
    state: &ClusterState,
    shapes: &PoolShapes,
    config: &Config,
    leaving_to_finish: &BTreeSet<String>,
    nodeclaim: &str,
    now_ms: u64,
) -> Result<Decision, Rejection> {
    simulate_many(
        state,
        shapes,
        config,
        leaving_to_finish,
        &[nodeclaim.to_string()],
        now_ms,
    )
}

/// Simulates removing several nodes at once: all their pods onto the rest of the cluster and
/// at most one new machine, which must be cheaper than all of them together.
pub fn simulate_many(
    state: &ClusterState,
    shapes: &PoolShapes,
    config: &Config,
    leaving_to_finish: &BTreeSet<String>,
    nodeclaims: &[String],
    now_ms: u64,
) -> Result<Decision, Rejection> {
    let nodeclaims: Vec<&str> = nodeclaims.iter().map(String::as_str).collect();
    simulate_in(
        &ClusterView::new(state, shapes, config, now_ms),
        state,
        config,
        &BudgetsNow::new(state, config, leaving_to_finish, now_ms),
        &nodeclaims,
        now_ms,
    )
}

/// The nodes to take away, as a simulation reads them.
struct Removal<'a> {
    /// What they cost together per hour.
    price: Price,
    any_spot: bool,
    any_on_demand: bool,
    /// Their workload pods, to go elsewhere (as bound now: a solve reads no pod's node).
    pods: Vec<&'a Pod>,
    /// How many nodes each NodePool would lose.
    per_pool: BTreeMap<&'a str, u32>,
    /// What evicting their pods costs.
    eviction_cost: EvictionCost,
    /// Each node with its instance type and price: the decision's nodes and its detail.
    described: Vec<(&'a str, &'a str, Price)>,
    /// Their NodeClaims.
    nodeclaims: &'a [&'a str],
    /// Their NodeClaims as a set, made when a simulation first asks ([`Removal::removed`]):
    /// most candidates of a search are ruled out before.
    removed: std::cell::OnceCell<BTreeSet<String>>,
    /// Whether their NodePools' budgets allow it, with the budgets as stated: read once,
    /// before the solve and for the decision's detail.
    budgets: Result<Vec<String>, Rejection>,
}

impl<'a> Removal<'a> {
    /// What taking `nodeclaims` away means, its budgets checked as `budgets` reads them.
    fn of(
        state: &'a ClusterState,
        config: &Config,
        budgets: &BudgetsNow,
        nodeclaims: &'a [&'a str],
        now_ms: u64,
    ) -> Result<Self, Rejection> {
        let gone = |nodeclaim: &str, what| Rejection::Gone {
            nodeclaim: nodeclaim.to_string(),
            what,
        };
        let mut removal = Removal {
            price: Price(0),
            any_spot: false,
            any_on_demand: false,
            pods: Vec::new(),
            per_pool: BTreeMap::new(),
            eviction_cost: EvictionCost::default(),
            described: Vec::new(),
            nodeclaims,
            removed: std::cell::OnceCell::new(),
            budgets: Ok(Vec::new()),
        };
        for &nodeclaim in nodeclaims {
            let claim = state
                .nodeclaims
                .get(nodeclaim)
                .ok_or_else(|| gone(nodeclaim, "it is gone"))?;
            let node = claim
                .node_name
                .as_deref()
                .ok_or_else(|| gone(nodeclaim, "its node is gone"))?;
            let instance = claim
                .instance
                .as_ref()
                .ok_or_else(|| gone(nodeclaim, "it has no instance"))?;
            removal.price = Price(removal.price.0 + instance.price.0);
            removal.any_spot |= instance.capacity_type == CapacityType::Spot;
            removal.any_on_demand |= instance.capacity_type == CapacityType::OnDemand;
            removal
                .described
                .push((node, instance.instance_type.as_str(), instance.price));
            let movable = state.workload_pods_on_node(node);
            let evicting = (node, instance.price, movable.as_slice());
            add_evictions(&mut removal.eviction_cost, state, config, evicting, now_ms);
            removal.pods.extend(movable);
            *removal
                .per_pool
                .entry(claim.spec.nodepool.as_str())
                .or_insert(0) += 1;
        }
        removal.budgets = budgets.allow(&removal.per_pool);
        Ok(removal)
    }

    /// Their NodeClaims, as a solve reads them.
    fn removed(&self) -> &BTreeSet<String> {
        self.removed
            .get_or_init(|| self.nodeclaims.iter().map(|n| n.to_string()).collect())
    }
}

/// Counts into `cost`, pod by pod, evicting `pods` from `node`, whose machine costs `price`.
fn add_evictions(
    cost: &mut EvictionCost,
    state: &ClusterState,
    config: &Config,
    (node, price, pods): (&str, Price, &[&Pod]),
    now_ms: u64,
) {
    if let Some(on) = state.nodes.get(node) {
        for pod in pods {
            cost.add(config, pod, &on.node.allocatable, price, now_ms);
        }
    }
}

/// What a NodePool's budgets allow now, with the budget in words; or why none applies
/// ([`allowed_disruptions`]).
type AllowedNow = Result<(u32, String), String>;

/// What each NodePool's disruption budgets allow now, asked once per NodePool in a search
/// (every simulation of a search sees the same cluster at the same time).
struct BudgetsNow<'a> {
    state: &'a ClusterState,
    config: &'a Config,
    leaving_to_finish: &'a BTreeSet<String>,
    now_ms: u64,
    allowed: std::cell::RefCell<BTreeMap<String, AllowedNow>>,
}

impl<'a> BudgetsNow<'a> {
    fn new(
        state: &'a ClusterState,
        config: &'a Config,
        leaving_to_finish: &'a BTreeSet<String>,
        now_ms: u64,
    ) -> Self {
        BudgetsNow {
            state,
            config,
            leaving_to_finish,
            now_ms,
            allowed: std::cell::RefCell::new(BTreeMap::new()),
        }
    }

    /// [`budgets_allow`] for a removal, each pool's budget from the first time it was asked.
    fn allow(&self, per_pool: &BTreeMap<&str, u32>) -> Result<Vec<String>, Rejection> {
        budgets_allow(self.state, per_pool, |pool| {
            if let Some(allowed) = self.allowed.borrow().get(&pool.name) {
                return allowed.clone();
            }
            let allowed = allowed_disruptions(
                self.state,
                self.config,
                self.leaving_to_finish,
                pool,
                DisruptionReason::Underutilized,
                self.now_ms,
            );
            self.allowed
                .borrow_mut()
                .insert(pool.name.clone(), allowed.clone());
            allowed
        })
    }
}

/// Every NodePool involved must allow as many disruptions as it loses nodes. Returns the
/// budgets as stated, for the decision's detail.
fn budgets_allow(
    state: &ClusterState,
    per_pool: &BTreeMap<&str, u32>,
    mut allowed_now: impl FnMut(&NodePool) -> AllowedNow,
) -> Result<Vec<String>, Rejection> {
    let mut texts = Vec::new();
    for (&pool_name, &wanted) in per_pool {
        let pool = state
            .nodepools
            .get(pool_name)
            .ok_or_else(|| Rejection::NodePoolGone {
                nodepool: pool_name.to_string(),
            })?;
        let (allowed, text) = allowed_now(pool).map_err(|why| Rejection::Budget {
            nodepool: pool_name.to_string(),
            allowed: 0,
            why,
        })?;
        if allowed < wanted {
            return Err(Rejection::Budget {
                nodepool: pool_name.to_string(),
                allowed,
                why: text,
            });
        }
        texts.push(text);
    }
    Ok(texts)
}

/// [`simulate_many`] on a view of the cluster built once for the whole pass.
///
/// What needs no solve is checked first (the budgets; and whether a new machine that could
/// take the pods fitting nowhere else could cost less than the nodes at all), so that most
/// rejections cost no solve. Each check is one the full simulation fails too — it decides
/// nothing the simulation would not (debug builds, every test's, check that on each use).
fn simulate_in(
    view: &ClusterView,
    state: &ClusterState,
    config: &Config,
    budgets: &BudgetsNow,
    nodeclaims: &[&str],
    now_ms: u64,
) -> Result<Decision, Rejection> {
    let removal = Removal::of(state, config, budgets, nodeclaims, now_ms)?;
    if let Some(rejection) = ruled_out_before_solve(view, &removal) {
        debug_assert!(
            solved(view, state, config, nodeclaims, &removal, now_ms).is_err(),
            "ruled out before the solve ({rejection}), yet the simulation takes it"
        );
        return Err(rejection);
    }
    solved(view, state, config, nodeclaims, &removal, now_ms)
}

/// What a search asks of taking `nodeclaims` away (`costs` are theirs, in the same order): the
/// decision, if it is one. A search keeps no reason for a no, so besides what [`simulate_in`]
/// rules out before solving, it takes a sure no from the payback rule without solving — from
/// the candidates' own costs ([`surely_out_of_reach`]) before it reads the group's pods, and
/// from the group's ([`payback_out_of_reach`]) before it solves; debug builds check that the
/// simulation says no too.
fn decides(
    view: &SearchView,
    budgets: &BudgetsNow,
    nodeclaims: &[&str],
    costs: &[CandidateCost],
) -> Option<Decision> {
    let (state, config, now_ms) = (view.state, view.config, view.now_ms);
    if surely_out_of_reach(config, costs) {
        debug_assert!(
            Removal::of(state, config, budgets, nodeclaims, now_ms)
                .is_ok_and(|removal| payback_out_of_reach(config, &removal)),
            "the candidates' costs put the payback rule out of reach, the group's do not"
        );
        return None;
    }
    let removal = Removal::of(state, config, budgets, nodeclaims, now_ms).ok()?;
    let view = view.get();
    if payback_out_of_reach(config, &removal) {
        debug_assert!(
            solved(view, state, config, nodeclaims, &removal, now_ms).is_err(),
            "the payback rule is out of reach, yet the simulation takes it"
        );
        return None;
    }
    // A rejection, or a replacement that costs too much for the payback rule at the least.
    let before = before_solve(view, &removal);
    let sure_no = match before {
        Err(_) => true,
        Ok(Some(least)) => payback_out_of_reach_at(config, &removal, least),
        Ok(None) => false,
    };
    if sure_no {
        debug_assert!(
            solved(view, state, config, nodeclaims, &removal, now_ms).is_err(),
            "ruled out before the solve ({before:?}), yet the simulation takes it"
        );
        return None;
    }
    solved(view, state, config, nodeclaims, &removal, now_ms).ok()
}

/// Whether the payback rule fails whatever the simulation finds: the saving is at most the
/// nodes' whole price (no replacement), and even that over the horizon does not pay for the
/// evictions. Computed as [`solved`] computes what is earned, so that no rounding tells them
/// apart.
fn payback_out_of_reach(config: &Config, removal: &Removal) -> bool {
    payback_out_of_reach_at(config, removal, Price(0))
}

/// Whether the payback rule fails for any replacement that costs at least `least` (below the
/// nodes' price): the saving is at most the nodes' price less `least`. Computed as [`solved`]
/// computes what is earned: a smaller saving earns no more over the same horizon.
fn payback_out_of_reach_at(config: &Config, removal: &Removal, least: Price) -> bool {
    let zero_rule =
        config.consolidation_payback_horizon_ms == 0 && config.eviction_cost_micro_usd == 0;
    if zero_rule {
        return false;
    }
    let eviction_cost = &removal.eviction_cost;
    let horizon_ms = eviction_cost.horizon_ms(config, config.consolidation_payback_horizon_ms);
    let horizon_h = horizon_ms as f64 / 3_600_000.0;
    let saving = Price(removal.price.0.saturating_sub(least.0));
    saving.usd_per_hour() * horizon_h <= eviction_cost.usd()
}

/// A rejection found without solving: a budget that does not allow it, or a new machine
/// that could not be cheaper.
fn ruled_out_before_solve(view: &ClusterView, removal: &Removal) -> Option<Rejection> {
    before_solve(view, removal).err()
}

/// What is known before solving: a rejection ([`ruled_out_before_solve`]), or the least the
/// one new machine the pods need can cost (`None`: they may need none).
fn before_solve(view: &ClusterView, removal: &Removal) -> Result<Option<Price>, Rejection> {
    if let Err(rejection) = &removal.budgets {
        return Err(rejection.clone());
    }
    // At most one new machine takes what the remaining nodes cannot: if no type it could be
    // costs less than the nodes, the replacement the solve would find is not cheaper either.
    let Some(needs) = view.new_machine_needs(&removal.pods, removal.removed()) else {
        return Ok(None);
    };
    match view.least_new_machine_price(&needs, removal.price) {
        Some(least) => Ok(Some(least)),
        None => Err(Rejection::NotCheaper {
            price: removal.price,
        }),
    }
}

/// The simulation itself: the pods solved onto the rest of the cluster and at most one new
/// machine, then the price, the payback rule and the budgets.
fn solved(
    view: &ClusterView,
    state: &ClusterState,
    config: &Config,
    nodeclaims: &[&str],
    removal: &Removal,
    now_ms: u64,
) -> Result<Decision, Rejection> {
    let price = removal.price;
    let result = view.solve(&removal.pods, removal.removed());
    if let Some((pod, reason)) = result.unschedulable.into_iter().next() {
        return Err(Rejection::NoRoom {
            pod,
            reason: Box::new(reason),
        });
    }
    if result.new_claims.len() > 1 {
        return Err(Rejection::NeedsMachines(result.new_claims.len()));
    }
    let (replacement, new_price) = match result.new_claims.into_iter().next() {
        None => (None, Price(0)),
        Some(planned) => {
            let (planned, cheapest) = cheaper_replacement(state, config, planned, removal, now_ms)?;
            (Some(planned), cheapest)
        }
    };
    let saving = Price(price.0 - new_price.0);
    let eviction_cost = &removal.eviction_cost;
    let evictions = removal.pods.len();
    // The payback rule: the saving over the horizon must exceed the cost of the evictions.
    let horizon_ms = eviction_cost.horizon_ms(config, config.consolidation_payback_horizon_ms);
    let horizon_h = horizon_ms as f64 / 3_600_000.0;
    let earned = saving.usd_per_hour() * horizon_h;
    let cost = eviction_cost.usd();
    // Both settings zero: no payback rule at all (Karpenter's), lost work or not.
    let zero_rule =
        config.consolidation_payback_horizon_ms == 0 && config.eviction_cost_micro_usd == 0;
    if !zero_rule && earned <= cost {
        // Work lost is said only where a pod whose work counts is evicted: others read as
        // they always did.
        return Err(Rejection::PaybackNotMet {
            saving,
            horizon_ms,
            earned_usd: earned,
            evictions,
            per_eviction_usd: config.eviction_cost_micro_usd as f64 / 1e6,
            lost_work_usd: eviction_cost
                .counts_lost_work
                .then_some(eviction_cost.lost_work_usd),
            cost_usd: cost,
        });
    }
    let budget_texts = removal.budgets.clone()?;
    let action = match (&replacement, nodeclaims.len()) {
        (None, 1) => "delete: its pods fit on the other nodes".to_string(),
        (None, _) => "delete: their pods fit on the other nodes".to_string(),
        (Some(_), _) => format!("replace with one machine from {new_price}"),
    };
    let detail = format!(
        "{} {} underutilized: {action}; saves {saving} (${earned:.4} over {}) for {} evictions (cost ${cost:.4}{}){}; {}",
        if nodeclaims.len() == 1 {
            "node"
        } else {
            "nodes"
        },
        removal
            .described
            .iter()
            .map(|(node, instance_type, price)| format!("{node} ({instance_type} at {price})"))
            .collect::<Vec<_>>()
            .join(", "),
        format_duration_ms(horizon_ms),
        evictions,
        if eviction_cost.counts_lost_work {
            format!(", of it work lost ${:.4}", eviction_cost.lost_work_usd)
        } else {
            String::new()
        },
        if zero_rule {
            ", payback rule off"
        } else {
            ", payback rule met"
        },
        budget_texts.join("; "),
    );
    Ok(Decision {
        nodeclaims: nodeclaims.iter().map(|n| n.to_string()).collect(),
        nodes: removal
            .described
            .iter()
            .map(|(node, _, _)| node.to_string())
            .collect(),
        replacement,
        saving,
        evictions,
        detail,
    })
}

/// The one new machine, narrowed to the offerings cheaper than the nodes it replaces (and, for
/// spot replacing spot, to the cheapest spot types), with its cheapest price.
fn cheaper_replacement(
    state: &ClusterState,
    config: &Config,
    mut planned: PlannedClaim,
    removal: &Removal,
    now_ms: u64,
) -> Result<(PlannedClaim, Price), Rejection> {
    let price = removal.price;
    let (any_spot, any_on_demand) = (removal.any_spot, removal.any_on_demand);
    let not_cheaper = || Rejection::NotCheaper { price };
    let prepared = state.catalog.as_deref().ok_or_else(not_cheaper)?;
    let is_spot = |o: &OfferingAt| {
        prepared.catalog.instance_types[o.t].offerings[o.o].capacity_type == CapacityType::Spot
    };
    let cheaper: Vec<OfferingAt> =
        launch_offerings(state, &planned, now_ms, config.max_instance_types)
            .into_iter()
            .filter(|o| o.price < price)
            .collect();
    let Some(cheapest_found) = cheaper.first().map(|o| o.price) else {
        return Err(not_cheaper());
    };
    // By catalog index: one per type.
    let spot_types: BTreeSet<usize> = cheaper.iter().filter(|o| is_spot(o)).map(|o| o.t).collect();
    if any_spot && !any_on_demand && spot_types.len() < MIN_SPOT_TO_SPOT_OPTIONS {
        return Err(Rejection::TooFewSpotTypes {
            found: spot_types.len(),
        });
    }
    // On-demand replaced by a machine that may be spot is pinned to spot.
    let pin_spot = any_on_demand && !spot_types.is_empty();
    let keep: BTreeSet<usize> = if pin_spot {
        spot_types
    } else {
        cheaper.iter().map(|o| o.t).collect()
    };
    if pin_spot {
        planned
            .requirements
            .add(crate::model::requirements::Requirement::single(
                crate::model::labels::CAPACITY_TYPE,
                "spot",
            ));
    }
    planned.types.retain(|t| keep.contains(t));
    let spot_to_spot = any_spot && !any_on_demand;
    if !pin_spot && !spot_to_spot && planned.min_values.is_empty() {
        // Nothing narrowed but to the types with a cheaper offering: the cheapest of those is
        // the cheapest offering found above (each type offers its cheapest as before).
        let cheapest = cheapest_found;
        debug_assert_eq!(
            launch_offerings(state, &planned, now_ms, config.max_instance_types)
                .into_iter()
                .find(|o| o.price < price)
                .map(|o| o.price),
            Some(cheapest),
            "the narrowed types launch at another price"
        );
        return Ok((planned, cheapest));
    }
    if spot_to_spot {
        // Spot-to-spot launches with the 15 cheapest spot types (Karpenter's rule).
        let cheapest: BTreeSet<usize> =
            launch_offerings(state, &planned, now_ms, MIN_SPOT_TO_SPOT_OPTIONS)
                .into_iter()
                .map(|o| o.t)
                .collect();
        planned.types.retain(|t| cheapest.contains(t));
    }
    let cheapest = launch_offerings(state, &planned, now_ms, config.max_instance_types)
        .into_iter()
        .find(|o| o.price < price)
        .map(|o| o.price)
        .ok_or_else(not_cheaper)?;
    Ok((planned, cheapest))
}

/// One consolidation search: multi-node first, then single-node, over one list of candidates
/// and one view of the cluster. Returns the decision, and the earliest time another node
/// becomes a candidate.
pub fn search(
    state: &ClusterState,
    shapes: &PoolShapes,
    config: &Config,
    nominated: &BTreeSet<String>,
    leaving_to_finish: &BTreeSet<String>,
    now_ms: u64,
) -> (Option<Decision>, Option<u64>) {
    if state.pending_pods().next().is_some() {
        // Pods are waiting for capacity: no node is taken away meanwhile.
        return (None, None);
    }
    let (names, costs, next) = candidates(state, config, nominated, now_ms);
    if names.is_empty() {
        return (None, next);
    }
    let view = SearchView {
        state,
        shapes,
        config,
        now_ms,
        built: std::cell::OnceCell::new(),
    };
    let budgets = BudgetsNow::new(state, config, leaving_to_finish, now_ms);
    if let Some(decision) = multi_node(&view, &budgets, &names, &costs) {
        return (Some(decision), None);
    }
    (single_node(&view, &budgets, &names, &costs), next)
}

/// The cluster view a search solves on, built when a group first gets past the payback rule's
/// sure no: in most searches none does.
struct SearchView<'a> {
    state: &'a ClusterState,
    shapes: &'a PoolShapes,
    config: &'a Config,
    now_ms: u64,
    built: std::cell::OnceCell<ClusterView<'a>>,
}

impl<'a> SearchView<'a> {
    fn get(&self) -> &ClusterView<'a> {
        self.built
            .get_or_init(|| ClusterView::new(self.state, self.shapes, self.config, self.now_ms))
    }
}

/// What one candidate brings to a group the search tries: its price and what evicting its pods
/// costs, read once per search (the search tries each candidate in many groups), as
/// [`Removal::of`] reads each of its nodes.
#[derive(Debug, Clone, Copy)]
struct CandidateCost {
    price: Price,
    eviction_cost: EvictionCost,
}

/// How far apart summing the eviction costs node by node and pod by pod may be, relatively, at
/// most: a few roundings of a sum of some hundred terms are far below it.
const SUMMING_MARGIN: f64 = 1e-9;

/// Whether the payback rule fails for the group of `costs` whatever the simulation finds, from
/// the candidates' costs summed node by node. It says so only with [`SUMMING_MARGIN`] to spare,
/// so that wherever it does, [`payback_out_of_reach`] (summed pod by pod) does too.
fn surely_out_of_reach(config: &Config, costs: &[CandidateCost]) -> bool {
    let zero_rule =
        config.consolidation_payback_horizon_ms == 0 && config.eviction_cost_micro_usd == 0;
    if zero_rule {
        return false;
    }
    let mut price = 0u64;
    let mut eviction_cost = EvictionCost::default();
    for cost in costs {
        price += cost.price.0;
        eviction_cost = eviction_cost.join(&cost.eviction_cost);
    }
    let horizon_ms = eviction_cost.horizon_ms(config, config.consolidation_payback_horizon_ms);
    let horizon_h = horizon_ms as f64 / 3_600_000.0;
    Price(price).usd_per_hour() * horizon_h < eviction_cost.usd() * (1.0 - SUMMING_MARGIN)
}

/// Multi-node consolidation: the largest prefix (at least two) of the first 100 candidates
/// that can go together, found by binary search.
fn multi_node(
    view: &SearchView,
    budgets: &BudgetsNow,
    candidates: &[&str],
    costs: &[CandidateCost],
) -> Option<Decision> {
    let names = &candidates[..candidates.len().min(MAX_MULTI_NODE_CANDIDATES)];
    if names.len() < 2 {
        return None;
    }
    let (mut lo, mut hi) = (2usize, names.len());
    let mut best = None;
    while lo <= hi {
        let mid = (lo + hi) / 2;
        match decides(view, budgets, &names[..mid], &costs[..mid]) {
            Some(d) => {
                best = Some(d);
                lo = mid + 1;
            }
            None => hi = mid - 1,
        }
    }
    best
}

/// The first node (cheapest to disrupt) that can be consolidated now.
fn single_node(
    view: &SearchView,
    budgets: &BudgetsNow,
    candidates: &[&str],
    costs: &[CandidateCost],
) -> Option<Decision> {
    candidates.iter().zip(costs).find_map(|(nodeclaim, cost)| {
        decides(
            view,
            budgets,
            std::slice::from_ref(nodeclaim),
            std::slice::from_ref(cost),
        )
    })
}
