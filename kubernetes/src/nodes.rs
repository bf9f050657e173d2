//! Node writes: the `karpenter.sh/disrupted` taint on and off, registration (the NodeClaim's
//! labels and taints, the registered label, the termination finalizer, the owner reference),
//! and deletion.

use k8s_openapi::api::core::v1::{Node, Taint as KubeTaint};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use nodewright_api::NodeClaim;

use crate::nodeclaims::{
    CONFLICT_RETRIES, INITIALIZED_LABEL, REGISTERED_LABEL, TERMINATION_FINALIZER, is_status,
    remove_finalizer,
};

/// The taint that keeps new pods off a node being disrupted.
pub const DISRUPTED_TAINT: &str = "karpenter.sh/disrupted";

/// The Nodes of the cluster, as nodewright writes them.
#[derive(Clone)]
pub struct Nodes {
    api: Api<Node>,
}

impl Nodes {
    pub fn new(client: kube::Client) -> Self {
        Nodes {
            api: Api::all(client),
        }
    }

    pub fn api(&self) -> &Api<Node> {
        &self.api
    }

    /// Changes the Node with `change` and writes it back (a replace, guarded by the version
    /// read; a conflict reads it again). `Ok(false)`: the Node is gone.
    pub async fn update(
        &self,
        name: &str,
        mut change: impl FnMut(&mut Node),
    ) -> Result<bool, kube::Error> {
        for attempt in 0..=CONFLICT_RETRIES {
            let Some(mut node) = self.api.get_opt(name).await? else {
                return Ok(false);
            };
            let before = node.clone();
            change(&mut node);
            if node == before {
                return Ok(true);
            }
            match self.api.replace(name, &PostParams::default(), &node).await {
                Ok(_) => return Ok(true),
                Err(e) if is_status(&e, 404) => return Ok(false),
                Err(e) if is_status(&e, 409) && attempt < CONFLICT_RETRIES => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Taints the node `karpenter.sh/disrupted:NoSchedule` (once).
    pub async fn cordon(&self, name: &str) -> Result<bool, kube::Error> {
        self.update(name, |node| {
            let taints = node
                .spec
                .get_or_insert_with(Default::default)
                .taints
                .get_or_insert_with(Vec::new);
            if !taints.iter().any(|t| t.key == DISRUPTED_TAINT) {
                taints.push(KubeTaint {
                    key: DISRUPTED_TAINT.into(),
                    effect: "NoSchedule".into(),
                    ..KubeTaint::default()
                });
            }
        })
        .await
    }

    /// Takes the `karpenter.sh/disrupted` taint off.
    pub async fn uncordon(&self, name: &str) -> Result<bool, kube::Error> {
        self.untaint(name, DISRUPTED_TAINT).await
    }

    /// Takes every taint with this key off.
    pub async fn untaint(&self, name: &str, key: &str) -> Result<bool, kube::Error> {
        self.update(name, |node| {
            if let Some(taints) = node.spec.as_mut().and_then(|s| s.taints.as_mut()) {
                taints.retain(|t| t.key != key);
            }
        })
        .await
    }

    /// Registers the node for its NodeClaim, as Karpenter does: the claim's labels (with
    /// `karpenter.sh/nodepool` and `karpenter.sh/registered`), its taints and startup taints
    /// where the kubelet did not put them, the termination finalizer and an owner reference to
    /// the claim (deleting the claim deletes the node).
    pub async fn register(&self, name: &str, claim: &NodeClaim) -> Result<bool, kube::Error> {
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        let claim_name = claim.metadata.name.clone().unwrap_or_default();
        let claim_labels = claim.metadata.labels.clone().unwrap_or_default();
        self.update(name, |node| {
            let labels = node.metadata.labels.get_or_insert_with(Default::default);
            for (k, v) in &claim_labels {
                labels.entry(k.clone()).or_insert_with(|| v.clone());
            }
            labels.insert(REGISTERED_LABEL.into(), "true".into());
            let finalizers = node.metadata.finalizers.get_or_insert_with(Vec::new);
            if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
                finalizers.push(TERMINATION_FINALIZER.into());
            }
            let owners = node.metadata.owner_references.get_or_insert_with(Vec::new);
            if !uid.is_empty() && !owners.iter().any(|o| o.uid == uid) {
                owners.push(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        api_version: format!(
                            "{}/{}",
                            nodewright_api::KARPENTER_GROUP,
                            nodewright_api::VERSION
                        ),
                        kind: "NodeClaim".into(),
                        name: claim_name.clone(),
                        uid: uid.clone(),
                        block_owner_deletion: Some(true),
                        ..Default::default()
                    },
                );
            }
            let taints = node
                .spec
                .get_or_insert_with(Default::default)
                .taints
                .get_or_insert_with(Vec::new);
            // The sibling hold is the core's: the kubelet registers with it, and only the core
            // takes it off. Put back after the core released the node (a release can come
            // before this registration), it would hold the node for good.
            for t in claim
                .spec
                .taints
                .iter()
                .chain(&claim.spec.startup_taints)
                .filter(|t| t.key != nodewright_core::model::labels::SIBLING_HOLD_TAINT)
            {
                if !taints
                    .iter()
                    .any(|k| k.key == t.key && k.effect == t.effect)
                {
                    taints.push(KubeTaint {
                        key: t.key.clone(),
                        value: t.value.clone(),
                        effect: t.effect.clone(),
                        time_added: None,
                    });
                }
            }
        })
        .await
    }

    /// Labels the node `karpenter.sh/initialized=true`.
    pub async fn mark_initialized(&self, name: &str) -> Result<bool, kube::Error> {
        self.update(name, |node| {
            node.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(INITIALIZED_LABEL.into(), "true".into());
        })
        .await
    }

    /// Deletes the node and takes the termination finalizer off (its instance is gone).
    pub async fn delete(&self, name: &str) -> Result<(), kube::Error> {
        match self.api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => return Ok(()),
            Err(e) => return Err(e),
        }
        remove_finalizer(&self.api, name).await
    }
}
