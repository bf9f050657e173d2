//! NodePool status, as Karpenter writes it: `ValidationSucceeded` (the pool translates into
//! the core's terms), `NodeClassReady` (its `nodeClassRef` names an EC2NodeClass that exists
//! and is Ready), `Ready` (both), with a message that names the field and the fix when not;
//! and `status.nodes` / `status.resources`, the pool's nodes and their allocatable summed
//! from the core's state. A pool that turns not-ready gets a Warning Event saying why.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::reflector::{ObjectRef, Store};
use nodewright_adapters::manifest::nodepool_from_api;
use nodewright_api::{EC2NodeClass, NodePool, NodePoolStatus, Quantity, Time};
use nodewright_core::model::resources::Resources;
use nodewright_kubernetes::announce::{Announcement, Announcer, Regarding};
use nodewright_kubernetes::nodeclaims::{CONFLICT_RETRIES, resource_list, set_condition};
use tokio::sync::watch;
use tracing::warn;

use crate::cache::cached;

/// Changes arriving this close together are looked at once.
const SETTLE: Duration = Duration::from_millis(100);

/// A pool's nodes, as the core knows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolNodes {
    pub nodes: i64,
    /// The nodes' allocatable, summed.
    pub resources: Resources,
}

/// Every pool's nodes, published by the control loop as it steps.
pub type PoolUsage = BTreeMap<String, PoolNodes>;

/// One condition as decided: type, status, reason, message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub type_: &'static str,
    pub ok: bool,
    pub reason: String,
    pub message: String,
}

fn verdict(type_: &'static str, ok: bool, reason: &str, message: String) -> Verdict {
    Verdict {
        type_,
        ok,
        reason: reason.to_string(),
        message,
    }
}

/// The pool's conditions, given the EC2NodeClasses that exist.
pub fn conditions(
    pool: &NodePool,
    class_of: impl Fn(&str) -> Option<EC2NodeClass>,
) -> Vec<Verdict> {
    let name = pool.metadata.name.clone().unwrap_or_default();
    let validation = match nodepool_from_api(pool.clone(), &format!("cluster NodePool {name}")) {
        Ok(_) => verdict(
            "ValidationSucceeded",
            true,
            "ValidationSucceeded",
            String::new(),
        ),
        Err(e) => verdict(
            "ValidationSucceeded",
            false,
            "ValidationFailed",
            e.to_string(),
        ),
    };
    let reference = &pool.spec.template.spec.node_class_ref;
    let class = if reference.kind != "EC2NodeClass" {
        verdict(
            "NodeClassReady",
            false,
            "NodeClassNotFound",
            format!(
                "spec.template.spec.nodeClassRef.kind is {:?}; fix: use kind EC2NodeClass (group karpenter.k8s.aws)",
                reference.kind
            ),
        )
    } else {
        match class_of(&reference.name) {
            None => verdict(
                "NodeClassReady",
                false,
                "NodeClassNotFound",
                format!(
                    "spec.template.spec.nodeClassRef.name: EC2NodeClass {:?} does not exist; fix: create it, or name one that exists",
                    reference.name
                ),
            ),
            Some(class) => {
                let ready = class
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
                match ready {
                    Some(c) if c.status == "True" => {
                        verdict("NodeClassReady", true, "NodeClassReady", String::new())
                    }
                    Some(c) => verdict(
                        "NodeClassReady",
                        false,
                        "NodeClassNotReady",
                        format!(
                            "EC2NodeClass {:?} is not ready: {}",
                            reference.name, c.message
                        ),
                    ),
                    None => verdict(
                        "NodeClassReady",
                        false,
                        "NodeClassNotReady",
                        format!("EC2NodeClass {:?} is not resolved yet", reference.name),
                    ),
                }
            }
        }
    };
    let failing: Vec<String> = [&validation, &class]
        .iter()
        .filter(|v| !v.ok)
        .map(|v| v.message.clone())
        .collect();
    let ready = if failing.is_empty() {
        verdict("Ready", true, "Ready", String::new())
    } else {
        verdict("Ready", false, "NotReady", failing.join("; "))
    };
    vec![validation, class, ready]
}

fn status_of(
    current: Option<&NodePoolStatus>,
    verdicts: &[Verdict],
    usage: Option<&PoolNodes>,
    generation: Option<i64>,
) -> NodePoolStatus {
    let mut status = current.cloned().unwrap_or_default();
    let now = Time(Timestamp::now());
    for v in verdicts {
        set_condition(
            &mut status.conditions,
            v.type_,
            v.ok,
            &v.reason,
            &v.message,
            &now,
        );
    }
    for c in &mut status.conditions {
        c.observed_generation = generation;
    }
    let usage = usage.cloned().unwrap_or_default();
    status.nodes = Some(usage.nodes);
    let mut resources: BTreeMap<String, Quantity> = resource_list(&usage.resources);
    resources.insert("nodes".into(), Quantity(usage.nodes.to_string()));
    status.resources = resources;
    status
}

/// Writes every NodePool's status until the process stops.
pub async fn run(
    client: kube::Client,
    announcer: Announcer,
    mut usage: watch::Receiver<PoolUsage>,
) {
    let api: Api<NodePool> = Api::all(client.clone());
    let (pools, mut pool_changes) = cached(api.clone());
    let (classes, mut class_changes) = cached(Api::<EC2NodeClass>::all(client));
    if pools.wait_until_ready().await.is_err() || classes.wait_until_ready().await.is_err() {
        return;
    }
    loop {
        let now = usage.borrow_and_update().clone();
        write_all(&api, &pools, &classes, &now, &announcer).await;
        tokio::select! {
            change = pool_changes.recv() => if change.is_none() { return },
            change = class_changes.recv() => if change.is_none() { return },
            change = usage.changed() => if change.is_err() { return },
        }
        tokio::time::sleep(SETTLE).await;
    }
}

