//! An EC2NodeClass's selector terms → the subnets, security groups and AMIs they select in the
//! cloud. Terms are ORed, the conditions inside one term ANDed, as in Karpenter: a tag term is
//! one `Describe*` call with a `tag:KEY` filter per tag (`*` as the value: the key exists), an
//! id or a name one call with that filter. AMI aliases are read from the public SSM parameters
//! of the EKS-optimized and Bottlerocket AMIs.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, Image};
use nodewright_adapters::manifest::launch::{AmiAlias, AmiFamily};
use nodewright_core::model::nodeclass::{
    NodeClass, ResolvedAmi, ResolvedNodeClass, ResolvedSecurityGroup, ResolvedSubnet, SelectorTerm,
};
use thiserror::Error;

use crate::error::AwsError;

/// What one selector term found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TermMatch {
    /// `spec.subnetSelectorTerms[0]`.
    pub field: String,
    /// `tags karpenter.sh/discovery=demo`, `id subnet-123`, `alias al2023@latest`.
    pub term: String,
    pub matched: usize,
}

/// A node class resolved, with what each of its terms found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    pub resolved: ResolvedNodeClass,
    pub terms: Vec<TermMatch>,
}

#[derive(Debug, Clone, Error)]
pub enum ResolveError {
    #[error("EC2NodeClass {nodeclass}: {field} matched no {what} ({terms}); fix: {fix}")]
    NothingMatched {
        nodeclass: String,
        field: &'static str,
        what: &'static str,
        terms: String,
        fix: &'static str,
    },
    #[error("EC2NodeClass {nodeclass}: {field}: {problem}; fix: {fix}")]
    Invalid {
        nodeclass: String,
        field: String,
        problem: String,
        fix: &'static str,
    },
    #[error("EC2NodeClass {nodeclass}: {source}")]
    Aws {
        nodeclass: String,
        #[source]
        source: AwsError,
    },
}

impl Resolution {
    /// The event the controller logs, so that a replay sees what it saw.
    pub fn event(&self) -> nodewright_core::EventKind {
        nodewright_core::EventKind::NodeClassResolved(Box::new(self.resolved.clone()))
    }

    /// The first selector list that matched nothing, as an error naming it and the fix.
    pub fn check(&self) -> Result<(), ResolveError> {
        let r = &self.resolved;
        let lists: [(&'static str, &'static str, bool, &'static str); 3] = [
            (
                "spec.subnetSelectorTerms",
                "subnet",
                r.subnets.is_empty(),
                "tag the cluster's subnets with the term's tags (e.g. karpenter.sh/discovery: <cluster>) or correct the term",
            ),
            (
                "spec.securityGroupSelectorTerms",
                "security group",
                r.security_groups.is_empty(),
                "tag the node security group with the term's tags or correct the term",
            ),
            (
                "spec.amiSelectorTerms",
                "AMI",
                r.amis.is_empty(),
                "pin an AMI id that exists in this region, or use an alias such as al2023@latest",
            ),
        ];
        for (field, what, empty, fix) in lists {
            if empty {
                let terms: Vec<String> = self
                    .terms
                    .iter()
                    .filter(|t| t.field.starts_with(field))
                    .map(|t| format!("{}: {}", t.field, t.term))
                    .collect();
                return Err(ResolveError::NothingMatched {
                    nodeclass: r.name.clone(),
                    field,
                    what,
                    terms: terms.join("; "),
                    fix,
                });
            }
        }
        Ok(())
    }
}

/// How a term reads in a message.
pub fn describe_term(term: &SelectorTerm) -> String {
    let mut parts = Vec::new();
    if let Some(id) = &term.id {
        parts.push(format!("id {id}"));
    }
    if let Some(name) = &term.name {
        parts.push(format!("name {name}"));
    }
    if let Some(alias) = &term.alias {
        parts.push(format!("alias {alias}"));
    }
    if let Some(owner) = &term.owner {
        parts.push(format!("owner {owner}"));
    }
    if !term.tags.is_empty() {
        let tags: Vec<String> = term.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        parts.push(format!("tags {}", tags.join(",")));
    }
    parts.join(", ")
}

fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<Filter> {
    tags.iter()
        .map(|(k, v)| {
            if v == "*" {
                Filter::builder().name("tag-key").values(k).build()
            } else {
                Filter::builder().name(format!("tag:{k}")).values(v).build()
            }
        })
        .collect()
}

fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

/// Kubernetes' architecture name of an EC2 image's.
fn kube_arch(ec2: &str) -> Option<&'static str> {
    match ec2 {
        "x86_64" => Some("amd64"),
        "arm64" => Some("arm64"),
        _ => None,
    }
}

