//! The AWS adapters against a real server: moto, started for each test on a free local port.
//! Catalog discovery, node class resolution, launch (and a retried launch), terminate, the
//! listing a restart reads, and the interruption queue.

use std::collections::{BTreeMap, BTreeSet};

use nodewright_adapters::control_loop::{self, Clock, Input};
use nodewright_adapters::driver::{CommandExecutor, Driver};
use nodewright_adapters::eventlog::{EventStore, LogHeader, LogRecord, MemoryStore};
use nodewright_adapters::manifest::parse_node_classes;
use nodewright_aws::Clients;
use nodewright_aws::catalog::CatalogSource;
use nodewright_aws::instances::Instances;
use nodewright_aws::launch::{LaunchClass, LaunchOutcome, Launcher};
use nodewright_aws::log_bucket::LogBucket;
use nodewright_aws::queue::InterruptionQueue;
use nodewright_aws::resolve::{ResolveError, Resolver};
use nodewright_aws::testing::{self, Network};
use nodewright_aws::user_data::ClusterInfo;
use nodewright_core::catalog::{CapacityType, Price, builtin};
use nodewright_core::model::nodeclaim::{LaunchOption, NodeClaimSpec};
use nodewright_core::{Command, Config, EventKind};
use nodewright_testkit::services::moto::Moto;

const CLUSTER: &str = "demo";

async fn clients(moto: &Moto) -> Clients {
    testing::local_clients(&moto.endpoint())
        .await
        .expect("clients for the moto server")
}

/// A VPC with two subnets tagged for discovery (us-east-1a, us-east-1b), one that is not,
/// and a tagged security group.
async fn network(c: &Clients) -> Network {
    let network = Network::create(c, CLUSTER, &["us-east-1a", "us-east-1b"])
        .await
        .expect("a network");
    network
        .add_subnet(c, "us-east-1c", false)
        .await
        .expect("an untagged subnet");
    network
}

fn nodeclass_yaml(ami: &str) -> String {
    format!(
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: default}}\nspec:\n  amiFamily: AL2023\n  role: KarpenterNodeRole-demo\n  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: {CLUSTER}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: \"*\"}}}}]\n  amiSelectorTerms: [{{id: {ami}}}]\n  tags: {{team: platform}}\n"
    )
}

fn cluster() -> ClusterInfo {
    ClusterInfo {
        name: CLUSTER.into(),
        endpoint: "https://demo.example".into(),
        ca_bundle: "Q0E=".into(),
        service_cidr: "10.100.0.0/16".into(),
    }
}

fn claim(name: &str) -> NodeClaimSpec {
    let option = |t: &str, zone: &str, micro: u64| LaunchOption {
        instance_type: t.into(),
        zone: zone.into(),
        capacity_type: CapacityType::OnDemand,
        price: Price(micro),
    };
    NodeClaimSpec {
        name: name.into(),
        nodepool: "default".into(),
        nodeclass: "default".into(),
        labels: BTreeMap::from([("kubernetes.io/arch".into(), "amd64".into())]),
        annotations: BTreeMap::new(),
        taints: Vec::new(),
        startup_taints: Vec::new(),
        requirements: Vec::new(),
        requests: Default::default(),
        // Cheapest first; us-east-1c has no subnet of the node class.
        options: vec![
            option("c5.large", "us-east-1c", 85_000),
            option("m5.large", "us-east-1b", 96_000),
            option("m5.large", "us-east-1a", 96_000),
        ]
        .into(),
        expire_after_ms: None,
    }
}

/// The data of a launch template's first version, as EC2 gives it back.
async fn template_data(c: &Clients, name: &str) -> aws_sdk_ec2::types::ResponseLaunchTemplateData {
    let version = c
        .ec2
        .describe_launch_template_versions()
        .launch_template_name(name)
        .send()
        .await
        .unwrap();
    version.launch_template_versions()[0]
        .launch_template_data()
        .unwrap()
        .clone()
}

async fn launch_class(c: &Clients) -> (LaunchClass, Vec<String>) {
    let Network { subnets, ami, .. } = network(c).await;
    let mut classes = parse_node_classes(&nodeclass_yaml(&ami), "nodeclass.yaml").unwrap();
    let (class, settings) = classes.remove(0);
    let resolution = Resolver::new(c.ec2.clone(), c.ssm.clone(), "1.34")
        .resolve(&class)
        .await
        .unwrap();
    resolution.check().unwrap();
    (
        LaunchClass {
            class,
            settings,
            resolved: resolution.resolved,
        },
        subnets,
    )
}

