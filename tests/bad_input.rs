//! Malformed manifests and scenarios are refused with an error that names the file, the field
//! and the fix, never a panic.

use nodewright_adapters::manifest::{Manifest, ManifestError, parse_manifests};
use nodewright_testkit::scenario::{ScenarioError, load_file};

const NODECLASS_REF: &str =
    "      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n";
/// The least a NodePool template must say (Karpenter's CRD requires both).
const MINIMAL_TEMPLATE: &str = "      requirements: []\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n";

fn nodepool(spec_extra: &str, template_extra: &str) -> String {
    format!(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: p}}\nspec:\n{spec_extra}  template:\n    spec:\n{template_extra}"
    )
}

fn refused(yaml: &str) -> String {
    match parse_manifests(yaml, "pool.yaml") {
        Ok(m) => panic!("accepted: {m:?}"),
        Err(e) => e.to_string(),
    }
}

fn assert_mentions(message: &str, parts: &[&str]) {
    for p in parts {
        assert!(message.contains(p), "{message:?} does not mention {p:?}");
    }
}

#[test]
fn the_tutorial_manifests_are_accepted_verbatim() {
    for file in ["nodepool.yaml", "ec2nodeclass.yaml", "inflate.yaml"] {
        let path = format!("{}/scenarios/tutorial/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("read");
        let parsed = parse_manifests(&text, &path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(parsed.len(), 1);
    }
    let text = std::fs::read_to_string(format!(
        "{}/scenarios/tutorial/nodepool.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("read");
    let Manifest::NodePool(pool) = &parse_manifests(&text, "nodepool.yaml").expect("parses")[0]
    else {
        panic!("a NodePool");
    };
    assert_eq!(pool.limits["cpu"], 1_000_000);
    assert_eq!(pool.requirements.len(), 4);
    assert_eq!(pool.consolidate_after.as_ms(), Some(60_000));
    assert_eq!(pool.expire_after.as_ms(), Some(720 * 3_600_000));
}

#[test]
fn unknown_operator() {
    let m = refused(&nodepool(
        "",
        &format!(
            "      requirements:\n        - {{key: kubernetes.io/arch, operator: Inn, values: [amd64]}}\n{NODECLASS_REF}"
        ),
    ));
    assert_mentions(
        &m,
        &[
            "pool.yaml",
            "requirements[0].operator",
            "Inn",
            "In, NotIn, Exists, DoesNotExist, Gt, Lt",
        ],
    );
}

#[test]
fn in_without_values() {
    let m = refused(&nodepool(
        "",
        &format!(
            "      requirements:\n        - {{key: kubernetes.io/arch, operator: In}}\n{NODECLASS_REF}"
        ),
    ));
    assert_mentions(&m, &["requirements[0]", "needs at least one value"]);
}

#[test]
fn gt_with_a_non_integer() {
    let m = refused(&nodepool(
        "",
        &format!(
            "      requirements:\n        - {{key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: [four]}}\n{NODECLASS_REF}"
        ),
    ));
    assert_mentions(&m, &["requirements[0]", "integer"]);
}

#[test]
fn hostname_in_nodepool_requirements() {
    let m = refused(&nodepool(
        "",
        &format!(
            "      requirements:\n        - {{key: kubernetes.io/hostname, operator: In, values: [a]}}\n{NODECLASS_REF}"
        ),
    ));
    assert_mentions(&m, &["requirements[0].key", "kubernetes.io/hostname"]);
}

#[test]
fn a_restricted_key_names_the_well_known_label_it_was_probably_meant_to_be() {
    let m = refused(&nodepool(
        "",
        &format!(
            "      requirements:\n        - {{key: karpenter.k8s.aws/instance-categry, operator: In, values: [c]}}\n{NODECLASS_REF}"
        ),
    ));
    assert_mentions(
        &m,
        &[
            "spec.template.spec.requirements[0].key",
            "label domain \"karpenter.k8s.aws\" is restricted",
            "did you mean karpenter.k8s.aws/instance-category?",
        ],
    );
    // A key of Karpenter's domain that resembles nothing gets the plain fix.
    let m = refused(&nodepool(
        "",
        &format!(
            "      requirements:\n        - {{key: karpenter.sh/my-own-team, operator: Exists}}\n{NODECLASS_REF}"
        ),
    ));
    assert_mentions(
        &m,
        &["label domain \"karpenter.sh\" is restricted", "remove it"],
    );
    assert!(!m.contains("did you mean"), "{m}");
}

#[test]
fn bad_quantity_in_limits() {
    let m = refused(&nodepool("  limits: {cpu: 10x}\n", MINIMAL_TEMPLATE));
    assert_mentions(&m, &["spec.limits.cpu", "10x", "500m"]);
}

#[test]
fn negative_limits() {
    let m = refused(&nodepool("  limits: {cpu: -4}\n", MINIMAL_TEMPLATE));
    assert_mentions(&m, &["spec.limits.cpu", "negative"]);
    let m = refused(&nodepool(
        "  limits: {memory: \"-4Gi\"}\n",
        MINIMAL_TEMPLATE,
    ));
    assert_mentions(&m, &["spec.limits.memory", "negative"]);
}

#[test]
fn unknown_resource_name_in_limits() {
    let m = refused(&nodepool("  limits: {cpus: 4}\n", MINIMAL_TEMPLATE));
    assert_mentions(&m, &["spec.limits.cpus", "not a resource name"]);
}

#[test]
fn missing_node_class_ref() {
    // A field Karpenter's CRD requires is refused while reading, at its line.
    let m = refused(&nodepool("", "      requirements: []\n"));
    assert_mentions(&m, &["pool.yaml", "missing field `nodeClassRef`", "line 7"]);
    let m = refused(&nodepool("", NODECLASS_REF));
    assert_mentions(&m, &["missing field `requirements`"]);
    let m = refused(&nodepool(
        "",
        "      requirements: []\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: \"\"}\n",
    ));
    assert_mentions(&m, &["spec.template.spec.nodeClassRef.name", "is missing"]);
}

#[test]
fn a_typo_in_a_nodepool_field_is_an_error_not_ignored() {
    let m = refused(&nodepool(
        "",
        &format!("      requirments: []\n{NODECLASS_REF}"),
    ));
    assert_mentions(&m, &["pool.yaml", "requirments"]);
}

#[test]
fn weight_out_of_range() {
    let m = refused(&nodepool("  weight: 101\n", MINIMAL_TEMPLATE));
    assert_mentions(&m, &["spec.weight", "between 1 and 100"]);
}

#[test]
fn bad_durations() {
    let m = refused(&nodepool(
        "  disruption: {consolidateAfter: 5 minutes}\n",
        MINIMAL_TEMPLATE,
    ));
    assert_mentions(&m, &["spec.disruption.consolidateAfter", "Go duration"]);
    let m = refused(&nodepool(
        "",
        &format!("{MINIMAL_TEMPLATE}      expireAfter: forever\n"),
    ));
    assert_mentions(&m, &["expireAfter", "Never"]);
}

#[test]
fn bad_budget() {
    let m = refused(&nodepool(
        "  disruption:\n    consolidateAfter: 0s\n    budgets:\n      - {nodes: \"ten\"}\n",
        MINIMAL_TEMPLATE,
    ));
    assert_mentions(&m, &["budgets[0].nodes", "10%"]);
    let m = refused(&nodepool(
        "  disruption:\n    consolidateAfter: 0s\n    budgets:\n      - {nodes: \"0\", schedule: \"0 9 * * 1-5\"}\n",
        MINIMAL_TEMPLATE,
    ));
    assert_mentions(&m, &["budgets[0]", "together"]);
}

#[test]
fn unknown_consolidation_policy() {
    let m = refused(&nodepool(
        "  disruption: {consolidationPolicy: WhenUnderutilized, consolidateAfter: 1m}\n",
        MINIMAL_TEMPLATE,
    ));
    assert_mentions(&m, &["consolidationPolicy", "WhenEmptyOrUnderutilized"]);
}

#[test]
fn ec2nodeclass_needs_role_subnets_and_amis() {
    let base = "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: c}\nspec:\n";
    let m = refused(&format!(
        "{base}  amiSelectorTerms: [{{alias: al2023@latest}}]\n  subnetSelectorTerms: [{{tags: {{a: b}}}}]\n  securityGroupSelectorTerms: [{{tags: {{a: b}}}}]\n"
    ));
    assert_mentions(&m, &["spec.role", "instanceProfile"]);
    let m = refused(&format!(
        "{base}  role: r\n  amiSelectorTerms: [{{alias: al2023@latest}}]\n  securityGroupSelectorTerms: [{{tags: {{a: b}}}}]\n"
    ));
    assert_mentions(&m, &["missing field `subnetSelectorTerms`"]);
    let m = refused(&format!(
        "{base}  role: r\n  amiSelectorTerms: [{{alias: al2023@latest}}]\n  subnetSelectorTerms: []\n  securityGroupSelectorTerms: [{{tags: {{a: b}}}}]\n"
    ));
    assert_mentions(&m, &["spec.subnetSelectorTerms", "karpenter.sh/discovery"]);
}

#[test]
fn a_bad_pod_request() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: c\n      resources: {requests: {memory: 12 gigs}}\n";
    let m = refused(yaml);
    assert_mentions(
        &m,
        &["Pod \"p\"", "spec.containers[0].resources.requests.memory"],
    );
}

#[test]
fn an_unknown_kind() {
    let m = refused("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n");
    assert_mentions(&m, &["ConfigMap", "NodePool"]);
}

#[test]
fn broken_yaml_names_the_document_and_line() {
    let err = parse_manifests("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: []}\n---\nkind: [unclosed\n", "multi.yaml").expect_err("refused");
    match &err {
        ManifestError::Yaml {
            document,
            first_line,
            ..
        } => {
            assert_eq!(*document, 2);
            assert_eq!(*first_line, 6);
        }
        other => panic!("{other:?}"),
    }
    assert_mentions(&err.to_string(), &["multi.yaml", "document 2"]);
}

fn scenario_error(body: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.yaml");
    std::fs::write(&path, body).expect("write");
    match load_file(&path) {
        Ok(_) => panic!("accepted"),
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains("s.yaml"), "{text}");
            text
        }
    }
}

#[test]
fn scenario_unknown_key() {
    let m = scenario_error("name: s\ndurration: 5m\n");
    assert_mentions(&m, &["durration"]);
}

#[test]
fn scenario_bad_duration_and_unknown_instance_type() {
    assert_mentions(
        &scenario_error("name: s\nduration: 5 mins\n"),
        &["duration", "Go duration"],
    );
    assert_mentions(
        &scenario_error(
            "name: s\ncluster:\n  nodes:\n    - {name: sys, instanceType: m5.hyper, zone: us-east-1a}\n",
        ),
        &["cluster.nodes[0].instanceType", "m5.hyper"],
    );
    assert_mentions(
        &scenario_error("name: s\ncloud:\n  insufficientCapacity:\n    - {zones: [us-east-9z]}\n"),
        &["cloud.insufficientCapacity[0].zones", "us-east-1a"],
    );
}

#[test]
fn scenario_timeline_and_expectations_take_one_item_each() {
    assert_mentions(
        &scenario_error(
            "name: s\ntimeline:\n  - at: 1m\n    scale: {deployment: a, replicas: 1}\n    delete: {kind: Deployment, name: a}\n",
        ),
        &[
            "timeline[0]",
            "exactly one of scale, delete, apply, interrupt",
        ],
    );
    assert_mentions(
        &scenario_error("name: s\nexpect:\n  - {maxNodes: 1, finalNodes: 0}\n"),
        &["expect[0]", "one assertion per list item"],
    );
}

#[test]
fn scenario_missing_manifest_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.yaml");
    std::fs::write(&path, "name: s\nmanifests:\n  - file: nowhere.yaml\n").expect("write");
    let err = load_file(&path).expect_err("refused");
    assert!(matches!(err, ScenarioError::Io { .. }), "{err:?}");
    assert_mentions(&err.to_string(), &["nowhere.yaml"]);
}

