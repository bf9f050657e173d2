//! The user data that joins a machine to the cluster, per AMI family: AL2023's nodeadm
//! `NodeConfig` (in a MIME multipart, after the user's own parts), AL2's `bootstrap.sh`,
//! Bottlerocket's TOML settings, Windows' bootstrap script; Custom passes the user's as it is.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use nodewright_adapters::manifest::launch::AmiFamily;
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
fn kubelet_config_lines(k: &KubeletConfig, indent: &str) -> String {
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
    let eviction = match (k.eviction_hard_memory_bytes, k.eviction_hard_memory_percent) {
        (Some(bytes), _) => Some(bytes.to_string()),
        (None, Some(p)) => Some(format!("{p}%")),
        _ => None,
    };
    if let Some(v) = eviction {
        let _ = writeln!(out, "{indent}evictionHard:");
        let _ = writeln!(out, "{indent}  memory.available: {}", yaml_quote(&v));
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
            let config = kubelet_config_lines(&node.kubelet, "      ");
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
            if let Some(n) = node.kubelet.max_pods {
                let _ = write!(extra, " --max-pods={n}");
            }
            let mut out = mime_with_users_part(custom);
            let _ = write!(
                out,
                "--{BOUNDARY}\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash -xe\n\
                 exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n\
                 /etc/eks/bootstrap.sh '{}' --apiserver-endpoint '{}' --b64-cluster-ca '{}' \
                 --use-max-pods {} --kubelet-extra-args '{}'\n--{BOUNDARY}--\n",
                cluster.name,
                cluster.endpoint,
                cluster.ca_bundle,
                node.kubelet.max_pods.is_none(),
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
            if let Some(n) = node.kubelet.max_pods {
                let _ = writeln!(out, "max-pods = {n}");
            }
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
        AmiFamily::Windows2019 | AmiFamily::Windows2022 => {
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
}
