//! From a scenario file to a checked [`Scenario`]: every duration parsed, every manifest
//! translated, every instance type and zone known. Errors name the file, the field and the fix.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nodewright_adapters::manifest::{Manifest, parse_manifests_noting};
use nodewright_core::Config;
use nodewright_core::catalog::{CapacityType, Catalog, builtin as catalogs};
use nodewright_core::config::LostWork;
use nodewright_core::model::duration::parse_duration_ms;

use super::format::*;
use super::model::*;

/// Where `file:` manifests come from.
pub trait ManifestFiles {
    fn read(&self, relative: &str) -> Result<(String, String), ScenarioError>;
}

/// No file can be read: for a scenario given as text that names none (a `file:` manifest is
/// then an error like any other).
pub struct NoFiles;

impl ManifestFiles for NoFiles {
    fn read(&self, relative: &str) -> Result<(String, String), ScenarioError> {
        Err(ScenarioError::Io {
            file: relative.to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "a scenario given as text reads no file",
            ),
        })
    }
}

pub(crate) struct Directory(pub(crate) PathBuf);

impl ManifestFiles for Directory {
    fn read(&self, relative: &str) -> Result<(String, String), ScenarioError> {
        let path = self.0.join(relative);
        let shown = path.display().to_string();
        std::fs::read_to_string(&path)
            .map(|text| (shown.clone(), text))
            .map_err(|source| ScenarioError::Io {
                file: shown,
                source,
            })
    }
}

/// The longest run nodewright simulates (a month of simulated time).
pub const MAX_DURATION_MS: u64 = 31 * 24 * 3_600_000;
const MAX_DURATION_TEXT: &str = "744h (31 days)";

/// The most existing nodes (`cluster.nodes[].count`, all groups together): the consolidation
/// benchmark's largest cluster.
pub const MAX_EXISTING_NODES: u64 = 10_000;

/// The most instances one capacity reservation of a scenario holds.
pub const MAX_RESERVED_INSTANCES: u32 = 10_000;
/// The account the simulated cloud's reservations belong to when a scenario names none (the
/// account of the simulated EventBridge messages).
const SIMULATED_ACCOUNT: &str = "123456789012";

pub use nodewright_adapters::manifest::MAX_REPLICAS;

/// The most pods a scenario may hold at once, all workloads together: twice the scheduling
/// benchmark's largest run.
pub const MAX_PODS: u64 = 200_000;

/// The most pods the scenario's workloads can hold at once: each Deployment, ReplicaSet and
/// StatefulSet at the most replicas it is ever given (applied or scaled), each Job and
/// CronJob at its parallelism, each bare pod. With the three largest, for the message.
fn peak_pods(manifests: &[Manifest], timeline: &[TimelineAction]) -> (u64, Vec<(String, u64)>) {
    let mut by_workload: BTreeMap<(&'static str, String, String), u64> = BTreeMap::new();
    let mut count = |kind: &'static str, ns: &str, name: &str, pods: u64| {
        let entry = by_workload
            .entry((kind, ns.to_string(), name.to_string()))
            .or_default();
        *entry = (*entry).max(pods);
    };
    let applied = manifests
        .iter()
        .chain(timeline.iter().flat_map(|t| match &t.action {
            Action::Apply(m) => m.as_slice(),
            _ => &[],
        }));
    for m in applied {
        match m {
            Manifest::Deployment(d) => {
                count("Deployment", &d.namespace, &d.name, d.replicas as u64)
            }
            Manifest::Job(j) => count(
                "Job",
                &j.namespace,
                &j.name,
                j.parallelism.min(j.completions) as u64,
            ),
            Manifest::CronJob(c) => count(
                "CronJob",
                &c.namespace,
                &c.name,
                c.job.parallelism.min(c.job.completions) as u64,
            ),
            Manifest::Pod(p) => count("Pod", &p.pod.key.namespace, &p.pod.key.name, 1),
            _ => {}
        }
    }
    for t in timeline {
        if let Action::Scale {
            namespace,
            deployment,
            replicas,
        } = &t.action
        {
            count("Deployment", namespace, deployment, *replicas as u64);
        }
    }
    let total = by_workload.values().sum();
    let mut largest: Vec<(String, u64)> = by_workload
        .into_iter()
        .filter(|((kind, _, _), _)| *kind != "Pod")
        .map(|((kind, ns, name), pods)| (format!("{kind} {ns}/{name}"), pods))
        .collect();
    largest.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    largest.truncate(3);
    (total, largest)
}

