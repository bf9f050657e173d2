//! EC2NodeClass resolution: each node class's selector terms are resolved against EC2 when it
//! changes and every refresh period. What they find goes to the core (`NodeClassResolved`,
//! when it differs from what was last sent), to the launch executor ([`LaunchClasses`]), and to
//! the object's status: the subnets, security groups and AMIs, and the `Ready` condition —
//! `False` with a message naming the field and the fix when a selector matches nothing or the
//! spec cannot be used. A broken node class stops only its own launches.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::reflector::Store;
use nodewright_adapters::control_loop::InboxSender;
use nodewright_adapters::manifest::nodeclass_from_api;
use nodewright_adapters::manifest::unmodelled::{self, InController};
use nodewright_api::{
    AmiRequirement, AmiStatus, EC2NodeClass, EC2NodeClassStatus, SecurityGroupStatus, SubnetStatus,
    Time,
};
use nodewright_aws::launch::LaunchClass;
use nodewright_aws::resolve::Resolver;
use nodewright_core::EventKind;
use nodewright_core::model::nodeclass::ResolvedNodeClass;
use nodewright_kubernetes::nodeclaims::{CONFLICT_RETRIES, set_condition};
use tracing::{info, warn};

use crate::cache::cached;
use crate::launch_classes::LaunchClasses;

/// Changes arriving this close together are looked at once.
const SETTLE: Duration = Duration::from_millis(100);

/// What one resolution of a node class came to.
enum Outcome {
    Ready(Box<LaunchClass>),
    /// The field and why, for the `Ready=False` condition; `found`: what the selectors did
    /// find, when they were resolved (the core must know that a list came back empty, so
    /// that it plans no machine of this class).
    NotReady {
        reason: &'static str,
        message: String,
        found: Option<ResolvedNodeClass>,
    },
    /// EC2 or SSM did not answer (throttled, unreachable, a timeout, refused): the last good
    /// resolution stays, for launches and on the status, until a refresh succeeds.
    Unanswered {
        message: String,
    },
}

/// Resolves node classes until the process stops.
pub struct NodeClassResolver {
    pub api: Api<EC2NodeClass>,
    pub resolver: Resolver,
    pub classes: LaunchClasses,
    pub inbox: InboxSender,
    pub refresh: Duration,
}

impl NodeClassResolver {
    pub async fn run(self) {
        let (store, mut changes) = cached(self.api.clone());
        let mut refresh = tokio::time::interval(self.refresh);
        // What was last sent to the core, by class: sent again only when it changes.
        let mut sent: BTreeMap<String, ResolvedNodeClass> = BTreeMap::new();
        // The generation last resolved, by class: a change of spec is resolved at once.
        let mut seen: BTreeMap<String, Option<i64>> = BTreeMap::new();
        if store.wait_until_ready().await.is_err() {
            return;
        }
        loop {
            let all = tokio::select! {
                change = changes.recv() => {
                    if change.is_none() {
                        return;
                    }
                    tokio::time::sleep(SETTLE).await;
                    false
                }
                _ = refresh.tick() => true,
            };
            self.pass(&store, all, &mut sent, &mut seen).await;
            if self.inbox.is_closed() {
                return;
            }
        }
    }

    async fn pass(
        &self,
        store: &Store<EC2NodeClass>,
        all: bool,
        sent: &mut BTreeMap<String, ResolvedNodeClass>,
        seen: &mut BTreeMap<String, Option<i64>>,
    ) {
        let mut objects = store.state();
        objects.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let names: Vec<String> = objects
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        // Gone classes launch nothing more.
        for gone in seen
            .keys()
            .filter(|n| !names.contains(n))
            .cloned()
            .collect::<Vec<_>>()
        {
            seen.remove(&gone);
            sent.remove(&gone);
            self.classes.remove(&gone);
        }
        for object in objects {
            let name = object.metadata.name.clone().unwrap_or_default();
            if object.metadata.deletion_timestamp.is_some() {
                self.classes.remove(&name);
                continue;
            }
            let generation = object.metadata.generation;
            if !all && seen.get(&name) == Some(&generation) {
                continue;
            }
            seen.insert(name.clone(), generation);
            // Said once per generation: a field nodewright reads but does not act on yet.
            let gaps = unmodelled::of_nodeclass(&object.spec)
                .into_iter()
                .filter(|(_, _, in_controller)| *in_controller == InController::NotApplied)
                .map(|(field, effect, _)| (field, effect))
                .chain(unmodelled::not_applied_by_the_controller(&object.spec));
            for (field, effect) in gaps {
                warn!(
                    nodeclass = name,
                    field,
                    "accepted but not applied by this nodewright ({effect}): launches go on without it"
                );
            }
            match self.resolve(&object).await {
                Outcome::Ready(launch) => {
                    if sent.get(&name) != Some(&launch.resolved) {
                        sent.insert(name.clone(), launch.resolved.clone());
                        let _ = self
                            .inbox
                            .observe(EventKind::NodeClassResolved(Box::new(
                                launch.resolved.clone(),
                            )))
                            .await;
                        info!(
                            nodeclass = name,
                            subnets = launch.resolved.subnets.len(),
                            amis = launch.resolved.amis.len(),
                            "resolved"
                        );
                    }
                    let status = ready_status(&launch.resolved);
                    self.classes.insert(*launch);
                    self.write_status(&name, status, generation).await;
                }
                Outcome::NotReady {
                    reason,
                    message,
                    found,
                } => {
                    warn!(nodeclass = name, reason, "{message}");
                    self.classes.remove(&name);
                    if let Some(found) = found
                        && sent.get(&name) != Some(&found)
                    {
                        sent.insert(name.clone(), found.clone());
                        let _ = self
                            .inbox
                            .observe(EventKind::NodeClassResolved(Box::new(found)))
                            .await;
                    }
                    let status = EC2NodeClassStatus {
                        conditions: vec![nodewright_api::Condition {
                            type_: "Ready".into(),
                            status: "False".into(),
                            reason: reason.into(),
                            message,
                            last_transition_time: Time(Timestamp::now()),
                            observed_generation: generation,
                        }],
                        ..Default::default()
                    };
                    self.write_status(&name, status, generation).await;
                }
                Outcome::Unanswered { message } => {
                    let kept = self.classes.get(&name).is_some();
                    warn!(
                        nodeclass = name,
                        error = message,
                        kept_last_resolution = kept,
                        "resolving the EC2NodeClass failed; the last good resolution stays until a refresh succeeds"
                    );
                }
            }
        }
    }

