//! What moto cannot produce, with the SDK's own mocks (aws-smithy-mocks): capacity errors from
//! CreateFleet, the client token a retried launch repeats, throttling outlived by the SDK's
//! retries, authorization errors, and AMI aliases read from SSM. The paths moto serves are
//! tested against moto (`tests/moto.rs`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_sdk_ec2::error::ErrorMetadata;
use aws_sdk_ec2::operation::create_fleet::{CreateFleetError, CreateFleetOutput};
use aws_sdk_ec2::operation::create_launch_template::CreateLaunchTemplateOutput;
use aws_sdk_ec2::operation::describe_images::DescribeImagesOutput;
use aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput;
use aws_sdk_ec2::operation::describe_launch_templates::DescribeLaunchTemplatesOutput;
use aws_sdk_ec2::types::{
    ArchitectureValues, CreateFleetError as FleetErrorItem, CreateFleetInstance,
    FleetLaunchTemplateOverrides, Image, InstanceType, LaunchTemplateAndOverridesResponse,
};
use aws_sdk_ssm::operation::get_parameter::{GetParameterError, GetParameterOutput};
use aws_sdk_ssm::types::Parameter;
use aws_smithy_mocks::{RuleMode, mock, mock_client};
use nodewright_adapters::manifest::launch::AmiAlias;
use nodewright_adapters::manifest::parse_node_classes;
use nodewright_aws::ErrorClass;
use nodewright_aws::launch::{LaunchClass, LaunchOutcome, Launcher};
use nodewright_aws::resolve::Resolver;
use nodewright_aws::user_data::ClusterInfo;
use nodewright_core::EventKind;
use nodewright_core::catalog::{CapacityType, Price};
use nodewright_core::model::nodeclaim::{LaunchOption, NodeClaimSpec};
use nodewright_core::model::nodeclass::{
    ResolvedAmi, ResolvedNodeClass, ResolvedSecurityGroup, ResolvedSubnet,
};

const NODECLASS: &str = "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\nspec:\n  amiFamily: AL2023\n  role: KarpenterNodeRole-demo\n  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]\n  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]\n  amiSelectorTerms: [{id: ami-0123}]\n";

fn launch_class() -> LaunchClass {
    let (class, settings) = parse_node_classes(NODECLASS, "nc.yaml").unwrap().remove(0);
    LaunchClass {
        class,
        settings,
        resolved: ResolvedNodeClass {
            name: "default".into(),
            subnets: vec![
                ResolvedSubnet {
                    id: "subnet-a".into(),
                    zone: "us-east-1a".into(),
                    zone_id: None,
                    available_ip_addresses: 250,
                },
                ResolvedSubnet {
                    id: "subnet-b".into(),
                    zone: "us-east-1b".into(),
                    zone_id: None,
                    available_ip_addresses: 250,
                },
            ],
            security_groups: vec![ResolvedSecurityGroup {
                id: "sg-1".into(),
                name: "nodes".into(),
            }],
            amis: vec![ResolvedAmi {
                id: "ami-0123".into(),
                name: "al2023".into(),
                architecture: "amd64".into(),
                creation_date: "2026-11-01T00:00:00.000Z".into(),
            }],
        },
    }
}

fn claim(capacity_type: CapacityType) -> NodeClaimSpec {
    let option = |t: &str, zone: &str, micro: u64| LaunchOption {
        instance_type: t.into(),
        zone: zone.into(),
        capacity_type,
        price: Price(micro),
    };
    NodeClaimSpec {
        name: "default-x7k2p".into(),
        nodepool: "default".into(),
        nodeclass: "default".into(),
        labels: BTreeMap::from([("kubernetes.io/arch".into(), "amd64".into())]),
        annotations: BTreeMap::new(),
        taints: Vec::new(),
        startup_taints: Vec::new(),
        requirements: Vec::new(),
        requests: Default::default(),
        options: vec![
            option("m5.large", "us-east-1a", 30_000),
            option("m5.large", "us-east-1b", 31_000),
            option("c5.large", "us-east-1a", 32_000),
        ]
        .into(),
        expire_after_ms: None,
    }
}