/// The SSM parameters an alias reads, with the architecture each gives.
pub fn alias_parameters(alias: &AmiAlias, kubernetes_version: &str) -> Vec<(String, &'static str)> {
    let k = kubernetes_version;
    let archs = [("x86_64", "amd64"), ("arm64", "arm64")];
    match alias.family {
        AmiFamily::Al2023 => archs
            .iter()
            .map(|(ec2, kube)| {
                let leaf = match &alias.version {
                    None => "recommended".to_string(),
                    Some(v) => format!("amazon-eks-node-al2023-{ec2}-standard-{k}-{v}"),
                };
                (
                    format!("/aws/service/eks/optimized-ami/{k}/amazon-linux-2023/{ec2}/standard/{leaf}/image_id"),
                    *kube,
                )
            })
            .collect(),
        AmiFamily::Al2 => archs
            .iter()
            .map(|(ec2, kube)| {
                let (variant, node) = if *ec2 == "arm64" {
                    ("amazon-linux-2-arm64", "amazon-eks-arm64-node")
                } else {
                    ("amazon-linux-2", "amazon-eks-node")
                };
                let leaf = match &alias.version {
                    None => "recommended".to_string(),
                    Some(v) => format!("{node}-{k}-{v}"),
                };
                (
                    format!("/aws/service/eks/optimized-ami/{k}/{variant}/{leaf}/image_id"),
                    *kube,
                )
            })
            .collect(),
        AmiFamily::Bottlerocket => archs
            .iter()
            .map(|(ec2, kube)| {
                let version = alias
                    .version
                    .as_deref()
                    .map_or("latest".to_string(), |v| v.trim_start_matches('v').to_string());
                (
                    format!("/aws/service/bottlerocket/aws-k8s-{k}/{ec2}/{version}/image_id"),
                    *kube,
                )
            })
            .collect(),
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
            let year = match alias.family {
                AmiFamily::Windows2019 => "2019",
                AmiFamily::Windows2022 => "2022",
                _ => "2025",
            };
            vec![(
                format!("/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k}/image_id"),
                "amd64",
            )]
        }
        AmiFamily::Custom => Vec::new(),
    }
}

/// Resolves node classes against EC2 and SSM.
#[derive(Debug, Clone)]
pub struct Resolver {
    ec2: aws_sdk_ec2::Client,
    ssm: aws_sdk_ssm::Client,
    /// The cluster's Kubernetes version (`1.34`): AMI aliases name AMIs per version.
    kubernetes_version: String,
}

impl Resolver {
    pub fn new(
        ec2: aws_sdk_ec2::Client,
        ssm: aws_sdk_ssm::Client,
        kubernetes_version: &str,
    ) -> Self {
        Resolver {
            ec2,
            ssm,
            kubernetes_version: kubernetes_version.to_string(),
        }
    }

    /// Resolves every selector list of `class` (an empty list is left empty: [`Resolution::check`]
    /// says so).
    pub async fn resolve(&self, class: &NodeClass) -> Result<Resolution, ResolveError> {
        let aws = |source| ResolveError::Aws {
            nodeclass: class.name.clone(),
            source,
        };
        let mut terms = Vec::new();
        let mut subnets: BTreeMap<String, ResolvedSubnet> = BTreeMap::new();
        for (i, term) in class.subnet_selector_terms.iter().enumerate() {
            let found = self.subnets(term).await.map_err(aws)?;
            terms.push(TermMatch {
                field: format!("spec.subnetSelectorTerms[{i}]"),
                term: describe_term(term),
                matched: found.len(),
            });
            subnets.extend(found.into_iter().map(|s| (s.id.clone(), s)));
        }
        let mut groups: BTreeMap<String, ResolvedSecurityGroup> = BTreeMap::new();
        for (i, term) in class.security_group_selector_terms.iter().enumerate() {
            let found = self.security_groups(term).await.map_err(aws)?;
            terms.push(TermMatch {
                field: format!("spec.securityGroupSelectorTerms[{i}]"),
                term: describe_term(term),
                matched: found.len(),
            });
            groups.extend(found.into_iter().map(|g| (g.id.clone(), g)));
        }
        let mut amis: BTreeMap<String, ResolvedAmi> = BTreeMap::new();
        for (i, term) in class.ami_selector_terms.iter().enumerate() {
            let field = format!("spec.amiSelectorTerms[{i}]");
            let found = match &term.alias {
                Some(raw) => {
                    let alias = AmiAlias::parse(raw).map_err(|problem| ResolveError::Invalid {
                        nodeclass: class.name.clone(),
                        field: format!("{field}.alias"),
                        problem,
                        fix: "use an alias such as al2023@latest, or select AMIs by id, name or tags",
                    })?;
                    self.alias_amis(&alias).await.map_err(aws)?
                }
                None => self.amis(term).await.map_err(aws)?,
            };
            terms.push(TermMatch {
                field,
                term: describe_term(term),
                matched: found.len(),
            });
            amis.extend(found.into_iter().map(|a| (a.id.clone(), a)));
        }
        let mut amis: Vec<ResolvedAmi> = amis.into_values().collect();
        amis.sort_by(|a, b| {
            b.creation_date
                .cmp(&a.creation_date)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(Resolution {
            resolved: ResolvedNodeClass {
                name: class.name.clone(),
                subnets: subnets.into_values().collect(),
                security_groups: groups.into_values().collect(),
                amis,
            },
            terms,
        })
    }

    async fn subnets(&self, term: &SelectorTerm) -> Result<Vec<ResolvedSubnet>, AwsError> {
        let mut filters = tag_filters(&term.tags);
        if let Some(id) = &term.id {
            filters.push(filter("subnet-id", id));
        }
        let subnets = self
            .ec2
            .describe_subnets()
            .set_filters(Some(filters))
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| AwsError::from_sdk("ec2:DescribeSubnets", e))?;
        Ok(subnets
            .iter()
            .filter_map(|s| {
                Some(ResolvedSubnet {
                    id: s.subnet_id()?.to_string(),
                    zone: s.availability_zone()?.to_string(),
                    zone_id: s.availability_zone_id().map(str::to_string),
                    available_ip_addresses: s
                        .available_ip_address_count()
                        .and_then(|n| u32::try_from(n).ok())
                        .unwrap_or(0),
                })
            })
            .collect())
    }

    async fn security_groups(
        &self,
        term: &SelectorTerm,
    ) -> Result<Vec<ResolvedSecurityGroup>, AwsError> {
        let mut filters = tag_filters(&term.tags);
        if let Some(id) = &term.id {
            filters.push(filter("group-id", id));
        }
        if let Some(name) = &term.name {
            filters.push(filter("group-name", name));
        }
        let groups = self
            .ec2
            .describe_security_groups()
            .set_filters(Some(filters))
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| AwsError::from_sdk("ec2:DescribeSecurityGroups", e))?;
        Ok(groups
            .iter()
            .filter_map(|g| {
                Some(ResolvedSecurityGroup {
                    id: g.group_id()?.to_string(),
                    name: g.group_name().unwrap_or_default().to_string(),
                })
            })
            .collect())
    }

