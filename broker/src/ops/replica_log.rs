//! One replica's own log of a partition, whatever its role: the records as this broker holds
//! them (offset, leader epoch of the batch, key, value) with its log start offset, HW and LEO,
//! read in bounded pages. The harness compares every replica's answer offset by offset after a
//! run (`replica-divergence`, docs/checkers.md), as Kafka's ReplicaVerificationTool compares
//! what each replica returns to a fetch.
//!
//! Unlike a consumer's fetch this is no read of the partition: it ignores leadership and the
//! HW (a follower answers with its own log, up to its own LEO) and never waits.

use serde::Serialize;

use crate::broker::Broker;
use crate::error::{ApiError, ErrorKind};
use crate::topics::validate_topic_name;

/// Default `max_bytes` of one page.
pub const REPLICA_LOG_MAX_BYTES_DEFAULT: u64 = 1 << 20;
/// Bound on `max_bytes` of one page, so one answer cannot exhaust memory.
pub const REPLICA_LOG_MAX_BYTES_LIMIT: u64 = 16 << 20;

/// What a page of a replica's log asks for.
#[derive(Debug, Clone, Copy)]
pub struct ReplicaLogParams {
    /// First offset wanted; `None`: the replica's log start offset.
    pub offset: Option<i64>,
    /// About how many bytes of records (at least one record when any is left).
    pub max_bytes: u64,
}

/// A record as this replica stores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplicaRecord {
    /// Its offset.
    pub offset: u64,
    /// The epoch of the leader that appended its batch.
    pub leader_epoch: u32,
    /// Its key, if any (UTF-8, invalid bytes replaced).
    pub key: Option<String>,
    /// Its value (UTF-8, invalid bytes replaced).
    pub value: String,
}

/// One page of a replica's log, with the replica's offsets at the moment it was read.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicaLogPage {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: u32,
    /// The broker that answered: whose log this is.
    pub broker_id: u32,
    /// `leader` or `follower`.
    pub role: &'static str,
    /// The leader epoch this replica knows.
    pub leader_epoch: u32,
    /// The replica's first offset.
    pub log_start_offset: u64,
    /// The replica's high watermark (a follower's lags its leader's).
    pub high_watermark: u64,
    /// The replica's log end offset.
    pub log_end_offset: u64,
    /// Records from the requested offset, in offset order, up to about `max_bytes`.
    pub records: Vec<ReplicaRecord>,
    /// Where the next page starts; equal to `log_end_offset` when this page reached the end.
    pub next_offset: u64,
}

/// Reads one page of this broker's replica of `topic`/`index`. Refuses an unknown topic or
/// partition (`UNKNOWN_TOPIC_OR_PARTITION`), a partition this broker holds no replica of
/// (`NOT_LEADER_OR_FOLLOWER`), an offset outside `[log start, LEO]` (`OFFSET_OUT_OF_RANGE`)
/// and `max_bytes` of 0 or above [`REPLICA_LOG_MAX_BYTES_LIMIT`] (`INVALID_REQUEST`).
pub fn read_replica_log(
    broker: &Broker,
    topic: &str,
    index: u32,
    params: ReplicaLogParams,
) -> Result<ReplicaLogPage, ApiError> {
    validate_topic_name(topic)?;
    if params.max_bytes == 0 || params.max_bytes > REPLICA_LOG_MAX_BYTES_LIMIT {
        return Err(ApiError::invalid_request(format!(
            "max_bytes must be between 1 and {REPLICA_LOG_MAX_BYTES_LIMIT}, got {}",
            params.max_bytes
        )));
    }
    let requested = params.offset.map(super::non_negative_offset).transpose()?;
    let partition = broker.topics.partition(topic, index)?;
    let role = match &broker.cluster {
        None => "leader",
        Some(cluster) => match cluster.replica_status(topic, index) {
            Some(status) => status.role,
            None => {
                return Err(ApiError::new(
                    ErrorKind::NotLeaderOrFollower,
                    format!(
                        "broker {} holds no replica of {topic}/{index}",
                        broker.config.broker_id
                    ),
                ))
            }
        },
    };
    let max_bytes = usize::try_from(params.max_bytes).unwrap_or(usize::MAX);
    super::run_maybe_blocking(true, || {
        let state = partition.lock();
        let (log_start_offset, log_end_offset) =
            (state.log.log_start_offset(), state.log.log_end_offset());
        let offset = requested.unwrap_or(log_start_offset);
        if offset < log_start_offset || offset > log_end_offset {
            return Err(ApiError::new(
                ErrorKind::OffsetOutOfRange,
                format!(
                    "offset {offset} is outside this replica's log [{log_start_offset}, \
                     {log_end_offset}] (log start offset, log end offset)"
                ),
            ));
        }
        let mut records = Vec::new();
        if offset < log_end_offset {
            for batch in state.log.read_batches(offset, max_bytes, log_end_offset)? {
                records.extend(batch.records.into_iter().map(|r| ReplicaRecord {
                    offset: r.offset,
                    leader_epoch: r.leader_epoch,
                    key: r.key.map(|k| String::from_utf8_lossy(&k).into_owned()),
                    value: String::from_utf8_lossy(&r.value).into_owned(),
                }));
            }
        }
        let next_offset = records.last().map_or(offset, |r| r.offset + 1);
        assert!(
            next_offset <= log_end_offset && records.windows(2).all(|w| w[0].offset < w[1].offset),
            "a replica log page must be in offset order within the log"
        );
        Ok(ReplicaLogPage {
            topic: topic.to_string(),
            partition: index,
            broker_id: broker.config.broker_id,
            role,
            leader_epoch: state.leader_epoch,
            log_start_offset,
            high_watermark: state.high_watermark,
            log_end_offset,
            records,
            next_offset,
        })
    })
}
