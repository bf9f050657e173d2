//! Machines for GPU pods launched apart where that costs less (`separateMachinesWhenCheaper`),
//! simulated end to end: two one-GPU pods of one Deployment get two one-GPU machines, not one
//! four-GPU machine; `false` in the scenario's settings gives Karpenter's packing.

use nodewright_adapters::eventlog::{LogHeader, MemoryStore};
use nodewright_testkit::Report;
use nodewright_testkit::scenario::{NoFiles, load_str};

const TWO_GPU_PODS: &str = r#"
name: two-gpu-pods
duration: 2h
cloud:
  launchLatency: 30s
  registrationLatency: 15s
manifests:
  - |
    apiVersion: karpenter.k8s.aws/v1
    kind: EC2NodeClass
    metadata: {name: default}
    spec:
      amiSelectorTerms: [{alias: al2023@latest}]
      role: KarpenterNodeRole
      subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
      securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  - |
    apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: gpu}
    spec:
      template:
        spec:
          requirements:
            - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
            - {key: karpenter.k8s.aws/instance-family, operator: In, values: ["g4dn"]}
          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 1m}
timeline:
  - at: 0s
    apply: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: train}
      spec:
        replicas: 2
        selector: {matchLabels: {app: train}}
        template:
          metadata: {labels: {app: train}}
          spec:
            containers:
              - name: c
                image: x
                resources: {requests: {cpu: 12, memory: 24Gi, nvidia.com/gpu: 1}}
"#;

fn run(settings: &str) -> Report {
    let text = format!("{TWO_GPU_PODS}{settings}");
    let scenario = load_str(&text, "two-gpu-pods.yaml", &NoFiles).expect("loads");
    let store = MemoryStore::new(LogHeader::new(scenario.config.clone(), &scenario.name));
    let report = nodewright_testkit::sim::run(&scenario, store)
        .expect("runs")
        .0;
    assert!(
        report.invariant_violations.is_empty(),
        "{}",
        report.summary()
    );
    assert_eq!(report.pods.scheduled, 2, "{}", report.summary());
    report
}

fn types(report: &Report) -> Vec<&str> {
    report
        .machines
        .iter()
        .map(|m| m.instance_type.as_str())
        .collect()
}

#[test]
fn two_one_gpu_pods_get_two_one_gpu_machines_and_cost_less_than_sharing_a_four_gpu_one() {
    let apart = run("");
    assert_eq!(
        types(&apart),
        ["g4dn.4xlarge", "g4dn.4xlarge"],
        "{}",
        apart.summary()
    );
    let karpenter = run("settings: {separateMachinesWhenCheaper: false}\n");
    assert_eq!(
        types(&karpenter),
        ["g4dn.12xlarge"],
        "{}",
        karpenter.summary()
    );
    assert!(
        apart.cost.total_usd < 0.7 * karpenter.cost.total_usd,
        "apart ${}, together ${}",
        apart.cost.total_usd,
        karpenter.cost.total_usd
    );
    assert_eq!(apart.disruptions.evictions, 0, "{}", apart.summary());
}