#[tokio::test]
async fn catalog_discovery_reads_motos_types_and_offerings() {
    let moto = Moto::start();
    let c = clients(&moto).await;
    let source = CatalogSource::new(c.ec2.clone(), "us-east-1");
    let found = source.discover().await.unwrap();
    assert!(found.types.len() > 1000, "{} types", found.types.len());
    let zones: Vec<&str> = found.zones["m5.large"].iter().map(String::as_str).collect();
    assert_eq!(
        zones,
        [
            "us-east-1a",
            "us-east-1b",
            "us-east-1c",
            "us-east-1d",
            "us-east-1f"
        ]
    );
    let builtin = builtin::us_east_1();
    let joined = found.join("us-east-1", &builtin);
    let catalog = joined.catalog;
    assert!(catalog.instance_types.len() > 1000);
    // The same labels as the built-in catalog, which was generated from the same data.
    let mut compared = 0;
    for it in &catalog.instance_types {
        if let Some(b) = builtin.get(&it.name) {
            assert_eq!(it.labels, b.labels, "labels of {}", it.name);
            assert_eq!(
                (it.vcpu, it.memory_mib),
                (b.vcpu, b.memory_mib),
                "{}",
                it.name
            );
            compared += 1;
        }
    }
    assert!(compared > 1000, "{compared} types compared");
    // On-demand prices from the built-in list, spot prices as the API gave them.
    assert_eq!(
        catalog.price_of("m5.large", "us-east-1a", CapacityType::OnDemand),
        builtin.price_of("m5.large", "us-east-1a", CapacityType::OnDemand)
    );
    assert_eq!(
        catalog.price_of("m5.large", "us-east-1a", CapacityType::Spot),
        Some(Price(10)),
        "moto's constant spot price, 0.00001 USD/h"
    );
    // The types whose processors support nested virtualization, as DescribeInstanceTypes
    // says: the same as the built-in catalog's.
    assert!(catalog.nested_virtualization.contains("c7i.large"));
    assert!(!catalog.nested_virtualization.contains("m5.large"));
    assert_eq!(
        catalog
            .nested_virtualization
            .iter()
            .filter(|t| builtin.get(t).is_some())
            .collect::<Vec<_>>(),
        builtin.nested_virtualization.iter().collect::<Vec<_>>()
    );
    let (initial, warning) = source.initial().await;
    assert!(warning.is_none());
    assert_eq!(*initial, catalog);
}

#[tokio::test]
async fn the_builtin_catalog_serves_when_the_api_is_unreachable() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let c = testing::local_clients(&format!("http://127.0.0.1:{port}"))
        .await
        .unwrap();
    let (catalog, warning) = CatalogSource::new(c.ec2.clone(), "us-east-1")
        .initial()
        .await;
    let warning = warning.expect("a warning");
    assert_eq!(warning.class, nodewright_aws::ErrorClass::Unreachable);
    assert_eq!(*catalog, builtin::us_east_1());
}

