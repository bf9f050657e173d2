//! For tests against a local EC2 API (the moto server): clients for it, and a network a node
//! class can discover — a VPC, subnets and a security group tagged `karpenter.sh/discovery`,
//! and an amd64 AMI the server lists. Behind the feature `testing`.

use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};

use crate::{AwsError, ClientSettings, Clients};

/// What a test fixture could not set up.
pub type SetupError = Box<dyn std::error::Error + Send + Sync>;

/// The settings of a local server at `endpoint`: us-east-1, static test credentials.
pub fn local_settings(endpoint: &str) -> ClientSettings {
    ClientSettings {
        region: Some("us-east-1".into()),
        endpoint_url: Some(endpoint.to_string()),
        static_credentials: Some(("testing".into(), "testing".into())),
    }
}

/// Clients for a local server at `endpoint`.
pub async fn local_clients(endpoint: &str) -> Result<Clients, AwsError> {
    Clients::connect(&local_settings(endpoint)).await
}

fn discovery_tags(kind: ResourceType, discovery: &str) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .tags(
            Tag::builder()
                .key("karpenter.sh/discovery")
                .value(discovery)
                .build(),
        )
        .build()
}

/// A discoverable network.
#[derive(Debug, Clone)]
pub struct Network {
    pub vpc: String,
    /// The discoverable subnets' ids, sorted.
    pub subnets: Vec<String>,
    pub security_group: String,
    /// An amd64 AMI the server lists (the first by id).
    pub ami: String,
    discovery: String,
}

impl Network {
    /// A VPC with one subnet per zone and a security group, all tagged
    /// `karpenter.sh/discovery: <discovery>`.
    pub async fn create(
        c: &Clients,
        discovery: &str,
        zones: &[&str],
    ) -> Result<Network, SetupError> {
        let vpc = c.ec2.create_vpc().cidr_block("10.0.0.0/16").send().await?;
        let vpc = vpc
            .vpc()
            .and_then(|v| v.vpc_id())
            .ok_or("CreateVpc returned no id")?
            .to_string();
        let security_group = c
            .ec2
            .create_security_group()
            .group_name(format!("{discovery}-nodes"))
            .description("nodes")
            .vpc_id(&vpc)
            .tag_specifications(discovery_tags(ResourceType::SecurityGroup, discovery))
            .send()
            .await?
            .group_id()
            .ok_or("CreateSecurityGroup returned no id")?
            .to_string();
        let mut network = Network {
            vpc,
            subnets: Vec::new(),
            security_group,
            ami: some_ami(c).await?,
            discovery: discovery.to_string(),
        };
        for zone in zones {
            let id = network.add_subnet(c, zone, true).await?;
            network.subnets.push(id);
        }
        network.subnets.sort();
        Ok(network)
    }

    /// Another subnet in `zone` (the n-th gets 10.0.n.0/24), tagged for discovery or not;
    /// its id. An untagged one is not added to [`Network::subnets`].
    pub async fn add_subnet(
        &self,
        c: &Clients,
        zone: &str,
        discoverable: bool,
    ) -> Result<String, SetupError> {
        let existing = c
            .ec2
            .describe_subnets()
            .filters(
                aws_sdk_ec2::types::Filter::builder()
                    .name("vpc-id")
                    .values(&self.vpc)
                    .build(),
            )
            .send()
            .await?
            .subnets()
            .len();
        let mut request = c
            .ec2
            .create_subnet()
            .vpc_id(&self.vpc)
            .cidr_block(format!("10.0.{}.0/24", existing + 1))
            .availability_zone(zone);
        if discoverable {
            request =
                request.tag_specifications(discovery_tags(ResourceType::Subnet, &self.discovery));
        }
        Ok(request
            .send()
            .await?
            .subnet()
            .and_then(|s| s.subnet_id())
            .ok_or("CreateSubnet returned no id")?
            .to_string())
    }
}

/// The amd64 AMIs owned by amazon the server lists, by id.
pub async fn amd64_amis(c: &Clients) -> Result<Vec<String>, SetupError> {
    let images = c.ec2.describe_images().owners("amazon").send().await?;
    let mut ids: Vec<String> = images
        .images()
        .iter()
        .filter(|i| i.architecture().map(|a| a.as_str()) == Some("x86_64"))
        .filter_map(|i| i.image_id().map(str::to_string))
        .collect();
    ids.sort();
    Ok(ids)
}

/// An amd64 AMI the server lists (the first by id).
pub async fn some_ami(c: &Clients) -> Result<String, SetupError> {
    amd64_amis(c)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| "the server lists no x86_64 AMI owned by amazon".into())
}
