//! Fields nodewright accepts whose effect the simulated world does not model: each is said once
//! when a manifest is read for a simulation, with what the controller does with it, so that no
//! field of a user's NodePool or EC2NodeClass is ignored in silence. The list is the one in
//! `docs/karpenter-differences.md`.

use std::fmt;

use nodewright_api::EC2NodeClassSpec;

/// What the controller does with a field the simulation leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InController {
    /// The EC2 adapter puts it in the launch template or the node's bootstrap.
    AppliedAtLaunch,
    /// nodewright does not act on it anywhere yet.
    NotApplied,
}

/// One accepted field the simulation does not model, where it was set.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnmodelledField {
    pub source_name: String,
    pub document: usize,
    /// `NodePool` or `EC2NodeClass`.
    pub kind: &'static str,
    pub name: String,
    /// The field's path, as the user wrote it (`spec.kubelet.clusterDNS`).
    pub field: &'static str,
    /// What it does on a real node, in a few words.
    pub effect: &'static str,
    pub in_controller: InController,
}

impl fmt::Display for UnmodelledField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let controller = match self.in_controller {
            InController::AppliedAtLaunch => "the controller applies it at launch",
            InController::NotApplied => "the controller does not apply it yet",
        };
        write!(
            f,
            "{}: document {} ({} {:?}): `{}` ({}) is accepted but not modelled in simulation; {controller}",
            self.source_name, self.document, self.kind, self.name, self.field, self.effect
        )
    }
}

/// A field as the lists below give it: path, effect, what the controller does.
type Entry = (&'static str, &'static str, InController);

use InController::AppliedAtLaunch;

/// The set fields of an EC2NodeClass the simulation leaves out.
pub fn of_nodeclass(spec: &EC2NodeClassSpec) -> Vec<Entry> {
    let kubelet = spec.kubelet.as_ref();
    let kubelet_has =
        |set: fn(&nodewright_api::KubeletConfiguration) -> bool| kubelet.is_some_and(set);
    let table: [(bool, Entry); 18] = [
        (
            spec.user_data.is_some(),
            ("spec.userData", "runs on the node at boot", AppliedAtLaunch),
        ),
        (
            spec.metadata_options.is_some(),
            (
                "spec.metadataOptions",
                "the instance metadata service",
                AppliedAtLaunch,
            ),
        ),
        (
            spec.detailed_monitoring.is_some(),
            (
                "spec.detailedMonitoring",
                "one-minute CloudWatch metrics",
                AppliedAtLaunch,
            ),
        ),
        (
            spec.associate_public_ip_address.is_some(),
            (
                "spec.associatePublicIPAddress",
                "a public IP on the node",
                AppliedAtLaunch,
            ),
        ),
        (
            spec.ami_selector_terms
                .iter()
                .any(|t| t.ssm_parameter.is_some()),
            (
                "spec.amiSelectorTerms[].ssmParameter",
                "the AMI named by an SSM parameter (simulated AMIs are found by alias, id, name or tags)",
                AppliedAtLaunch,
            ),
        ),
        (
            !spec.network_interfaces.is_empty(),
            (
                "spec.networkInterfaces",
                "EFA and extra network interfaces",
                AppliedAtLaunch,
            ),
        ),
        (
            spec.ip_prefix_count.is_some(),
            (
                "spec.ipPrefixCount",
                "IPv4 prefixes on the primary interface",
                AppliedAtLaunch,
            ),
        ),
        (
            spec.connection_tracking.is_some(),
            (
                "spec.connectionTracking",
                "connection-tracking timeouts",
                AppliedAtLaunch,
            ),
        ),
        (
            spec.placement_group_selector.is_some(),
            (
                "spec.placementGroupSelector",
                "the placement group of the instances",
                AppliedAtLaunch,
            ),
        ),
        (
            spec.context.is_some(),
            (
                "spec.context",
                "the EC2 Fleet context of reserved launches",
                AppliedAtLaunch,
            ),
        ),
        (
            kubelet_has(|k| k.cluster_dns.is_some()),
            (
                "spec.kubelet.clusterDNS",
                "the DNS servers pods get",
                AppliedAtLaunch,
            ),
        ),
        (
            kubelet_has(|k| {
                k.eviction_hard
                    .keys()
                    .any(|s| s != "memory.available" && s != "nodefs.available")
            }),
            (
                "spec.kubelet.evictionHard (other than memory.available and nodefs.available)",
                "hard eviction on disk and process signals",
                AppliedAtLaunch,
            ),
        ),
        (
            kubelet_has(|k| !k.eviction_soft.is_empty()),
            (
                "spec.kubelet.evictionSoft",
                "soft eviction thresholds",
                AppliedAtLaunch,
            ),
        ),
        (
            kubelet_has(|k| !k.eviction_soft_grace_period.is_empty()),
            (
                "spec.kubelet.evictionSoftGracePeriod",
                "how long a soft threshold holds before eviction",
                AppliedAtLaunch,
            ),
        ),
        (
            kubelet_has(|k| k.eviction_max_pod_grace_period.is_some()),
            (
                "spec.kubelet.evictionMaxPodGracePeriod",
                "the grace period of pods evicted by the kubelet",
                AppliedAtLaunch,
            ),
        ),
        (
            kubelet_has(|k| k.image_gc_high_threshold_percent.is_some()),
            (
                "spec.kubelet.imageGCHighThresholdPercent",
                "image garbage collection",
                AppliedAtLaunch,
            ),
        ),
        (
            kubelet_has(|k| k.image_gc_low_threshold_percent.is_some()),
            (
                "spec.kubelet.imageGCLowThresholdPercent",
                "image garbage collection",
                AppliedAtLaunch,
            ),
        ),
        (
            kubelet_has(|k| k.cpu_cfs_quota.is_some()),
            (
                "spec.kubelet.cpuCFSQuota",
                "CPU limits enforced by CFS quota",
                AppliedAtLaunch,
            ),
        ),
    ];
    table
        .into_iter()
        .filter_map(|(set, entry)| set.then_some(entry))
        .collect()
}

