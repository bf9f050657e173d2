//! NodeClaim objects: created from the core's decision, their status kept as Karpenter keeps
//! it (conditions `Launched`, `Registered`, `Initialized`, `Ready`; `providerID`, `nodeName`,
//! capacity and allocatable), released once their instance is gone.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use nodewright_api::{
    Condition, NodeClaim, NodeClaimSpec as ApiSpec, NodeClassReference, NodeSelectorRequirement,
    Quantity, ResourceRequirements, Taint as ApiTaint, Time,
};
use nodewright_core::model::nodeclaim::NodeClaimSpec;
use nodewright_core::model::resources::{Resources, format_bytes, format_milli_cpu};
use nodewright_core::model::taints::Taint;

/// The finalizer that keeps a NodeClaim (and its Node) until its instance is terminated.
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";
/// The label naming a node's (and a NodeClaim's) NodePool.
pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";
/// The label set on a node once it registered for its NodeClaim.
pub const REGISTERED_LABEL: &str = "karpenter.sh/registered";
/// The label set on a node once it is initialized (ready, startup taints gone).
pub const INITIALIZED_LABEL: &str = "karpenter.sh/initialized";
/// The label naming a node's EC2NodeClass.
pub const NODECLASS_LABEL: &str = "karpenter.k8s.aws/ec2nodeclass";

/// How many times a status write is tried again after a 409 conflict, each time on the object
/// read afresh.
pub const CONFLICT_RETRIES: usize = 8;

/// A resource list in Kubernetes' notation (`cpu: 1500m`, `memory: 4Gi`).
pub fn resource_list(resources: &Resources) -> BTreeMap<String, Quantity> {
    resources
        .names()
        .into_iter()
        .map(|name| {
            let amount = resources.get(&name);
            let text = match name.as_str() {
                "cpu" => format_milli_cpu(amount),
                "memory" => format_bytes(amount),
                _ => amount.to_string(),
            };
            (name, Quantity(text))
        })
        .collect()
}

fn api_taint(taint: &Taint) -> ApiTaint {
    ApiTaint {
        key: taint.key.clone(),
        value: taint.value.clone(),
        effect: taint.effect.as_str().to_string(),
        time_added: None,
    }
}

/// The NodeClaim object of a NodeClaim the core decided on: its labels (the NodePool's, and
/// `karpenter.sh/nodepool`), requirements, requests, taints and node class, with the
/// termination finalizer.
pub fn nodeclaim_object(spec: &NodeClaimSpec) -> NodeClaim {
    let mut labels = spec.labels.clone();
    labels.insert(NODEPOOL_LABEL.into(), spec.nodepool.clone());
    labels.insert(NODECLASS_LABEL.into(), spec.nodeclass.clone());
    let mut object = NodeClaim::new(
        &spec.name,
        ApiSpec {
            requirements: spec
                .requirements
                .iter()
                .map(|r| NodeSelectorRequirement {
                    key: r.key.clone(),
                    operator: r.operator.to_string(),
                    values: r.values.clone(),
                    min_values: r.min_values.map(i64::from),
                })
                .collect(),
            node_class_ref: NodeClassReference {
                kind: "EC2NodeClass".into(),
                name: spec.nodeclass.clone(),
                group: nodewright_api::AWS_GROUP.into(),
            },
            resources: Some(ResourceRequirements {
                requests: resource_list(&spec.requests),
            }),
            taints: spec.taints.iter().map(api_taint).collect(),
            startup_taints: spec.startup_taints.iter().map(api_taint).collect(),
            expire_after: Some(match spec.expire_after_ms {
                Some(ms) => format!("{}s", ms / 1000),
                None => "Never".into(),
            }),
            termination_grace_period: None,
        },
    );
    object.metadata.labels = Some(labels);
    object.metadata.annotations = (!spec.annotations.is_empty()).then(|| spec.annotations.clone());
    object.metadata.finalizers = Some(vec![TERMINATION_FINALIZER.into()]);
    object
}

