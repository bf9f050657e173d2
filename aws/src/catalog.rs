//! The catalog from the EC2 API: every instance type (`DescribeInstanceTypes`), the zones each
//! is offered in (`DescribeInstanceTypeOfferings`), spot prices (`DescribeSpotPriceHistory`)
//! and on-demand prices from the built-in list (the Pricing API is not regional and needs
//! permissions a node autoscaler should not hold). Each refresh is one `CatalogUpdated`
//! event; when the API cannot be reached at start, the built-in catalog serves.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_ec2::types::LocationType;
use nodewright_core::catalog::{CapacityType, Catalog, Offering, Price, builtin};

use crate::error::AwsError;
use crate::instance_types::TypeFacts;

/// Karpenter refreshes instance types and offerings every 5 minutes.
pub const OFFERINGS_REFRESH: Duration = Duration::from_secs(5 * 60);
/// ... and prices every 12 hours.
pub const PRICES_REFRESH: Duration = Duration::from_secs(12 * 60 * 60);

/// What the EC2 API said, before it is joined into a catalog.
#[derive(Debug, Clone, Default)]
pub struct Discovered {
    pub types: Vec<TypeFacts>,
    /// Zones each type is offered in.
    pub zones: BTreeMap<String, BTreeSet<String>>,
    /// The newest spot price of each (type, zone), in micro-USD per hour.
    pub spot_prices: BTreeMap<(String, String), Price>,
}

/// The join, and what it had to leave out.
#[derive(Debug, Clone)]
pub struct Joined {
    pub catalog: Catalog,
    /// Types the API lists that have no on-demand price nodewright knows.
    pub without_price: Vec<String>,
    /// Types of an architecture nodewright does not launch, or offered in no zone.
    pub not_launchable: usize,
}

/// `"0.0431"` → 43 100 micro-USD, exactly (round half to even past the sixth decimal, as
/// the built-in catalog's generator does).
pub fn parse_usd(text: &str) -> Option<Price> {
    let text = text.trim();
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && frac.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut micro = whole.checked_mul(1_000_000)?;
    let digits: Vec<u64> = frac.bytes().map(|b| u64::from(b - b'0')).collect();
    for (i, d) in digits.iter().take(6).enumerate() {
        micro += d * 10u64.pow(5 - i as u32);
    }
    if digits.len() > 6 {
        let rest = &digits[6..];
        let half_or_more = rest[0] >= 5;
        let exactly_half = rest[0] == 5 && rest[1..].iter().all(|d| *d == 0);
        if half_or_more && !(exactly_half && micro % 2 == 0) {
            micro += 1;
        }
    }
    Some(Price(micro))
}

impl Discovered {
    /// Joins the API's answers with the built-in list's on-demand prices (and its VPC limits,
    /// Karpenter's table): spot offerings where the type supports spot and a price is known
    /// (the API's, else the built-in one).
    pub fn join(&self, region: &str, prices: &Catalog) -> Joined {
        let mut types = Vec::new();
        let mut without_price = Vec::new();
        let mut not_launchable = 0;
        let mut nested_virtualization = BTreeSet::new();
        for facts in &self.types {
            let zones = self.zones.get(&facts.name);
            let Some(zones) = zones.filter(|z| !z.is_empty()) else {
                not_launchable += 1;
                continue;
            };
            let known = prices.get(&facts.name);
            let on_demand = known.and_then(|k| {
                k.offerings
                    .iter()
                    .find(|o| o.capacity_type == CapacityType::OnDemand)
                    .map(|o| o.price)
            });
            let Some(on_demand) = on_demand else {
                without_price.push(facts.name.clone());
                continue;
            };
            let mut offerings = Vec::new();
            for zone in zones {
                offerings.push(Offering {
                    zone: zone.clone(),
                    capacity_type: CapacityType::OnDemand,
                    price: on_demand,
                });
                if facts.spot_supported {
                    let spot = self
                        .spot_prices
                        .get(&(facts.name.clone(), zone.clone()))
                        .copied()
                        .or_else(|| prices.price_of(&facts.name, zone, CapacityType::Spot));
                    if let Some(price) = spot.filter(|p| p.0 > 0) {
                        offerings.push(Offering {
                            zone: zone.clone(),
                            capacity_type: CapacityType::Spot,
                            price,
                        });
                    }
                }
            }
            let enis = known.map(|k| (k.max_enis, k.ipv4_per_eni));
            match facts.to_instance_type(offerings, enis) {
                Some(t) => {
                    if facts.nested_virtualization {
                        nested_virtualization.insert(t.name.clone());
                    }
                    types.push(t)
                }
                None => not_launchable += 1,
            }
        }
        Joined {
            catalog: Catalog {
                region: region.to_string(),
                instance_types: types,
                nested_virtualization,
                reservations: Vec::new(),
                ..Catalog::default()
            }
            .normalized(),
            without_price,
            not_launchable,
        }
    }
}

/// Reads the catalog's sources from the EC2 API.
#[derive(Debug, Clone)]
pub struct CatalogSource {
    ec2: aws_sdk_ec2::Client,
    region: String,
}

impl CatalogSource {
    pub fn new(ec2: aws_sdk_ec2::Client, region: &str) -> Self {
        CatalogSource {
            ec2,
            region: region.to_string(),
        }
    }