#[tokio::test]
async fn node_class_selectors_find_what_was_created_and_name_what_matched_nothing() {
    let moto = Moto::start();
    let c = clients(&moto).await;
    let Network {
        subnets,
        security_group: sg,
        ami,
        ..
    } = network(&c).await;
    let (class, _) = parse_node_classes(&nodeclass_yaml(&ami), "nc.yaml")
        .unwrap()
        .remove(0);
    let resolver = Resolver::new(c.ec2.clone(), c.ssm.clone(), "1.34");
    let r = resolver.resolve(&class).await.unwrap();
    let found: Vec<String> = r.resolved.subnets.iter().map(|s| s.id.clone()).collect();
    assert_eq!(found, subnets, "only the tagged subnets");
    let zones: BTreeSet<&str> = r.resolved.zones();
    assert_eq!(zones, BTreeSet::from(["us-east-1a", "us-east-1b"]));
    assert!(
        r.resolved
            .subnets
            .iter()
            .all(|s| s.available_ip_addresses > 200)
    );
    assert_eq!(
        r.resolved
            .security_groups
            .iter()
            .map(|g| g.id.as_str())
            .collect::<Vec<_>>(),
        [sg.as_str()],
        "the wildcard tag term selects the tagged group only"
    );
    assert_eq!(r.resolved.amis.len(), 1);
    assert_eq!(r.resolved.amis[0].id, ami);
    assert_eq!(r.resolved.amis[0].architecture, "amd64");
    r.check().unwrap();

    // A selector that matches nothing: the error names the field and the fix.
    let mut empty = class.clone();
    empty.subnet_selector_terms[0]
        .tags
        .insert("karpenter.sh/discovery".into(), "no-such-cluster".into());
    let r = resolver.resolve(&empty).await.unwrap();
    let err = r.check().unwrap_err();
    assert!(matches!(
        err,
        ResolveError::NothingMatched {
            field: "spec.subnetSelectorTerms",
            ..
        }
    ));
    let text = err.to_string();
    assert!(
        text.contains("no-such-cluster") && text.contains("fix:"),
        "{text}"
    );

    // An alias moto does not publish resolves to nothing (and says so), not to an error.
    let mut alias = class.clone();
    alias.ami_selector_terms = vec![nodewright_core::model::nodeclass::SelectorTerm {
        alias: Some("al2023@latest".into()),
        ..Default::default()
    }];
    let r = resolver.resolve(&alias).await.unwrap();
    assert!(r.resolved.amis.is_empty());
    assert!(
        r.check()
            .unwrap_err()
            .to_string()
            .contains("spec.amiSelectorTerms")
    );
}

#[tokio::test]
async fn a_launch_makes_one_tagged_instance_also_when_retried_and_terminate_removes_it() {
    let moto = Moto::start();
    let c = clients(&moto).await;
    let (launch, subnets) = launch_class(&c).await;
    let launcher = Launcher::new(c.ec2.clone(), cluster(), "log-nonce");
    let spec = claim("default-abcde");
    let LaunchOutcome::Launched { event, reused } = launcher.launch(&spec, &launch).await else {
        panic!("the launch failed");
    };
    assert!(!reused);
    let EventKind::LaunchSucceeded {
        nodeclaim,
        instance,
    } = event
    else {
        panic!("{event:?}");
    };
    assert_eq!(nodeclaim, "default-abcde");
    // us-east-1c has no subnet: the cheapest option it can have is m5.large.
    assert_eq!(instance.instance_type, "m5.large");
    assert!(["us-east-1a", "us-east-1b"].contains(&instance.zone.as_str()));
    assert_eq!(instance.price, Price(96_000));

    let described = c
        .ec2
        .describe_instances()
        .instance_ids(&instance.instance_id)
        .send()
        .await
        .unwrap();
    let ec2 = &described.reservations()[0].instances()[0];
    let tags: BTreeMap<&str, &str> = ec2
        .tags()
        .iter()
        .map(|t| (t.key().unwrap(), t.value().unwrap()))
        .collect();
    for (k, v) in [
        ("karpenter.sh/nodepool", "default"),
        ("karpenter.sh/nodeclaim", "default-abcde"),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ("kubernetes.io/cluster/demo", "owned"),
        ("eks:eks-cluster-name", "demo"),
        ("team", "platform"),
    ] {
        assert_eq!(tags.get(k), Some(&v), "tag {k}: {tags:?}");
    }
    assert!(subnets.contains(&ec2.subnet_id().unwrap().to_string()));
    assert_eq!(ec2.image_id(), Some(launch.resolved.amis[0].id.as_str()));
    // The launch template: named by its content, holding the AMI and the user data.
    let templates = c.ec2.describe_launch_templates().send().await.unwrap();
    let names: Vec<&str> = templates
        .launch_templates()
        .iter()
        .filter_map(|t| t.launch_template_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("nodewright/demo/"), "{names:?}");
    let data = template_data(&c, names[0]).await;
    assert_eq!(data.image_id(), Some(launch.resolved.amis[0].id.as_str()));
    let user_data = aws_smithy_types::base64::decode(data.user_data().unwrap()).unwrap();
    let user_data = String::from_utf8(user_data).unwrap();
    assert!(user_data.contains("kind: NodeConfig") && user_data.contains("name: \"demo\""));

    // A retried launch of the same NodeClaim finds the instance: still one.
    let LaunchOutcome::Launched { event, reused } = launcher.launch(&spec, &launch).await else {
        panic!("the retried launch failed");
    };
    assert!(reused);
    let EventKind::LaunchSucceeded {
        instance: again, ..
    } = event
    else {
        panic!();
    };
    assert_eq!(again.instance_id, instance.instance_id);
    let instances = Instances::new(c.ec2.clone(), CLUSTER);
    assert_eq!(instances.list().await.unwrap().len(), 1);

    // After a restart, the listing finds it, with its NodeClaim.
    let listing = Instances::new(c.ec2.clone(), CLUSTER)
        .listing()
        .await
        .unwrap();
    assert_eq!(listing.len(), 1);
    assert_eq!(listing[0].instance_id, instance.instance_id);
    assert_eq!(listing[0].nodeclaim.as_deref(), Some("default-abcde"));
    assert!(listing[0].running);

    // Terminate, twice: the second is success too.
    instances.terminate(&instance.instance_id).await.unwrap();
    instances.terminate(&instance.instance_id).await.unwrap();
    let after = instances.listing().await.unwrap();
    assert!(after.iter().all(|i| !i.running), "{after:?}");
    assert!(
        instances
            .of_nodeclaim("default-abcde")
            .await
            .unwrap()
            .is_none()
    );
    // An id EC2 never knew: also success.
    instances.terminate("i-0123456789abcdef0").await.unwrap();
}

