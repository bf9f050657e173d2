//! The Helm chart (`charts/nodewright`), with a real helm (v4, built beside the test control
//! plane): its CRDs are the ones `nodewright crds` prints, `helm lint --strict` is clean, and
//! what it renders runs the controller with the settings in Karpenter's names, its probes, its
//! store, and no more rights than the controller uses.

mod support;

use support::installation::{chart, helm, text};

#[test]
fn the_charts_crds_are_the_generated_ones() {
    for (name, generated) in nodewright_api::CRD_FILES {
        let path = chart().join("crds").join(name);
        let in_chart =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            in_chart == generated,
            "{} differs from api/crds/{name}; fix: cp api/crds/*.yaml charts/nodewright/crds/",
            path.display()
        );
    }
    let files = std::fs::read_dir(chart().join("crds"))
        .expect("the crds folder")
        .count();
    assert_eq!(
        files,
        nodewright_api::CRD_FILES.len(),
        "a CRD file too many"
    );
}

#[tokio::test]
async fn helm_lint_is_clean() {
    let chart = chart();
    let out = helm(&[
        "lint",
        "--strict",
        chart.to_str().expect("a UTF-8 path"),
        "--set",
        "settings.clusterName=demo",
    ])
    .await;
    assert!(out.status.success(), "{}", text(&out));
}

#[tokio::test]
async fn the_chart_renders_the_controller_with_karpenters_settings() {
    let chart = chart();
    let chart = chart.to_str().expect("a UTF-8 path");
    let out = helm(&[
        "template",
        "nodewright",
        chart,
        "--namespace",
        "kube-system",
        "--set",
        "settings.clusterName=demo",
        "--set",
        "settings.interruptionQueue=demo-queue",
        "--set",
        "settings.featureGates.spotToSpotConsolidation=true",
        "--set",
        "serviceMonitor.enabled=true",
        "--set",
        "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::111122223333:role/nodewright",
    ])
    .await;
    assert!(out.status.success(), "{}", text(&out));
    let rendered = String::from_utf8_lossy(&out.stdout).to_string();
    for kind in [
        "kind: Deployment",
        "kind: ServiceAccount",
        "kind: ClusterRole\n",
        "kind: Role\n",
        "kind: PodDisruptionBudget",
        "kind: Service\n",
        "kind: ServiceMonitor",
        "kind: PersistentVolumeClaim",
    ] {
        assert!(rendered.contains(kind), "no {kind:?} in\n{rendered}");
    }
    for (name, value) in [
        ("CLUSTER_NAME", "\"demo\""),
        ("INTERRUPTION_QUEUE", "\"demo-queue\""),
        ("BATCH_IDLE_DURATION", "\"1s\""),
        ("BATCH_MAX_DURATION", "\"10s\""),
        (
            "FEATURE_GATES",
            "\"SpotToSpotConsolidation=true,NodeRepair=false,ReservedCapacity=true,StaticCapacity=false\"",
        ),
        ("NODEWRIGHT_STORE", "\"/var/lib/nodewright/events.redb\""),
        ("LEADER_ELECTION_NAME", "\"nodewright-leader-election\""),
        ("METRICS_PORT", "\"8080\""),
        ("HEALTH_PROBE_PORT", "\"8081\""),
    ] {
        let entry = format!("- name: {name}\n              value: {value}");
        assert!(rendered.contains(&entry), "no {entry:?} in\n{rendered}");
    }
    assert!(rendered.contains("replicas: 2"));
    assert!(rendered.contains("path: /healthz") && rendered.contains("path: /readyz"));
    assert!(
        rendered.contains("eks.amazonaws.com/role-arn: arn:aws:iam::111122223333:role/nodewright")
    );
    assert!(rendered.contains("topologyKey: topology.kubernetes.io/zone"));
    assert!(rendered.contains("- ReadWriteMany"));
    // Least privilege: Pods are never patched, Nodes never created, nothing is read that the
    // controller does not watch.
    assert!(!rendered.contains("\"*\""), "a wildcard rule");
    assert!(
        !rendered.contains("secrets"),
        "secrets are not the controller's"
    );

    // The value the controller cannot run without is named.
    let out = helm(&["template", "nodewright", chart]).await;
    assert!(!out.status.success());
    assert!(
        text(&out).contains("settings.clusterName is required"),
        "{}",
        text(&out)
    );
}
