//! A kubelet stand-in for the instances nodewright launches in the test EC2 (moto): for each
//! running instance of the cluster, after a delay, it registers the Node a kubelet would — the
//! provider id `aws:///<zone>/<instance-id>`, the NodeClaim's labels and taints (what the
//! bootstrap passes to the kubelet), the well-known labels of the instance, capacity and
//! allocatable from the instance type — with kwok's annotation, so that kwok keeps it Ready and
//! runs the pods bound to it. When the instance is terminated, its Node goes (as the cloud
//! controller manager deletes it).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use nodewright_api::NodeClaim;
use nodewright_aws::instances::Instances;
use nodewright_core::catalog::{Catalog, builtin, capacity};
use nodewright_core::model::nodeclass::KubeletConfig;
use nodewright_core::model::resources::{Resources, format_bytes, format_milli_cpu, is_bytes};
use tokio::task::JoinHandle;

use crate::{FAKE_NODE_ANNOTATION, FAKE_NODE_LABEL};

/// How often the stand-in looks at the instances.
const POLL: Duration = Duration::from_millis(250);

/// The Node name of an instance (EC2's private DNS names are not known to the test EC2).
pub fn node_name(instance_id: &str) -> String {
    format!("{instance_id}.ec2.internal")
}

/// As a kubelet reports them: CPU, memory, pods, ephemeral storage and the devices.
fn quantities(r: &Resources) -> BTreeMap<String, Quantity> {
    let mut out = BTreeMap::from([
        ("cpu".to_string(), Quantity(format_milli_cpu(r.cpu_milli))),
        ("memory".to_string(), Quantity(format_bytes(r.memory_bytes))),
        ("pods".to_string(), Quantity(r.pods.to_string())),
    ]);
    for (name, amount) in &r.extended {
        let value = if is_bytes(name) {
            format_bytes(*amount)
        } else {
            amount.to_string()
        };
        out.insert(name.to_string(), Quantity(value));
    }
    out
}

/// Registers Nodes for the cluster's instances.
pub struct KubeletStandIn {
    pub client: kube::Client,
    pub instances: Instances,
    /// How long after an instance is first seen running its Node registers.
    pub delay: Duration,
    /// Added once for every instance seen before it: the k-th instance registers
    /// `delay + k × stagger` after it was first seen, as machines of one launch come up at
    /// different speeds. Zero by default.
    pub stagger: Duration,
    /// Where instance types' sizes come from.
    pub catalog: Catalog,
}

impl KubeletStandIn {
    pub fn new(client: kube::Client, instances: Instances, delay: Duration) -> Self {
        KubeletStandIn {
            client,
            instances,
            delay,
            stagger: Duration::ZERO,
            catalog: builtin::us_east_1(),
        }
    }

    /// Runs until the task is aborted.
    pub fn spawn(self) -> JoinHandle<()> {
        tokio::spawn(async move { self.run().await })
    }

    async fn run(self) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        // When each instance was first seen, and how many were seen before it.
        let mut first_seen: BTreeMap<String, (Instant, u32)> = BTreeMap::new();
        let mut registered: BTreeSet<String> = BTreeSet::new();
        loop {
            if let Ok(list) = self.instances.list().await {
                for instance in list {
                    let name = node_name(&instance.instance_id);
                    if !instance.is_live() {
                        if registered.remove(&instance.instance_id) {
                            let _ = nodes.delete(&name, &DeleteParams::default()).await;
                        }
                        continue;
                    }
                    let before = first_seen.len() as u32;
                    let (seen, order) = *first_seen
                        .entry(instance.instance_id.clone())
                        .or_insert_with(|| (Instant::now(), before));
                    let delay = self.delay + self.stagger * order;
                    if registered.contains(&instance.instance_id) || seen.elapsed() < delay {
                        continue;
                    }
                    let claim = match &instance.nodeclaim {
                        Some(c) => claims.get_opt(c).await.ok().flatten(),
                        None => None,
                    };
                    let node = self.node(&instance, claim.as_ref());
                    match nodes.create(&PostParams::default(), &node).await {
                        Ok(_) => {
                            registered.insert(instance.instance_id.clone());
                        }
                        Err(kube::Error::Api(s)) if s.code == 409 => {
                            registered.insert(instance.instance_id.clone());
                        }
                        Err(_) => {}
                    }
                }
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn node(
        &self,
        instance: &nodewright_aws::instances::Described,
        claim: Option<&NodeClaim>,
    ) -> Node {
        let mut labels: BTreeMap<String, String> = claim
            .and_then(|c| c.metadata.labels.clone())
            .unwrap_or_default();
        let name = node_name(&instance.instance_id);
        labels.insert("kubernetes.io/hostname".into(), name.clone());
        labels.insert("kubernetes.io/os".into(), "linux".into());
        labels.insert(
            "node.kubernetes.io/instance-type".into(),
            instance.instance_type.clone(),
        );
        labels.insert("topology.kubernetes.io/zone".into(), instance.zone.clone());
        labels.insert(FAKE_NODE_LABEL.0.into(), FAKE_NODE_LABEL.1.into());
        let it = self.catalog.get(&instance.instance_type);
        if let Some(it) = it {
            labels.insert("kubernetes.io/arch".into(), it.architecture.clone());
        }
        let sizes = it.map(|it| capacity(it, &KubeletConfig::default()));
        let taints: Vec<Taint> = claim
            .map(|c| {
                c.spec
                    .taints
                    .iter()
                    .chain(&c.spec.startup_taints)
                    .map(|t| Taint {
                        key: t.key.clone(),
                        value: t.value.clone(),
                        effect: t.effect.clone(),
                        time_added: None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        Node {
            metadata: ObjectMeta {
                name: Some(name),
                labels: Some(labels),
                annotations: Some(BTreeMap::from([(
                    FAKE_NODE_ANNOTATION.0.to_string(),
                    FAKE_NODE_ANNOTATION.1.to_string(),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(format!("aws:///{}/{}", instance.zone, instance.instance_id)),
                taints: (!taints.is_empty()).then_some(taints),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                capacity: sizes.as_ref().map(|s| quantities(&s.capacity)),
                allocatable: sizes.as_ref().map(|s| quantities(&s.allocatable)),
                ..NodeStatus::default()
            }),
        }
    }
}
