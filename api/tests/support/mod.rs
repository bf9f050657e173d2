//! What the API tests share: Karpenter's own CRDs and examples (from its Go module), YAML
//! documents as JSON values, and applying objects to a control plane.

#![allow(dead_code)] // each test file uses a part

use std::path::PathBuf;
use std::process::Command;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use nodewright_api::{EC2NodeClass, NodeClaim, NodePool};
use serde_json::Value;

/// The Karpenter release whose API the types follow.
pub const KARPENTER_MODULE: &str = "github.com/aws/karpenter-provider-aws@v1.14.1";

/// The folder of Karpenter's Go module (its CRDs under `pkg/apis/crds`, its examples under
/// `examples/v1`), fetched from the Go module proxy into Go's module cache on first use.
pub fn karpenter_module() -> PathBuf {
    let scratch = std::env::temp_dir();
    let out = Command::new("go")
        .args(["mod", "download", "-json", KARPENTER_MODULE])
        .current_dir(&scratch)
        .env("GOWORK", "off")
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .output()
        .unwrap_or_else(|e| {
            panic!("running `go mod download {KARPENTER_MODULE}` (is Go installed?): {e}")
        });
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "`go mod download -json {KARPENTER_MODULE}` said no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    match answer["Dir"].as_str() {
        Some(dir) => PathBuf::from(dir),
        None => panic!("`go mod download -json {KARPENTER_MODULE}` failed: {answer}"),
    }
}

/// Every non-empty document of a YAML text, as JSON.
pub fn documents(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines().chain(std::iter::once("---")) {
        if line.trim_end() == "---" {
            let meaningful = current
                .lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
            if meaningful {
                let value: Value = serde_saphyr::from_str(&current)
                    .unwrap_or_else(|e| panic!("not YAML: {e}\n{current}"));
                out.push(value);
            }
            current.clear();
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    out
}

/// The files of one of Karpenter's example folders, sorted by name, with their text.
pub fn karpenter_examples() -> Vec<(String, String)> {
    let dir = karpenter_module().join("examples/v1");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("a directory entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .expect("a UTF-8 name")
                .to_string();
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            (name, text)
        })
        .filter(|(name, _)| name.ends_with(".yaml"))
        .collect();
    files.sort();
    files
}

/// The API resource of one of the three kinds.
pub fn resource_of(kind: &str) -> ApiResource {
    match kind {
        "NodePool" => ApiResource::erase::<NodePool>(&()),
        "NodeClaim" => ApiResource::erase::<NodeClaim>(&()),
        "EC2NodeClass" => ApiResource::erase::<EC2NodeClass>(&()),
        other => panic!("not one of nodewright's kinds: {other}"),
    }
}

/// Server-side applies one object given as JSON, as `kubectl apply --server-side` does.
pub async fn apply(client: &kube::Client, object: &Value) -> Result<DynamicObject, kube::Error> {
    let kind = object["kind"].as_str().expect("a kind");
    let name = object["metadata"]["name"].as_str().expect("a name");
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource_of(kind));
    api.patch(
        name,
        &PatchParams::apply("nodewright-tests").force(),
        &Patch::Apply(object),
    )
    .await
}
