//! What every start observes before the core decides anything, sent to the core in this
//! order: the catalog, the NodePools and EC2NodeClasses, then every NodeClaim of the API
//! server with its instance (`NodeClaimsObserved`). The cluster and the cloud are the truth:
//! the core adopts the machines it does not know (a lost store, a new leader with a store of
//! its own, Karpenter's machines), so that the instance lister, started after, finds no
//! NodeClaim's instance an orphan.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kube::Api;
use kube::api::ListParams;
use nodewright_adapters::control_loop::{InboxSender, Input};
use nodewright_api::NodeClaim;
use nodewright_aws::instances::{Described, Instances};
use nodewright_aws::refresh::CatalogRefresher;
use nodewright_core::EventKind;
use nodewright_core::catalog::{CapacityType, Catalog};
use nodewright_core::model::observed::ObservedInstance;
use nodewright_kubernetes::announce::{Announcement, Announcer, Regarding};
use nodewright_kubernetes::observed::{observed_nodeclaim, provider_instance_id};
use nodewright_kubernetes::watch::{NodeClasses, NodePools, Observed};
use thiserror::Error;
use tracing::{info, warn};

/// How many times a start asks for what it must observe before it gives up.
const ATTEMPTS: u32 = 6;
/// The wait before the first retry; it doubles each time (about a minute in all).
const FIRST_RETRY: Duration = Duration::from_secs(1);

/// What a start could not observe.
#[derive(Debug, Error)]
pub enum ObservationError {
    #[error(
        "listing {what} in the API server failed {ATTEMPTS} times, the last with: {source}; fix: check the API server and the controller's RBAC (list {what})"
    )]
    Kubernetes {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error(
        "listing this cluster's instances in EC2 failed {ATTEMPTS} times, the last with: {source}; fix: check the EC2 endpoint and the controller's IAM policy (ec2:DescribeInstances)"
    )]
    Ec2 {
        #[source]
        source: nodewright_aws::AwsError,
    },
}