/// The set fields of an EC2NodeClass the simulation models and the controller does not act on
/// yet: the controller says each once per generation of the class.
pub fn not_applied_by_the_controller(spec: &EC2NodeClassSpec) -> Vec<(&'static str, &'static str)> {
    let mut out = Vec::new();
    if !spec.capacity_reservation_selector_terms.is_empty() {
        // The reservations come from DescribeCapacityReservations, which the controller does
        // not call yet (moto, the EC2 it is tested against, does not serve it).
        out.push((
            "spec.capacityReservationSelectorTerms",
            "launches into capacity reservations",
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::manifest::parse_manifests_noting;

    const CLASS: &str = "apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: R
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {k: v}}]
  securityGroupSelectorTerms: [{tags: {k: v}}]
";

    #[test]
    fn a_bare_class_has_nothing_unmodelled() {
        let (manifests, unmodelled) = parse_manifests_noting(CLASS, "c.yaml").unwrap();
        assert_eq!(manifests.len(), 1);
        assert!(unmodelled.is_empty());
    }

    #[test]
    fn each_set_field_is_named_once_with_its_object() {
        let text = format!(
            "{CLASS}  userData: echo\n  detailedMonitoring: false\n  ipPrefixCount: 1\n  kubelet: {{clusterDNS: [10.0.0.10], evictionHard: {{memory.available: 5%}}}}\n"
        );
        let (_, unmodelled) = parse_manifests_noting(&text, "c.yaml").unwrap();
        let fields: Vec<&str> = unmodelled.iter().map(|u| u.field).collect();
        assert_eq!(
            fields,
            [
                "spec.userData",
                "spec.detailedMonitoring",
                "spec.ipPrefixCount",
                "spec.kubelet.clusterDNS"
            ]
        );
        let shown = unmodelled[0].to_string();
        assert!(
            shown.starts_with("c.yaml: document 1 (EC2NodeClass \"default\"): `spec.userData`"),
            "{shown}"
        );
        assert!(
            shown.contains("the controller applies it at launch"),
            "{shown}"
        );
    }
}
