//! The CRDs served by a real control plane: they install, Karpenter's manifests apply to them
//! unchanged, the API server itself refuses bad manifests with Karpenter's messages, and the
//! printer columns, defaults and status subresource work as `kubectl` users expect.

mod support;

use kube::api::{Api, Patch, PatchParams, PostParams};
use nodewright_adapters::manifest::parse_manifests;
use nodewright_api::{EC2NodeClass, NodePool};
use nodewright_controlplane::{ControlPlane, eventually};
use serde_json::{Value, json};
use support::{apply, documents, karpenter_examples};

fn tutorial(file: &str) -> String {
    let path = format!(
        "{}/../scenarios/tutorial/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// The rows of a list read as a Table, as `kubectl get` reads it: the column names, and each
/// row's cells.
async fn table(client: &kube::Client, path: &str) -> (Vec<String>, Vec<Vec<Value>>) {
    let request = http::Request::get(path)
        .header(
            http::header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io",
        )
        .body(Vec::new())
        .expect("a request");
    let text = client.request_text(request).await.expect("a table");
    let table: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(table["kind"], "Table", "{text}");
    let columns = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| c["name"].as_str().expect("a name").to_string())
        .collect();
    let rows = table["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["cells"].as_array().expect("cells").clone())
        .collect();
    (columns, rows)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karpenters_manifests_apply_unchanged_and_read_back_into_the_types() {
    let control_plane = ControlPlane::start_with_crds()
        .await
        .expect("the control plane serves the CRDs");
    let client = control_plane.client();

    // The guide's NodePool and EC2NodeClass, byte for byte.
    for file in ["nodepool.yaml", "ec2nodeclass.yaml"] {
        for doc in documents(&tutorial(file)) {
            apply(&client, &doc)
                .await
                .unwrap_or_else(|e| panic!("the tutorial's {file} is refused: {e}"));
        }
    }

    // Karpenter's own v1 examples. windows-custom-userdata.yaml names its node class group
    // with a version (karpenter.k8s.aws/v1), which Karpenter's CRD refuses too.
    let mut applied = 0;
    for (file, text) in karpenter_examples() {
        for doc in documents(&text) {
            let outcome = apply(&client, &doc).await;
            if file == "windows-custom-userdata.yaml" && doc["kind"] == "NodePool" {
                let err = outcome.expect_err("the group with a version is refused");
                assert!(
                    err.to_string().contains("nodeClassRef.group"),
                    "{file}: {err}"
                );
            } else {
                outcome.unwrap_or_else(|e| panic!("{file}: {} is refused: {e}", doc["kind"]));
                applied += 1;
            }
        }
    }
    assert!(applied >= 40, "only {applied} objects applied");

    // What the API server stored reads into the same types the simulator uses, with
    // Karpenter's defaults filled in by the server.
    let pools: Api<NodePool> = Api::all(client.clone());
    let general = pools.get("general-purpose").await.expect("applied");
    let template = &general.spec.template.spec;
    assert_eq!(template.expire_after.as_deref(), Some("720h"));
    let disruption = general.spec.disruption.expect("defaulted");
    assert_eq!(
        disruption.consolidation_policy.as_deref(),
        Some("WhenEmptyOrUnderutilized")
    );
    let budgets = disruption.budgets.expect("defaulted");
    assert_eq!(budgets.len(), 1);
    assert_eq!(budgets[0].nodes, "10%");
    let classes: Api<EC2NodeClass> = Api::all(client.clone());
    let class = classes.get("default").await.expect("the tutorial's class");
    let metadata = class.spec.metadata_options.expect("defaulted");
    assert_eq!(metadata.http_tokens.as_deref(), Some("required"));
    assert_eq!(metadata.http_put_response_hop_limit, Some(1));

    // The scenario loader reads the stored objects too, and agrees.
    let stored = serde_json::to_string(&pools.get("default").await.expect("the tutorial's pool"))
        .expect("JSON");
    parse_manifests(&stored, "stored NodePool").expect("the scenario loader reads it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn printer_columns_and_the_status_subresource_work_like_karpenters() {
    let control_plane = ControlPlane::start_with_crds()
        .await
        .expect("the control plane serves the CRDs");
    let client = control_plane.client();
    for doc in documents(&tutorial("nodepool.yaml"))
        .into_iter()
        .chain(documents(&tutorial("ec2nodeclass.yaml")))
    {
        apply(&client, &doc).await.expect("the tutorial applies");
    }

    // The controller writes status through the status subresource.
    let pools: Api<NodePool> = Api::all(client.clone());
    let status = json!({"status": {
        "nodes": 3,
        "resources": {"cpu": "12", "memory": "48Gi"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }});
    pools
        .patch_status("default", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("status is written");
    let written = pools.get_status("default").await.expect("read back");
    assert_eq!(written.status.expect("a status").nodes, Some(3));

    let (columns, rows) = table(&client, "/apis/karpenter.sh/v1/nodepools").await;
    assert_eq!(
        columns,
        [
            "Name",
            "NodeClass",
            "Nodes",
            "Ready",
            "Age",
            "Weight",
            "CPU",
            "Memory"
        ]
    );
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row[0], "default");
    assert_eq!(row[1], "default", "the node class");
    assert_eq!(row[2], "3", "nodes");
    assert_eq!(row[3], "True", "ready");
    assert_eq!(row[6], "12", "cpu");
    assert_eq!(row[7], "48Gi", "memory");

    let (columns, rows) = table(&client, "/apis/karpenter.k8s.aws/v1/ec2nodeclasses").await;
    assert_eq!(columns, ["Name", "Ready", "Age", "Role"]);
    assert_eq!(rows[0][3], "KarpenterNodeRole-nodewright-demo");

    // `kubectl get karpenter` lists all three kinds: the category is registered.
    eventually("the karpenter category is discoverable", || async {
        let text = client
            .request_text(
                http::Request::get("/apis/karpenter.sh/v1")
                    .body(Vec::new())
                    .expect("a request"),
            )
            .await
            .map_err(|e| e.to_string())?;
        let list: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        let categorised = list["resources"]
            .as_array()
            .map(|rs| {
                rs.iter()
                    .filter(|r| {
                        r["categories"]
                            .as_array()
                            .is_some_and(|c| c.iter().any(|c| c == "karpenter"))
                    })
                    .count()
            })
            .unwrap_or(0);
        if categorised == 2 { Ok(()) } else { Err(text) }
    })
    .await;
}

/// A NodePool with one requirement, and extra text under `spec`.
fn pool(name: &str, requirement: Value, spec_extra: Value) -> Value {
    let mut spec = json!({
        "template": {"spec": {
            "requirements": [requirement],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        }},
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_refuses_bad_manifests_naming_the_field() {
    let control_plane = ControlPlane::start_with_crds()
        .await
        .expect("the control plane serves the CRDs");
    let client = control_plane.client();
    let arch = json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]});
    let class = json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "both"},
        "spec": {
            "role": "KarpenterNodeRole", "instanceProfile": "KarpenterNodeProfile",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        },
    });
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "role and instanceProfile",
            class,
            vec![
                "spec",
                "must specify exactly one of ['role', 'instanceProfile']",
            ],
        ),
        (
            "minValues above the values given",
            pool(
                "min-values",
                json!({"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                       "values": ["m5", "c5"], "minValues": 3}),
                json!({}),
            ),
            vec![
                "spec.template.spec.requirements",
                "requirements with 'minValues' must have at least that many values specified in the 'values' field",
            ],
        ),
        (
            "an unknown operator",
            pool(
                "operator",
                json!({"key": "kubernetes.io/arch", "operator": "Inn", "values": ["amd64"]}),
                json!({}),
            ),
            vec![
                "spec.template.spec.requirements[0].operator",
                "Unsupported value: \"Inn\"",
            ],
        ),
        (
            "a budget with a schedule and no duration",
            pool(
                "budget",
                arch.clone(),
                json!({"disruption": {"consolidateAfter": "1m",
                                      "budgets": [{"nodes": "0", "schedule": "0 9 * * 1-5"}]}}),
            ),
            vec![
                "spec.disruption.budgets",
                "'schedule' must be set with 'duration'",
            ],
        ),
        (
            "a requirement on a restricted label",
            pool(
                "restricted",
                json!({"key": "kubernetes.io/hostname", "operator": "In", "values": ["a"]}),
                json!({}),
            ),
            vec![
                "spec.template.spec.requirements[0].key",
                "label \"kubernetes.io/hostname\" is restricted",
            ],
        ),
        (
            "a template label in Karpenter's domain",
            pool(
                "label-domain",
                arch.clone(),
                json!({"template": {
                    "metadata": {"labels": {"karpenter.sh/custom": "x"}},
                    "spec": {"requirements": [arch.clone()],
                             "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
                }}),
            ),
            vec![
                "spec.template.metadata.labels",
                "label domain \"karpenter.sh\" is restricted",
            ],
        ),
        (
            "a weight above 100",
            pool("weight", arch.clone(), json!({"weight": 101})),
            vec!["spec.weight", "should be less than or equal to 100"],
        ),
    ];
    for (what, manifest, expected) in cases {
        let err = apply(&client, &manifest)
            .await
            .expect_err(&format!("{what}: accepted by the API server"));
        let message = err.to_string();
        for part in expected {
            assert!(message.contains(part), "{what}: {message:?} lacks {part:?}");
        }
        // The scenario loader refuses the same manifest.
        let text = serde_json::to_string(&manifest).expect("JSON");
        assert!(
            parse_manifests(&text, "bad.yaml").is_err(),
            "{what}: refused by the API server but accepted by the scenario loader"
        );
    }

    // Karpenter's transition rules: a NodePool's node class group never changes, and a
    // NodeClaim is immutable.
    apply(&client, &pool("moving", arch.clone(), json!({})))
        .await
        .expect("a good NodePool");
    let mut moved = pool("moving", arch.clone(), json!({}));
    moved["spec"]["template"]["spec"]["nodeClassRef"]["group"] = json!("example.com");
    let err = apply(&client, &moved)
        .await
        .expect_err("the group is immutable");
    assert!(
        err.to_string().contains("nodeClassRef.group is immutable"),
        "{err}"
    );
    let claims: Api<nodewright_api::NodeClaim> = Api::all(client.clone());
    let claim: nodewright_api::NodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "claim"},
        "spec": {
            "requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
            ],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        },
    }))
    .expect("a NodeClaim");
    claims
        .create(&PostParams::default(), &claim)
        .await
        .expect("a NodeClaim may name its NodePool");
    let change = json!({"spec": {"expireAfter": "1h"}});
    let err = claims
        .patch("claim", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .expect_err("a NodeClaim's spec is immutable");
    assert!(err.to_string().contains("spec is immutable"), "{err}");
}
