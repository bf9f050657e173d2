//! What a scenario names must exist: the Deployment a timeline entry scales and the object it
//! deletes exist at that time, each NodePool's `nodeClassRef` names an EC2NodeClass of the
//! scenario, and no two of its starting objects of one kind share a name. Checked at load, so
//! that a typo is an error naming the field (with the name it was probably meant to be), not a
//! run that quietly does nothing.

use std::collections::BTreeMap;

use nodewright_adapters::manifest::Manifest;

use super::model::{Action, DeleteKind, ScenarioError, TimelineAction, invalid_field};

/// An object's kind, namespace ("" for cluster-scoped kinds) and name.
type Identity = (&'static str, String, String);

fn identity(manifest: &Manifest) -> Identity {
    match manifest {
        Manifest::NodePool(p) => ("NodePool", String::new(), p.name.clone()),
        Manifest::NodeClass(c) => ("EC2NodeClass", String::new(), c.name.clone()),
        Manifest::Pod(p) => ("Pod", p.pod.key.namespace.clone(), p.pod.key.name.clone()),
        // A Deployment, ReplicaSet or StatefulSet: one name among them, as the simulated
        // cluster keeps them (and `scale` and `delete` find them) by namespace and name.
        Manifest::Deployment(d) => ("Deployment", d.namespace.clone(), d.name.clone()),
        Manifest::DaemonSet(d) => ("DaemonSet", d.namespace.clone(), d.name.clone()),
        Manifest::Job(j) => ("Job", j.namespace.clone(), j.name.clone()),
        Manifest::CronJob(c) => ("CronJob", c.namespace.clone(), c.name.clone()),
        Manifest::PodDisruptionBudget(b) => {
            ("PodDisruptionBudget", b.namespace.clone(), b.name.clone())
        }
        Manifest::PersistentVolumeClaim(c) => {
            ("PersistentVolumeClaim", c.namespace.clone(), c.name.clone())
        }
        Manifest::PersistentVolume(v) => ("PersistentVolume", String::new(), v.name.clone()),
        Manifest::StorageClass(c) => ("StorageClass", String::new(), c.name.clone()),
    }
}

fn shown((kind, namespace, name): &Identity) -> String {
    if namespace.is_empty() {
        format!("{kind} {name:?}")
    } else {
        format!("{kind} {namespace}/{name}")
    }
}

/// The fix for a name that matches nothing: the closest name of that kind, if one is close.
fn fix_for<'a>(name: &str, candidates: impl Iterator<Item = &'a str>, what: &str) -> String {
    let mut names: Vec<&str> = candidates.collect();
    names.sort_unstable();
    names.dedup();
    let closest = names
        .iter()
        .map(|c| (strsim::levenshtein(name, c), *c))
        .min()
        .filter(|(distance, _)| *distance <= 2.max(name.len() / 4));
    match (closest, names.is_empty()) {
        (Some((_, meant)), _) => format!("did you mean {meant:?}?"),
        (None, true) => format!("define the {what} in `manifests` first"),
        (None, false) => format!("name one of: {}", names.join(", ")),
    }
}

/// The objects of the scenario as the timeline goes.
#[derive(Default)]
struct Objects(BTreeMap<Identity, ()>);

impl Objects {
    fn apply(&mut self, manifest: &Manifest) {
        self.0.insert(identity(manifest), ());
    }

    fn names_of<'a>(&'a self, kind: &'a str, namespace: &'a str) -> impl Iterator<Item = &'a str> {
        self.0
            .keys()
            .filter(move |(k, ns, _)| *k == kind && (ns.is_empty() || ns == namespace))
            .map(|(_, _, name)| name.as_str())
    }

    /// A Pod delete may name a bare Pod, or a pod a Deployment of its namespace made
    /// (`<deployment>-<hash>-<suffix>`, whose name is known only when it runs).
    fn has(&self, key: &Identity) -> bool {
        self.0.contains_key(key)
            || (key.0 == "Pod"
                && self
                    .names_of("Deployment", &key.1)
                    .any(|d| key.2.starts_with(&format!("{d}-"))))
    }
}