#[test]
fn scenario_manifest_errors_carry_the_scenario_file() {
    let m = scenario_error(
        "name: s\nmanifests:\n  - |\n    apiVersion: karpenter.sh/v1\n    kind: NodePool\n    metadata: {name: p}\n    spec:\n      limits: {cpu: -1}\n      template:\n        spec:\n          requirements: []\n          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n",
    );
    assert_mentions(&m, &["manifests[0]", "spec.limits.cpu", "negative"]);
}

#[test]
fn scenario_settings_are_checked() {
    assert_mentions(
        &scenario_error("name: s\nsettings: {preferencePolicy: Sometimes}\n"),
        &["settings.preferencePolicy", "Respect or Ignore"],
    );
    assert_mentions(
        &scenario_error("name: s\nsettings: {minValuesPolicy: Loose}\n"),
        &["settings.minValuesPolicy", "Strict or BestEffort"],
    );
}

#[test]
fn spread_max_skew_out_of_range_is_refused() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  topologySpreadConstraints:\n    - {maxSkew: 4294967296, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: p}}}\n  containers: [{name: c}]\n";
    assert_mentions(
        &refused(yaml),
        &["topologySpreadConstraints[0].maxSkew", "2147483647"],
    );
}

#[test]
fn a_term_without_label_selector_selects_no_pod() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: p}}\nspec:\n  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        - topologyKey: kubernetes.io/hostname\n  containers: [{name: c}]\n";
    let Manifest::Pod(template) = &parse_manifests(yaml, "p.yaml").expect("parses")[0] else {
        panic!("a pod");
    };
    let pod = &template.pod;
    assert!(!pod.pod_anti_affinity[0].selector.matches(&pod.labels));
}