fn cluster() -> ClusterInfo {
    ClusterInfo {
        name: "demo".into(),
        endpoint: "https://demo.example".into(),
        ca_bundle: "Q0E=".into(),
        service_cidr: "10.100.0.0/16".into(),
    }
}

/// The calls before CreateFleet: no instance tagged with the NodeClaim yet, no template yet.
fn setup_rules() -> Vec<aws_smithy_mocks::Rule> {
    vec![
        mock!(aws_sdk_ec2::Client::describe_instances)
            .then_output(|| DescribeInstancesOutput::builder().build()),
        mock!(aws_sdk_ec2::Client::describe_launch_templates)
            .then_output(|| DescribeLaunchTemplatesOutput::builder().build()),
        mock!(aws_sdk_ec2::Client::create_launch_template)
            .then_output(|| CreateLaunchTemplateOutput::builder().build()),
    ]
}

fn capacity_error(code: &str, instance_type: &str, zone: &str) -> FleetErrorItem {
    FleetErrorItem::builder()
        .error_code(code)
        .error_message(format!(
            "We currently do not have sufficient {instance_type} capacity in {zone}"
        ))
        .launch_template_and_overrides(
            LaunchTemplateAndOverridesResponse::builder()
                .overrides(
                    FleetLaunchTemplateOverrides::builder()
                        .instance_type(InstanceType::from(instance_type))
                        .availability_zone(zone)
                        .build(),
                )
                .build(),
        )
        .build()
}

#[tokio::test]
async fn capacity_errors_name_the_offerings_for_the_cores_cache() {
    let fleet = mock!(aws_sdk_ec2::Client::create_fleet).then_output(|| {
        CreateFleetOutput::builder()
            .errors(capacity_error(
                "InsufficientInstanceCapacity",
                "m5.large",
                "us-east-1a",
            ))
            .errors(capacity_error(
                "InsufficientInstanceCapacity",
                "m5.large",
                "us-east-1b",
            ))
            .errors(capacity_error(
                "UnfulfillableCapacity",
                "c5.large",
                "us-east-1a",
            ))
            .build()
    });
    let mut rules = setup_rules();
    rules.push(fleet);
    let ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, rules.iter());
    let launcher = Launcher::new(ec2, cluster(), "scope");
    let outcome = launcher
        .launch(&claim(CapacityType::Spot), &launch_class())
        .await;
    let LaunchOutcome::NoCapacity { event } = outcome else {
        panic!("{outcome:?}");
    };
    let EventKind::LaunchFailed {
        nodeclaim,
        code,
        unavailable,
        ..
    } = event
    else {
        panic!();
    };
    assert_eq!(nodeclaim, "default-x7k2p");
    assert_eq!(code, "InsufficientInstanceCapacity");
    let named: Vec<String> = unavailable.iter().map(|o| o.to_string()).collect();
    assert_eq!(
        named,
        [
            "c5.large/us-east-1a/spot",
            "m5.large/us-east-1a/spot",
            "m5.large/us-east-1b/spot"
        ]
    );
}

/// CreateFleet's answer when it launched one m5.large.
fn one_m5_large(instance_id: &str) -> CreateFleetOutput {
    CreateFleetOutput::builder()
        .instances(
            CreateFleetInstance::builder()
                .instance_ids(instance_id)
                .instance_type(InstanceType::M5Large)
                .build(),
        )
        .build()
}

/// What one CreateFleet asked for: its client token, (instance type, subnet) overrides, and
/// default capacity type.
type FleetAsked = (String, Vec<(String, String)>, String);