async fn write_all(
    api: &Api<NodePool>,
    pools: &Store<NodePool>,
    classes: &Store<EC2NodeClass>,
    usage: &PoolUsage,
    announcer: &Announcer,
) {
    let class_of = |name: &str| classes.get(&ObjectRef::new(name)).map(|c| (*c).clone());
    let mut all = pools.state();
    all.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for pool in all {
        if pool.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pool.metadata.name.clone().unwrap_or_default();
        let verdicts = conditions(&pool, class_of);
        let was_ready = pool.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "Ready")
                .map(|c| c.status == "True")
        });
        let status = status_of(
            pool.status.as_ref(),
            &verdicts,
            usage.get(&name),
            pool.metadata.generation,
        );
        if pool.status.as_ref() == Some(&status) {
            continue;
        }
        if write(api, &name, &verdicts, usage.get(&name)).await {
            let ready = verdicts.iter().find(|v| v.type_ == "Ready");
            if let Some(ready) = ready.filter(|r| !r.ok && was_ready != Some(false)) {
                let note = Announcement {
                    regarding: Regarding::NodePool(name.clone()),
                    warning: true,
                    reason: "NodePoolNotReady",
                    action: "Validate",
                    note: ready.message.clone(),
                };
                if let Err(e) = announcer.publish(&note).await {
                    warn!(nodepool = name, error = %e, "publishing a Kubernetes Event failed");
                }
            }
        }
    }
}

/// Writes one pool's status on the object as it is now (retried on a conflict).
async fn write(
    api: &Api<NodePool>,
    name: &str,
    verdicts: &[Verdict],
    usage: Option<&PoolNodes>,
) -> bool {
    for _ in 0..=CONFLICT_RETRIES {
        let Ok(Some(mut object)) = api.get_opt(name).await else {
            return false;
        };
        let status = status_of(
            object.status.as_ref(),
            verdicts,
            usage,
            object.metadata.generation,
        );
        if object.status.as_ref() == Some(&status) {
            return false;
        }
        object.status = Some(status);
        match api
            .replace_status(name, &PostParams::default(), &object)
            .await
        {
            Ok(_) => return true,
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => {
                warn!(nodepool = name, error = %e, "writing the NodePool status failed");
                return false;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(class: &str) -> NodePool {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class},
                "requirements": []
            }}}
        }))
        .expect("a NodePool")
    }

    fn class(ready: Option<bool>) -> EC2NodeClass {
        let mut class: EC2NodeClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "role": "KarpenterNodeRole",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]
            }
        }))
        .expect("an EC2NodeClass");
        if let Some(ready) = ready {
            let mut status = nodewright_api::EC2NodeClassStatus::default();
            set_condition(
                &mut status.conditions,
                "Ready",
                ready,
                if ready {
                    "Ready"
                } else {
                    "SelectorsMatchedNothing"
                },
                if ready {
                    ""
                } else {
                    "spec.subnetSelectorTerms matched no subnet"
                },
                &Time(Timestamp::UNIX_EPOCH),
            );
            class.status = Some(status);
        }
        class
    }

    fn find<'a>(verdicts: &'a [Verdict], type_: &str) -> &'a Verdict {
        verdicts
            .iter()
            .find(|v| v.type_ == type_)
            .expect("the condition")
    }

    #[test]
    fn a_missing_node_class_is_named_with_the_field_and_the_fix() {
        let v = conditions(&pool("nope"), |_| None);
        assert!(find(&v, "ValidationSucceeded").ok);
        let class = find(&v, "NodeClassReady");
        assert!(!class.ok);
        assert_eq!(class.reason, "NodeClassNotFound");
        assert!(
            class
                .message
                .contains("spec.template.spec.nodeClassRef.name"),
            "{}",
            class.message
        );
        assert!(class.message.contains("\"nope\""), "{}", class.message);
        assert!(!find(&v, "Ready").ok);
    }

    #[test]
    fn a_pool_is_ready_when_its_node_class_is() {
        let v = conditions(&pool("default"), |_| Some(class(Some(true))));
        assert!(v.iter().all(|c| c.ok), "{v:?}");
        let v = conditions(&pool("default"), |_| Some(class(Some(false))));
        let not = find(&v, "NodeClassReady");
        assert_eq!(not.reason, "NodeClassNotReady");
        assert!(not.message.contains("matched no subnet"), "{}", not.message);
        let v = conditions(&pool("default"), |_| Some(class(None)));
        assert!(!find(&v, "Ready").ok);
    }

    #[test]
    fn the_status_counts_the_pools_nodes() {
        let usage = PoolNodes {
            nodes: 2,
            resources: Resources::new(4000, 8 << 30, 58),
        };
        let v = conditions(&pool("default"), |_| Some(class(Some(true))));
        let status = status_of(None, &v, Some(&usage), Some(3));
        assert_eq!(status.nodes, Some(2));
        assert_eq!(status.resources.get("nodes"), Some(&Quantity("2".into())));
        assert!(status.resources.contains_key("cpu"));
        assert!(
            status
                .conditions
                .iter()
                .all(|c| c.observed_generation == Some(3))
        );
        // Written again with nothing changed: the same status, transition times kept.
        let again = status_of(Some(&status), &v, Some(&usage), Some(3));
        assert_eq!(again, status);
    }
}
