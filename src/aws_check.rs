//! `nodewright aws check`: the preflight of an EC2NodeClass (and its NodePools and the
//! interruption queue) against the AWS API, or the endpoint `AWS_ENDPOINT_URL` names.

use std::path::Path;

use anyhow::{Context, Result};
use nodewright_adapters::manifest::{Manifest, parse_manifests, parse_node_classes};
use nodewright_aws::catalog::CatalogSource;
use nodewright_aws::preflight::{QueueLine, Report, pool_line, pools_of};
use nodewright_aws::queue::InterruptionQueue;
use nodewright_aws::resolve::Resolver;
use nodewright_aws::{ClientSettings, Clients};
use nodewright_core::catalog::builtin;

/// The options of `aws check`.
pub struct CheckArgs<'a> {
    pub nodeclass: &'a Path,
    pub nodepool: Option<&'a Path>,
    pub queue: Option<&'a str>,
    pub kubernetes_version: &'a str,
    pub json: bool,
}

/// Exit code 0 when a launch has what it needs, 1 naming what is missing.
pub fn check(args: &CheckArgs) -> Result<u8> {
    let text = std::fs::read_to_string(args.nodeclass)
        .with_context(|| format!("reading {}", args.nodeclass.display()))?;
    let classes = parse_node_classes(&text, &args.nodeclass.display().to_string())?;
    if classes.is_empty() {
        anyhow::bail!(
            "{} holds no EC2NodeClass (apiVersion karpenter.k8s.aws/v1); fix: pass the file of your EC2NodeClass",
            args.nodeclass.display()
        );
    }
    let pools = match args.nodepool {
        None => Vec::new(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            parse_manifests(&text, &path.display().to_string())?
                .into_iter()
                .filter_map(|m| match m {
                    Manifest::NodePool(p) => Some(p),
                    _ => None,
                })
                .collect()
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let clients = Clients::connect(&ClientSettings::default()).await?;
        let resolver = Resolver::new(
            clients.ec2.clone(),
            clients.ssm.clone(),
            args.kubernetes_version,
        );
        let catalog = if pools.is_empty() {
            None
        } else {
            let source = CatalogSource::new(clients.ec2.clone(), &clients.region);
            let found = source.discover().await?;
            Some(found.join(&clients.region, &builtin::us_east_1()).catalog)
        };
        let mut all_ok = true;
        let mut reports = Vec::new();
        for (class, _settings) in &classes {
            let resolution = resolver.resolve(class).await?;
            let mut report = Report::new(&clients.region, class, &resolution);
            if let Some(catalog) = &catalog {
                for pool in pools_of(&pools, &class.name) {
                    report.add_pool(pool_line(pool, &resolution.resolved, catalog));
                }
            }
            if let Some(name) = args.queue {
                let line = match InterruptionQueue::open(clients.sqs.clone(), name).await {
                    Ok(q) => QueueLine {
                        name: name.to_string(),
                        url: Some(q.url().to_string()),
                        error: None,
                    },
                    Err(e) => QueueLine {
                        name: name.to_string(),
                        url: None,
                        error: Some(e.to_string()),
                    },
                };
                report.set_queue(line);
            }
            all_ok &= report.ok();
            reports.push(report);
        }
        if args.json {
            println!("{}", serde_json::to_string_pretty(&reports)?);
        } else {
            for r in &reports {
                print!("{}", r.render());
            }
        }
        Ok(if all_ok { 0 } else { 1 })
    })
}