/// Loads a scenario file; `file:` manifests are read relative to it.
pub fn load_file(path: &Path) -> Result<Scenario, ScenarioError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
        file: shown.clone(),
        source,
    })?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    load_str(&text, &shown, &Directory(dir))
}

/// Loads a scenario from text; `file_name` names it in errors.
pub fn load_str(
    text: &str,
    file_name: &str,
    files: &dyn ManifestFiles,
) -> Result<Scenario, ScenarioError> {
    let raw: ScenarioFile = serde_saphyr::from_str(text).map_err(|e| ScenarioError::Yaml {
        file: file_name.to_string(),
        message: nodewright_adapters::manifest::describe_yaml_error(&e, file_name, 1),
    })?;
    let invalid =
        |field: &str, problem: String, fix: &str| invalid_field(file_name, field, problem, fix);
    let duration = |field: &str, text: &str| duration_field(file_name, field, text);

    let region = raw
        .region
        .clone()
        .unwrap_or_else(|| "us-east-1".to_string());
    let catalog = match region.as_str() {
        "us-east-1" => Some(crate::us_east_1_catalog()),
        other => catalogs::for_region(other).map(|c| std::sync::Arc::new(c.normalized())),
    }
    .ok_or_else(|| {
        invalid(
            "region",
            format!("no built-in catalog for {region:?}"),
            "use region: us-east-1",
        )
    })?;
    let seed = raw.seed.unwrap_or(1);
    let duration_ms = duration("duration", raw.duration.as_deref().unwrap_or("30m"))?;
    if duration_ms == 0 {
        return Err(invalid(
            "duration",
            "is zero".into(),
            "give the run a length such as 30m",
        ));
    }
    if duration_ms > MAX_DURATION_MS {
        return Err(invalid(
            "duration",
            format!(
                "is {}, above the longest run nodewright simulates ({})",
                raw.duration.as_deref().unwrap_or_default(),
                MAX_DURATION_TEXT
            ),
            &format!("give at most {MAX_DURATION_TEXT}"),
        ));
    }

    let mut config = Config {
        seed,
        ..Config::default()
    };
    if let Some(settings) = &raw.settings {
        apply_settings(&mut config, settings, file_name)?;
    }

    let zones: Vec<String> = {
        let mut z: Vec<String> = catalog
            .instance_types
            .iter()
            .flat_map(|it| it.offerings.iter().map(|o| o.zone.clone()))
            .collect();
        z.sort();
        z.dedup();
        z
    };
    let latency = |field: &str, value: &Option<LatencyFile>, default_ms: u64| match value {
        None => Ok(Latency {
            min_ms: default_ms,
            max_ms: default_ms,
        }),
        Some(LatencyFile::Fixed(d)) => {
            let ms = duration(field, d)?;
            Ok(Latency {
                min_ms: ms,
                max_ms: ms,
            })
        }
        Some(LatencyFile::Range { min, max }) => {
            let min_ms = duration(&format!("{field}.min"), min)?;
            let max_ms = duration(&format!("{field}.max"), max)?;
            if min_ms > max_ms {
                return Err(invalid(
                    field,
                    "min is above max".into(),
                    "swap min and max",
                ));
            }
            Ok(Latency { min_ms, max_ms })
        }
    };
    let cloud_file = raw.cloud.clone();
    let mut ice = Vec::new();
    for (i, w) in cloud_file
        .as_ref()
        .map(|c| c.insufficient_capacity.clone())
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let field = format!("cloud.insufficientCapacity[{i}]");
        for t in &w.instance_types {
            if catalog.get(t).is_none() {
                return Err(invalid(
                    &format!("{field}.instanceTypes"),
                    format!("{t:?} is not an instance type of {region}"),
                    "use a type of the built-in catalog, e.g. m5.large",
                ));
            }
        }
        for z in &w.zones {
            if !zones.contains(z) {
                return Err(invalid(
                    &format!("{field}.zones"),
                    format!("{z:?} is not a zone of {region}"),
                    &format!("use one of {}", zones.join(", ")),
                ));
            }
        }
        let capacity_type = match &w.capacity_type {
            None => None,
            Some(c) => Some(CapacityType::parse(c).ok_or_else(|| {
                invalid(
                    &format!("{field}.capacityType"),
                    format!("{c:?} is not a capacity type"),
                    "use spot, on-demand or reserved",
                )
            })?),
        };
        let from_ms = match &w.from {
            Some(d) => duration(&format!("{field}.from"), d)?,
            None => 0,
        };
        let until_ms = match &w.until {
            Some(d) => duration(&format!("{field}.until"), d)?,
            None => u64::MAX,
        };
        ice.push(IceWindow {
            instance_types: w.instance_types.clone(),
            zones: w.zones.clone(),
            capacity_type,
            from_ms,
            until_ms,
        });
    }
    let api_error_rate = cloud_file
        .as_ref()
        .and_then(|c| c.api_error_rate)
        .unwrap_or(0.0);
    if !(0.0..=1.0).contains(&api_error_rate) {
        return Err(invalid(
            "cloud.apiErrorRate",
            format!("{api_error_rate} is not a fraction"),
            "use a number between 0.0 and 1.0",
        ));
    }
    let mut launch_latency_spikes = Vec::new();
    for (i, spike) in cloud_file
        .as_ref()
        .map(|c| c.launch_latency_spikes.clone())
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let field = format!("cloud.launchLatencySpikes[{i}]");
        let from_ms = duration(&format!("{field}.from"), &spike.from)?;
        let until_ms = duration(&format!("{field}.until"), &spike.until)?;
        if until_ms <= from_ms {
            return Err(invalid(
                &format!("{field}.until"),
                "is not after from".into(),
                "give the window an end after its start",
            ));
        }
        let latency = latency(&format!("{field}.latency"), &Some(spike.latency.clone()), 0)?;
        launch_latency_spikes.push(LatencySpike {
            from_ms,
            until_ms,
            latency,
        });
    }
    let mut capacity_reservations: Vec<nodewright_core::catalog::CapacityReservation> = Vec::new();
    for (i, r) in cloud_file
        .as_ref()
        .map(|c| c.capacity_reservations.clone())
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let field = format!("cloud.capacityReservations[{i}]");
        let well_formed = r.id.strip_prefix("cr-").is_some_and(|rest| {
            !rest.is_empty() && rest.chars().all(|c| c.is_ascii_alphanumeric())
        });
        if !well_formed {
            return Err(invalid(
                &format!("{field}.id"),
                format!("{:?} is not a capacity reservation id", r.id),
                "write cr- and letters or digits, e.g. cr-0123456789abcdef0",
            ));
        }
        if capacity_reservations.iter().any(|c| c.id == r.id) {
            return Err(invalid(
                &format!("{field}.id"),
                format!("{:?} is given twice", r.id),
                "give each reservation its own id",
            ));
        }
        if catalog.get(&r.instance_type).is_none() {
            return Err(invalid(
                &format!("{field}.instanceType"),
                format!("{:?} is not an instance type of {region}", r.instance_type),
                "use a type of the built-in catalog, e.g. m5.large",
            ));
        }
        if !zones.contains(&r.zone) {
            return Err(invalid(
                &format!("{field}.zone"),
                format!("{:?} is not a zone of {region}", r.zone),
                &format!("use one of {}", zones.join(", ")),
            ));
        }
        if r.count == 0 || r.count > MAX_RESERVED_INSTANCES {
            return Err(invalid(
                &format!("{field}.count"),
                format!("{} is not between 1 and {MAX_RESERVED_INSTANCES}", r.count),
                "give the instances the reservation holds",
            ));
        }
        let kind = match r.kind.as_deref() {
            None | Some("default") => nodewright_core::catalog::ReservationKind::Default,
            Some("capacity-block") => nodewright_core::catalog::ReservationKind::CapacityBlock,
            Some(other) => {
                return Err(invalid(
                    &format!("{field}.type"),
                    format!("{other:?} is not a reservation type"),
                    "use default (an On-Demand Capacity Reservation) or capacity-block",
                ));
            }
        };
        capacity_reservations.push(nodewright_core::catalog::CapacityReservation {
            id: r.id,
            instance_type: r.instance_type,
            zone: r.zone,
            count: r.count,
            kind,
            owner_id: r.owner_id.unwrap_or_else(|| SIMULATED_ACCOUNT.to_string()),
            tags: r.tags,
        });
    }
    // EC2 describes the reservations with the catalog.
    let catalog = if capacity_reservations.is_empty() {
        catalog
    } else {
        std::sync::Arc::new(nodewright_core::catalog::Catalog {
            reservations: capacity_reservations.clone(),
            ..nodewright_core::catalog::Catalog::clone(&catalog)
        })
    };
    let cloud = CloudSpec {
        launch_latency: latency(
            "cloud.launchLatency",
            &cloud_file.as_ref().and_then(|c| c.launch_latency.clone()),
            40_000,
        )?,
        registration_latency: latency(
            "cloud.registrationLatency",
            &cloud_file
                .as_ref()
                .and_then(|c| c.registration_latency.clone()),
            20_000,
        )?,
        insufficient_capacity: ice,
        api_error_rate,
        launch_latency_spikes,
        capacity_reservations,
    };

    let mut existing_nodes = Vec::new();
    let mut existing_total: u64 = 0;
    for (i, group) in raw
        .cluster
        .as_ref()
        .map(|c| c.nodes.clone())
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let field = format!("cluster.nodes[{i}]");
        let count = group.count.unwrap_or(1);
        existing_total += u64::from(count);
        if existing_total > MAX_EXISTING_NODES {
            return Err(invalid(
                &format!("{field}.count"),
                format!(
                    "brings the cluster's existing nodes to {existing_total}, above the most nodewright simulates ({MAX_EXISTING_NODES})"
                ),
                &format!("give at most {MAX_EXISTING_NODES} existing nodes in all"),
            ));
        }
        if catalog.get(&group.instance_type).is_none() {
            return Err(invalid(
                &format!("{field}.instanceType"),
                format!(
                    "{:?} is not an instance type of {region}",
                    group.instance_type
                ),
                "use a type of the built-in catalog, e.g. m5.large",
            ));
        }
        if !zones.contains(&group.zone) {
            return Err(invalid(
                &format!("{field}.zone"),
                format!("{:?} is not a zone of {region}", group.zone),
                &format!("use one of {}", zones.join(", ")),
            ));
        }
        existing_nodes.push(ExistingNodeGroup {
            name: group.name,
            instance_type: group.instance_type,
            zone: group.zone,
            count,
            labels: group.labels,
        });
    }

    // Each object with the index of the `manifests` entry it came from (for the checks of
    // what the scenario names).
    let mut sourced: Vec<(usize, Manifest)> = Vec::new();
    let mut unmodelled = Vec::new();
    for (i, source) in raw.manifests.iter().enumerate() {
        let (name, text) = match source {
            ManifestSource::File { file } => files.read(file)?,
            ManifestSource::Inline(text) => (format!("{file_name} manifests[{i}]"), text.clone()),
        };
        let (manifests, notes) = parse_manifests_noting(&text, &name)?;
        sourced.extend(manifests.into_iter().map(|m| (i, m)));
        unmodelled.extend(notes);
    }

    let mut timeline = Vec::new();
    for (i, entry) in raw.timeline.iter().enumerate() {
        let field = format!("timeline[{i}]");
        let at_ms = duration(&format!("{field}.at"), &entry.at)?;
        let set = [
            entry.scale.is_some(),
            entry.delete.is_some(),
            entry.apply.is_some(),
            entry.interrupt.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if set != 1 {
            return Err(invalid(
                &field,
                format!("has {set} actions"),
                "give each timeline entry exactly one of scale, delete, apply, interrupt",
            ));
        }
        let action = if let Some(interrupt) = &entry.interrupt {
            let kind = match interrupt.kind.as_str() {
                "spot-interruption" => InterruptKind::SpotInterruption,
                "rebalance" => InterruptKind::Rebalance,
                "scheduled-change" => InterruptKind::ScheduledChange(
                    interrupt
                        .detail
                        .clone()
                        .unwrap_or_else(|| "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED".into()),
                ),
                "state-change" => InterruptKind::StateChange(
                    interrupt
                        .detail
                        .clone()
                        .unwrap_or_else(|| "terminated".into()),
                ),
                other => {
                    return Err(invalid(
                        &format!("{field}.interrupt.kind"),
                        format!("{other:?} is not an interruption kind"),
                        "use one of spot-interruption, rebalance, scheduled-change, state-change",
                    ));
                }
            };
            let target = match interrupt.node.as_str() {
                "any" => InterruptTarget::Any,
                "any-spot" => InterruptTarget::AnySpot,
                "" => {
                    return Err(invalid(
                        &format!("{field}.interrupt.node"),
                        "is empty".to_string(),
                        "write any, any-spot, or the name of a NodeClaim",
                    ));
                }
                name => InterruptTarget::NodeClaim(name.to_string()),
            };
            let storm = match (interrupt.fraction, &interrupt.over) {
                (None, None) => None,
                (Some(fraction), over) => {
                    if !(fraction > 0.0 && fraction <= 1.0) {
                        return Err(invalid(
                            &format!("{field}.interrupt.fraction"),
                            format!("{fraction} is not in (0, 1]"),
                            "write the share of machines to interrupt, e.g. 0.3 for 30 %",
                        ));
                    }
                    let over_ms = match over {
                        Some(text) => duration(&format!("{field}.interrupt.over"), text)?,
                        None => 0,
                    };
                    Some(Storm { fraction, over_ms })
                }
                (None, Some(_)) => {
                    return Err(invalid(
                        &format!("{field}.interrupt.over"),
                        "is set without fraction".to_string(),
                        "add fraction (the share of machines to interrupt) or remove over",
                    ));
                }
            };
            Action::Interrupt {
                kind,
                target,
                storm,
            }
        } else if let Some(scale) = &entry.scale {
            if scale.replicas < 0 {
                return Err(invalid(
                    &format!("{field}.scale.replicas"),
                    format!("{} is negative", scale.replicas),
                    "scale to 0 or more replicas",
                ));
            }
            if scale.replicas > MAX_REPLICAS {
                return Err(invalid(
                    &format!("{field}.scale.replicas"),
                    format!(
                        "{} is above the most nodewright simulates, {MAX_REPLICAS}",
                        scale.replicas
                    ),
                    &format!("scale to at most {MAX_REPLICAS} replicas"),
                ));
            }
            Action::Scale {
                namespace: scale.namespace.clone().unwrap_or_else(|| "default".into()),
                deployment: scale.deployment.clone(),
                replicas: scale.replicas as u32,
            }
        } else if let Some(delete) = &entry.delete {
            let Some(kind) = DeleteKind::parse(&delete.kind) else {
                let known: Vec<&str> = DeleteKind::ALL.iter().map(|k| k.as_str()).collect();
                return Err(invalid(
                    &format!("{field}.delete.kind"),
                    format!("{:?} cannot be deleted in a scenario", delete.kind),
                    &format!("use one of {}", known.join(", ")),
                ));
            };
            Action::Delete {
                kind,
                namespace: delete.namespace.clone().unwrap_or_else(|| "default".into()),
                name: delete.name.clone(),
            }
        } else {
            let text = entry.apply.clone().unwrap_or_default();
            let (manifests, notes) =
                parse_manifests_noting(&text, &format!("{file_name} {field}.apply"))?;
            unmodelled.extend(notes);
            Action::Apply(manifests)
        };
        timeline.push((i, TimelineAction { at_ms, action }));
    }
    // In time order; entries at the same time keep their file order.
    timeline.sort_by_key(|(_, t)| t.at_ms);
    super::references::check(
        file_name,
        &sourced,
        &timeline.iter().map(|(i, t)| (*i, t)).collect::<Vec<_>>(),
    )?;
    let timeline: Vec<TimelineAction> = timeline.into_iter().map(|(_, t)| t).collect();
    let manifests: Vec<Manifest> = sourced.into_iter().map(|(_, m)| m).collect();
    let (pods, largest) = peak_pods(&manifests, &timeline);
    if pods > MAX_PODS {
        let shown: Vec<String> = largest
            .iter()
            .map(|(what, n)| format!("{what} {n}"))
            .collect();
        return Err(invalid(
            "manifests",
            format!(
                "the workloads can hold {pods} pods at once (the largest: {}), above the most nodewright simulates, {MAX_PODS}",
                shown.join(", ")
            ),
            &format!("keep the replicas of all workloads together at {MAX_PODS} or fewer"),
        ));
    }

    let mut expectations = Vec::new();
    for (i, e) in raw.expect.iter().enumerate() {
        let field = format!("expect[{i}]");
        let mut found = Vec::new();
        if let Some(d) = &e.pods_scheduled_within {
            found.push(Expectation::PodsScheduledWithin(duration(
                &format!("{field}.podsScheduledWithin"),
                d,
            )?));
        }
        if let Some(n) = e.max_nodes {
            found.push(Expectation::MaxNodes(n));
        }
        if let Some(n) = e.final_nodes {
            found.push(Expectation::FinalNodes(n));
        }
        if let Some(c) = e.max_cost_per_hour {
            found.push(Expectation::MaxCostPerHour(c));
        }
        if let Some(n) = e.max_disruptions {
            found.push(Expectation::MaxDisruptions(n));
        }
        if let Some(pods) = &e.unschedulable {
            found.push(Expectation::Unschedulable(pods.clone()));
        }
        match e.placement_honours_constraints {
            Some(true) => found.push(Expectation::PlacementHonoured),
            Some(false) => {
                return Err(invalid(
                    &format!("{field}.placementHonoursConstraints"),
                    "is false".into(),
                    "write `placementHonoursConstraints: true`, or leave the assertion out",
                ));
            }
            None => {}
        }
        if found.len() != 1 {
            return Err(invalid(
                &field,
                format!("has {} assertions", found.len()),
                "write one assertion per list item, e.g. `- maxNodes: 4`",
            ));
        }
        expectations.extend(found);
    }

    let warnings = unlaunchable_pools(&catalog, &manifests, &timeline);
    Ok(Scenario {
        name: raw.name,
        description: raw.description.unwrap_or_default().trim().to_string(),
        region,
        seed,
        duration_ms,
        config,
        catalog,
        cloud,
        existing_nodes,
        manifests,
        timeline,
        expectations,
        warnings,
        unmodelled,
    })
}