#[test]
fn scenario_interrupt_entries_are_checked() {
    assert_mentions(
        &scenario_error("name: s\ntimeline:\n  - at: 1m\n    interrupt: {kind: spot, node: any}\n"),
        &[
            "timeline[0].interrupt.kind",
            "\"spot\"",
            "spot-interruption, rebalance",
        ],
    );
    assert_mentions(
        &scenario_error(
            "name: s\ntimeline:\n  - at: 1m\n    interrupt: {kind: rebalance, node: \"\"}\n",
        ),
        &["timeline[0].interrupt.node", "any-spot"],
    );
    assert_mentions(
        &scenario_error(
            "name: s\ntimeline:\n  - at: 1m\n    interrupt: {kind: rebalance, nodes: any}\n",
        ),
        &["nodes"],
    );
}

#[test]
fn scenario_interrupt_storms_are_checked() {
    assert_mentions(
        &scenario_error(
            "name: s\ntimeline:\n  - at: 1m\n    interrupt: {kind: spot-interruption, node: any-spot, fraction: 1.5}\n",
        ),
        &["timeline[0].interrupt.fraction", "1.5", "0.3"],
    );
    assert_mentions(
        &scenario_error(
            "name: s\ntimeline:\n  - at: 1m\n    interrupt: {kind: spot-interruption, node: any-spot, over: 2m}\n",
        ),
        &["timeline[0].interrupt.over", "without fraction"],
    );
}