#[tokio::test]
async fn options_with_no_subnet_fail_as_unavailable_offerings_without_a_launch() {
    let moto = Moto::start();
    let c = clients(&moto).await;
    let (launch, _) = launch_class(&c).await;
    let launcher = Launcher::new(c.ec2.clone(), cluster(), "log-nonce");
    let mut spec = claim("default-zzzzz");
    spec.options = spec
        .options
        .iter()
        .filter(|o| o.zone == "us-east-1c")
        .cloned()
        .collect();
    let LaunchOutcome::NoCapacity { event } = launcher.launch(&spec, &launch).await else {
        panic!("expected a failed launch");
    };
    let EventKind::LaunchFailed {
        unavailable,
        message,
        ..
    } = event
    else {
        panic!();
    };
    assert_eq!(unavailable.len(), 1);
    assert!(message.contains("us-east-1c"), "{message}");
    assert!(
        Instances::new(c.ec2.clone(), CLUSTER)
            .list()
            .await
            .unwrap()
            .is_empty()
    );
}

/// The controller's clock on tokio.
struct WallClock(std::time::Instant);

impl Clock for WallClock {
    fn now_ms(&self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }
    async fn sleep_until(&self, at_ms: u64) {
        let now = self.now_ms();
        tokio::time::sleep(std::time::Duration::from_millis(at_ms.saturating_sub(now))).await;
    }
}

#[derive(Default)]
struct Executed(Vec<Command>);

impl CommandExecutor for Executed {
    fn execute(&mut self, command: &Command) {
        self.0.push(command.clone());
    }
}

const SPOT_WARNING: &str =
    include_str!("../../adapters/tests/fixtures/eventbridge/spot-interruption.json");

async fn queue(c: &Clients, name: &str) -> InterruptionQueue {
    c.sqs
        .create_queue()
        .queue_name(name)
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout,
            "1",
        )
        .send()
        .await
        .unwrap();
    InterruptionQueue::open(c.sqs.clone(), name)
        .await
        .unwrap()
        .with_wait_seconds(1)
}

/// A queue holding one EventBridge spot interruption warning, as AWS delivers it.
async fn queue_with_spot_warning(c: &Clients) -> InterruptionQueue {
    let q = queue(c, "demo-interruptions").await;
    c.sqs
        .send_message()
        .queue_url(q.url())
        .message_body(SPOT_WARNING)
        .send()
        .await
        .unwrap();
    q
}

