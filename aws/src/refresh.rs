//! The catalog kept fresh: instance types and offerings every 5 minutes, spot prices every 12
//! hours (Karpenter's periods). A refresh that finds the same catalog sends nothing; one that
//! finds another sends a `CatalogUpdated` event to the control loop, which logs it before the
//! core reads it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use nodewright_adapters::control_loop::InboxSender;
use nodewright_core::EventKind;
use nodewright_core::catalog::{Catalog, Price};

use crate::catalog::{CatalogSource, Discovered, OFFERINGS_REFRESH, PRICES_REFRESH};
use crate::error::AwsError;

/// Reads the catalog again and tells what changed.
#[derive(Debug)]
pub struct CatalogRefresher {
    source: CatalogSource,
    region: String,
    /// On-demand prices and Karpenter's VPC limits.
    prices: Catalog,
    spot: BTreeMap<(String, String), Price>,
    last: Option<Arc<Catalog>>,
    /// Where each new catalog is also shown (to the writers of NodeClaim labels).
    published: Option<tokio::sync::watch::Sender<Option<Arc<Catalog>>>>,
}

impl CatalogRefresher {
    /// `last`: the catalog the core has now (from the log), so that an unchanged one is not
    /// logged again after a restart.
    pub fn new(source: CatalogSource, region: &str, last: Option<Arc<Catalog>>) -> Self {
        CatalogRefresher {
            source,
            region: region.to_string(),
            prices: nodewright_core::catalog::builtin::us_east_1(),
            spot: BTreeMap::new(),
            last,
            published: None,
        }
    }

    /// Shows every catalog it reads on `to` too, before the core has it.
    pub fn publishing(mut self, to: tokio::sync::watch::Sender<Option<Arc<Catalog>>>) -> Self {
        self.published = Some(to);
        self
    }

    /// Reads types and offerings (and spot prices when `prices` or when none were read yet);
    /// the new catalog when it differs from the last one.
    pub async fn refresh(&mut self, prices: bool) -> Result<Option<Arc<Catalog>>, AwsError> {
        if prices || self.spot.is_empty() {
            self.spot = self.source.spot_prices().await?;
        }
        let found = Discovered {
            types: self.source.instance_types().await?,
            zones: self.source.zones().await?,
            spot_prices: self.spot.clone(),
        };
        let catalog = found.join(&self.region, &self.prices).catalog;
        if self.last.as_deref() == Some(&catalog) {
            return Ok(None);
        }
        let catalog = Arc::new(catalog);
        self.last = Some(Arc::clone(&catalog));
        if let Some(published) = &self.published {
            published.send_replace(Some(Arc::clone(&catalog)));
        }
        Ok(Some(catalog))
    }

    /// Refreshes on Karpenter's periods until the loop goes away; a failed refresh is logged
    /// and the catalog the core has keeps serving.
    pub async fn run(self, inbox: InboxSender) {
        self.run_every(inbox, OFFERINGS_REFRESH, PRICES_REFRESH)
            .await;
    }

    /// [`CatalogRefresher::run`] with other periods.
    pub async fn run_every(mut self, inbox: InboxSender, offerings: Duration, prices: Duration) {
        let mut offerings_tick = tokio::time::interval(offerings);
        let mut prices_tick = tokio::time::interval(prices);
        offerings_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        prices_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while !inbox.is_closed() {
            let with_prices = tokio::select! {
                _ = prices_tick.tick() => true,
                _ = offerings_tick.tick() => false,
            };
            match self.refresh(with_prices).await {
                Ok(Some(catalog)) => {
                    if inbox
                        .observe(EventKind::CatalogUpdated(catalog))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "catalog refresh; the last catalog keeps serving")
                }
            }
        }
    }
}