#[test]
fn scenario_latency_spikes_are_checked() {
    assert_mentions(
        &scenario_error(
            "name: s\ncloud:\n  launchLatencySpikes:\n    - {from: 5m, until: 2m, latency: 3m}\n",
        ),
        &["cloud.launchLatencySpikes[0].until", "after"],
    );
    assert_mentions(
        &scenario_error("name: s\ncloud:\n  apiErrorRate: 1.5\n"),
        &["cloud.apiErrorRate", "1.5"],
    );
}

#[test]
fn counts_replicas_and_durations_past_their_maximum_are_refused_at_load() {
    // Before the limits, `count: 1000000000` ran out of memory building the cluster.
    let m = scenario_error(
        "name: s\ncluster:\n  nodes:\n    - {name: sys, instanceType: m5.large, zone: us-east-1a, count: 1000000000}\n",
    );
    assert_mentions(&m, &["cluster.nodes[0].count", "10000", "fix:"]);
    let m = scenario_error(
        "name: s\ncluster:\n  nodes:\n    - {name: a, instanceType: m5.large, zone: us-east-1a, count: 6000}\n    - {name: b, instanceType: m5.large, zone: us-east-1b, count: 6000}\n",
    );
    assert_mentions(&m, &["cluster.nodes[1].count", "12000"]);
    let m = scenario_error("name: s\nduration: 10000h\n");
    assert_mentions(&m, &["duration", "744h", "fix:"]);
    let m = scenario_error(
        "name: s\ntimeline:\n  - at: 1m\n    scale: {deployment: web, replicas: 5000000000}\n",
    );
    assert_mentions(&m, &["timeline[0].scale.replicas", "100000", "fix:"]);
    let m = refused(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 100001\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: c, image: x}]\n",
    );
    assert_mentions(&m, &["spec.replicas", "100001", "at most 100000"]);
}

