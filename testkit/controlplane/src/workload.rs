//! Workloads tests create: pods that ask for resources and run nothing (kwok runs them).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A pod spec of one pause container requesting `cpu` and `memory`, deleted without a grace
/// period.
pub fn pause_pod_spec(cpu: &str, memory: &str) -> PodSpec {
    PodSpec {
        containers: vec![Container {
            name: "app".to_owned(),
            image: Some("registry.k8s.io/pause:3.10".to_owned()),
            resources: Some(ResourceRequirements {
                requests: Some(BTreeMap::from([
                    ("cpu".to_owned(), Quantity(cpu.to_owned())),
                    ("memory".to_owned(), Quantity(memory.to_owned())),
                ])),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        }],
        termination_grace_period_seconds: Some(0),
        ..PodSpec::default()
    }
}

/// A bare pod named `name` (namespace from the API it is created with) of [`pause_pod_spec`].
pub fn pause_pod(name: &str, cpu: &str, memory: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(pause_pod_spec(cpu, memory)),
        status: None,
    }
}
