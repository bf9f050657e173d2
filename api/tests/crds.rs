//! The generated CRDs against Karpenter's own (v1.14.1, from its Go module): the fields they
//! cover, and Karpenter's examples read into the types.

mod support;

use std::collections::BTreeSet;

use serde_json::Value;
use support::{documents, karpenter_examples, karpenter_module};

/// Every property path under `root` of an OpenAPI schema: `.template.spec.requirements[].key`.
fn property_paths(schema: &Value, path: &str, out: &mut BTreeSet<String>) {
    if let Some(properties) = schema["properties"].as_object() {
        for (name, sub) in properties {
            let here = format!("{path}.{name}");
            out.insert(here.clone());
            property_paths(sub, &here, out);
        }
    }
    if schema["items"].is_object() {
        property_paths(&schema["items"], &format!("{path}[]"), out);
    }
    if schema["additionalProperties"].is_object() {
        property_paths(&schema["additionalProperties"], &format!("{path}{{}}"), out);
    }
}

fn schema_of(crd: &Value) -> &Value {
    &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
}

fn rules_of(schema: &Value, path: &str, out: &mut BTreeSet<String>) {
    if let Some(rules) = schema["x-kubernetes-validations"].as_array() {
        for r in rules {
            out.insert(format!(
                "{path}: {}",
                r["rule"].as_str().unwrap_or_default()
            ));
        }
    }
    if let Some(properties) = schema["properties"].as_object() {
        for (name, sub) in properties {
            rules_of(sub, &format!("{path}.{name}"), out);
        }
    }
    for key in ["items", "additionalProperties"] {
        if schema[key].is_object() {
            rules_of(&schema[key], &format!("{path}[]"), out);
        }
    }
}

#[test]
fn the_crds_cover_karpenters_v1_fields_and_rules() {
    let upstream_dir = karpenter_module().join("pkg/apis/crds");
    let ours: Vec<Value> = nodewright_api::crds()
        .iter()
        .map(|crd| serde_json::to_value(crd).expect("a CRD is JSON"))
        .collect();
    let mut covered = 0;
    let mut total = 0;
    let mut missing = Vec::new();
    for (file, ours) in [
        "karpenter.sh_nodepools.yaml",
        "karpenter.sh_nodeclaims.yaml",
        "karpenter.k8s.aws_ec2nodeclasses.yaml",
    ]
    .iter()
    .zip(&ours)
    {
        let text = std::fs::read_to_string(upstream_dir.join(file)).expect("Karpenter's CRD");
        let upstream = &documents(&text)[0];
        assert_eq!(upstream["metadata"]["name"], ours["metadata"]["name"]);
        assert_eq!(
            upstream["spec"]["names"], ours["spec"]["names"],
            "{file}: kind, plural, short names and category"
        );
        assert_eq!(upstream["spec"]["scope"], ours["spec"]["scope"]);
        let (up_version, our_version) = (
            &upstream["spec"]["versions"][0],
            &ours["spec"]["versions"][0],
        );
        assert_eq!(
            up_version["additionalPrinterColumns"], our_version["additionalPrinterColumns"],
            "{file}: printer columns"
        );
        assert_eq!(
            up_version["subresources"], our_version["subresources"],
            "{file}: subresources"
        );

        let mut up_paths = BTreeSet::new();
        property_paths(
            &schema_of(upstream)["properties"]["spec"],
            ".spec",
            &mut up_paths,
        );
        let mut our_paths = BTreeSet::new();
        property_paths(
            &schema_of(ours)["properties"]["spec"],
            ".spec",
            &mut our_paths,
        );
        total += up_paths.len();
        covered += up_paths.intersection(&our_paths).count();
        missing.extend(
            up_paths
                .difference(&our_paths)
                .map(|p| format!("{file}: {p}")),
        );

        // Every CEL rule of Karpenter's is there too, on the same field.
        let mut up_rules = BTreeSet::new();
        rules_of(schema_of(upstream), "", &mut up_rules);
        let mut our_rules = BTreeSet::new();
        rules_of(schema_of(ours), "", &mut our_rules);
        let lacking: Vec<_> = up_rules
            .difference(&our_rules)
            // Karpenter's label-domain rule over template labels lists one allowed label twice.
            .filter(|r| !r.contains("\"karpenter.k8s.aws/capacity-reservation-interruptible\", \"karpenter.k8s.aws/capacity-reservation-interruptible\""))
            .collect();
        assert!(lacking.is_empty(), "{file}: rules we lack: {lacking:#?}");
    }
    let percent = 100.0 * covered as f64 / total as f64;
    println!("spec fields covered: {covered} of {total} ({percent:.1}%)");
    assert!(percent >= 95.0, "only {percent:.1}%; missing: {missing:#?}");
    assert!(missing.is_empty(), "missing: {missing:#?}");
}

