//! NodeClaims as a start observes them in the API server, in the core's terms: what the core
//! adopts when its store does not know them (a lost store, or Karpenter's machines).

use nodewright_adapters::manifest::{NodeClaimSpecParts, nodeclaim_spec_from_api};
use nodewright_api::NodeClaim;
use nodewright_core::model::observed::{ObservedInstance, ObservedNodeClaim};

use crate::ObserveError;
use crate::nodeclaims::{NODEPOOL_LABEL, condition_is};

/// The instance id a NodeClaim's `status.providerID` names (`aws:///<zone>/<id>`).
pub fn provider_instance_id(claim: &NodeClaim) -> Option<&str> {
    let provider_id = claim.status.as_ref()?.provider_id.as_deref()?;
    let rest = provider_id.strip_prefix("aws:///")?;
    let (_, id) = rest.rsplit_once('/')?;
    (!id.is_empty()).then_some(id)
}

/// A NodeClaim of the API server with its instance (found by the caller in the cloud: the one
/// its provider id names, or the one tagged with its name). A spec that cannot be read (a
/// NodeClaim edited by hand) is adopted all the same, with no requirements, taints or
/// requests, so that its machine is never taken for an orphan; the error says what could not
/// be read.
pub fn observed_nodeclaim(
    claim: &NodeClaim,
    instance: Option<ObservedInstance>,
) -> (ObservedNodeClaim, Option<ObserveError>) {
    let meta = &claim.metadata;
    let name = meta.name.clone().unwrap_or_default();
    let (parts, unread) = match nodeclaim_spec_from_api(&claim.spec, &name) {
        Ok(parts) => (parts, None),
        Err(e) => (
            NodeClaimSpecParts {
                requirements: Vec::new(),
                taints: Vec::new(),
                startup_taints: Vec::new(),
                requests: Default::default(),
                expire_after_ms: None,
            },
            Some(ObserveError::from(e)),
        ),
    };
    let labels = meta.labels.clone().unwrap_or_default();
    let millis = |t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time| {
        u64::try_from(t.0.as_millisecond()).unwrap_or(0)
    };
    let observed = ObservedNodeClaim {
        nodepool: labels.get(NODEPOOL_LABEL).cloned().unwrap_or_default(),
        nodeclass: claim.spec.node_class_ref.name.clone(),
        labels,
        annotations: meta
            .annotations
            .as_ref()
            .map(nodewright_core::model::labels::read_annotations)
            .unwrap_or_default(),
        taints: parts.taints,
        startup_taints: parts.startup_taints,
        requirements: parts.requirements,
        requests: parts.requests,
        expire_after_ms: parts.expire_after_ms,
        created_at_ms: meta.creation_timestamp.as_ref().map_or(0, millis),
        instance,
        node_name: claim.status.as_ref().and_then(|s| s.node_name.clone()),
        initialized: condition_is(claim, "Initialized"),
        deleting: meta.deletion_timestamp.is_some(),
        name,
    };
    (observed, unread)
}