    async fn resolve(&self, object: &EC2NodeClass) -> Outcome {
        let name = object.metadata.name.clone().unwrap_or_default();
        let (class, settings) =
            match nodeclass_from_api(object.clone(), &format!("cluster EC2NodeClass {name}")) {
                Ok(read) => read,
                Err(e) => {
                    return Outcome::NotReady {
                        reason: "ValidationFailed",
                        message: e.to_string(),
                        found: None,
                    };
                }
            };
        match self.resolver.resolve(&class).await {
            Ok(resolution) => match resolution.check() {
                Ok(()) => Outcome::Ready(Box::new(LaunchClass {
                    class,
                    settings,
                    resolved: resolution.resolved,
                })),
                Err(e) => Outcome::NotReady {
                    reason: "SelectorsMatchedNothing",
                    message: e.to_string(),
                    found: Some(resolution.resolved),
                },
            },
            // EC2 did not answer: what was found last stays.
            Err(e) => Outcome::Unanswered {
                message: e.to_string(),
            },
        }
    }

    /// Writes the status, keeping each condition's transition time when it did not change.
    async fn write_status(
        &self,
        name: &str,
        mut status: EC2NodeClassStatus,
        generation: Option<i64>,
    ) {
        for _ in 0..=CONFLICT_RETRIES {
            let Ok(Some(mut object)) = self.api.get_opt(name).await else {
                return;
            };
            let mut conditions = object
                .status
                .as_ref()
                .map(|s| s.conditions.clone())
                .unwrap_or_default();
            for c in &status.conditions {
                set_condition(
                    &mut conditions,
                    &c.type_,
                    c.status == "True",
                    &c.reason,
                    &c.message,
                    &c.last_transition_time,
                );
            }
            for c in &mut conditions {
                c.observed_generation = generation;
            }
            status.conditions = conditions;
            if object.status.as_ref() == Some(&status) {
                return;
            }
            object.status = Some(status.clone());
            match self
                .api
                .replace_status(name, &PostParams::default(), &object)
                .await
            {
                Ok(_) => return,
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(e) => {
                    warn!(nodeclass = name, error = %e, "writing the EC2NodeClass status failed");
                    return;
                }
            }
        }
    }
}

fn ready_status(resolved: &ResolvedNodeClass) -> EC2NodeClassStatus {
    EC2NodeClassStatus {
        subnets: resolved
            .subnets
            .iter()
            .map(|s| SubnetStatus {
                id: s.id.clone(),
                zone: s.zone.clone(),
                zone_id: s.zone_id.clone(),
            })
            .collect(),
        security_groups: resolved
            .security_groups
            .iter()
            .map(|g| SecurityGroupStatus {
                id: g.id.clone(),
                name: Some(g.name.clone()).filter(|n| !n.is_empty()),
            })
            .collect(),
        amis: resolved
            .amis
            .iter()
            .map(|a| AmiStatus {
                id: a.id.clone(),
                name: Some(a.name.clone()).filter(|n| !n.is_empty()),
                deprecated: None,
                requirements: vec![AmiRequirement {
                    key: "kubernetes.io/arch".into(),
                    operator: "In".into(),
                    values: vec![a.architecture.clone()],
                }],
            })
            .collect(),
        conditions: vec![nodewright_api::Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "Ready".into(),
            message: String::new(),
            last_transition_time: Time(Timestamp::now()),
            observed_generation: None,
        }],
        ..Default::default()
    }
}
