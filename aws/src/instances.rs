//! This cluster's instances: terminate one (an instance already gone is success), find the one
//! a NodeClaim launched, and list them all for `relist` and orphan collection.
//!
//! Only what is nodewright's (or Karpenter's, the same contract) is listed: an instance carries
//! the cluster's tag `kubernetes.io/cluster/<name>=owned` *and* `karpenter.sh/nodepool`, as
//! Karpenter's garbage collector lists them. A self-managed or managed node group's instance
//! carries the cluster tag too (AWS requires it), never the NodePool tag, so it is never
//! listed, and never terminated.

use aws_sdk_ec2::types::{Filter, Instance as Ec2Instance, InstanceLifecycleType};
use nodewright_core::catalog::CapacityType;
use nodewright_core::model::nodeclaim::ListedInstance;

use crate::error::AwsError;
use crate::tags::{CLUSTER_TAG_PREFIX, NODECLAIM_TAG, NODEPOOL_TAG, cluster_tag};

/// One instance as EC2 describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    pub instance_id: String,
    pub instance_type: String,
    pub zone: String,
    /// None when EC2 did not say (on-demand instances carry no lifecycle).
    pub capacity_type: Option<CapacityType>,
    pub nodeclaim: Option<String>,
    /// Its `karpenter.sh/nodepool` tag.
    pub nodepool: Option<String>,
    /// Its `kubernetes.io/cluster/<name>` tags: the clusters it belongs to, with the value
    /// (`owned`, `shared`).
    pub clusters: Vec<(String, String)>,
    /// `pending`, `running`, `shutting-down`, `terminated`, ...
    pub state: String,
    pub launched_at_ms: u64,
}

impl Described {
    fn from_sdk(i: &Ec2Instance) -> Option<Described> {
        Some(Described {
            instance_id: i.instance_id()?.to_string(),
            instance_type: i.instance_type().map(|t| t.as_str().to_string())?,
            zone: i
                .placement()
                .and_then(|p| p.availability_zone())
                .unwrap_or_default()
                .to_string(),
            capacity_type: Some(match i.instance_lifecycle() {
                Some(InstanceLifecycleType::Spot) => CapacityType::Spot,
                _ => CapacityType::OnDemand,
            }),
            nodeclaim: tag(i, NODECLAIM_TAG),
            nodepool: tag(i, NODEPOOL_TAG),
            clusters: i
                .tags()
                .iter()
                .filter_map(|t| {
                    let cluster = t.key()?.strip_prefix(CLUSTER_TAG_PREFIX)?;
                    Some((
                        cluster.to_string(),
                        t.value().unwrap_or_default().to_string(),
                    ))
                })
                .collect(),
            state: i
                .state()
                .and_then(|s| s.name())
                .map(|n| n.as_str().to_string())
                .unwrap_or_default(),
            launched_at_ms: i
                .launch_time()
                .and_then(|t| t.to_millis().ok())
                .and_then(|ms| u64::try_from(ms).ok())
                .unwrap_or(0),
        })
    }

    /// Running or on its way there.
    pub fn is_live(&self) -> bool {
        matches!(self.state.as_str(), "pending" | "running")
    }

    /// Whether it is a machine of cluster `cluster` that a NodePool launched: tagged
    /// `kubernetes.io/cluster/<cluster>=owned` and `karpenter.sh/nodepool`. Nothing else is
    /// ever terminated.
    pub fn is_nodepool_machine_of(&self, cluster: &str) -> bool {
        self.nodepool.is_some()
            && self
                .clusters
                .iter()
                .any(|(name, value)| name == cluster && value == "owned")
    }
}

fn tag(i: &Ec2Instance, key: &str) -> Option<String> {
    i.tags()
        .iter()
        .find(|t| t.key() == Some(key))
        .and_then(|t| t.value())
        .map(str::to_string)
}

/// An instance that is not a machine of this cluster's NodePools: left alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "instance {instance_id} is not a machine of cluster {cluster}'s NodePools (it lacks the tag kubernetes.io/cluster/{cluster}=owned or karpenter.sh/nodepool): nodewright leaves it alone; fix: if it is this cluster's, tag it as Karpenter does, else take the NodeClaim that names it away"
)]
pub struct NotOurs {
    pub instance_id: String,
    pub cluster: String,
}