#[test]
fn every_karpenter_example_reads_into_the_types() {
    let examples = karpenter_examples();
    assert!(examples.len() >= 20, "only {} examples", examples.len());
    for (file, text) in examples {
        for doc in documents(&text) {
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            let read = match kind.as_str() {
                "NodePool" => serde_json::from_value::<nodewright_api::NodePool>(doc.clone())
                    .map(|o| serde_json::to_value(o).expect("JSON")),
                "EC2NodeClass" => {
                    serde_json::from_value::<nodewright_api::EC2NodeClass>(doc.clone())
                        .map(|o| serde_json::to_value(o).expect("JSON"))
                }
                other => panic!("{file}: unexpected kind {other}"),
            };
            let back = read.unwrap_or_else(|e| panic!("{file}: {kind} does not read: {e}"));
            // Nothing is lost on the way through the types (a quantity written as a number
            // comes back as the same quantity in text: `100` → `"100"`).
            let mut expected = doc["spec"].clone();
            if let Some(limits) = expected.get_mut("limits").and_then(Value::as_object_mut) {
                for value in limits.values_mut() {
                    if value.is_number() {
                        *value = Value::String(value.to_string());
                    }
                }
            }
            assert_eq!(back["spec"], expected, "{file}: {kind}");
        }
    }
}

#[test]
fn the_printed_yaml_is_the_crds() {
    let yaml = nodewright_api::crds_yaml().expect("YAML");
    let docs = documents(&yaml);
    let ours: Vec<Value> = nodewright_api::crds()
        .iter()
        .map(|crd| serde_json::to_value(crd).expect("JSON"))
        .collect();
    assert_eq!(docs, ours);
}

/// The YAML files under `crds/` (what `nodewright crds` prints without the `crd` feature, and
/// what the Helm chart installs) are the CRDs the types generate, byte for byte.
/// `NODEWRIGHT_WRITE_CRDS=1` rewrites them after a change to the types.
#[test]
fn committed_crd_files_are_the_generated_ones() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
    let rewrite = std::env::var_os("NODEWRIGHT_WRITE_CRDS").is_some_and(|v| v == "1");
    let crds = nodewright_api::crds();
    assert_eq!(crds.len(), nodewright_api::CRD_FILES.len());
    let mut stale = Vec::new();
    for ((file, committed), crd) in nodewright_api::CRD_FILES.iter().zip(&crds) {
        let generated = nodewright_api::crd_yaml(crd).expect("YAML");
        assert!(
            generated.contains(&format!(
                "  name: {}\n",
                crd.metadata.name.as_deref().unwrap_or_default()
            )),
            "{file} holds {:?}",
            crd.metadata.name
        );
        if generated != *committed {
            if rewrite {
                std::fs::write(dir.join(file), &generated).expect("writing the CRD file");
            }
            stale.push(*file);
        }
    }
    assert!(
        stale.is_empty() || rewrite,
        "api/crds/{stale:?} differ from the CRDs the types generate; rewrite them with \
         NODEWRIGHT_WRITE_CRDS=1 cargo test -p nodewright-api --test crds committed_crd_files"
    );
    if !rewrite {
        assert_eq!(
            nodewright_api::crds_text(),
            nodewright_api::crds_yaml().expect("YAML")
        );
    }
}