#[tokio::test]
async fn a_retried_launch_repeats_its_client_token_and_asks_for_each_option_in_each_subnet() {
    let seen: Arc<Mutex<Vec<FleetAsked>>> = Arc::default();
    let record = Arc::clone(&seen);
    let fleet = mock!(aws_sdk_ec2::Client::create_fleet)
        .match_requests(move |req| {
            let overrides: Vec<(String, String)> = req
                .launch_template_configs()
                .iter()
                .flat_map(|c| c.overrides())
                .map(|o| {
                    (
                        o.instance_type()
                            .map(|t| t.as_str().to_string())
                            .unwrap_or_default(),
                        o.subnet_id().unwrap_or_default().to_string(),
                    )
                })
                .collect();
            let capacity = req
                .target_capacity_specification()
                .and_then(|t| t.default_target_capacity_type())
                .map(|t| t.as_str().to_string())
                .unwrap_or_default();
            record.lock().unwrap().push((
                req.client_token().unwrap_or_default().to_string(),
                overrides,
                capacity,
            ));
            true
        })
        // EC2 remembers the token: both attempts get the same instance.
        .then_output(|| one_m5_large("i-0aaa"));
    let mut rules = setup_rules();
    rules.push(fleet);
    let ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, rules.iter());
    let launcher = Launcher::new(ec2, cluster(), "scope");
    let spec = claim(CapacityType::OnDemand);
    for _ in 0..2 {
        let outcome = launcher.launch(&spec, &launch_class()).await;
        assert!(
            matches!(outcome, LaunchOutcome::Launched { .. }),
            "{outcome:?}"
        );
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, spec.client_token("scope"));
    assert_eq!(seen[0].0, seen[1].0, "the same token on the retry");
    assert_eq!(seen[0].2, "on-demand");
    assert_eq!(
        seen[0].1,
        [
            ("m5.large".to_string(), "subnet-a".to_string()),
            ("m5.large".to_string(), "subnet-b".to_string()),
            ("c5.large".to_string(), "subnet-a".to_string()),
        ]
    );
}

#[tokio::test]
async fn throttling_is_retried_by_the_sdk_with_backoff() {
    let fleet = mock!(aws_sdk_ec2::Client::create_fleet)
        .sequence()
        .error(|| {
            CreateFleetError::generic(
                ErrorMetadata::builder()
                    .code("RequestLimitExceeded")
                    .message("Request limit exceeded.")
                    .build(),
            )
        })
        .times(2)
        .output(|| {
            CreateFleetOutput::builder()
                .instances(
                    CreateFleetInstance::builder()
                        .instance_ids("i-0bbb")
                        .instance_type(InstanceType::M5Large)
                        .build(),
                )
                .build()
        })
        .build();
    let mut rules = setup_rules();
    rules.push(fleet);
    let ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, rules.iter(), |conf| conf
        .retry_config(
            aws_sdk_ec2::config::retry::RetryConfig::standard()
                .with_max_attempts(nodewright_aws::clients::MAX_ATTEMPTS)
                .with_initial_backoff(std::time::Duration::from_millis(1))
        ));
    let launcher = Launcher::new(ec2, cluster(), "scope");
    let outcome = launcher
        .launch(&claim(CapacityType::OnDemand), &launch_class())
        .await;
    let LaunchOutcome::Launched { event, .. } = outcome else {
        panic!("{outcome:?}");
    };
    assert!(
        matches!(event, EventKind::LaunchSucceeded { ref instance, .. } if instance.instance_id == "i-0bbb")
    );
    assert_eq!(
        rules[3].num_calls(),
        3,
        "two throttled attempts, then the launch"
    );
}