/// The instances of one cluster.
#[derive(Debug, Clone)]
pub struct Instances {
    ec2: aws_sdk_ec2::Client,
    cluster: String,
}

impl Instances {
    pub fn new(ec2: aws_sdk_ec2::Client, cluster: &str) -> Self {
        Instances {
            ec2,
            cluster: cluster.to_string(),
        }
    }

    async fn describe_filtered(&self, filters: Vec<Filter>) -> Result<Vec<Described>, AwsError> {
        let reservations = self
            .ec2
            .describe_instances()
            .set_filters(Some(filters))
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| AwsError::from_sdk("ec2:DescribeInstances", e))?;
        let mut out: Vec<Described> = reservations
            .iter()
            .flat_map(|r| r.instances())
            .filter_map(Described::from_sdk)
            .collect();
        out.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
        Ok(out)
    }

    /// This cluster's NodePools' machines: the cluster's tag (`owned`) and a NodePool's.
    fn ours_filters(&self) -> Vec<Filter> {
        vec![
            Filter::builder()
                .name(format!("tag:{}", cluster_tag(&self.cluster)))
                .values("owned")
                .build(),
            Filter::builder()
                .name("tag-key")
                .values(NODEPOOL_TAG)
                .build(),
        ]
    }

    /// Every machine of this cluster's NodePools, in every state EC2 still lists.
    pub async fn list(&self) -> Result<Vec<Described>, AwsError> {
        self.describe_filtered(self.ours_filters()).await
    }

    /// The listing `relist` and the garbage collector read.
    pub async fn listing(&self) -> Result<Vec<ListedInstance>, AwsError> {
        Ok(self
            .list()
            .await?
            .into_iter()
            .map(|d| ListedInstance {
                running: d.is_live(),
                instance_id: d.instance_id,
                nodeclaim: d.nodeclaim,
                launched_at_ms: d.launched_at_ms,
            })
            .collect())
    }

    /// The live instance launched for a NodeClaim, if there is one.
    pub async fn of_nodeclaim(&self, nodeclaim: &str) -> Result<Option<Described>, AwsError> {
        let found = self
            .describe_filtered(
                self.ours_filters()
                    .into_iter()
                    .chain([
                        Filter::builder()
                            .name(format!("tag:{NODECLAIM_TAG}"))
                            .values(nodeclaim)
                            .build(),
                        Filter::builder()
                            .name("instance-state-name")
                            .values("pending")
                            .values("running")
                            .build(),
                    ])
                    .collect(),
            )
            .await?;
        Ok(found.into_iter().next())
    }

    /// One instance by id (None: EC2 does not know it).
    pub async fn describe(&self, instance_id: &str) -> Result<Option<Described>, AwsError> {
        let found = self
            .describe_filtered(vec![
                Filter::builder()
                    .name("instance-id")
                    .values(instance_id)
                    .build(),
            ])
            .await?;
        Ok(found.into_iter().next())
    }

    /// Terminates a machine of this cluster's NodePools once it has read it as one; an
    /// instance already gone (or never known) is success, and any other instance is refused
    /// ([`NotOurs`]) and left running.
    pub async fn terminate_ours(&self, instance_id: &str) -> Result<Result<(), NotOurs>, AwsError> {
        match self.describe(instance_id).await? {
            None => Ok(Ok(())),
            Some(i) if !i.is_live() => Ok(Ok(())),
            Some(i) if !i.is_nodepool_machine_of(&self.cluster) => Ok(Err(NotOurs {
                instance_id: instance_id.to_string(),
                cluster: self.cluster.clone(),
            })),
            Some(_) => self.terminate(instance_id).await.map(Ok),
        }
    }

    /// The cluster whose machines these are.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// Terminates an instance; one that is already gone (or never existed) is success.
    /// Callers outside tests use [`Instances::terminate_ours`].
    pub async fn terminate(&self, instance_id: &str) -> Result<(), AwsError> {
        match self
            .ec2
            .terminate_instances()
            .instance_ids(instance_id)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                let e = AwsError::from_sdk("ec2:TerminateInstances", e);
                if e.code.as_deref() == Some("InvalidInstanceID.NotFound") {
                    Ok(())
                } else {
                    Err(e)
                }
            }
        }
    }
}