/// Runs `call` until it succeeds, [`ATTEMPTS`] times at most, waiting longer between tries.
async fn bounded<T, E: std::fmt::Display>(
    what: &str,
    mut call: impl AsyncFnMut() -> Result<T, E>,
) -> Result<T, E> {
    let mut wait = FIRST_RETRY;
    let mut attempt = 1;
    loop {
        match call().await {
            Ok(found) => return Ok(found),
            Err(e) if attempt < ATTEMPTS => {
                warn!(what, attempt, error = %e, retry_in_ms = wait.as_millis() as u64, "observing at the start failed; retrying");
                tokio::time::sleep(wait).await;
                wait *= 2;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The names of the NodePools and EC2NodeClasses told to the core, for their watchers.
#[derive(Debug, Default)]
pub struct Told {
    pub nodepools: BTreeSet<String>,
    pub nodeclasses: BTreeSet<String>,
}

/// Reads the catalog once, before anything is adopted: an adopted machine is priced from it.
/// A failure leaves the core with the catalog its log holds (or none, until the refresher's
/// next read); the refresher keeps reading it on its periods.
pub async fn first_catalog(
    refresher: &mut CatalogRefresher,
    known: Option<&Arc<Catalog>>,
    inbox: &InboxSender,
) {
    let read = bounded("the catalog", async || refresher.refresh(true).await).await;
    match read {
        Ok(Some(catalog)) if known.is_none_or(|k| **k != *catalog) => {
            let _ = inbox.send(Input::Observed(EventKind::CatalogUpdated(catalog)));
        }
        Ok(_) => {}
        Err(e) => {
            warn!(error = %e, "reading the catalog at the start failed; machines adopted now are priced at zero until the next start")
        }
    }
}

/// Tells the core every NodePool and EC2NodeClass, then every NodeClaim with its instance.
pub async fn observe(
    client: &kube::Client,
    instances: &Instances,
    announcer: &Announcer,
    inbox: &InboxSender,
) -> Result<Told, ObservationError> {
    let told = Told {
        nodepools: tell(
            NodePools,
            &list::<nodewright_api::NodePool>(client, "NodePools").await?,
            inbox,
        ),
        nodeclasses: tell(
            NodeClasses,
            &list::<nodewright_api::EC2NodeClass>(client, "EC2NodeClasses").await?,
            inbox,
        ),
    };
    let mut claims = list::<NodeClaim>(client, "NodeClaims").await?;
    claims.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let listed = bounded("this cluster's instances", async || instances.list().await)
        .await
        .map_err(|source| ObservationError::Ec2 { source })?;
    let found = Found::new(&listed);
    let mut observed = Vec::with_capacity(claims.len());
    for claim in &claims {
        let instance = found.instance_of(claim);
        let (nodeclaim, unread) = observed_nodeclaim(claim, instance);
        if let Some(error) = unread {
            // Adopted all the same (its machine is not an orphan); what could not be read is
            // said on it, with the field.
            warn!(nodeclaim = nodeclaim.name, error = %error, "a NodeClaim adopted with a part that cannot be read");
            let note = Announcement {
                regarding: Regarding::NodeClaim(nodeclaim.name.clone()),
                warning: true,
                reason: "AdoptedUnreadable",
                action: "Adopt",
                note: error.to_string(),
            };
            if let Err(e) = announcer.publish(&note).await {
                warn!(error = %e, "publishing a Kubernetes Event failed");
            }
        }
        if let Some(id) = provider_instance_id(claim)
            && !found.by_id.contains_key(id)
        {
            warn!(
                nodeclaim = nodeclaim.name,
                instance_id = id,
                "a NodeClaim names an instance that is not a machine of this cluster's NodePools (gone, or another cluster's): the NodeClaim is collected, the instance left alone"
            );
        }
        observed.push(nodeclaim);
    }
    info!(
        nodepools = told.nodepools.len(),
        nodeclasses = told.nodeclasses.len(),
        nodeclaims = observed.len(),
        adopted_instances = observed
            .iter()
            .filter(|c| c.instance.as_ref().is_some_and(|i| i.running))
            .count(),
        "observed the cluster's machines"
    );
    let _ = inbox.send(Input::Observed(EventKind::NodeClaimsObserved {
        nodeclaims: observed,
    }));
    Ok(told)
}

/// Tells the core every object of one kind that reads (one that does not is reported, with
/// the field, by its watcher); the names told.
fn tell<O: Observed<Key = String>>(
    observed: O,
    objects: &[O::Object],
    inbox: &InboxSender,
) -> BTreeSet<String> {
    let mut told = BTreeSet::new();
    for object in objects {
        if let Ok(Some(event)) = observed.applied(object) {
            told.insert(O::key(object));
            let _ = inbox.send(Input::Observed(event));
        }
    }
    told
}

async fn list<K>(client: &kube::Client, what: &'static str) -> Result<Vec<K>, ObservationError>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api = Api::<K>::all(client.clone());
    let params = ListParams::default();
    bounded(what, async || api.list(&params).await)
        .await
        .map(|list| list.items)
        .map_err(|source| ObservationError::Kubernetes { what, source })
}

/// This cluster's NodePools' machines, by id and by the NodeClaim their tag names.
struct Found<'a> {
    by_id: BTreeMap<&'a str, &'a Described>,
    live_by_nodeclaim: BTreeMap<&'a str, &'a Described>,
}

impl<'a> Found<'a> {
    fn new(listed: &'a [Described]) -> Self {
        Found {
            by_id: listed.iter().map(|d| (d.instance_id.as_str(), d)).collect(),
            live_by_nodeclaim: listed
                .iter()
                .filter(|d| d.is_live())
                .filter_map(|d| Some((d.nodeclaim.as_deref()?, d)))
                .collect(),
        }
    }

    /// A NodeClaim's instance: the one its provider id names (as EC2 lists it; one EC2 does
    /// not list as this cluster's is read from the NodeClaim and counted gone), or, before its
    /// status says, the live one tagged with its name.
    fn instance_of(&self, claim: &NodeClaim) -> Option<ObservedInstance> {
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        let described = match provider_instance_id(claim) {
            Some(id) => match self.by_id.get(id) {
                Some(d) => d,
                None => return Some(unlisted(claim, id)),
            },
            None => self.live_by_nodeclaim.get(name)?,
        };
        Some(ObservedInstance {
            instance_id: described.instance_id.clone(),
            instance_type: described.instance_type.clone(),
            zone: described.zone.clone(),
            capacity_type: described.capacity_type.unwrap_or(CapacityType::OnDemand),
            launched_at_ms: described.launched_at_ms,
            running: described.is_live(),
        })
    }
}

/// The instance a NodeClaim's provider id names when EC2 does not list it as this cluster's:
/// what the NodeClaim says of it, not running.
fn unlisted(claim: &NodeClaim, id: &str) -> ObservedInstance {
    let labels = claim.metadata.labels.clone().unwrap_or_default();
    let label = |key: &str| labels.get(key).cloned().unwrap_or_default();
    let zone = claim
        .status
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .and_then(|p| p.strip_prefix("aws:///"))
        .and_then(|rest| rest.rsplit_once('/'))
        .map(|(zone, _)| zone.to_string())
        .unwrap_or_default();
    ObservedInstance {
        instance_id: id.to_string(),
        instance_type: label("node.kubernetes.io/instance-type"),
        zone,
        capacity_type: match label("karpenter.sh/capacity-type").as_str() {
            "spot" => CapacityType::Spot,
            "reserved" => CapacityType::Reserved,
            _ => CapacityType::OnDemand,
        },
        launched_at_ms: 0,
        running: false,
    }
}