/// NodePools that require an operating system their EC2NodeClass's machines do not run (a
/// Windows NodePool on an AL2023 class, say): they launch nothing, and the run says why at load.
/// A class's OS is its AMI family's; the catalog's types run either (Windows on amd64 only).
fn unlaunchable_pools(
    catalog: &Catalog,
    manifests: &[Manifest],
    timeline: &[TimelineAction],
) -> Vec<String> {
    use nodewright_core::model::labels;
    let applied: Vec<&Manifest> = timeline
        .iter()
        .flat_map(|t| match &t.action {
            Action::Apply(applied) => applied.as_slice(),
            _ => &[],
        })
        .collect();
    let all = || manifests.iter().chain(applied.iter().copied());
    let class_of = |name: &str| {
        all().find_map(|m| match m {
            Manifest::NodeClass(class) if class.name == name => Some(class),
            _ => None,
        })
    };
    let mut warned = std::collections::BTreeSet::new();
    all()
        .filter_map(|m| match m {
            Manifest::NodePool(pool) => Some(pool),
            _ => None,
        })
        .filter_map(|pool| {
            let requirements = pool.template_requirements();
            let os = requirements.get(labels::OS)?;
            let class = class_of(&pool.node_class_ref.name)?;
            let class_os = class.os();
            let runs = catalog.instance_types.iter().any(|it| {
                it.labels_under(class_os)
                    .get(labels::OS)
                    .is_some_and(|v| os.has(v))
            });
            (!runs && warned.insert(pool.name.clone())).then(|| {
                format!(
                    "NodePool {:?} requires {os}, and its EC2NodeClass {:?} runs {} (its AMI family): it launches nothing; give it a class of a {} AMI family",
                    pool.name,
                    class.name,
                    class_os.as_str(),
                    if class_os.as_str() == "linux" { "Windows" } else { "Linux" },
                )
            })
        })
        .collect()
}