/// A scenario of the guide's NodePool, EC2NodeClass and `inflate`, with `extra` after them.
fn tutorial_scenario(manifests_extra: &str, timeline: &str) -> String {
    let dir = format!("{}/scenarios/tutorial", env!("CARGO_MANIFEST_DIR"));
    format!(
        "name: s\nmanifests:\n  - file: {dir}/ec2nodeclass.yaml\n  - file: {dir}/nodepool.yaml\n  - file: {dir}/inflate.yaml\n{manifests_extra}timeline:\n{timeline}"
    )
}

#[test]
fn what_a_scenario_names_must_exist_and_a_typo_gets_the_name_it_meant() {
    // A timeline that scales a Deployment of another name.
    let m = scenario_error(&tutorial_scenario(
        "",
        "  - at: 1m\n    scale: {deployment: infalte, replicas: 5}\n",
    ));
    assert_mentions(
        &m,
        &[
            "timeline[0].scale.deployment",
            "no Deployment default/infalte exists",
            "did you mean \"inflate\"?",
        ],
    );
    // Deleted, then scaled.
    let m = scenario_error(&tutorial_scenario(
        "",
        "  - at: 2m\n    scale: {deployment: inflate, replicas: 5}\n  - at: 1m\n    delete: {kind: Deployment, name: inflate}\n",
    ));
    assert_mentions(&m, &["timeline[0].scale.deployment", "exists at that time"]);
    // A delete of nothing.
    let m = scenario_error(&tutorial_scenario(
        "",
        "  - at: 1m\n    delete: {kind: NodePool, name: defaults}\n",
    ));
    assert_mentions(
        &m,
        &[
            "timeline[0].delete.name",
            "NodePool \"defaults\"",
            "did you mean \"default\"?",
        ],
    );
    // A NodePool whose nodeClassRef names no EC2NodeClass.
    let pool = "  - |\n    apiVersion: karpenter.sh/v1\n    kind: NodePool\n    metadata: {name: other}\n    spec:\n      template:\n        spec:\n          requirements: []\n          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: defualt}\n";
    let m = scenario_error(&tutorial_scenario(
        pool,
        "  - at: 1m\n    scale: {deployment: inflate, replicas: 1}\n",
    ));
    assert_mentions(
        &m,
        &[
            "manifests[3]",
            "EC2NodeClass \"defualt\"",
            "did you mean \"default\"?",
        ],
    );
    // Two starting objects with one name.
    let again = "  - |\n    apiVersion: karpenter.sh/v1\n    kind: NodePool\n    metadata: {name: default}\n    spec:\n      template:\n        spec:\n          requirements: []\n          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n";
    let m = scenario_error(&tutorial_scenario(
        again,
        "  - at: 1m\n    scale: {deployment: inflate, replicas: 1}\n",
    ));
    assert_mentions(
        &m,
        &[
            "manifests[3]",
            "defines NodePool \"default\" again (manifests[1]",
        ],
    );
}

fn job(spec_extra: &str, annotations: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  annotations: {{{annotations}}}\nspec:\n{spec_extra}  template:\n    spec:\n      containers: [{{name: c, image: x}}]\n"
    )
}

