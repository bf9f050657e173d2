//! One EC2 instance type → the core's [`InstanceType`], with the labels Karpenter gives it
//! (`karpenter.k8s.aws/instance-*`, `kubernetes.io/arch`, ...). The rules are those of the
//! built-in catalog's generator (`tools/catalog-gen/generate.py`), so that a type discovered
//! from the API and the same type in the built-in catalog carry the same labels.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{InstanceTypeInfo, SupportedAdditionalProcessorFeature};
use nodewright_core::catalog::{Gpu, InstanceType, Offering};

const K: &str = "karpenter.k8s.aws/";

/// What nodewright reads of `DescribeInstanceTypes`, free of the SDK's types.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TypeFacts {
    pub name: String,
    /// EC2's names: `x86_64`, `arm64`, `i386`, ...
    pub architectures: Vec<String>,
    pub vcpu: u32,
    pub memory_mib: u64,
    pub cpu_manufacturer: Option<String>,
    pub sustained_clock_ghz: Option<f64>,
    pub hypervisor: Option<String>,
    pub encryption_in_transit: Option<bool>,
    /// Per network card.
    pub baseline_bandwidth_gbps: Vec<f64>,
    pub ebs_bandwidth_mbps: Option<i64>,
    /// `required`, `supported` or `unsupported`.
    pub nvme_support: Option<String>,
    pub local_storage_gb: Option<i64>,
    pub gpus: Vec<GpuFacts>,
    pub neuron_devices: u32,
    pub max_enis: Option<u32>,
    pub ipv4_per_eni: Option<u32>,
    pub spot_supported: bool,
    /// `nested-virtualization` is among the processor's supported features.
    pub nested_virtualization: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GpuFacts {
    pub name: String,
    pub manufacturer: String,
    pub count: u32,
    pub memory_mib: u64,
}

fn non_negative(v: Option<i32>) -> u32 {
    v.and_then(|v| u32::try_from(v).ok()).unwrap_or(0)
}

