//! The user data that joins a machine to the cluster, per AMI family: AL2023's nodeadm
//! `NodeConfig` (in a MIME multipart, after the user's own parts), AL2's `bootstrap.sh`,
//! Bottlerocket's TOML settings, Windows' bootstrap script; Custom passes the user's as it is.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use nodewright_adapters::manifest::launch::{AmiFamily, KubeletExtra};
use nodewright_core::model::nodeclass::KubeletConfig;
use nodewright_core::model::taints::Taint;

/// What a machine needs to know of its cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClusterInfo {
    pub name: String,
    /// `https://...` (Karpenter's `CLUSTER_ENDPOINT`).
    pub endpoint: String,
    /// The cluster's CA, base64 (PEM), as EKS gives it.
    pub ca_bundle: String,
    /// The service CIDR (nodeadm wants it to find the cluster DNS address).
    pub service_cidr: String,
}

/// What the node registers with: its labels, taints and kubelet settings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeBootstrap {
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub kubelet: KubeletConfig,
    pub kubelet_extra: KubeletExtra,
}

const BOUNDARY: &str = "//";

fn taint_flag(t: &Taint) -> String {
    match &t.value {
        Some(v) => format!("{}={}:{}", t.key, v, t.effect.as_str()),
        None => format!("{}:{}", t.key, t.effect.as_str()),
    }
}

fn yaml_quote(s: &str) -> String {
    // JSON strings are valid YAML scalars.
    serde_json::to_string(s).unwrap_or_default()
}

/// The kubelet configuration keys nodewright sets (nodeadm's `kubelet.config`).
/// Every hard eviction threshold as written: the core's `memory.available` with the others.
fn eviction_hard(k: &KubeletConfig, extra: &KubeletExtra) -> BTreeMap<String, String> {
    let mut signals = extra.eviction_hard.clone();
    match (k.eviction_hard_memory_bytes, k.eviction_hard_memory_percent) {
        (Some(bytes), _) => {
            signals.insert("memory.available".into(), bytes.to_string());
        }
        (None, Some(p)) => {
            signals.insert("memory.available".into(), format!("{p}%"));
        }
        _ => {}
    }
    signals
}

fn borrowed(m: &BTreeMap<String, String>) -> BTreeMap<&str, String> {
    m.iter().map(|(s, v)| (s.as_str(), v.clone())).collect()
}

fn kubelet_config_lines(k: &KubeletConfig, extra: &KubeletExtra, indent: &str) -> String {
    let mut out = String::new();
    if let Some(n) = k.max_pods {
        let _ = writeln!(out, "{indent}maxPods: {n}");
    }
    if let Some(n) = k.pods_per_core {
        let _ = writeln!(out, "{indent}podsPerCore: {n}");
    }
    for (name, map) in [
        ("systemReserved", &k.system_reserved),
        ("kubeReserved", &k.kube_reserved),
    ] {
        if map.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{indent}{name}:");
        for (resource, amount) in map {
            let value = if resource == "cpu" {
                format!("{amount}m")
            } else {
                amount.to_string()
            };
            let _ = writeln!(out, "{indent}  {resource}: {}", yaml_quote(&value));
        }
    }
    let hard = eviction_hard(k, extra);
    let signals = |out: &mut String, name: &str, map: &BTreeMap<&str, String>| {
        if !map.is_empty() {
            let _ = writeln!(out, "{indent}{name}:");
            for (signal, value) in map {
                let _ = writeln!(out, "{indent}  {signal}: {}", yaml_quote(value));
            }
        }
    };
    signals(&mut out, "evictionHard", &borrowed(&hard));
    signals(&mut out, "evictionSoft", &borrowed(&extra.eviction_soft));
    signals(
        &mut out,
        "evictionSoftGracePeriod",
        &borrowed(&extra.eviction_soft_grace_period),
    );
    if !extra.cluster_dns.is_empty() {
        let _ = writeln!(out, "{indent}clusterDNS:");
        for ip in &extra.cluster_dns {
            let _ = writeln!(out, "{indent}  - {}", yaml_quote(ip));
        }
    }
    if let Some(n) = extra.eviction_max_pod_grace_period {
        let _ = writeln!(out, "{indent}evictionMaxPodGracePeriod: {n}");
    }
    if let Some(n) = extra.image_gc_high_threshold_percent {
        let _ = writeln!(out, "{indent}imageGCHighThresholdPercent: {n}");
    }
    if let Some(n) = extra.image_gc_low_threshold_percent {
        let _ = writeln!(out, "{indent}imageGCLowThresholdPercent: {n}");
    }
    if let Some(b) = extra.cpu_cfs_quota {
        let _ = writeln!(out, "{indent}cpuCFSQuota: {b}");
    }
    out
}

