//! The controller's settings, in Karpenter's names where Karpenter has one (`CLUSTER_NAME`,
//! `CLUSTER_ENDPOINT`, `INTERRUPTION_QUEUE`, `BATCH_IDLE_DURATION`, `BATCH_MAX_DURATION`,
//! `FEATURE_GATES`, ...). The binary reads them from flags and the environment; this is what
//! they become, checked.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use nodewright_core::config::LostWork;
use thiserror::Error;

use crate::leadership::LeaderElection;

/// Everything the controller runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `CLUSTER_NAME`: tags instances, names the discovery tag, scopes launch tokens.
    pub cluster_name: String,
    /// `CLUSTER_ENDPOINT`: the API server nodes join (in their user data).
    pub cluster_endpoint: String,
    /// The cluster's CA bundle (base64 PEM) for the nodes' user data.
    pub cluster_ca_bundle: String,
    /// The service CIDR, for the nodes' cluster DNS address.
    pub service_cidr: String,
    /// `INTERRUPTION_QUEUE`: the SQS queue of interruption events (none: not watched).
    pub interruption_queue: Option<String>,
    /// `BATCH_IDLE_DURATION`: a batch of pending pods closes after this long without a new one.
    pub batch_idle: Duration,
    /// `BATCH_MAX_DURATION`: ... and at most this long after it opened.
    pub batch_max: Duration,
    /// `SIBLING_HOLD_DURATION`: how long the machines of one decision placing spreading pods
    /// are held for each other (zero: not held). Goes into a new store's configuration.
    pub sibling_hold: Duration,
    /// `COUNT_LOST_WORK` and `COUNT_LOST_WORK_OF_UNREPLICATED_PODS`: whose work consolidation
    /// counts an eviction to throw away (a Job's pod starts over; a pod no ReplicaSet,
    /// StatefulSet or ReplicationController makes again is gone or fails). Goes into a new
    /// store's configuration.
    pub count_lost_work: LostWork,
    /// `SEPARATE_MACHINES_WHEN_CHEAPER`: whether a machine planned for GPU pods is launched as
    /// one machine per pod where those cost less. Goes into a new store's configuration.
    pub separate_when_cheaper: bool,
    /// `EXPIRATION_WAITS_FOR_JOBS`: whether a machine past its `expireAfter` leaves the pods
    /// that would lose their work to finish. Goes into a new store's configuration.
    pub expiration_waits_for_jobs: bool,
    /// `FEATURE_GATES` as given (`SpotToSpotConsolidation=true,...`).
    pub feature_gates: Vec<(String, bool)>,
    /// `NODEWRIGHT_STORE`: the redb file of the event log (on a persistent volume).
    pub store: PathBuf,
    /// `KUBERNETES_VERSION` for AMI aliases (none: asked of the API server).
    pub kubernetes_version: Option<String>,
    /// How often the cloud's instances are listed for the garbage collector.
    pub instance_gc_period: Duration,
    /// How often EC2NodeClasses are resolved again.
    pub nodeclass_refresh: Duration,
    /// This replica's name in the Lease and in Events (`POD_NAME`, else the host name).
    pub identity: String,
    /// The Lease replicas elect a leader on (none: `DISABLE_LEADER_ELECTION`, one replica).
    pub leader_election: Option<LeaderElection>,
    /// `METRICS_PORT`: where `/metrics` is served.
    pub metrics_address: SocketAddr,
    /// `HEALTH_PROBE_PORT`: where `/healthz` and `/readyz` are served.
    pub health_address: SocketAddr,
    /// `LOG_PORT`: where `/log` is served, to callers the API server allows.
    pub log_address: SocketAddr,
    /// `LOG_SEGMENTS_BUCKET` and `LOG_SEGMENT_INTERVAL`: where the leader ships its store's
    /// sealed segments, and how often it seals (none: the log stays in the replica's store).
    pub log_segments: Option<LogSegments>,
    /// Test hook, never read from the environment: the step of an event it says true of fails
    /// as if the core had panicked on it (see `Driver::with_fault`).
    pub fault: Option<fn(&nodewright_core::Event) -> bool>,
}

/// Where sealed segments of the store go (`controller/src/shipping.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSegments {
    /// `s3://<bucket>/<prefix>` read: the bucket ...
    pub bucket: String,
    /// ... and the prefix; the cluster's name is added under it.
    pub prefix: String,
    /// The leader seals its store and ships what came before this often, and when its term
    /// ends.
    pub every: Duration,
}

/// A setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{setting}: {problem}; fix: {fix}")]
pub struct SettingError {
    pub setting: &'static str,
    pub problem: String,
    pub fix: &'static str,
}