#[tokio::test]
async fn an_authorization_error_logs_nothing_and_is_classified_for_the_node_class() {
    let fleet = mock!(aws_sdk_ec2::Client::create_fleet).then_error(|| {
        CreateFleetError::generic(
            ErrorMetadata::builder()
                .code("UnauthorizedOperation")
                .message("You are not authorized to perform this operation.")
                .build(),
        )
    });
    let mut rules = setup_rules();
    rules.push(fleet);
    let ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, rules.iter());
    let launcher = Launcher::new(ec2, cluster(), "scope");
    let outcome = launcher
        .launch(&claim(CapacityType::OnDemand), &launch_class())
        .await;
    let LaunchOutcome::Failed { error } = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(error.class, ErrorClass::Auth);
    let text = error.to_string();
    assert!(
        text.contains("ec2:CreateFleet") && text.contains("docs/aws.md"),
        "{text}"
    );
}

#[tokio::test]
async fn an_ami_alias_reads_the_public_ssm_parameter_of_each_architecture() {
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = Arc::clone(&asked);
    let parameter = mock!(aws_sdk_ssm::Client::get_parameter).then_compute_response(move |req| {
        let name = req.name().unwrap_or_default().to_string();
        record.lock().unwrap().push(name.clone());
        if name.contains("/x86_64/") {
            aws_smithy_mocks::MockResponse::Output(
                GetParameterOutput::builder()
                    .parameter(Parameter::builder().name(&name).value("ami-0amd").build())
                    .build(),
            )
        } else {
            aws_smithy_mocks::MockResponse::Error(GetParameterError::generic(
                ErrorMetadata::builder().code("ParameterNotFound").build(),
            ))
        }
    });
    let images = mock!(aws_sdk_ec2::Client::describe_images)
        .match_requests(|req| req.image_ids() == ["ami-0amd"])
        .then_output(|| {
            DescribeImagesOutput::builder()
                .images(
                    Image::builder()
                        .image_id("ami-0amd")
                        .name("amazon-eks-node-al2023-x86_64-standard-1.34-v20261101")
                        .architecture(ArchitectureValues::X8664)
                        .creation_date("2026-11-01T00:00:00.000Z")
                        .build(),
                )
                .build()
        });
    let ssm = mock_client!(aws_sdk_ssm, RuleMode::MatchAny, [&parameter]);
    let ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, [&images]);
    let alias = AmiAlias::parse("al2023@latest").unwrap();
    let amis = Resolver::new(ec2, ssm, "1.34")
        .alias_amis(&alias)
        .await
        .unwrap();
    assert_eq!(
        *asked.lock().unwrap(),
        [
            "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/standard/recommended/image_id",
            "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/arm64/standard/recommended/image_id",
        ]
    );
    // arm64 is not published here: one AMI, amd64.
    assert_eq!(amis.len(), 1);
    assert_eq!(
        (amis[0].id.as_str(), amis[0].architecture.as_str()),
        ("ami-0amd", "amd64")
    );
}

/// `spec.context` reaches CreateFleet as its `Context` (moto accepts it and keeps nothing of
/// it, so the request is checked here).
#[tokio::test]
async fn the_node_classs_context_is_the_fleets() {
    let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let record = Arc::clone(&seen);
    let fleet = mock!(aws_sdk_ec2::Client::create_fleet)
        .match_requests(move |req| {
            record
                .lock()
                .unwrap()
                .push(req.context().map(str::to_string));
            true
        })
        .then_output(|| one_m5_large("i-0ctx"));
    let mut rules = setup_rules();
    rules.push(fleet);
    let ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, rules.iter());
    let launcher = Launcher::new(ec2, cluster(), "scope");
    let (class, settings) = parse_node_classes(
        &format!("{NODECLASS}  context: reservation-context-1\n"),
        "nc.yaml",
    )
    .unwrap()
    .remove(0);
    let with_context = LaunchClass {
        class,
        settings,
        resolved: launch_class().resolved,
    };
    let spec = claim(CapacityType::OnDemand);
    for launch in [&with_context, &launch_class()] {
        let outcome = launcher.launch(&spec, launch).await;
        assert!(
            matches!(outcome, LaunchOutcome::Launched { .. }),
            "{outcome:?}"
        );
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [Some("reservation-context-1".to_string()), None]
    );
}