/// The kubelet settings as Bottlerocket's `[settings.kubernetes]` keys, and its sub-tables
/// (which follow the keys).
fn bottlerocket_kubelet(k: &KubeletConfig, extra: &KubeletExtra) -> (String, String) {
    let mut keys = String::new();
    if let Some(n) = k.max_pods {
        let _ = writeln!(keys, "max-pods = {n}");
    }
    if let Some(ip) = extra.cluster_dns.first() {
        let _ = writeln!(keys, "cluster-dns-ip = {}", yaml_quote(ip));
    }
    if let Some(n) = extra.eviction_max_pod_grace_period {
        let _ = writeln!(keys, "eviction-max-pod-grace-period = {n}");
    }
    if let Some(n) = extra.image_gc_high_threshold_percent {
        let _ = writeln!(keys, "image-gc-high-threshold-percent = {n}");
    }
    if let Some(n) = extra.image_gc_low_threshold_percent {
        let _ = writeln!(keys, "image-gc-low-threshold-percent = {n}");
    }
    if let Some(b) = extra.cpu_cfs_quota {
        let _ = writeln!(keys, "cpu-cfs-quota-enforced = {b}");
    }
    let mut tables = String::new();
    let hard = eviction_hard(k, extra);
    for (table, map) in [
        ("eviction-hard", &hard),
        ("eviction-soft", &extra.eviction_soft),
        (
            "eviction-soft-grace-period",
            &extra.eviction_soft_grace_period,
        ),
    ] {
        if !map.is_empty() {
            let _ = writeln!(tables, "\n[settings.kubernetes.{table}]");
            for (signal, value) in map {
                let _ = writeln!(tables, "{} = {}", yaml_quote(signal), yaml_quote(value));
            }
        }
    }
    (keys, tables)
}