impl TypeFacts {
    pub fn from_sdk(info: &InstanceTypeInfo) -> Option<TypeFacts> {
        let name = info.instance_type()?.as_str().to_string();
        let processor = info.processor_info();
        let network = info.network_info();
        let storage = info.instance_storage_info();
        Some(TypeFacts {
            name,
            architectures: processor
                .map(|p| {
                    p.supported_architectures()
                        .iter()
                        .map(|a| a.as_str().to_string())
                        .collect()
                })
                .unwrap_or_default(),
            vcpu: non_negative(info.v_cpu_info().and_then(|v| v.default_v_cpus())),
            memory_mib: info
                .memory_info()
                .and_then(|m| m.size_in_mib())
                .and_then(|m| u64::try_from(m).ok())
                .unwrap_or(0),
            cpu_manufacturer: processor.and_then(|p| p.manufacturer()).map(str::to_string),
            nested_virtualization: processor.is_some_and(|p| {
                p.supported_features()
                    .contains(&SupportedAdditionalProcessorFeature::NestedVirtualization)
            }),
            sustained_clock_ghz: processor.and_then(|p| p.sustained_clock_speed_in_ghz()),
            hypervisor: info.hypervisor().map(|h| h.as_str().to_string()),
            encryption_in_transit: network.and_then(|n| n.encryption_in_transit_supported()),
            baseline_bandwidth_gbps: network
                .map(|n| {
                    n.network_cards()
                        .iter()
                        .filter_map(|c| c.baseline_bandwidth_in_gbps())
                        .collect()
                })
                .unwrap_or_default(),
            ebs_bandwidth_mbps: info
                .ebs_info()
                .and_then(|e| e.ebs_optimized_info())
                .and_then(|o| o.maximum_bandwidth_in_mbps())
                .map(i64::from),
            nvme_support: storage
                .and_then(|s| s.nvme_support())
                .map(|n| n.as_str().to_string()),
            local_storage_gb: storage.and_then(|s| s.total_size_in_gb()),
            gpus: info
                .gpu_info()
                .map(|g| {
                    g.gpus()
                        .iter()
                        .map(|d| GpuFacts {
                            name: d.name().unwrap_or_default().to_string(),
                            manufacturer: d.manufacturer().unwrap_or_default().to_string(),
                            count: non_negative(d.count()),
                            memory_mib: d
                                .memory_info()
                                .and_then(|m| m.size_in_mib())
                                .and_then(|m| u64::try_from(m).ok())
                                .unwrap_or(0),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            neuron_devices: info
                .neuron_info()
                .map(|n| {
                    n.neuron_devices()
                        .iter()
                        .map(|d| non_negative(d.count()))
                        .sum()
                })
                .unwrap_or(0),
            max_enis: network.map(|n| non_negative(n.maximum_network_interfaces())),
            ipv4_per_eni: network.map(|n| non_negative(n.ipv4_addresses_per_interface())),
            spot_supported: info
                .supported_usage_classes()
                .iter()
                .any(|u| u.as_str() == "spot"),
        })
    }

    /// Kubernetes' name of the architecture, when it is one nodewright launches.
    pub fn kube_architecture(&self) -> Option<&'static str> {
        [("x86_64", "amd64"), ("arm64", "arm64")]
            .into_iter()
            .find(|(ec2, _)| self.architectures.iter().any(|a| a == ec2))
            .map(|(_, kube)| kube)
    }

    fn gpu(&self) -> Option<Gpu> {
        let first = self.gpus.first()?;
        Some(Gpu {
            name: first.name.to_lowercase().replace(' ', "-"),
            manufacturer: first.manufacturer.to_lowercase(),
            count: self.gpus.iter().map(|g| g.count).sum(),
            memory_mib: first.memory_mib,
        })
    }

    /// The core's instance type with these offerings; None for an architecture nodewright does
    /// not launch. `enis` is `(max ENIs, IPv4 addresses per ENI)` when known better than the
    /// API says (Karpenter's VPC limits table).
    pub fn to_instance_type(
        &self,
        offerings: Vec<Offering>,
        enis: Option<(u32, u32)>,
    ) -> Option<InstanceType> {
        let arch = self.kube_architecture()?;
        let gpu = self.gpu();
        let (max_enis, ipv4_per_eni) = enis.unwrap_or((
            self.max_enis.unwrap_or(1).max(1),
            self.ipv4_per_eni.unwrap_or(1).max(1),
        ));
        Some(InstanceType {
            name: self.name.clone(),
            architecture: arch.to_string(),
            vcpu: self.vcpu,
            memory_mib: self.memory_mib,
            labels: self.labels(arch, gpu.as_ref()),
            gpu,
            neuron_count: self.neuron_devices,
            max_enis,
            ipv4_per_eni,
            offerings,
        })
    }

    fn labels(&self, arch: &str, gpu: Option<&Gpu>) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::new();
        let mut put = |key: &str, value: String| {
            if !value.is_empty() {
                labels.insert(key.to_string(), value);
            }
        };
        let (family, size) = self.name.split_once('.').unwrap_or((&self.name, ""));
        put("kubernetes.io/arch", arch.to_string());
        put("kubernetes.io/os", "linux".to_string());
        put("node.kubernetes.io/instance-type", self.name.clone());
        put(&format!("{K}instance-family"), family.to_string());
        put(&format!("{K}instance-size"), size.to_string());
        put(&format!("{K}instance-cpu"), self.vcpu.to_string());
        put(&format!("{K}instance-memory"), self.memory_mib.to_string());
        if let Some((category, generation)) = category_and_generation(&self.name) {
            put(&format!("{K}instance-category"), category.to_string());
            put(&format!("{K}instance-generation"), generation.to_string());
        }
        if let Some(m) = &self.cpu_manufacturer {
            put(&format!("{K}instance-cpu-manufacturer"), m.to_lowercase());
        }
        if let Some(ghz) = self.sustained_clock_ghz {
            put(
                &format!("{K}instance-cpu-sustained-clock-speed-mhz"),
                format!("{}", (ghz * 1000.0).round() as i64),
            );
        }
        if let Some(h) = &self.hypervisor {
            put(&format!("{K}instance-hypervisor"), h.clone());
        }
        if let Some(e) = self.encryption_in_transit {
            put(
                &format!("{K}instance-encryption-in-transit-supported"),
                e.to_string(),
            );
        }
        if !self.baseline_bandwidth_gbps.is_empty() {
            let mbps: i64 = self
                .baseline_bandwidth_gbps
                .iter()
                .map(|g| (g * 1000.0).round() as i64)
                .sum();
            put(&format!("{K}instance-network-bandwidth"), mbps.to_string());
        }
        if let Some(ebs) = self.ebs_bandwidth_mbps {
            put(&format!("{K}instance-ebs-bandwidth"), ebs.to_string());
        }
        if matches!(self.nvme_support.as_deref(), Some("required" | "supported"))
            && let Some(gb) = self.local_storage_gb.filter(|gb| *gb > 0)
        {
            put(&format!("{K}instance-local-nvme"), gb.to_string());
        }
        if let Some(gpu) = gpu {
            put(&format!("{K}instance-gpu-name"), gpu.name.clone());
            put(
                &format!("{K}instance-gpu-manufacturer"),
                gpu.manufacturer.clone(),
            );
            put(&format!("{K}instance-gpu-count"), gpu.count.to_string());
            put(
                &format!("{K}instance-gpu-memory"),
                gpu.memory_mib.to_string(),
            );
        }
        labels
    }
}

/// `m5d.large` → (`m`, `5`); `u-6tb1.metal` → (`u`, `1`): letters, an optional `-<n>tb`, then
/// the generation's digits, with a `.` somewhere after.
fn category_and_generation(name: &str) -> Option<(&str, &str)> {
    let letters = name.bytes().take_while(u8::is_ascii_lowercase).count();
    if letters == 0 {
        return None;
    }
    let mut rest = &name[letters..];
    if let Some(after_dash) = rest.strip_prefix('-') {
        let digits = after_dash.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && after_dash[digits..].starts_with("tb") {
            rest = &after_dash[digits + 2..];
        }
    }
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || !rest[digits..].contains('.') {
        return None;
    }
    let start = name.len() - rest.len();
    Some((&name[..letters], &name[start..start + digits]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn category_and_generation_as_karpenter_reads_them() {
        assert_eq!(category_and_generation("m5d.large"), Some(("m", "5")));
        assert_eq!(category_and_generation("u-6tb1.metal"), Some(("u", "1")));
        assert_eq!(category_and_generation("p4de.24xlarge"), Some(("p", "4")));
        assert_eq!(
            category_and_generation("mac2-m2pro.metal"),
            Some(("mac", "2"))
        );
        assert_eq!(category_and_generation("x"), None);
    }
}
