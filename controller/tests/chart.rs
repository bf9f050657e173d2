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
        "store.segmentsBucket=s3://incident-logs/clusters",
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
        "kind: NetworkPolicy",
        "name: nodewright-log-reader\n",
        "name: nodewright-log-reader-redacted\n",
        "resources: [\"tokenreviews\"]",
        "resources: [\"subjectaccessreviews\"]",
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
        ("LOG_SEGMENTS_BUCKET", "\"s3://incident-logs/clusters\""),
        ("LOG_SEGMENT_INTERVAL", "\"5m\""),
        ("LEADER_ELECTION_NAME", "\"nodewright-leader-election\""),
        ("METRICS_PORT", "\"8080\""),
        ("HEALTH_PROBE_PORT", "\"8081\""),
        ("LOG_PORT", "\"8082\""),
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
    // Each replica keeps a store of its own: no shared volume, no claim a stock cluster cannot
    // bind.
    assert!(
        !rendered.contains("kind: PersistentVolumeClaim"),
        "{rendered}"
    );
    assert!(!rendered.contains("ReadWriteMany"), "{rendered}");
    assert!(
        rendered.contains("- name: store\n          emptyDir:"),
        "{rendered}"
    );
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

/// No container engine runs in the test environment, so the image is not built here; what
/// the chart relies on is checked in the Dockerfile itself: it builds the controller's
/// features with the locked dependencies, runs as the user the chart's pod security context
/// names, and starts `nodewright` with the arguments the chart gives.
#[test]
fn the_dockerfile_builds_what_the_chart_runs() {
    let root = chart().join("../..");
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).expect("the Dockerfile");
    let values = std::fs::read_to_string(chart().join("values.yaml")).expect("values.yaml");
    let values: serde_json::Value = serde_saphyr::from_str(&values).expect("values.yaml parses");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");

    let build = dockerfile
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("cargo build"))
        .expect("a cargo build step");
    for flag in [
        "--release",
        "--locked",
        "--bin nodewright",
        "--features controller",
    ] {
        assert!(build.contains(flag), "{build:?} lacks {flag}");
    }
    assert!(
        manifest.contains("\n[features]\n") && manifest.contains("\ncontroller = ["),
        "the feature the image builds is the root crate's"
    );

    // Two stages: the runtime one is distroless, as a non-root user.
    let stages: Vec<&str> = dockerfile
        .lines()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert_eq!(stages.len(), 2, "{stages:?}");
    assert!(stages[1].contains("distroless") && stages[1].contains(":nonroot"));
    let user = format!(
        "USER {}:{}",
        values["podSecurityContext"]["runAsUser"], values["podSecurityContext"]["runAsGroup"]
    );
    assert!(
        dockerfile.contains(&user),
        "the image's user is the chart's: {user}"
    );

    // The toolchain is at least the workspace's rust-version.
    let rust = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("ARG RUST_VERSION="))
        .expect("ARG RUST_VERSION");
    let minimum = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("rust-version");
    let minor = |v: &str| -> u32 {
        v.split('.')
            .nth(1)
            .and_then(|m| m.parse().ok())
            .expect("a version")
    };
    assert!(minor(rust) >= minor(minimum), "rust {rust} < {minimum}");

    // The chart's container runs `<entrypoint> controller`, the binary the stage copied.
    let deployment = std::fs::read_to_string(chart().join("templates/deployment.yaml"))
        .expect("the Deployment template");
    assert!(deployment.contains("args: [\"controller\"]"));
    let entrypoint = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("ENTRYPOINT [\""))
        .and_then(|l| l.strip_suffix("\"]"))
        .expect("ENTRYPOINT");
    assert!(
        dockerfile.contains(&format!("COPY --from=build {entrypoint} {entrypoint}")),
        "the entrypoint {entrypoint} is the binary copied from the build stage"
    );
}