#[test]
fn job_and_cronjob_mistakes_name_the_field() {
    let m = refused(&job("  completions: 0\n", ""));
    assert_mentions(
        &m,
        &["Job \"j\"", "`spec.completions`", "0 is outside 1..=100000"],
    );
    let m = refused(&job("  parallelism: 200000\n", ""));
    assert_mentions(&m, &["`spec.parallelism`"]);
    let m = refused(&job("", "nodewright.dev/run-time: soon"));
    assert_mentions(
        &m,
        &[
            "`metadata.annotations.nodewright.dev/run-time`",
            "\"soon\"",
            "90s, 10m or 2h",
        ],
    );
    let cron = |schedule: &str, policy: &str| {
        format!(
            "apiVersion: batch/v1\nkind: CronJob\nmetadata: {{name: c}}\nspec:\n  schedule: \"{schedule}\"\n{policy}  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers: [{{name: c, image: x}}]\n"
        )
    };
    let m = refused(&cron("every hour", ""));
    assert_mentions(&m, &["CronJob \"c\"", "`spec.schedule`", "@hourly"]);
    let m = refused(&cron("@hourly", "  concurrencyPolicy: Sometimes\n"));
    assert_mentions(
        &m,
        &["`spec.concurrencyPolicy`", "Allow, Forbid or Replace"],
    );
    // Good ones read.
    assert!(parse_manifests(&cron("@hourly", "  concurrencyPolicy: Replace\n"), "c.yaml").is_ok());
    assert!(
        parse_manifests(
            &job("  completions: 3\n", "nodewright.dev/run-time: 90s"),
            "j.yaml"
        )
        .is_ok()
    );
}

fn nodeclass_storage(spec_extra: &str) -> nodewright_core::model::nodeclass::NodeStorage {
    let yaml = format!(
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: c}}\nspec:\n  role: R\n  subnetSelectorTerms: [{{tags: {{k: v}}}}]\n  securityGroupSelectorTerms: [{{tags: {{k: v}}}}]\n{spec_extra}"
    );
    match parse_manifests(&yaml, "c.yaml")
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0)
    {
        Manifest::NodeClass(class) => class.storage,
        other => panic!("an EC2NodeClass: {other:?}"),
    }
}

#[test]
fn the_node_storage_is_read_from_block_device_mappings_as_karpenter_reads_it() {
    use nodewright_core::model::nodeclass::Threshold;
    let gib = 1i64 << 30;
    let al2023 = "  amiSelectorTerms: [{alias: al2023@latest}]\n";
    assert_eq!(nodeclass_storage(al2023).volume_bytes, 20 * gib);
    // The mapping marked rootVolume.
    let root = nodeclass_storage(&format!(
        "{al2023}  blockDeviceMappings:\n    - {{deviceName: /dev/xvdb, ebs: {{volumeSize: 300Gi}}}}\n    - {{deviceName: /dev/xvda, rootVolume: true, ebs: {{volumeSize: 100Gi}}}}\n"
    ));
    assert_eq!(root.volume_bytes, 100 * gib);
    // Else the family's device: /dev/xvda for AL2023, /dev/xvdb (the data volume) for
    // Bottlerocket, whose default is 20 GiB.
    let device = nodeclass_storage(&format!(
        "{al2023}  blockDeviceMappings:\n    - {{deviceName: /dev/xvda, ebs: {{volumeSize: 80Gi}}}}\n"
    ));
    assert_eq!(device.volume_bytes, 80 * gib);
    let bottlerocket = "  amiSelectorTerms: [{alias: bottlerocket@latest}]\n";
    assert_eq!(nodeclass_storage(bottlerocket).volume_bytes, 20 * gib);
    let data = nodeclass_storage(&format!(
        "{bottlerocket}  blockDeviceMappings:\n    - {{deviceName: /dev/xvda, ebs: {{volumeSize: 4Gi}}}}\n    - {{deviceName: /dev/xvdb, ebs: {{volumeSize: 60Gi}}}}\n"
    ));
    assert_eq!(data.volume_bytes, 60 * gib);
    // A Custom AMI: the last mapping.
    let custom = nodeclass_storage(
        "  amiFamily: Custom\n  amiSelectorTerms: [{id: ami-123}]\n  blockDeviceMappings:\n    - {deviceName: /dev/sda1, ebs: {volumeSize: 30Gi}}\n    - {deviceName: /dev/sdb, ebs: {volumeSize: 40Gi}}\n",
    );
    assert_eq!(custom.volume_bytes, 40 * gib);
    // RAID0 and the nodefs eviction threshold.
    let raid = nodeclass_storage(&format!(
        "{al2023}  instanceStorePolicy: RAID0\n  kubelet:\n    evictionHard: {{nodefs.available: 15%}}\n"
    ));
    assert!(raid.instance_store_raid0);
    assert_eq!(raid.eviction_hard_nodefs, Some(Threshold::Percent(15)));
}

