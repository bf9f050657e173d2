//! `nodewright aws check` against a moto server: it prints the subnets, security groups and
//! AMIs that a node class resolves to, how many instance types a NodePool allows, and the
//! queue; it exits 1 naming a selector that matched nothing, and 2 when credentials are
//! missing, without calling anything.
#![cfg(feature = "controller")]

use std::path::Path;
use std::process::{Command, Output};

use nodewright_aws::aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
use nodewright_aws::{ClientSettings, Clients};
use nodewright_testkit::services::moto::Moto;

fn tagged(resource: ResourceType) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(resource)
        .tags(
            Tag::builder()
                .key("karpenter.sh/discovery")
                .value("nodewright-demo")
                .build(),
        )
        .build()
}

/// A subnet and a security group tagged for the guide's cluster; the id of an AMI moto lists.
fn setup(moto: &Moto) -> (String, String, String) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let c = Clients::connect(&ClientSettings {
            region: Some("us-east-1".into()),
            endpoint_url: Some(moto.endpoint()),
            static_credentials: Some(("testing".into(), "testing".into())),
        })
        .await
        .unwrap();
        let vpc = c
            .ec2
            .create_vpc()
            .cidr_block("10.0.0.0/16")
            .send()
            .await
            .unwrap();
        let vpc_id = vpc.vpc().unwrap().vpc_id().unwrap().to_string();
        let subnet = c
            .ec2
            .create_subnet()
            .vpc_id(&vpc_id)
            .cidr_block("10.0.1.0/24")
            .availability_zone("us-east-1a")
            .tag_specifications(tagged(ResourceType::Subnet))
            .send()
            .await
            .unwrap();
        let sg = c
            .ec2
            .create_security_group()
            .group_name("nodes")
            .description("nodes")
            .vpc_id(&vpc_id)
            .tag_specifications(tagged(ResourceType::SecurityGroup))
            .send()
            .await
            .unwrap();
        let images = c
            .ec2
            .describe_images()
            .owners("amazon")
            .send()
            .await
            .unwrap();
        let mut amis: Vec<String> = images
            .images()
            .iter()
            .filter(|i| i.architecture().map(|a| a.as_str()) == Some("x86_64"))
            .filter_map(|i| i.image_id().map(str::to_string))
            .collect();
        amis.sort();
        c.sqs
            .create_queue()
            .queue_name("nodewright-demo")
            .send()
            .await
            .unwrap();
        (
            subnet.subnet().unwrap().subnet_id().unwrap().to_string(),
            sg.group_id().unwrap().to_string(),
            amis.remove(0),
        )
    })
}

/// The guide's EC2NodeClass with its pinned AMI id replaced by one moto has.
fn nodeclass(dir: &Path, ami: &str, discovery: &str) -> std::path::PathBuf {
    let guide = std::fs::read_to_string("scenarios/tutorial/ec2nodeclass.yaml").unwrap();
    let text = guide.replace("ami-0a1b2c3d4e5f67890", ami).replacen(
        "karpenter.sh/discovery: \"nodewright-demo\"",
        &format!("karpenter.sh/discovery: \"{discovery}\""),
        1,
    );
    let path = dir.join(format!("nodeclass-{discovery}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

fn check(moto: &Moto, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(["aws", "check"])
        .args(args)
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap()
}

#[test]
fn aws_check_prints_what_the_guides_node_class_resolves_to() {
    let moto = Moto::start();
    let (subnet, sg, ami) = setup(&moto);
    let dir = tempfile::tempdir().unwrap();
    let nc = nodeclass(dir.path(), &ami, "nodewright-demo");
    let nc = nc.to_str().unwrap();
    let out = check(
        &moto,
        &[
            "--nodeclass",
            nc,
            "--nodepool",
            "scenarios/tutorial/nodepool.yaml",
            "--queue",
            "nodewright-demo",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for expected in [
        subnet.as_str(),
        "us-east-1a",
        sg.as_str(),
        ami.as_str(),
        "amd64",
        "NodePool default:",
        "ok:",
    ] {
        assert!(
            stdout.contains(expected),
            "{expected} missing from:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("interruption queue nodewright-demo: http"),
        "{stdout}"
    );

    // JSON, for scripts: the guide's pool allows c, m and r amd64 on-demand types in us-east-1a.
    let out = check(
        &moto,
        &[
            "--nodeclass",
            nc,
            "--nodepool",
            "scenarios/tutorial/nodepool.yaml",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pool = &json[0]["nodepools"][0];
    assert_eq!(pool["nodepool"], "default");
    assert!(pool["instance_types"].as_u64().unwrap() > 50, "{pool}");
    assert_eq!(pool["zones"], serde_json::json!(["us-east-1a"]));
}

#[test]
fn aws_check_names_the_selector_that_matched_nothing_and_a_missing_queue() {
    let moto = Moto::start();
    let (_, _, ami) = setup(&moto);
    let dir = tempfile::tempdir().unwrap();
    let nc = nodeclass(dir.path(), &ami, "other-cluster");
    let out = check(
        &moto,
        &[
            "--nodeclass",
            nc.to_str().unwrap(),
            "--queue",
            "missing-queue",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("spec.subnetSelectorTerms"), "{stdout}");
    assert!(stdout.contains("other-cluster"), "{stdout}");
    assert!(stdout.contains("missing-queue"), "{stdout}");
    assert!(stdout.contains("fix:"), "{stdout}");
}

#[test]
fn aws_check_refuses_bad_input_before_calling_aws() {
    let moto = Moto::start();
    let dir = tempfile::tempdir().unwrap();
    // Both role and instanceProfile: refused by the manifest translation, exit 2.
    let both = dir.path().join("both.yaml");
    std::fs::write(
        &both,
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: c}\nspec:\n  amiFamily: AL2023\n  role: r\n  instanceProfile: p\n  subnetSelectorTerms: [{tags: {a: b}}]\n  securityGroupSelectorTerms: [{tags: {a: b}}]\n  amiSelectorTerms: [{id: ami-1}]\n",
    )
    .unwrap();
    let out = check(&moto, &["--nodeclass", both.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("spec.role") && stderr.contains("instanceProfile"),
        "{stderr}"
    );
    // An unknown AMI alias.
    let alias = dir.path().join("alias.yaml");
    std::fs::write(
        &alias,
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: c}\nspec:\n  role: r\n  subnetSelectorTerms: [{tags: {a: b}}]\n  securityGroupSelectorTerms: [{tags: {a: b}}]\n  amiSelectorTerms: [{alias: ubuntu@latest}]\n",
    )
    .unwrap();
    let out = check(&moto, &["--nodeclass", alias.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("spec.amiSelectorTerms[0].alias") && stderr.contains("al2023"),
        "{stderr}"
    );
    // No credentials anywhere: a clear error naming the fix.
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args([
            "aws",
            "check",
            "--nodeclass",
            "scenarios/tutorial/ec2nodeclass.yaml",
        ])
        .env_clear()
        .env("HOME", home.path())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("credentials") && stderr.contains("AWS_ACCESS_KEY_ID"),
        "{stderr}"
    );
}
