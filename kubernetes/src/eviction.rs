//! Evictions through the Eviction API, where PodDisruptionBudgets apply: a refusal (429) is an
//! answer for the core, never a reason to delete the pod. Only a forced eviction (the
//! NodePool's terminationGracePeriod ran out) deletes it.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, EvictParams};
use nodewright_core::model::pod::PodKey;

/// What became of an eviction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evicted {
    /// The pod is on its way out.
    Yes,
    /// A PodDisruptionBudget allows no disruption now (HTTP 429): the API server's reason.
    Refused(String),
    /// The pod is gone already.
    Gone,
}

/// Evicts `pod`, or deletes it with no grace period when `forced`. `client` must not retry 429
/// answers (`kube::Config::default_retry` off): kube's default retries them for minutes, and
/// a refusal is an answer the caller needs at once.
pub async fn evict(
    client: &kube::Client,
    pod: &PodKey,
    forced: bool,
) -> Result<Evicted, kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let result = if forced {
        api.delete(&pod.name, &DeleteParams::default().grace_period(0))
            .await
            .map(|_| ())
    } else {
        api.evict(&pod.name, &EvictParams::default())
            .await
            .map(|_| ())
    };
    match result {
        Ok(()) => Ok(Evicted::Yes),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Evicted::Gone),
        Err(kube::Error::Api(status)) if status.code == 429 => {
            Ok(Evicted::Refused(status.message.clone()))
        }
        Err(e) => Err(e),
    }
}