/// Manifest files held in memory (the built-in scenarios).
pub struct Embedded(pub &'static [(&'static str, &'static str)]);

impl ManifestFiles for Embedded {
    fn read(&self, relative: &str) -> Result<(String, String), ScenarioError> {
        self.0
            .iter()
            .find(|(name, _)| *name == relative)
            .map(|(name, text)| (format!("built-in {name}"), text.to_string()))
            .ok_or_else(|| ScenarioError::Io {
                file: relative.to_string(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a built-in file"),
            })
    }
}

/// A Go duration in a field of `file_name`, in milliseconds.
fn duration_field(file_name: &str, field: &str, text: &str) -> Result<u64, ScenarioError> {
    parse_duration_ms(text).map_err(|e| {
        invalid_field(
            file_name,
            field,
            e.to_string(),
            "write a Go duration such as 90s, 5m or 1h30m",
        )
    })
}

/// Puts a `settings` block (Karpenter's settings, as a scenario or a `--policy` file writes
/// them) into `config`; `file_name` names the file in errors.
pub fn apply_settings(
    config: &mut Config,
    settings: &SettingsFile,
    file_name: &str,
) -> Result<(), ScenarioError> {
    let invalid =
        |field: &str, problem: String, fix: &str| invalid_field(file_name, field, problem, fix);
    let duration = |field: &str, text: &str| duration_field(file_name, field, text);
    if let Some(d) = &settings.batch_idle_duration {
        config.batch_idle_ms = duration("settings.batchIdleDuration", d)?;
    }
    if let Some(d) = &settings.batch_max_duration {
        config.batch_max_ms = duration("settings.batchMaxDuration", d)?;
    }
    if let Some(name) = &settings.cluster_name {
        config.cluster_name = name.clone();
    }
    if let Some(n) = settings.reserved_enis {
        config.reserved_enis = n;
    }
    if let Some(p) = settings.vm_memory_overhead_percent {
        if !(0.0..100.0).contains(&p) {
            return Err(invalid(
                "settings.vmMemoryOverheadPercent",
                format!("{p} is not a fraction"),
                "use a value between 0 and 1 (Karpenter's default is 0.075)",
            ));
        }
        // Karpenter's setting is a fraction (0.075 = 7.5 %).
        config.vm_memory_overhead_per_mille = (p * 1000.0).round() as u32;
    }
    if let Some(p) = &settings.preference_policy {
        config.preference_policy = match p.as_str() {
            "Respect" => nodewright_core::config::PreferencePolicy::Respect,
            "Ignore" => nodewright_core::config::PreferencePolicy::Ignore,
            other => {
                return Err(invalid(
                    "settings.preferencePolicy",
                    format!("unknown policy {other:?}"),
                    "use Respect or Ignore",
                ));
            }
        };
    }
    if let Some(p) = &settings.min_values_policy {
        config.min_values_policy = match p.as_str() {
            "Strict" => nodewright_core::config::MinValuesPolicy::Strict,
            "BestEffort" => nodewright_core::config::MinValuesPolicy::BestEffort,
            other => {
                return Err(invalid(
                    "settings.minValuesPolicy",
                    format!("unknown policy {other:?}"),
                    "use Strict or BestEffort",
                ));
            }
        };
    }
    if let Some(d) = &settings.sibling_hold_duration {
        config.sibling_hold_ms = duration("settings.siblingHoldDuration", d)?;
    }
    if settings.count_lost_work.is_some() || settings.count_lost_work_of_unreplicated_pods.is_some()
    {
        // A switch not given keeps what the configuration had (a recording's, in a what-if).
        let was = config.count_lost_work;
        config.count_lost_work = LostWork::from_switches(
            settings.count_lost_work.unwrap_or(was.is_on()),
            settings
                .count_lost_work_of_unreplicated_pods
                .unwrap_or(was != LostWork::Jobs),
        );
    }
    if let Some(separate) = settings.separate_machines_when_cheaper {
        config.separate_when_cheaper = separate;
    }
    if let Some(waits) = settings.expiration_waits_for_jobs {
        config.expiration_waits_for_jobs = waits;
    }
    if config.batch_idle_ms > config.batch_max_ms {
        return Err(invalid(
            "settings.batchIdleDuration",
            "is longer than batchMaxDuration".into(),
            "keep batchIdleDuration at most batchMaxDuration (defaults 1s and 10s)",
        ));
    }
    Ok(())
}
