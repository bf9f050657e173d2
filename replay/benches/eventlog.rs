//! Criterion benchmarks of the event log: `replay --verify` over a log dominated by pod events,
//! the controller store's durable group commit, and the encoded size of an event.
//!
//! The log: one Deployment scaled to 2,000 pods, then to 500, then to 0, under a NodePool of
//! c6a.4xlarge on-demand, 30 simulated minutes (about 10,000 events: pods applied, bound and
//! deleted, nodes, launches). Figures in `docs/benchmarks.md`.

use std::io::Cursor;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use nodewright_adapters::eventlog::{LogHeader, LogRecord, MemoryStore, NwlogReader, RedbStore};
use nodewright_core::model::pod::Pod;
use nodewright_core::{Event, EventKind};
use nodewright_testkit::scenario::{NoFiles, load_str};

const SCENARIO: &str = r#"
name: pod-churn
seed: 1
duration: 30m
manifests:
  - |
    apiVersion: karpenter.k8s.aws/v1
    kind: EC2NodeClass
    metadata: {name: default}
    spec:
      amiSelectorTerms: [{alias: al2023@latest}]
      role: KarpenterNodeRole-demo
      subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
      securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  - |
    apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: default}
    spec:
      template:
        spec:
          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
          requirements:
            - {key: node.kubernetes.io/instance-type, operator: In, values: [c6a.4xlarge]}
            - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 1m}
  - |
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web, namespace: default}
    spec:
      replicas: 2000
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec:
          containers:
            - name: web
              image: nginx
              resources:
                requests: {cpu: 1500m, memory: 2Gi}
timeline:
  - at: 10m
    scale: {deployment: web, namespace: default, replicas: 500}
  - at: 20m
    scale: {deployment: web, namespace: default, replicas: 0}
"#;

/// A log dominated by pod events: the pod-churn cluster's Deployment, of 250m / 256Mi pods,
/// scaled between 1,000 and 1,400 replicas every 2 s for ten minutes (a busy cluster's pod
/// traffic over some twenty machines).
fn pod_stream_scenario() -> String {
    let head = SCENARIO
        .split("timeline:")
        .next()
        .expect("the scenario has a timeline")
        .replace("name: pod-churn", "name: pod-stream")
        .replace("duration: 30m", "duration: 11m")
        .replace("replicas: 2000", "replicas: 1000")
        .replace(
            "requests: {cpu: 1500m, memory: 2Gi}",
            "requests: {cpu: 250m, memory: 256Mi}",
        );
    let mut text = format!("{head}timeline:\n");
    for (i, at) in (60..660).step_by(2).enumerate() {
        let replicas = if i % 2 == 0 { 1400 } else { 1000 };
        text.push_str(&format!(
            "  - at: {at}s\n    scale: {{deployment: web, namespace: default, replicas: {replicas}}}\n"
        ));
    }
    text
}

/// The log of a scenario as `.nwlog` bytes, and its event count.
fn scenario_log(text: &str, file: &str) -> (Vec<u8>, u64) {
    let scenario = load_str(text, file, &NoFiles).expect("the scenario loads");
    let store: MemoryStore<LogHeader, LogRecord> =
        MemoryStore::new(LogHeader::new(scenario.config.clone(), &scenario.name));
    let (report, store) = nodewright_testkit::sim::run(&scenario, store).expect("runs");
    let bytes = store.write_nwlog(Vec::new()).expect("encodes");
    (bytes, report.events)
}

fn replay_verify(c: &mut Criterion) {
    let logs = [
        ("pod-churn", scenario_log(SCENARIO, "pod-churn.yaml")),
        (
            "pod-stream",
            scenario_log(&pod_stream_scenario(), "pod-stream.yaml"),
        ),
    ];
    for (name, (bytes, events)) in logs {
        let mut group = c.benchmark_group("replay-verify");
        group.sample_size(10);
        group.throughput(Throughput::Elements(events));
        group.bench_function(name, |b| {
            b.iter(|| {
                let reader: NwlogReader<LogHeader, LogRecord, _> =
                    NwlogReader::new(Cursor::new(&bytes)).expect("a log");
                let outcome = nodewright_replay::verify(reader).expect("readable");
                assert!(outcome.divergence.is_none());
            })
        });
        group.finish();
    }
}

/// Pod events as a controller appends them: a batch of `n` created pods.
fn pod_batch(from: usize, n: usize) -> Vec<LogRecord> {
    (from..from + n)
        .map(|i| {
            let mut pod = Pod::new("default", &format!("web-5tkszj9wl-{i:05}"), 1500, 2 << 30);
            pod.labels.insert("app".into(), "web".into());
            pod.created_at_ms = i as u64;
            LogRecord::Event(Event::new(i as u64, EventKind::PodApplied(Box::new(pod))))
        })
        .collect()
}

fn durable_append(c: &mut Criterion) {
    let mut group = c.benchmark_group("redb-append-durable");
    group.sample_size(10);
    for batch in [100usize, 1000] {
        group.throughput(Throughput::Elements(batch as u64));
        group.bench_function(format!("batch-{batch}"), |b| {
            let dir = tempfile::tempdir().expect("a temp dir");
            let header = LogHeader::new(Default::default(), "bench");
            let mut store: RedbStore<LogHeader, LogRecord> =
                RedbStore::create(dir.path().join("events.redb"), &header).expect("a store");
            let mut next = 0;
            b.iter_batched(
                || {
                    let records = pod_batch(next, batch);
                    next += batch;
                    records
                },
                |records| store.append(&records).expect("appended"),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, replay_verify, durable_append);
criterion_main!(benches);