#[tokio::test]
async fn an_interruption_message_becomes_an_event_and_is_deleted_once_logged() {
    let moto = Moto::start();
    let c = clients(&moto).await;
    let q = queue_with_spot_warning(&c).await;

    let store = MemoryStore::<LogHeader, LogRecord>::new(LogHeader::new(Config::default(), "moto"));
    let mut driver = Driver::new(store);
    let (sender, mut inbox) = control_loop::inbox();
    let consumer = {
        let q = q.clone();
        let sender = sender.clone();
        tokio::spawn(async move {
            let batch = loop {
                if let Some(batch) = q.poll_once(&sender).await.unwrap() {
                    break batch;
                }
            };
            let _ = sender.send(Input::Stop);
            batch
        })
    };
    let clock = WallClock(std::time::Instant::now());
    let mut executed = Executed::default();
    control_loop::run(&mut driver, &mut inbox, &mut executed, &clock)
        .await
        .unwrap();
    let batch = consumer.await.unwrap();
    assert_eq!(batch.delete.len(), 1);
    let logged: Vec<String> = driver
        .store()
        .read_range(0, driver.store().len())
        .unwrap()
        .into_iter()
        .filter_map(|r| match r {
            LogRecord::Event(e) => match e.kind {
                EventKind::InterruptionReceived { instance_id, .. } => Some(instance_id),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(logged, ["i-0b662ef9931388ba0"]);
    // Deleted: nothing comes back after the visibility timeout.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert!(q.receive().await.unwrap().is_empty());
}

/// A message that is not an interruption event does not stop the queue: it is deleted, told
/// (the controller counts it and the queue logs it, naming what is wrong), and the interruption
/// behind it is handled.
#[tokio::test]
async fn a_malformed_message_is_deleted_and_told_and_the_next_is_handled() {
    use nodewright_adapters::interruption_queue::Outcome;
    use std::sync::{Arc, Mutex};

    let moto = Moto::start();
    let c = clients(&moto).await;
    let q = queue(&c, "demo-interruptions").await;
    for body in ["{not json", SPOT_WARNING] {
        c.sqs
            .send_message()
            .queue_url(q.url())
            .message_body(body)
            .send()
            .await
            .unwrap();
    }
    let store = MemoryStore::<LogHeader, LogRecord>::new(LogHeader::new(Config::default(), "moto"));
    let mut driver = Driver::new(store);
    let (sender, mut inbox) = control_loop::inbox();
    let heard: Arc<Mutex<Vec<Outcome>>> = Arc::default();
    let consumer = {
        let (q, sender, heard) = (q.clone(), sender.clone(), Arc::clone(&heard));
        tokio::spawn(async move {
            q.run(sender, |outcome| {
                heard.lock().unwrap().push(outcome.clone())
            })
            .await
        })
    };
    {
        let heard = Arc::clone(&heard);
        tokio::spawn(async move {
            while heard.lock().unwrap().len() < 2 {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            let _ = sender.send(Input::Stop);
        });
    }
    let clock = WallClock(std::time::Instant::now());
    let mut executed = Executed::default();
    control_loop::run(&mut driver, &mut inbox, &mut executed, &clock)
        .await
        .unwrap();
    drop(inbox);
    consumer.await.unwrap();

    // In either order: a standard queue does not promise one.
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.len(), 2, "{heard:?}");
    assert!(
        heard.iter().any(
            |o| matches!(o, Outcome::Malformed { error } if error.to_string().contains("not JSON"))
        ),
        "{heard:?}"
    );
    assert!(
        heard
            .iter()
            .any(|o| matches!(o, Outcome::Handled { events: 1, .. })),
        "{heard:?}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert!(q.receive().await.unwrap().is_empty(), "both deleted");
}

#[tokio::test]
async fn a_message_the_log_did_not_take_comes_back() {
    let moto = Moto::start();
    let c = clients(&moto).await;
    let q = queue_with_spot_warning(&c).await;
    // The loop is gone before it answers (a crash between receive and log): no delete.
    let (sender, inbox) = control_loop::inbox();
    drop(inbox);
    assert!(q.poll_once(&sender).await.unwrap().is_none());
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let again = q.receive().await.unwrap();
    assert_eq!(again.len(), 1, "the message is delivered again");
    assert!(again[0].body.contains("i-0b662ef9931388ba0"));
}

#[tokio::test]
async fn a_queue_that_does_not_exist_is_named_with_the_fix() {
    let moto = Moto::start();
    let c = clients(&moto).await;
    let err = InterruptionQueue::open(c.sqs.clone(), "no-such-queue")
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("no-such-queue") && text.contains("fix:"),
        "{text}"
    );
}

/// The whole path on moto, as the controller will run it: the discovered catalog, the guide's
/// NodePool, the resolved node class and a pending pod go through the driver; the core's launch
/// goes to EC2 and its outcome back into the log; the log then replays exactly.
#[tokio::test]
async fn a_pending_pod_becomes_a_moto_instance_through_the_driver_and_the_log_replays() {
    use nodewright_adapters::eventlog::NwlogWriter;
    use nodewright_adapters::manifest::{Manifest, parse_manifests};
    use nodewright_aws::refresh::CatalogRefresher;
    use nodewright_core::Event;
    use nodewright_core::model::pod::Pod;

    let moto = Moto::start();
    let c = clients(&moto).await;
    let (launch, _) = launch_class(&c).await;
    let resolution = Resolver::new(c.ec2.clone(), c.ssm.clone(), "1.34")
        .resolve(&launch.class)
        .await
        .unwrap();
    let mut refresher = CatalogRefresher::new(
        CatalogSource::new(c.ec2.clone(), "us-east-1"),
        "us-east-1",
        None,
    );
    let catalog = refresher
        .refresh(true)
        .await
        .unwrap()
        .expect("a first catalog");
    assert!(
        refresher.refresh(false).await.unwrap().is_none(),
        "an unchanged catalog is not sent again"
    );

    let pool = parse_manifests(
        include_str!("../../scenarios/tutorial/nodepool.yaml"),
        "nodepool.yaml",
    )
    .unwrap()
    .into_iter()
    .find_map(|m| match m {
        Manifest::NodePool(p) => Some(p),
        _ => None,
    })
    .unwrap();
    let header = LogHeader::new(Config::default(), "moto");
    let mut driver = Driver::new(MemoryStore::<LogHeader, LogRecord>::new(header.clone()));
    let mut executed = Executed::default();
    let mut at = 1_000;
    for kind in [
        EventKind::CatalogUpdated(catalog),
        EventKind::NodeClassApplied(Box::new(launch.class.clone())),
        resolution.event(),
        EventKind::NodePoolApplied(Box::new(pool)),
        EventKind::PodApplied(Box::new(Pod::new("default", "inflate-1", 1000, 1 << 30))),
    ] {
        driver.step(Event::new(at, kind), &mut executed).unwrap();
        at += 10;
    }
    // The batch window closes.
    while let Some(t) = driver.next_timer_ms() {
        if t > 20_000
            || executed
                .0
                .iter()
                .any(|c| matches!(c, Command::LaunchNodeClaim { .. }))
        {
            break;
        }
        driver
            .step(Event::new(t, EventKind::Tick), &mut executed)
            .unwrap();
    }
    let spec = executed
        .0
        .iter()
        .find_map(|c| match c {
            Command::LaunchNodeClaim { nodeclaim, .. } => Some((**nodeclaim).clone()),
            _ => None,
        })
        .expect("a launch");
    // Only the zones with a subnet of the node class.
    assert!(
        spec.options
            .iter()
            .all(|o| ["us-east-1a", "us-east-1b"].contains(&o.zone.as_str())),
        "{:?}",
        spec.options
    );
    let launcher = Launcher::new(c.ec2.clone(), cluster(), "log-nonce");
    let LaunchOutcome::Launched { event, .. } = launcher.launch(&spec, &launch).await else {
        panic!("the launch failed");
    };
    driver
        .step(Event::new(at + 20_000, event), &mut executed)
        .unwrap();
    let claim = &driver.core().state().nodeclaims[&spec.name];
    assert!(claim.instance.is_some());

    // The log replays with the same decisions.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("moto.nwlog");
    let records = driver.store().read_range(0, driver.store().len()).unwrap();
    let mut writer = NwlogWriter::create(&path, &header).unwrap();
    writer.append(&records).unwrap();
    drop(writer);
    let outcome = nodewright_replay::verify::verify_file(&path).unwrap();
    assert!(outcome.divergence.is_none(), "{:?}", outcome.divergence);
    assert!(outcome.events >= 6);
}

#[tokio::test]
async fn the_node_classs_interfaces_prefixes_tracking_placement_cpu_options_and_context_launch() {
    let moto = Moto::start();
    let c = clients(&moto).await;
    let (mut launch, _) = launch_class(&c).await;
    let shaped = format!(
        "{}  networkInterfaces:\n    - {{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}}\n    - {{networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}}\n  ipPrefixCount: 2\n  connectionTracking: {{tcpEstablishedTimeout: 3600, udpTimeout: 45}}\n  placementGroupSelector: {{name: gpu-cluster}}\n  cpuOptions: {{nestedVirtualization: enabled}}\n  context: reservation-context-1\n",
        nodeclass_yaml(launch.resolved.amis[0].id.as_str())
    );
    let (_, settings) = parse_node_classes(&shaped, "nodeclass.yaml")
        .unwrap()
        .remove(0);
    launch.settings = settings;
    let launcher = Launcher::new(c.ec2.clone(), cluster(), "log-nonce");
    let bootstrap_claim = claim("default-nets");
    let LaunchOutcome::Launched { .. } = launcher.launch(&bootstrap_claim, &launch).await else {
        panic!("the launch failed");
    };
    let templates = c.ec2.describe_launch_templates().send().await.unwrap();
    let name = templates.launch_templates()[0]
        .launch_template_name()
        .unwrap()
        .to_string();
    let data = template_data(&c, &name).await;
    let nics = data.network_interfaces();
    assert_eq!(nics.len(), 2, "{nics:?}");
    let primary = nics
        .iter()
        .find(|n| n.network_card_index() == Some(0))
        .expect("the primary interface");
    assert_eq!(primary.device_index(), Some(0));
    assert_eq!(primary.ipv4_prefix_count(), Some(2), "{primary:?}");
    let tracking = primary
        .connection_tracking_specification()
        .expect("connection tracking");
    assert_eq!(tracking.tcp_established_timeout(), Some(3600));
    assert_eq!(tracking.udp_timeout(), Some(45));
    assert!(
        !primary.groups().is_empty(),
        "the groups ride on the interface"
    );
    let efa = nics
        .iter()
        .find(|n| n.network_card_index() == Some(1))
        .expect("the EFA interface");
    assert_eq!(efa.interface_type(), Some("efa-only"));
    assert!(data.security_group_ids().is_empty(), "{data:?}");
    assert_eq!(
        data.placement().and_then(|p| p.group_name()),
        Some("gpu-cluster"),
        "{data:?}"
    );
    assert_eq!(
        data.cpu_options()
            .and_then(|o| o.nested_virtualization())
            .map(|n| n.as_str()),
        Some("enabled"),
        "{data:?}"
    );
}

/// The bucket sealed segments go to: put whole, listed under a prefix through several pages,
/// read back byte for byte; a bucket that does not exist is an error naming the operation.
#[tokio::test]
async fn segments_are_put_listed_across_pages_and_read_back() {
    let moto = Moto::start();
    let c = clients(&moto).await;
    c.s3.create_bucket()
        .bucket("incident-logs")
        .send()
        .await
        .expect("a bucket");
    let bucket = LogBucket::new(c.s3.clone(), "incident-logs", "clusters").with_page(2);
    assert_eq!(bucket.location(), "s3://incident-logs/clusters/");
    let names = [
        "demo/00000000000000aa/000000000000-000000000010-0000000001000-0000000002000.nwlog",
        "demo/00000000000000aa/000000000010-000000000020-0000000002000-0000000003000.nwlog",
        "demo/00000000000000bb/000000000000-000000000005-0000000004000-0000000005000.nwlog",
        "other/00000000000000cc/000000000000-000000000005-0000000004000-0000000005000.nwlog",
    ];
    for (i, name) in names.iter().enumerate() {
        bucket.put(name, vec![i as u8; 100 + i]).await.expect("put");
    }
    assert_eq!(
        bucket.list("demo/").await.expect("listed"),
        names[..3].to_vec(),
        "one cluster's, in name order, across pages"
    );
    assert_eq!(
        bucket.list("demo/00000000000000aa/").await.expect("listed"),
        names[..2].to_vec()
    );
    assert_eq!(bucket.get(names[1]).await.expect("read"), vec![1u8; 101]);
    // The prefix is the bucket's own: nothing outside it is listed.
    let outside = LogBucket::new(c.s3.clone(), "incident-logs", "elsewhere");
    assert!(outside.list("").await.expect("listed").is_empty());

    let missing = LogBucket::new(c.s3.clone(), "no-such-bucket", "");
    let error = missing.put("x", vec![1]).await.expect_err("no bucket");
    assert_eq!(error.operation, "s3:PutObject");
    assert!(error.to_string().contains("NoSuchBucket"), "{error}");
}
