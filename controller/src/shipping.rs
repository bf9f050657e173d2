//! The leader's log shipped to S3, so that it outlives the replica's pod and the leader's term.
//!
//! Every `LOG_SEGMENT_INTERVAL`, and once more when its term ends, the leader seals its store
//! (the control loop appends a snapshot of the core: [`Input::Seal`]) and ships the records
//! before the seal that the bucket does not hold yet, as one segment
//! (`nodewright_replay::segments`), to `s3://<bucket>/<prefix>/<cluster>/<store>/…`. Where a
//! store's shipping stopped is read from the bucket when a term begins (the highest record any
//! of its segments ends at), so a store that leads again goes on where it stopped, and nothing
//! is shipped twice.
//!
//! A failed shipment stops nothing: it is a log line and `nodewright_log_segments_failed_total`,
//! and the next seal ships what it left (the segment then spans both seals). A replica killed
//! outright takes its unshipped records (at most one interval) with it, unless its store's
//! volume outlives it.

use std::sync::Arc;
use std::time::Duration;

use nodewright_adapters::control_loop::{InboxSender, Input};
use nodewright_adapters::eventlog::{LogError, LogHeader, LogRecord, RedbStore};
use nodewright_aws::AwsError;
use nodewright_aws::log_bucket::LogBucket;
use nodewright_replay::segments::{SegmentError, SegmentName, cut};
use thiserror::Error;
use tokio::sync::{Mutex, oneshot};
use tracing::{info, warn};

use crate::metrics::Metrics;
use crate::settings::LogSegments;

/// The controller's event store.
type Store = RedbStore<LogHeader, LogRecord>;

/// How long the last shipment of a term may take before the store is closed and the lease
/// let go: the next leader waits for it no longer than this.
pub const LAST_SHIPMENT: Duration = Duration::from_secs(20);

#[derive(Debug, Error)]
pub enum ShipError {
    #[error("the bucket: {0}")]
    Bucket(#[from] AwsError),
    #[error("cutting the segment: {0}")]
    Segment(#[from] SegmentError),
    #[error("reading the store: {0}")]
    Store(#[from] LogError),
    #[error("the seal: {0}")]
    Seal(String),
}

/// Ships one store's segments.
pub struct Shipper {
    bucket: LogBucket,
    /// A reader of the leader's store (each shipment takes a new one, which sees every record
    /// committed by then).
    store: Store,
    /// The cluster's name: this store's segments go under `<cluster>/` in the bucket's prefix.
    cluster: String,
    /// The record the next segment starts at, once read from the bucket.
    shipped: Option<u64>,
    metrics: Arc<Metrics>,
}

impl Shipper {
    pub fn new(bucket: LogBucket, store: Store, cluster: &str, metrics: Arc<Metrics>) -> Shipper {
        Shipper {
            bucket,
            store,
            cluster: cluster.to_string(),
            shipped: None,
            metrics,
        }
    }

    /// Where the bucket's segments of this store end (0: it has none).
    async fn shipped_end(&mut self) -> Result<u64, ShipError> {
        if let Some(end) = self.shipped {
            return Ok(end);
        }
        let store = SegmentName::store_of(self.store.header());
        let names = self
            .bucket
            .list(&format!("{}/{store}/", self.cluster))
            .await?;
        let end = names
            .iter()
            .filter_map(|n| SegmentName::parse(n))
            .map(|n| n.to)
            .max()
            .unwrap_or(0);
        self.shipped = Some(end);
        Ok(end)
    }

    /// Ships the records before `seal` (where a snapshot begins) that the bucket lacks, as one
    /// segment. Returns the segment's name, if there was anything to ship.
    pub async fn ship_until(&mut self, seal: u64) -> Result<Option<SegmentName>, ShipError> {
        let from = self.shipped_end().await?;
        if seal <= from {
            return Ok(None);
        }
        let reader = self.store.reader()?;
        let Some(segment) = cut(&reader, from, seal)? else {
            return Ok(None);
        };
        let key = format!("{}/{}", self.cluster, segment.name.path());
        let bytes = segment.bytes.len();
        self.bucket.put(&key, segment.bytes).await?;
        self.shipped = Some(seal);
        self.metrics.log_segment_shipped(bytes);
        info!(
            segment = %format!("{}{key}", self.bucket.location()),
            events = segment.events,
            bytes,
            "shipped a sealed segment of the event store"
        );
        Ok(Some(segment.name))
    }

    /// Asks the control loop on `inbox` to seal the store, and ships up to the seal.
    async fn seal_and_ship(&mut self, inbox: &InboxSender) -> Result<(), ShipError> {
        let (reply, sealed) = oneshot::channel();
        if inbox.send(Input::Seal(reply)).is_err() {
            return Ok(());
        }
        let Ok(sealed) = sealed.await else {
            // The loop stopped first: the term's last seal ships it.
            return Ok(());
        };
        let seal = sealed.map_err(|e| ShipError::Seal(e.to_string()))?;
        self.ship_until(seal).await?;
        Ok(())
    }

    /// A shipment that failed: a log line and a metric; the next one ships what it left.
    pub fn failed(&self, error: &ShipError) {
        self.metrics.log_segment_failed();
        warn!(
            error = %error,
            bucket = %self.bucket.location(),
            "shipping a sealed segment of the event store failed; the next seal ships what it left"
        );
    }
}

/// The shipper of a term, shared by its timer and the term's end.
pub type SharedShipper = Arc<Mutex<Shipper>>;

/// A shipper for the leader's store when segments are asked for.
pub fn shipper(
    segments: Option<&LogSegments>,
    s3: &nodewright_aws::aws_sdk_s3::Client,
    store: &Store,
    cluster: &str,
    metrics: &Arc<Metrics>,
) -> Result<Option<SharedShipper>, LogError> {
    let Some(segments) = segments else {
        return Ok(None);
    };
    let bucket = LogBucket::new(s3.clone(), &segments.bucket, &segments.prefix);
    Ok(Some(Arc::new(Mutex::new(Shipper::new(
        bucket,
        store.reader()?,
        cluster,
        Arc::clone(metrics),
    )))))
}

/// Seals and ships every `every`, until the inbox closes.
pub async fn every(shipper: SharedShipper, inbox: InboxSender, every: Duration) {
    let mut tick = tokio::time::interval(every);
    // The first tick is at once: the first seal is one interval after the term began.
    tick.tick().await;
    while !inbox.is_closed() {
        tick.tick().await;
        let mut shipper = shipper.lock().await;
        if let Err(error) = shipper.seal_and_ship(&inbox).await {
            shipper.failed(&error);
        }
    }
}

/// The term's last shipment, up to `seal`, given at most [`LAST_SHIPMENT`].
pub async fn last(shipper: &SharedShipper, seal: u64) {
    let shipped = tokio::time::timeout(LAST_SHIPMENT, async {
        let mut shipper = shipper.lock().await;
        if let Err(error) = shipper.ship_until(seal).await {
            shipper.failed(&error);
        }
    })
    .await;
    if shipped.is_err() {
        warn!(
            waited = ?LAST_SHIPMENT,
            "the term's last segment was not shipped in time; it stays in this replica's store"
        );
    }
}
