//! Offsets of a partition as its leader answers consumers: list offsets (earliest, latest, the
//! first record at or after a timestamp), the end offset of a leader epoch (KIP-320), and
//! delete records, which moves the log start offset.

use crate::broker::Broker;
use crate::error::ApiError;
use crate::partition::{Isolation, PartitionOffsets};
use crate::topics::validate_topic_name;

/// The offsets of a partition as its leader answers consumers' list-offsets.
pub fn consumer_offsets(
    broker: &Broker,
    topic: &str,
    index: u32,
) -> Result<PartitionOffsets, ApiError> {
    validate_topic_name(topic)?;
    let partition = broker.topics.partition(topic, index)?;
    if let Some(cluster) = &broker.cluster {
        cluster.check_consumer_read(topic, index)?;
    }
    Ok(partition.offsets())
}

/// KIP-207 for a consumer asking for the latest offset of `index` of `topic`: in a cluster,
/// OFFSET_NOT_AVAILABLE while a new leader's HW is below its epoch start (Kafka gates only
/// this answer; fetches and the earliest offset are served with the lagging HW).
pub fn check_latest_available(broker: &Broker, topic: &str, index: u32) -> Result<(), ApiError> {
    match &broker.cluster {
        Some(cluster) => cluster.check_hw_current(topic, index),
        None => Ok(()),
    }
}

/// [`consumer_offsets`] for a client that sent the leader epoch it believes current: in a
/// cluster that epoch is checked first (KIP-320); a standalone broker does not check it here.
pub fn consumer_offsets_at(
    broker: &Broker,
    topic: &str,
    index: u32,
    client_epoch: Option<u32>,
) -> Result<PartitionOffsets, ApiError> {
    if let (Some(cluster), Some(epoch)) = (&broker.cluster, client_epoch) {
        cluster.check_consumer_read_at(topic, index, Some(epoch))?;
    }
    consumer_offsets(broker, topic, index)
}

/// Which record a search by timestamp looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampSearch {
    /// The first committed record with a timestamp at or after this one.
    AtOrAfter(i64),
    /// The committed record with the largest timestamp (the first of them on a tie).
    Largest,
}

/// Scans the committed records from `from` for the one `search` names: (offset, timestamp),
/// or `None` when no record qualifies. This broker keeps no time index, so the scan reads the
/// log, through the same consumer checks as a fetch.
pub async fn offset_for_timestamp(
    broker: &Broker,
    topic: &str,
    index: u32,
    search: TimestampSearch,
    from: u64,
) -> Result<Option<(u64, i64)>, ApiError> {
    let mut offset = from;
    let mut best: Option<(u64, i64)> = None;
    loop {
        let params = super::fetch::FetchParams {
            offset: offset as i64,
            max_bytes: 1 << 20,
            max_wait_ms: 0,
            isolation: Isolation::Committed,
            leader_epoch: None,
        };
        let (records, _) = super::fetch::fetch_records(broker, topic, index, params).await?;
        let Some(last) = records.last() else {
            return Ok(best);
        };
        offset = last.offset + 1;
        for record in &records {
            match search {
                TimestampSearch::Largest => {
                    if best.is_none_or(|(_, t)| record.timestamp_ms > t) {
                        best = Some((record.offset, record.timestamp_ms));
                    }
                }
                TimestampSearch::AtOrAfter(target) => {
                    if record.timestamp_ms >= target {
                        return Ok(Some((record.offset, record.timestamp_ms)));
                    }
                }
            }
        }
    }
}

/// The leader epoch of the record at `offset` (the newest epoch that starts at or below it),
/// `None` when the partition is not here or no epoch starts that low.
pub fn epoch_at(broker: &Broker, topic: &str, index: u32, offset: u64) -> Option<u32> {
    let partition = broker.topics.partition(topic, index).ok()?;
    let state = partition.lock();
    state
        .log
        .epochs()
        .entries()
        .iter()
        .rev()
        .find(|e| e.start_offset <= offset)
        .map(|e| e.epoch)
}

/// OffsetForLeaderEpoch for consumers (KIP-320): (epoch, end offset) of the largest epoch at or
/// below `requested_epoch`, from the leader's epoch cache, after the consumer checks with the
/// client's current epoch; `None` when no epoch is that old, or when `requested_epoch` is
/// above every known epoch.
pub fn end_offset_for_epoch(
    broker: &Broker,
    topic: &str,
    index: u32,
    client_epoch: Option<u32>,
    requested_epoch: i32,
) -> Result<Option<(u32, u64)>, ApiError> {
    let partition = broker.topics.partition(topic, index)?;
    super::check_consumer_read(broker, topic, index, &partition, client_epoch)?;
    let requested = u32::try_from(requested_epoch).map_err(|_| {
        ApiError::invalid_request(format!("leader epoch {requested_epoch} is negative"))
    })?;
    let state = partition.lock();
    // An epoch above every epoch the leader knows has no end offset (Kafka's
    // `LeaderEpochFileCache.endOffsetFor` answers UNDEFINED for it), not the latest's.
    let latest = state.log.epochs().latest_epoch();
    if latest.is_some_and(|latest| requested > latest) {
        return Ok(None);
    }
    Ok(state.log.end_offset_for_epoch(requested))
}

/// Moves the log start offset of a partition to `offset` (-1 = the HW); returns the new low
/// watermark.
pub async fn delete_records_before(
    broker: &Broker,
    topic: &str,
    index: u32,
    offset: i64,
) -> Result<u64, ApiError> {
    validate_topic_name(topic)?;
    let partition = broker.topics.partition(topic, index)?;
    let offset = match offset {
        -1 => partition.offsets().high_watermark,
        offset => super::non_negative_offset(offset)?,
    };
    match &broker.cluster {
        Some(cluster) => cluster.delete_records(topic, index, offset).await,
        None => Ok(partition.delete_records_before(offset)?),
    }
}
