//! `nodewright aws check`: resolves everything a launch would need — subnets, security groups,
//! AMIs, the instance types a NodePool allows and where, the interruption queue — and says
//! which selector matched nothing and how to fix it. Karpenter's users most often fail here:
//! a node class whose selectors find nothing launches nothing, silently.

use std::collections::{BTreeMap, BTreeSet};

use nodewright_core::catalog::Catalog;
use nodewright_core::model::nodeclass::{NodeClass, ResolvedNodeClass};
use nodewright_core::model::nodepool::NodePool;
use nodewright_core::provisioning::launch::offering_allowed;
use serde::Serialize;

use crate::resolve::{Resolution, TermMatch};

/// The check's findings, as printed (and as `--json`).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub region: String,
    pub nodeclass: String,
    pub subnets: Vec<SubnetLine>,
    pub security_groups: Vec<GroupLine>,
    pub amis: Vec<AmiLine>,
    pub terms: Vec<TermLine>,
    pub nodepools: Vec<PoolLine>,
    pub queue: Option<QueueLine>,
    /// What must be fixed before a launch can work; empty when all is well.
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SubnetLine {
    pub id: String,
    pub zone: String,
    pub available_ip_addresses: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct GroupLine {
    pub id: String,
    pub name: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct AmiLine {
    pub id: String,
    pub name: String,
    pub architecture: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct TermLine {
    pub field: String,
    pub term: String,
    pub matched: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct PoolLine {
    pub nodepool: String,
    /// Instance types the NodePool allows that can launch here (an AMI for their
    /// architecture, an offering in a zone with a subnet).
    pub instance_types: usize,
    pub zones: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueueLine {
    pub name: String,
    pub url: Option<String>,
    pub error: Option<String>,
}

impl From<&TermMatch> for TermLine {
    fn from(t: &TermMatch) -> Self {
        TermLine {
            field: t.field.clone(),
            term: t.term.clone(),
            matched: t.matched,
        }
    }
}

/// What a NodePool can launch with a resolved node class.
pub fn pool_line(pool: &NodePool, resolved: &ResolvedNodeClass, catalog: &Catalog) -> PoolLine {
    let reqs = pool.template_requirements();
    let subnet_zones = resolved.zones();
    let archs: BTreeSet<&str> = resolved
        .amis
        .iter()
        .map(|a| a.architecture.as_str())
        .collect();
    let mut zones = BTreeSet::new();
    let mut count = 0;
    for it in &catalog.instance_types {
        if !archs.contains(it.architecture.as_str()) || reqs.compatible(&it.requirements()).is_err()
        {
            continue;
        }
        let here: Vec<&str> = it
            .offerings
            .iter()
            .filter(|o| subnet_zones.contains(o.zone.as_str()))
            .filter(|o| offering_allowed(&reqs, &o.zone, o.capacity_type.as_str()))
            .map(|o| o.zone.as_str())
            .collect();
        if !here.is_empty() {
            count += 1;
            zones.extend(here);
        }
    }
    PoolLine {
        nodepool: pool.name.clone(),
        instance_types: count,
        zones: zones.into_iter().map(str::to_string).collect(),
    }
}

impl Report {
    /// The report of one resolution; pools and the queue are added by the caller.
    pub fn new(region: &str, class: &NodeClass, resolution: &Resolution) -> Report {
        let r = &resolution.resolved;
        let mut problems = Vec::new();
        if let Err(e) = resolution.check() {
            problems.push(e.to_string());
        }
        for t in &resolution.terms {
            if t.matched == 0 {
                problems.push(format!(
                    "EC2NodeClass {}: {} ({}) matches nothing; fix: correct or remove the term",
                    class.name, t.field, t.term
                ));
            }
        }
        problems.dedup();
        Report {
            region: region.to_string(),
            nodeclass: class.name.clone(),
            subnets: r
                .subnets
                .iter()
                .map(|s| SubnetLine {
                    id: s.id.clone(),
                    zone: s.zone.clone(),
                    available_ip_addresses: s.available_ip_addresses,
                })
                .collect(),
            security_groups: r
                .security_groups
                .iter()
                .map(|g| GroupLine {
                    id: g.id.clone(),
                    name: g.name.clone(),
                })
                .collect(),
            amis: r
                .amis
                .iter()
                .map(|a| AmiLine {
                    id: a.id.clone(),
                    name: a.name.clone(),
                    architecture: a.architecture.clone(),
                })
                .collect(),
            terms: resolution.terms.iter().map(TermLine::from).collect(),
            nodepools: Vec::new(),
            queue: None,
            problems,
        }
    }

    pub fn add_pool(&mut self, line: PoolLine) {
        if line.instance_types == 0 {
            self.problems.push(format!(
                "NodePool {}: allows no instance type that can launch with EC2NodeClass {} (zones with a subnet, AMI architectures); fix: widen spec.template.spec.requirements or the node class's selectors",
                line.nodepool, self.nodeclass
            ));
        }
        self.nodepools.push(line);
    }

    pub fn set_queue(&mut self, line: QueueLine) {
        if let Some(e) = &line.error {
            self.problems
                .push(format!("interruption queue {}: {e}", line.name));
        }
        self.queue = Some(line);
    }

    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// The text for people.
    pub fn render(&self) -> String {
        let mut out = format!("EC2NodeClass {} in {}\n", self.nodeclass, self.region);
        out.push_str(&format!("subnets ({}):\n", self.subnets.len()));
        for s in &self.subnets {
            out.push_str(&format!(
                "  {}  {}  {} free addresses\n",
                s.id, s.zone, s.available_ip_addresses
            ));
        }
        out.push_str(&format!(
            "security groups ({}):\n",
            self.security_groups.len()
        ));
        for g in &self.security_groups {
            out.push_str(&format!("  {}  {}\n", g.id, g.name));
        }
        out.push_str(&format!("AMIs ({}):\n", self.amis.len()));
        for a in &self.amis {
            out.push_str(&format!("  {}  {}  {}\n", a.id, a.architecture, a.name));
        }
        out.push_str("selector terms:\n");
        for t in &self.terms {
            out.push_str(&format!(
                "  {}  {}  → {} matched\n",
                t.field, t.term, t.matched
            ));
        }
        for p in &self.nodepools {
            out.push_str(&format!(
                "NodePool {}: {} instance types in {}\n",
                p.nodepool,
                p.instance_types,
                if p.zones.is_empty() {
                    "no zone".to_string()
                } else {
                    p.zones.join(", ")
                }
            ));
        }
        if let Some(q) = &self.queue {
            match (&q.url, &q.error) {
                (Some(url), _) => out.push_str(&format!("interruption queue {}: {url}\n", q.name)),
                (None, Some(e)) => out.push_str(&format!("interruption queue {}: {e}\n", q.name)),
                _ => {}
            }
        }
        if self.ok() {
            out.push_str("ok: a launch has what it needs\n");
        } else {
            for p in &self.problems {
                out.push_str(&format!("problem: {p}\n"));
            }
        }
        out
    }
}

/// Pools grouped by the node class they name.
pub fn pools_of<'a>(pools: &'a [NodePool], class: &str) -> Vec<&'a NodePool> {
    let by: BTreeMap<&str, &NodePool> = pools
        .iter()
        .filter(|p| p.node_class_ref.name == class)
        .map(|p| (p.name.as_str(), p))
        .collect();
    by.into_values().collect()
}