/// The kubelet settings as flags, for AL2's `--kubelet-extra-args`.
fn kubelet_flags(k: &KubeletConfig, extra: &KubeletExtra) -> String {
    let mut out = String::new();
    if let Some(n) = k.max_pods {
        let _ = write!(out, " --max-pods={n}");
    }
    let joined = |m: &BTreeMap<String, String>, sep: char| -> String {
        m.iter()
            .map(|(s, v)| format!("{s}{sep}{v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let hard = eviction_hard(k, extra);
    if !hard.is_empty() {
        let _ = write!(out, " --eviction-hard={}", joined(&hard, '<'));
    }
    if !extra.eviction_soft.is_empty() {
        let _ = write!(
            out,
            " --eviction-soft={}",
            joined(&extra.eviction_soft, '<')
        );
    }
    if !extra.eviction_soft_grace_period.is_empty() {
        let _ = write!(
            out,
            " --eviction-soft-grace-period={}",
            joined(&extra.eviction_soft_grace_period, '=')
        );
    }
    if let Some(n) = extra.eviction_max_pod_grace_period {
        let _ = write!(out, " --eviction-max-pod-grace-period={n}");
    }
    if let Some(n) = extra.image_gc_high_threshold_percent {
        let _ = write!(out, " --image-gc-high-threshold={n}");
    }
    if let Some(n) = extra.image_gc_low_threshold_percent {
        let _ = write!(out, " --image-gc-low-threshold={n}");
    }
    if let Some(b) = extra.cpu_cfs_quota {
        let _ = write!(out, " --cpu-cfs-quota={b}");
    }
    out
}

fn guess_content_type(part: &str) -> &'static str {
    let t = part.trim_start();
    if t.starts_with("#!") {
        "text/x-shellscript"
    } else if t.starts_with("MIME-Version") {
        "multipart/mixed"
    } else if t.contains("node.eks.aws") {
        "application/node.eks.aws"
    } else {
        "text/cloud-config"
    }
}

/// The start of a MIME multipart: its header, then the user's own user data as the first part
/// (when there is some), before nodewright's.
fn mime_with_users_part(custom: Option<&str>) -> String {
    let mut out =
        format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    if let Some(part) = custom.filter(|c| !c.trim().is_empty()) {
        let _ = write!(
            out,
            "--{BOUNDARY}\nContent-Type: {}\n\n{}\n",
            guess_content_type(part),
            part.trim_end()
        );
    }
    out
}

/// The user data for one launch, as text (the launch template takes it base64).
pub fn render(
    family: AmiFamily,
    custom: Option<&str>,
    cluster: &ClusterInfo,
    node: &NodeBootstrap,
) -> String {
    let labels: Vec<String> = node
        .labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let taints: Vec<String> = node.taints.iter().map(taint_flag).collect();
    match family {
        AmiFamily::Custom => custom.unwrap_or_default().to_string(),
        AmiFamily::Al2023 => {
            let mut out = mime_with_users_part(custom);
            let _ = write!(
                out,
                "--{BOUNDARY}\nContent-Type: application/node.eks.aws\n\n\
                 apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    \
                 name: {}\n    apiServerEndpoint: {}\n    certificateAuthority: {}\n    cidr: {}\n  \
                 kubelet:\n",
                yaml_quote(&cluster.name),
                yaml_quote(&cluster.endpoint),
                yaml_quote(&cluster.ca_bundle),
                yaml_quote(&cluster.service_cidr),
            );
            let config = kubelet_config_lines(&node.kubelet, &node.kubelet_extra, "      ");
            if !config.is_empty() {
                let _ = write!(out, "    config:\n{config}");
            }
            out.push_str("    flags:\n");
            let _ = writeln!(
                out,
                "      - {}",
                yaml_quote(&format!("--node-labels={}", labels.join(",")))
            );
            if !taints.is_empty() {
                let _ = writeln!(
                    out,
                    "      - {}",
                    yaml_quote(&format!("--register-with-taints={}", taints.join(",")))
                );
            }
            let _ = writeln!(out, "--{BOUNDARY}--");
            out
        }
        AmiFamily::Al2 => {
            let mut extra = format!("--node-labels={}", labels.join(","));
            if !taints.is_empty() {
                let _ = write!(extra, " --register-with-taints={}", taints.join(","));
            }
            extra.push_str(&kubelet_flags(&node.kubelet, &node.kubelet_extra));
            let mut out = mime_with_users_part(custom);
            let _ = write!(
                out,
                "--{BOUNDARY}\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash -xe\n\
                 exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n\
                 /etc/eks/bootstrap.sh '{}' --apiserver-endpoint '{}' --b64-cluster-ca '{}' \
                 --use-max-pods {}{} --kubelet-extra-args '{}'\n--{BOUNDARY}--\n",
                cluster.name,
                cluster.endpoint,
                cluster.ca_bundle,
                node.kubelet.max_pods.is_none(),
                match node.kubelet_extra.cluster_dns.first() {
                    Some(ip) => format!(" --dns-cluster-ip '{ip}'"),
                    None => String::new(),
                },
                extra
            );
            out
        }
        AmiFamily::Bottlerocket => {
            let mut out = String::new();
            if let Some(part) = custom.filter(|c| !c.trim().is_empty()) {
                out.push_str(part.trim_end());
                out.push_str("\n\n");
            }
            let _ = write!(
                out,
                "[settings.kubernetes]\ncluster-name = {}\napi-server = {}\ncluster-certificate = {}\n",
                yaml_quote(&cluster.name),
                yaml_quote(&cluster.endpoint),
                yaml_quote(&cluster.ca_bundle)
            );
            let (keys, tables) = bottlerocket_kubelet(&node.kubelet, &node.kubelet_extra);
            out.push_str(&keys);
            out.push_str(&tables);
            out.push_str("\n[settings.kubernetes.node-labels]\n");
            for (k, v) in &node.labels {
                let _ = writeln!(out, "{} = {}", yaml_quote(k), yaml_quote(v));
            }
            if !node.taints.is_empty() {
                out.push_str("\n[settings.kubernetes.node-taints]\n");
                let mut by_key: BTreeMap<&str, Vec<String>> = BTreeMap::new();
                for t in &node.taints {
                    by_key.entry(&t.key).or_default().push(format!(
                        "{}:{}",
                        t.value.as_deref().unwrap_or_default(),
                        t.effect.as_str()
                    ));
                }
                for (k, values) in by_key {
                    let quoted: Vec<String> = values.iter().map(|v| yaml_quote(v)).collect();
                    let _ = writeln!(out, "{} = [{}]", yaml_quote(k), quoted.join(", "));
                }
            }
            out
        }
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
            let mut extra = format!("--node-labels=\"{}\"", labels.join(","));
            if !taints.is_empty() {
                let _ = write!(extra, " --register-with-taints=\"{}\"", taints.join(","));
            }
            format!(
                "<powershell>\n{}[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n\
                 & $EKSBootstrapScriptFile -EKSClusterName '{}' -APIServerEndpoint '{}' -Base64ClusterCA '{}' -KubeletExtraArgs '{}' 3>&1 4>&1 5>&1 6>&1\n</powershell>\n",
                custom
                    .map(|c| format!("{}\n", c.trim_end()))
                    .unwrap_or_default(),
                cluster.name,
                cluster.endpoint,
                cluster.ca_bundle,
                extra
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_core::model::taints::TaintEffect;

    fn cluster() -> ClusterInfo {
        ClusterInfo {
            name: "demo".into(),
            endpoint: "https://example.eks".into(),
            ca_bundle: "Q0E=".into(),
            service_cidr: "10.100.0.0/16".into(),
        }
    }

    fn node() -> NodeBootstrap {
        NodeBootstrap {
            labels: BTreeMap::from([("karpenter.sh/nodepool".into(), "default".into())]),
            taints: vec![Taint {
                key: "karpenter.sh/unregistered".into(),
                value: None,
                effect: TaintEffect::NoExecute,
            }],
            kubelet: KubeletConfig {
                max_pods: Some(110),
                ..KubeletConfig::default()
            },
            kubelet_extra: KubeletExtra::default(),
        }
    }

    #[test]
    fn al2023_is_a_nodeconfig_after_the_users_part() {
        let text = render(
            AmiFamily::Al2023,
            Some("#!/bin/bash\necho hi"),
            &cluster(),
            &node(),
        );
        let user = text.find("echo hi").unwrap();
        let ours = text.find("kind: NodeConfig").unwrap();
        assert!(user < ours, "{text}");
        assert!(
            text.contains("apiServerEndpoint: \"https://example.eks\""),
            "{text}"
        );
        assert!(text.contains("maxPods: 110"), "{text}");
        assert!(
            text.contains("--node-labels=karpenter.sh/nodepool=default"),
            "{text}"
        );
        assert!(
            text.contains("--register-with-taints=karpenter.sh/unregistered:NoExecute"),
            "{text}"
        );
        assert!(text.trim_end().ends_with("--//--"), "{text}");
    }

    #[test]
    fn bottlerocket_is_toml_and_custom_is_passed_through() {
        let text = render(AmiFamily::Bottlerocket, None, &cluster(), &node());
        assert!(
            text.contains("[settings.kubernetes]\ncluster-name = \"demo\""),
            "{text}"
        );
        assert!(
            text.contains("\"karpenter.sh/unregistered\" = [\":NoExecute\"]"),
            "{text}"
        );
        assert_eq!(
            render(AmiFamily::Custom, Some("raw"), &cluster(), &node()),
            "raw"
        );
    }

    fn tuned() -> NodeBootstrap {
        let mut node = node();
        node.kubelet.eviction_hard_memory_percent = Some(5);
        node.kubelet_extra = KubeletExtra {
            cluster_dns: vec!["10.100.0.10".into()],
            eviction_hard: BTreeMap::from([("nodefs.available".into(), "15%".into())]),
            eviction_soft: BTreeMap::from([("memory.available".into(), "10%".into())]),
            eviction_soft_grace_period: BTreeMap::from([("memory.available".into(), "1m".into())]),
            eviction_max_pod_grace_period: Some(60),
            image_gc_high_threshold_percent: Some(85),
            image_gc_low_threshold_percent: Some(80),
            cpu_cfs_quota: Some(false),
        };
        node
    }

    #[test]
    fn every_kubelet_setting_reaches_the_nodes_kubelet() {
        let al2023 = render(AmiFamily::Al2023, None, &cluster(), &tuned());
        for line in [
            "      maxPods: 110",
            "      evictionHard:\n        memory.available: \"5%\"\n        nodefs.available: \"15%\"",
            "      evictionSoft:\n        memory.available: \"10%\"",
            "      evictionSoftGracePeriod:\n        memory.available: \"1m\"",
            "      clusterDNS:\n        - \"10.100.0.10\"",
            "      evictionMaxPodGracePeriod: 60",
            "      imageGCHighThresholdPercent: 85",
            "      imageGCLowThresholdPercent: 80",
            "      cpuCFSQuota: false",
        ] {
            assert!(al2023.contains(line), "{line:?} in {al2023}");
        }
        let bottlerocket = render(AmiFamily::Bottlerocket, None, &cluster(), &tuned());
        for line in [
            "max-pods = 110",
            "cluster-dns-ip = \"10.100.0.10\"",
            "eviction-max-pod-grace-period = 60",
            "image-gc-high-threshold-percent = 85",
            "cpu-cfs-quota-enforced = false",
            "[settings.kubernetes.eviction-hard]\n\"memory.available\" = \"5%\"\n\"nodefs.available\" = \"15%\"",
            "[settings.kubernetes.eviction-soft-grace-period]\n\"memory.available\" = \"1m\"",
        ] {
            assert!(bottlerocket.contains(line), "{line:?} in {bottlerocket}");
        }
        // The keys of [settings.kubernetes] come before its sub-tables.
        let keys_end = bottlerocket.find("cpu-cfs-quota-enforced").expect("a key");
        let first_table = bottlerocket.find("[settings.kubernetes.").expect("a table");
        assert!(keys_end < first_table, "{bottlerocket}");
        let al2 = render(AmiFamily::Al2, None, &cluster(), &tuned());
        for flag in [
            "--dns-cluster-ip '10.100.0.10'",
            "--max-pods=110",
            "--eviction-hard=memory.available<5%,nodefs.available<15%",
            "--eviction-soft=memory.available<10%",
            "--eviction-soft-grace-period=memory.available=1m",
            "--eviction-max-pod-grace-period=60",
            "--image-gc-high-threshold=85",
            "--image-gc-low-threshold=80",
            "--cpu-cfs-quota=false",
        ] {
            assert!(al2.contains(flag), "{flag:?} in {al2}");
        }
    }
}