/// Sets condition `type_` (replacing the one of that type), keeping its transition time when
/// the status does not change.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: &Time,
) {
    let status = if status { "True" } else { "False" };
    let reason = if reason.is_empty() { type_ } else { reason };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now.clone();
            }
            c.status = status.into();
            c.reason = reason.into();
            c.message = message.into();
        }
        None => conditions.push(Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: now.clone(),
            observed_generation: None,
        }),
    }
}

/// Whether condition `type_` is `True`.
pub fn condition_is(claim: &NodeClaim, type_: &str) -> bool {
    claim.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    })
}

/// The NodeClaims of the cluster, as nodewright writes them.
#[derive(Clone)]
pub struct NodeClaims {
    api: Api<NodeClaim>,
}

/// Whether the API server answered with HTTP status `code`.
pub(crate) fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

impl NodeClaims {
    pub fn new(client: kube::Client) -> Self {
        NodeClaims {
            api: Api::all(client),
        }
    }

    pub fn api(&self) -> &Api<NodeClaim> {
        &self.api
    }

    /// Creates the NodeClaim; one that exists already (the command asked again after a restart)
    /// is left as it is.
    pub async fn create(&self, spec: &NodeClaimSpec) -> Result<(), kube::Error> {
        match self
            .api
            .create(&PostParams::default(), &nodeclaim_object(spec))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 409) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Changes the NodeClaim's labels and status with `change`, on the object as the API server
    /// has it: a 409 conflict (someone wrote in between) reads it again and changes that, up to
    /// [`CONFLICT_RETRIES`] times. `Ok(None)`: the NodeClaim is gone.
    pub async fn update(
        &self,
        name: &str,
        mut change: impl FnMut(&mut NodeClaim),
    ) -> Result<Option<NodeClaim>, kube::Error> {
        let mut attempt = 0;
        loop {
            let Some(mut claim) = self.api.get_opt(name).await? else {
                return Ok(None);
            };
            let before = claim.clone();
            change(&mut claim);
            if claim == before {
                return Ok(Some(claim));
            }
            let result = async {
                let status_changed = claim.status != before.status;
                let mut written = if claim.metadata != before.metadata {
                    // The main resource ignores the status: the written object has the old
                    // one, and the new version the status write must name.
                    let mut written = self
                        .api
                        .replace(name, &PostParams::default(), &claim)
                        .await?;
                    written.status = claim.status.clone();
                    written
                } else {
                    claim
                };
                if status_changed {
                    written = self
                        .api
                        .replace_status(name, &PostParams::default(), &written)
                        .await?;
                }
                Ok(written)
            }
            .await;
            match result {
                Ok(written) => return Ok(Some(written)),
                Err(e) if is_status(&e, 404) => return Ok(None),
                Err(e) if is_status(&e, 409) && attempt < CONFLICT_RETRIES => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(20 * attempt as u64)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Deletes the NodeClaim and lets it go: its instance is terminated, so the termination
    /// finalizer comes off. Gone already is fine.
    pub async fn release(&self, name: &str) -> Result<(), kube::Error> {
        match self.api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => return Ok(()),
            Err(e) => return Err(e),
        }
        remove_finalizer(&self.api, name).await
    }
}

/// Takes `karpenter.sh/termination` off an object's finalizers (a JSON merge patch of the
/// remaining list, guarded by the resourceVersion read, retried on conflict).
pub async fn remove_finalizer<K>(api: &Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    for attempt in 0..=CONFLICT_RETRIES {
        let Some(object) = api.get_opt(name).await? else {
            return Ok(());
        };
        let meta = object.meta();
        let finalizers: Vec<String> = meta
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != TERMINATION_FINALIZER)
            .cloned()
            .collect();
        if meta.finalizers.as_ref().map_or(0, Vec::len) == finalizers.len() {
            return Ok(());
        }
        let patch = serde_json::json!({
            "metadata": {
                "resourceVersion": meta.resource_version,
                "finalizers": finalizers,
            }
        });
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if is_status(&e, 404) => return Ok(()),
            Err(e) if is_status(&e, 409) && attempt < CONFLICT_RETRIES => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
