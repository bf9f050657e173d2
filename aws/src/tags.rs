//! The tags nodewright puts on what it launches, as Karpenter's: the instances of a cluster are
//! found, listed and adopted by them.

/// The tag every instance nodewright launches carries: which NodeClaim it is for.
pub const NODECLAIM_TAG: &str = "karpenter.sh/nodeclaim";
pub const NODEPOOL_TAG: &str = "karpenter.sh/nodepool";
pub const NODECLASS_TAG: &str = "karpenter.k8s.aws/ec2nodeclass";

/// The prefix of the tag that names the cluster an instance belongs to.
pub const CLUSTER_TAG_PREFIX: &str = "kubernetes.io/cluster/";

/// The tag that names the cluster an instance belongs to (`owned`).
pub fn cluster_tag(cluster: &str) -> String {
    format!("{CLUSTER_TAG_PREFIX}{cluster}")
}