#[test]
fn cpu_options_nested_virtualization_is_read_and_a_bad_value_is_refused() {
    let class = |extra: &str| {
        format!(
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: c}}\nspec:\n  role: R\n  subnetSelectorTerms: [{{tags: {{k: v}}}}]\n  securityGroupSelectorTerms: [{{tags: {{k: v}}}}]\n  amiSelectorTerms: [{{alias: al2023@latest}}]\n{extra}"
        )
    };
    let read = |extra: &str| match parse_manifests(&class(extra), "c.yaml")
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0)
    {
        Manifest::NodeClass(class) => class.nested_virtualization,
        other => panic!("an EC2NodeClass: {other:?}"),
    };
    assert!(read("  cpuOptions: {nestedVirtualization: enabled}\n"));
    assert!(!read("  cpuOptions: {nestedVirtualization: disabled}\n"));
    assert!(!read(""));
    let message = refused(&class("  cpuOptions: {nestedVirtualization: on}\n"));
    assert_mentions(
        &message,
        &[
            "spec.cpuOptions.nestedVirtualization",
            "\"on\"",
            "enabled",
            "disabled",
        ],
    );
}

#[test]
fn a_static_nodepool_is_read_and_refused_where_karpenters_crd_refuses_it() {
    let read = |spec_extra: &str| match parse_manifests(
        &nodepool(spec_extra, MINIMAL_TEMPLATE),
        "pool.yaml",
    )
    .unwrap_or_else(|e| panic!("{e}"))
    .remove(0)
    {
        Manifest::NodePool(pool) => pool.replicas,
        other => panic!("a NodePool: {other:?}"),
    };
    assert_eq!(read("  replicas: 4\n  limits: {nodes: 6}\n"), Some(4));
    assert_eq!(read(""), None);
    let weight = refused(&nodepool("  replicas: 2\n  weight: 10\n", MINIMAL_TEMPLATE));
    assert_mentions(&weight, &["spec.weight", "static NodePool", "fix: "]);
    let limits = refused(&nodepool(
        "  replicas: 2\n  limits: {cpu: 100}\n",
        MINIMAL_TEMPLATE,
    ));
    assert_mentions(&limits, &["spec.limits.cpu", "only limits.nodes", "fix: "]);
    let negative = refused(&nodepool("  replicas: -1\n", MINIMAL_TEMPLATE));
    assert_mentions(&negative, &["spec.replicas", "negative", "fix: "]);
    let huge = refused(&nodepool("  replicas: 1000000\n", MINIMAL_TEMPLATE));
    assert_mentions(&huge, &["spec.replicas", "10000", "fix: "]);
}

