//! Volume topology: where a pod's PersistentVolumeClaims let it run.
//!
//! Karpenter's rule (`VolumeTopology.Inject`): for each claim of the pod, a bound claim brings
//! its PersistentVolume's node affinity (the first term's expressions); an unbound claim brings
//! its StorageClass's `allowedTopologies` (the first term's expressions, each an `In`). The
//! requirements are added to every required node affinity term of the pod (or make its only
//! term), so the pod is scheduled, and its machine launched, only where its volumes can attach.

use std::collections::BTreeMap;

use nodewright_core::model::pod::Pod;
use nodewright_core::model::requirements::RequirementSpec;

/// A PersistentVolumeClaim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub namespace: String,
    pub name: String,
    pub storage_class: Option<String>,
    /// The PersistentVolume it is bound to.
    pub volume: Option<String>,
}

/// A claim template of a StatefulSet: pod `NAME-i` gets claim `TEMPLATE-NAME-i`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimTemplate {
    pub name: String,
    pub storage_class: Option<String>,
}

/// A PersistentVolume: the nodes it can be attached to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    pub name: String,
    /// Its node affinity's required terms (ORed).
    pub node_affinity: Vec<Vec<RequirementSpec>>,
}

/// A StorageClass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageClass {
    pub name: String,
    /// `volumeBindingMode: WaitForFirstConsumer`: a claim is bound (its volume provisioned)
    /// where its first pod is scheduled. Otherwise `Immediate`.
    pub wait_for_first_consumer: bool,
    /// Its `allowedTopologies` terms, each expression an `In`.
    pub allowed_topologies: Vec<Vec<RequirementSpec>>,
}

/// The claims, volumes and classes of a cluster, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Storage {
    /// By (namespace, name).
    pub claims: BTreeMap<(String, String), Claim>,
    pub volumes: BTreeMap<String, Volume>,
    pub classes: BTreeMap<String, StorageClass>,
}

impl Storage {
    /// The requirements `claims` (in the pod's namespace) put on where it runs, and the first
    /// claim that does not exist.
    pub fn requirements(
        &self,
        namespace: &str,
        claims: &[String],
    ) -> Result<Vec<RequirementSpec>, String> {
        let mut out = Vec::new();
        for name in claims {
            let claim = self
                .claims
                .get(&(namespace.to_string(), name.clone()))
                .ok_or_else(|| name.clone())?;
            match &claim.volume {
                Some(volume) => {
                    if let Some(term) = self
                        .volumes
                        .get(volume)
                        .and_then(|v| v.node_affinity.first())
                    {
                        out.extend(term.iter().cloned());
                    }
                }
                None => {
                    if let Some(term) = claim
                        .storage_class
                        .as_ref()
                        .and_then(|c| self.classes.get(c))
                        .and_then(|c| c.allowed_topologies.first())
                    {
                        out.extend(term.iter().cloned());
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Adds volume requirements to every required node affinity term of `pod` (or makes them its
/// only term).
pub fn inject(pod: &mut Pod, requirements: &[RequirementSpec]) {
    if requirements.is_empty() {
        return;
    }
    if pod.required_node_affinity.is_empty() {
        pod.required_node_affinity.push(requirements.to_vec());
    } else {
        for term in &mut pod.required_node_affinity {
            term.extend(requirements.iter().cloned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_core::model::requirements::Operator;

    fn zone(z: &str) -> RequirementSpec {
        RequirementSpec::new("topology.kubernetes.io/zone", Operator::In, &[z])
    }

    fn storage() -> Storage {
        let mut s = Storage::default();
        s.classes.insert(
            "gp3".into(),
            StorageClass {
                name: "gp3".into(),
                wait_for_first_consumer: true,
                allowed_topologies: vec![vec![RequirementSpec::new(
                    "topology.kubernetes.io/zone",
                    Operator::In,
                    &["us-east-1a", "us-east-1b"],
                )]],
            },
        );
        s.volumes.insert(
            "pv-1".into(),
            Volume {
                name: "pv-1".into(),
                node_affinity: vec![vec![zone("us-east-1c")]],
            },
        );
        for (name, volume) in [("bound", Some("pv-1")), ("unbound", None)] {
            s.claims.insert(
                ("default".into(), name.into()),
                Claim {
                    namespace: "default".into(),
                    name: name.into(),
                    storage_class: Some("gp3".into()),
                    volume: volume.map(String::from),
                },
            );
        }
        s
    }

    #[test]
    fn a_bound_claim_brings_its_volume_s_zone_and_an_unbound_one_its_class_s_topology() {
        let s = storage();
        assert_eq!(
            s.requirements("default", &["bound".into()]),
            Ok(vec![zone("us-east-1c")])
        );
        let unbound = s
            .requirements("default", &["unbound".into()])
            .expect("known");
        assert_eq!(unbound.len(), 1);
        assert_eq!(unbound[0].values, vec!["us-east-1a", "us-east-1b"]);
        assert_eq!(
            s.requirements("default", &["missing".into()]),
            Err("missing".to_string())
        );
        assert_eq!(
            s.requirements("other", &["bound".into()]),
            Err("bound".to_string())
        );
    }

    #[test]
    fn the_requirements_join_every_node_affinity_term() {
        let mut pod = Pod::new("default", "p", 100, 1 << 20);
        inject(&mut pod, &[zone("us-east-1c")]);
        assert_eq!(pod.required_node_affinity, vec![vec![zone("us-east-1c")]]);
        let arch = RequirementSpec::new("kubernetes.io/arch", Operator::In, &["arm64"]);
        let mut pod = Pod::new("default", "p", 100, 1 << 20);
        pod.required_node_affinity = vec![vec![arch.clone()], vec![]];
        inject(&mut pod, &[zone("us-east-1c")]);
        assert_eq!(
            pod.required_node_affinity,
            vec![vec![arch, zone("us-east-1c")], vec![zone("us-east-1c")]]
        );
    }
}
