//! A consumer's fetch of one partition on its leader: leader and epoch checks (KIP-320),
//! bounds, the read below the HW (or the LEO), and a long poll when nothing is visible yet. A
//! new leader whose HW lags its epoch start serves reads below that HW, as Kafka does
//! (KIP-207 gates only the latest offset, `ops::offsets::check_latest_available`).

use std::time::Duration;

use crate::broker::Broker;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::partition::{Isolation, PartitionOffsets};
use crate::storage::StoredRecord;
use crate::topics::validate_topic_name;

/// Bound on `max_bytes` of a fetch, so one response cannot exhaust memory.
pub const FETCH_MAX_BYTES_LIMIT: u64 = 64 << 20;
/// Bound on `max_wait_ms` of a long-polling fetch.
pub const FETCH_MAX_WAIT_LIMIT_MS: u64 = 30_000;

/// What a consumer's fetch of one partition asks for, whichever front end decoded it.
#[derive(Debug, Clone, Copy)]
pub struct FetchParams {
    /// First offset wanted.
    pub offset: i64,
    /// About how many bytes of records (at least one record if any is visible).
    pub max_bytes: u64,
    /// Long poll: how long to wait when nothing is visible at `offset`.
    pub max_wait_ms: u64,
    /// Below the HW (committed) or the LEO.
    pub isolation: Isolation,
    /// The client's leader epoch (KIP-320), if it sent one.
    pub leader_epoch: Option<u32>,
}

/// A consumer's read of one partition on its leader: leader and epoch checks, bounds, the
/// read, and a long poll when nothing is visible yet. Returns the records and the partition's
/// offsets at the time of the read.
pub async fn fetch_records(
    broker: &Broker,
    topic: &str,
    index: u32,
    params: FetchParams,
) -> Result<(Vec<StoredRecord>, PartitionOffsets), ApiError> {
    validate_topic_name(topic)?;
    let partition = broker.topics.partition(topic, index)?;
    super::check_consumer_read(broker, topic, index, &partition, params.leader_epoch)?;
    let offset = super::non_negative_offset(params.offset)?;
    let mut isolation = params.isolation;
    if broker.config.bugs.on(crate::bugs::Bug::ServeUncommitted) {
        // Deliberate bug: consumers read past the HW.
        isolation = Isolation::Uncommitted;
    }
    let (max_bytes, max_wait_ms) = (params.max_bytes, params.max_wait_ms);
    if max_bytes > FETCH_MAX_BYTES_LIMIT || max_wait_ms > FETCH_MAX_WAIT_LIMIT_MS {
        return Err(ApiError::invalid_request(format!(
            "max_bytes must be at most {FETCH_MAX_BYTES_LIMIT} and max_wait_ms at most \
             {FETCH_MAX_WAIT_LIMIT_MS}"
        )));
    }
    let max_bytes = max_bytes as usize;
    let (mut records, mut offsets) = partition.read(offset, max_bytes, isolation)?;
    if records.is_empty() && max_wait_ms > 0 {
        tokio::select! {
            _ = partition.wait_for_records(offset, isolation, Duration::from_millis(max_wait_ms)) => {}
            _ = broker.shutdown_started() => {}
        }
        (records, offsets) = partition.read(offset, max_bytes, isolation)?;
    }
    let bytes_out: u64 = records
        .iter()
        .map(|r| (r.value.len() + r.key.as_ref().map_or(0, Vec::len)) as u64)
        .sum();
    Metrics::add(&broker.metrics.bytes_out, bytes_out);
    Ok((records, offsets))
}