/// `manifests`: each starting object with the index of the `manifests` entry it came from.
/// `timeline`: in time order, each entry with its index in the file.
pub(crate) fn check(
    file_name: &str,
    manifests: &[(usize, Manifest)],
    timeline: &[(usize, &TimelineAction)],
) -> Result<(), ScenarioError> {
    let invalid =
        |field: &str, problem: String, fix: &str| invalid_field(file_name, field, problem, fix);
    let mut objects = Objects::default();
    let mut first_at: BTreeMap<Identity, usize> = BTreeMap::new();
    for (i, manifest) in manifests {
        let id = identity(manifest);
        if let Some(first) = first_at.get(&id) {
            return Err(invalid(
                &format!("manifests[{i}]"),
                format!(
                    "defines {} again (manifests[{first}] defines it)",
                    shown(&id)
                ),
                "give each object a name of its own, or keep one of the two",
            ));
        }
        first_at.insert(id, *i);
        objects.apply(manifest);
    }

    // Every object the scenario ever has: at the start, and applied on the timeline.
    let ever = || {
        manifests
            .iter()
            .map(|(_, m)| m)
            .chain(timeline.iter().flat_map(|(_, t)| match &t.action {
                Action::Apply(applied) => applied.as_slice(),
                _ => &[],
            }))
    };
    // Every EC2NodeClass the scenario ever has, for the NodePools' references.
    let mut classes: Vec<&str> = ever()
        .filter_map(|m| match m {
            Manifest::NodeClass(c) => Some(c.name.as_str()),
            _ => None,
        })
        .collect();
    classes.sort_unstable();
    let check_pool = |field: &str, manifest: &Manifest| match manifest {
        Manifest::NodePool(pool) if !classes.contains(&pool.node_class_ref.name.as_str()) => {
            Err(invalid(
                field,
                format!(
                    "NodePool {:?}: spec.template.spec.nodeClassRef.name names EC2NodeClass {:?}, which the scenario does not define",
                    pool.name, pool.node_class_ref.name
                ),
                &fix_for(
                    &pool.node_class_ref.name,
                    classes.iter().copied(),
                    "EC2NodeClass",
                ),
            ))
        }
        _ => Ok(()),
    };
    // Every PersistentVolumeClaim the scenario ever has, for the pods' volumes.
    let claims: Vec<(&str, &str)> = ever()
        .filter_map(|m| match m {
            Manifest::PersistentVolumeClaim(c) => Some((c.namespace.as_str(), c.name.as_str())),
            _ => None,
        })
        .collect();
    let check_claims = |field: &str, manifest: &Manifest| {
        let (template, namespace) = match manifest {
            Manifest::Pod(p) => (p, &p.pod.key.namespace),
            Manifest::Deployment(d) => (&d.template, &d.namespace),
            Manifest::Job(j) => (&j.template, &j.namespace),
            Manifest::CronJob(c) => (&c.job.template, &c.job.namespace),
            _ => return Ok(()),
        };
        let (kind, ns, name) = identity(manifest);
        match template
            .volume_claims
            .iter()
            .find(|c| !claims.contains(&(namespace.as_str(), c.as_str())))
        {
            Some(missing) => Err(invalid(
                field,
                format!(
                    "{}: a volume names PersistentVolumeClaim {missing:?}, which the scenario does not define in namespace {namespace:?}",
                    shown(&(kind, ns, name))
                ),
                &fix_for(
                    missing,
                    claims
                        .iter()
                        .filter(|(n, _)| *n == namespace.as_str())
                        .map(|(_, c)| *c),
                    "PersistentVolumeClaim",
                ),
            )),
            None => Ok(()),
        }
    };
    for (i, manifest) in manifests {
        check_pool(&format!("manifests[{i}]"), manifest)?;
        check_claims(&format!("manifests[{i}]"), manifest)?;
    }

    for (i, entry) in timeline {
        let field = format!("timeline[{i}]");
        match &entry.action {
            Action::Apply(applied) => {
                for manifest in applied {
                    check_pool(&format!("{field}.apply"), manifest)?;
                    check_claims(&format!("{field}.apply"), manifest)?;
                    objects.apply(manifest);
                }
            }
            Action::Scale {
                namespace,
                deployment,
                ..
            } => {
                let id = ("Deployment", namespace.clone(), deployment.clone());
                if !objects.has(&id) {
                    return Err(invalid(
                        &format!("{field}.scale.deployment"),
                        format!("no {} exists at that time", shown(&id)),
                        &fix_for(
                            deployment,
                            objects.names_of("Deployment", namespace),
                            "Deployment",
                        ),
                    ));
                }
            }
            Action::Delete {
                kind,
                namespace,
                name,
            } => {
                let cluster_scoped = kind.is_cluster_scoped();
                // The workloads of pods are kept under one name.
                let kind: &'static str = match kind {
                    DeleteKind::Deployment | DeleteKind::ReplicaSet | DeleteKind::StatefulSet => {
                        "Deployment"
                    }
                    other => other.as_str(),
                };
                let namespace = if cluster_scoped {
                    String::new()
                } else {
                    namespace.clone()
                };
                let id = (kind, namespace.clone(), name.clone());
                if !objects.has(&id) {
                    return Err(invalid(
                        &format!("{field}.delete.name"),
                        format!("no {} exists at that time", shown(&id)),
                        &fix_for(name, objects.names_of(kind, &namespace), kind),
                    ));
                }
                objects.0.remove(&id);
            }
            Action::Interrupt { .. } => {}
        }
    }
    Ok(())
}