    /// Every instance type, all pages.
    pub async fn instance_types(&self) -> Result<Vec<TypeFacts>, AwsError> {
        let infos = self
            .ec2
            .describe_instance_types()
            .max_results(100)
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| AwsError::from_sdk("ec2:DescribeInstanceTypes", e))?;
        let mut out: Vec<TypeFacts> = infos.iter().filter_map(TypeFacts::from_sdk).collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out.dedup_by(|a, b| a.name == b.name);
        Ok(out)
    }

    /// The zones of every offered type, all pages.
    pub async fn zones(&self) -> Result<BTreeMap<String, BTreeSet<String>>, AwsError> {
        let offerings = self
            .ec2
            .describe_instance_type_offerings()
            .location_type(LocationType::AvailabilityZone)
            .max_results(1000)
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| AwsError::from_sdk("ec2:DescribeInstanceTypeOfferings", e))?;
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for offering in &offerings {
            if let (Some(t), Some(zone)) = (offering.instance_type(), offering.location()) {
                out.entry(t.as_str().to_string())
                    .or_default()
                    .insert(zone.to_string());
            }
        }
        Ok(out)
    }

    /// The newest Linux spot price of every (type, zone), all pages. (Product descriptions as
    /// a parameter, not a filter: moto answers the filter with nothing.)
    pub async fn spot_prices(&self) -> Result<BTreeMap<(String, String), Price>, AwsError> {
        let history = self
            .ec2
            .describe_spot_price_history()
            .product_descriptions("Linux/UNIX")
            .product_descriptions("Linux/UNIX (Amazon VPC)")
            .start_time(aws_sdk_ec2::primitives::DateTime::from(
                std::time::SystemTime::now(),
            ))
            .max_results(1000)
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| AwsError::from_sdk("ec2:DescribeSpotPriceHistory", e))?;
        let mut newest: BTreeMap<(String, String), (i64, Price)> = BTreeMap::new();
        for entry in &history {
            let (Some(t), Some(zone), Some(price)) = (
                entry.instance_type(),
                entry.availability_zone(),
                entry.spot_price().and_then(parse_usd),
            ) else {
                continue;
            };
            let at = entry.timestamp().map_or(0, |t| t.secs());
            let key = (t.as_str().to_string(), zone.to_string());
            match newest.get(&key) {
                Some((seen, _)) if *seen >= at => {}
                _ => {
                    newest.insert(key, (at, price));
                }
            }
        }
        Ok(newest.into_iter().map(|(k, (_, p))| (k, p)).collect())
    }

    /// Everything, read now.
    pub async fn discover(&self) -> Result<Discovered, AwsError> {
        Ok(Discovered {
            types: self.instance_types().await?,
            zones: self.zones().await?,
            spot_prices: self.spot_prices().await?,
        })
    }

    /// The catalog to start with: the API's, or the built-in one when the API cannot be read
    /// (with the reason, for a warning).
    pub async fn initial(&self) -> (Arc<Catalog>, Option<AwsError>) {
        match self.discover().await {
            Ok(found) => (
                Arc::new(found.join(&self.region, &builtin::us_east_1()).catalog),
                None,
            ),
            Err(e) => (Arc::new(builtin_catalog(&self.region)), Some(e)),
        }
    }
}

/// The built-in catalog of a region, or us-east-1's (with its zones) when nodewright ships none
/// for it.
pub fn builtin_catalog(region: &str) -> Catalog {
    builtin::for_region(region).unwrap_or_else(builtin::us_east_1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usd_to_micro_exactly() {
        assert_eq!(parse_usd("0.096"), Some(Price(96_000)));
        assert_eq!(parse_usd("0.00001"), Some(Price(10)));
        assert_eq!(parse_usd("12"), Some(Price(12_000_000)));
        assert_eq!(parse_usd("0.0000005"), Some(Price(0)));
        assert_eq!(parse_usd("0.0000015"), Some(Price(2)));
        assert_eq!(parse_usd("0.00000151"), Some(Price(2)));
        assert_eq!(parse_usd("abc"), None);
        assert_eq!(parse_usd(""), None);
    }

    #[test]
    fn join_prices_types_from_the_builtin_list_and_skips_the_unpriced() {
        let prices = builtin::us_east_1();
        let m5 = TypeFacts {
            name: "m5.large".into(),
            architectures: vec!["x86_64".into()],
            vcpu: 2,
            memory_mib: 8192,
            spot_supported: true,
            ..TypeFacts::default()
        };
        let unknown = TypeFacts {
            name: "zz9.large".into(),
            architectures: vec!["x86_64".into()],
            ..TypeFacts::default()
        };
        let found = Discovered {
            types: vec![m5, unknown],
            zones: BTreeMap::from([
                (
                    "m5.large".into(),
                    BTreeSet::from(["us-east-1a".into(), "us-east-1b".into()]),
                ),
                ("zz9.large".into(), BTreeSet::from(["us-east-1a".into()])),
            ]),
            spot_prices: BTreeMap::from([(("m5.large".into(), "us-east-1a".into()), Price(10))]),
        };
        let joined = found.join("us-east-1", &prices);
        assert_eq!(joined.without_price, vec!["zz9.large".to_string()]);
        let t = joined.catalog.get("m5.large").expect("m5.large");
        let od = prices.price_of("m5.large", "us-east-1a", CapacityType::OnDemand);
        assert_eq!(
            joined
                .catalog
                .price_of("m5.large", "us-east-1a", CapacityType::OnDemand),
            od
        );
        // The API's spot price where it gave one, the built-in one elsewhere.
        assert_eq!(
            joined
                .catalog
                .price_of("m5.large", "us-east-1a", CapacityType::Spot),
            Some(Price(10))
        );
        assert_eq!(
            joined
                .catalog
                .price_of("m5.large", "us-east-1b", CapacityType::Spot),
            prices.price_of("m5.large", "us-east-1b", CapacityType::Spot)
        );
        assert_eq!(t.offerings.len(), 4);
    }
}