/// The feature gates Karpenter knows, with their defaults.
pub const FEATURE_GATES: [(&str, bool); 4] = [
    ("SpotToSpotConsolidation", false),
    ("NodeRepair", false),
    ("ReservedCapacity", true),
    ("StaticCapacity", false),
];

/// Reads `FEATURE_GATES` (`Name=true,Other=false`).
pub fn parse_feature_gates(raw: &str) -> Result<Vec<(String, bool)>, SettingError> {
    let mut gates = Vec::new();
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let invalid = |problem: String| SettingError {
            setting: "FEATURE_GATES",
            problem,
            fix: "write Name=true or Name=false, separated by commas",
        };
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| invalid(format!("{part:?} has no '='")))?;
        let value = match value.trim() {
            "true" => true,
            "false" => false,
            other => return Err(invalid(format!("{name}={other:?} is not true or false"))),
        };
        if !FEATURE_GATES.iter().any(|(known, _)| *known == name.trim()) {
            return Err(SettingError {
                setting: "FEATURE_GATES",
                problem: format!("unknown gate {name:?}"),
                fix: "use one of SpotToSpotConsolidation, NodeRepair, ReservedCapacity, StaticCapacity",
            });
        }
        gates.push((name.trim().to_string(), value));
    }
    Ok(gates)
}

impl Settings {
    /// Checks what the settings say together.
    pub fn validate(&self) -> Result<(), SettingError> {
        if self.cluster_name.trim().is_empty() {
            return Err(SettingError {
                setting: "CLUSTER_NAME",
                problem: "is empty".into(),
                fix: "set CLUSTER_NAME (or --cluster-name) to the cluster's name",
            });
        }
        if self.batch_idle.is_zero() || self.batch_max < self.batch_idle {
            return Err(SettingError {
                setting: "BATCH_IDLE_DURATION",
                problem: format!(
                    "{:?} with BATCH_MAX_DURATION {:?}",
                    self.batch_idle, self.batch_max
                ),
                fix: "use a positive idle duration no longer than the max duration (Karpenter: 1s and 10s)",
            });
        }
        if let Some(election) = &self.leader_election {
            if election.name.trim().is_empty() || election.namespace.trim().is_empty() {
                return Err(SettingError {
                    setting: "LEADER_ELECTION_NAME",
                    problem: "the Lease's name or namespace is empty".into(),
                    fix: "set LEADER_ELECTION_NAME and LEADER_ELECTION_NAMESPACE, or DISABLE_LEADER_ELECTION=true for one replica",
                });
            }
            if election.lease_duration < Duration::from_secs(2) {
                return Err(SettingError {
                    setting: "LEADER_ELECTION_LEASE_DURATION",
                    problem: format!("{:?} is shorter than 2s", election.lease_duration),
                    fix: "use at least 2s (Karpenter: 15s)",
                });
            }
        }
        if let Some(segments) = &self.log_segments
            && segments.every < Duration::from_secs(1)
        {
            return Err(SettingError {
                setting: "LOG_SEGMENT_INTERVAL",
                problem: format!("{:?} is shorter than 1s", segments.every),
                fix: "seal the store every minute or more (the default is 5m)",
            });
        }
        if self.metrics_address.port() != 0 && self.metrics_address == self.health_address {
            return Err(SettingError {
                setting: "HEALTH_PROBE_PORT",
                problem: format!("is METRICS_PORT too ({})", self.metrics_address.port()),
                fix: "give the probes and the metrics two ports (Karpenter: 8081 and 8080)",
            });
        }
        if self.log_address.port() != 0
            && (self.log_address.port() == self.metrics_address.port()
                || self.log_address.port() == self.health_address.port())
        {
            return Err(SettingError {
                setting: "LOG_PORT",
                problem: format!(
                    "is METRICS_PORT or HEALTH_PROBE_PORT too ({})",
                    self.log_address.port()
                ),
                fix: "give /log a port of its own (the default is 8082): it is served only to callers the API server allows",
            });
        }
        Ok(())
    }

    /// Whether a feature gate is on (its default when not given).
    pub fn gate(&self, name: &str) -> bool {
        self.feature_gates
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, on)| *on)
            .or_else(|| {
                FEATURE_GATES
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, d)| *d)
            })
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_gates_read_as_karpenter_writes_them() {
        let gates = parse_feature_gates("SpotToSpotConsolidation=true, NodeRepair=false").unwrap();
        assert_eq!(
            gates,
            [
                ("SpotToSpotConsolidation".to_string(), true),
                ("NodeRepair".to_string(), false)
            ]
        );
        let err = parse_feature_gates("Spot=yes").unwrap_err();
        assert_eq!(err.setting, "FEATURE_GATES");
        assert!(err.to_string().contains("\"yes\""), "{err}");
        assert!(parse_feature_gates("Unknown=true").is_err());
        assert!(parse_feature_gates("").unwrap().is_empty());
    }
}