#[test]
fn too_many_pods_at_once_and_an_oversized_object_are_refused_at_load() {
    let dir = tempfile::tempdir().expect("a folder");
    let deployment = |name: &str, replicas: u32| {
        format!(
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      containers: [{{name: c, image: x}}]\n"
        )
    };
    // Each under the per-workload limit, together over the total; a scale counts at its peak.
    let manifests = deployment("a", 90_000) + &deployment("b", 90_000) + &deployment("c", 1);
    std::fs::write(dir.path().join("apps.yaml"), manifests).expect("written");
    let scenario = dir.path().join("s.yaml");
    std::fs::write(
        &scenario,
        "name: s\nduration: 10m\nmanifests:\n  - file: apps.yaml\ntimeline:\n  - at: 5m\n    scale: {deployment: c, replicas: 30000}\n",
    )
    .expect("written");
    let err = load_file(&scenario).expect_err("over the total");
    assert_mentions(
        &err.to_string(),
        &[
            "manifests",
            "210000 pods at once",
            "Deployment default/a 90000",
            "Deployment default/c 30000",
            "200000",
        ],
    );
    // One object over Kubernetes' 1.5 MiB.
    let huge_label = "x".repeat(1_600_000);
    let m = refused(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, annotations: {{big: \"{huge_label}\"}}}}\nspec:\n  containers: [{{name: c, image: x}}]\n"
    ));
    assert_mentions(&m, &["document 1", "Pod", "1.5 MiB", "split it"]);
}

#[test]
fn network_interfaces_without_a_primary_or_of_an_unknown_type_are_refused() {
    let class = |nics: &str| {
        format!(
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: c}}\nspec:\n  role: R\n  amiSelectorTerms: [{{alias: al2023@latest}}]\n  subnetSelectorTerms: [{{tags: {{k: v}}}}]\n  securityGroupSelectorTerms: [{{tags: {{k: v}}}}]\n  networkInterfaces:\n{nics}"
        )
    };
    let m = refused(&class(
        "    - {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}\n",
    ));
    assert_mentions(
        &m,
        &[
            "`spec.networkInterfaces`",
            "no primary interface",
            "deviceIndex: 0",
        ],
    );
    let m = refused(&class(
        "    - {networkCardIndex: 0, deviceIndex: 0, interfaceType: efa}\n",
    ));
    assert_mentions(
        &m,
        &[
            "`spec.networkInterfaces[0].interfaceType`",
            "interface or efa-only",
        ],
    );
}

#[test]
fn a_placement_group_selector_names_one_group() {
    let m = refused(
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: c}\nspec:\n  role: R\n  amiSelectorTerms: [{alias: al2023@latest}]\n  subnetSelectorTerms: [{tags: {k: v}}]\n  securityGroupSelectorTerms: [{tags: {k: v}}]\n  placementGroupSelector: {id: pg-0123, name: gpu}\n",
    );
    assert_mentions(&m, &["`spec.placementGroupSelector`", "by id or by name"]);
}

#[test]
fn a_capacity_reservation_of_a_scenario_is_checked_at_load() {
    let dir = tempfile::tempdir().expect("a folder");
    let scenario = |reservation: &str| {
        let path = dir.path().join("s.yaml");
        std::fs::write(
            &path,
            format!(
                "name: s\ncloud:\n  capacityReservations:\n    - {{{reservation}}}\nmanifests: []\n"
            ),
        )
        .expect("written");
        match load_file(&path) {
            Ok(_) => panic!("accepted: {reservation}"),
            Err(e) => e.to_string(),
        }
    };
    let good = "id: cr-0a1, instanceType: m5.large, zone: us-east-1a, count: 2";
    assert_mentions(
        &scenario(&good.replace("cr-0a1", "reservation-1")),
        &["cloud.capacityReservations[0].id", "cr-", "fix: "],
    );
    assert_mentions(
        &scenario(&good.replace("m5.large", "m5.huge")),
        &[
            "cloud.capacityReservations[0].instanceType",
            "m5.huge",
            "fix: ",
        ],
    );
    assert_mentions(
        &scenario(&good.replace("us-east-1a", "us-east-1z")),
        &["cloud.capacityReservations[0].zone", "fix: "],
    );
    assert_mentions(
        &scenario(&good.replace("count: 2", "count: 0")),
        &["cloud.capacityReservations[0].count", "10000", "fix: "],
    );
    assert_mentions(
        &scenario(&format!("{good}, type: weekly")),
        &[
            "cloud.capacityReservations[0].type",
            "capacity-block",
            "fix: ",
        ],
    );
}