    async fn amis(&self, term: &SelectorTerm) -> Result<Vec<ResolvedAmi>, AwsError> {
        let mut filters = tag_filters(&term.tags);
        let mut request = self.ec2.describe_images();
        if let Some(id) = &term.id {
            request = request.image_ids(id);
        }
        if let Some(name) = &term.name {
            filters.push(filter("name", name));
            // Karpenter's default owners for a name: this account and Amazon.
            if term.owner.is_none() {
                request = request.owners("self").owners("amazon");
            }
        }
        if let Some(owner) = &term.owner {
            request = request.owners(owner);
        }
        let out = request
            .set_filters(if filters.is_empty() {
                None
            } else {
                Some(filters)
            })
            .send()
            .await;
        match out {
            Ok(page) => Ok(page.images().iter().filter_map(resolved_ami).collect()),
            // An id that does not exist (or is malformed) selects nothing.
            Err(e) => {
                let e = AwsError::from_sdk("ec2:DescribeImages", e);
                if term.id.is_some()
                    && e.code
                        .as_deref()
                        .is_some_and(|c| c.starts_with("InvalidAMIID"))
                {
                    Ok(Vec::new())
                } else {
                    Err(e)
                }
            }
        }
    }

    /// The AMIs an alias names today, one per architecture published.
    pub async fn alias_amis(&self, alias: &AmiAlias) -> Result<Vec<ResolvedAmi>, AwsError> {
        let mut ids = Vec::new();
        for (parameter, _) in alias_parameters(alias, &self.kubernetes_version) {
            match self.ssm.get_parameter().name(&parameter).send().await {
                Ok(out) => {
                    if let Some(id) = out.parameter().and_then(|p| p.value()) {
                        ids.push(id.to_string());
                    }
                }
                Err(e) => {
                    let e = AwsError::from_sdk("ssm:GetParameter", e);
                    // Not every family is published for every architecture and version.
                    if !e.is_not_found() {
                        return Err(e);
                    }
                }
            }
        }
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let page = self
            .ec2
            .describe_images()
            .set_image_ids(Some(ids))
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("ec2:DescribeImages", e))?;
        Ok(page.images().iter().filter_map(resolved_ami).collect())
    }
}

fn resolved_ami(image: &Image) -> Option<ResolvedAmi> {
    let architecture = kube_arch(image.architecture()?.as_str())?;
    Some(ResolvedAmi {
        id: image.image_id()?.to_string(),
        name: image.name().unwrap_or_default().to_string(),
        architecture: architecture.to_string(),
        creation_date: image.creation_date().unwrap_or_default().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_parameters_follow_the_published_paths() {
        let latest = AmiAlias::parse("al2023@latest").unwrap();
        let p = alias_parameters(&latest, "1.34");
        assert_eq!(
            p[0].0,
            "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/standard/recommended/image_id"
        );
        assert_eq!(p[1].1, "arm64");
        let pinned = AmiAlias::parse("al2023@v20240807").unwrap();
        assert!(
            alias_parameters(&pinned, "1.34")[0]
                .0
                .ends_with("amazon-eks-node-al2023-x86_64-standard-1.34-v20240807/image_id")
        );
        let br = AmiAlias::parse("bottlerocket@v1.20.3").unwrap();
        assert_eq!(
            alias_parameters(&br, "1.34")[1].0,
            "/aws/service/bottlerocket/aws-k8s-1.34/arm64/1.20.3/image_id"
        );
    }
}
