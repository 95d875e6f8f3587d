//! Produce: resolve the partition (auto-creating its topic on a standalone broker when
//! `auto.create.topics.enable` allows), check the batch against the topic's
//! `max.message.bytes` and `message.timestamp.difference.max.ms`, then append on the leader
//! path of a cluster ([`crate::replication::ReplicaManager::produce_with`]) or the local log,
//! waiting for the HW with acks=all.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::broker::Broker;
use crate::error::{ApiError, ErrorKind};
use crate::metrics::Metrics;
use crate::partition::Partition;
use crate::storage::producer_state::Verification;
use crate::storage::{LogConfig, ProducerStamp, Record};
use crate::topics::{validate_topic_name, Topic, TopicMeta};

/// Bound on the timeout of a produce: a delayed produce never holds its request longer.
pub const PRODUCE_TIMEOUT_MAX_MS: u64 = 300_000;

/// Which replicas must have a batch before the produce is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `0`: answer without offsets.
    None,
    /// `1`: answer once the leader has appended.
    Leader,
    /// `all`/`-1`: answer once the HW passed the batch (the whole ISR has it).
    All,
}

/// Answer of a produce. With acks=0 the offsets and HW are null.
#[derive(Debug, Serialize)]
pub struct ProduceResponse {
    /// Offset of the first record.
    pub base_offset: Option<u64>,
    /// Offset of each record, in request order.
    pub offsets: Option<Vec<u64>>,
    /// The partition's HW after the produce.
    pub high_watermark: Option<u64>,
    /// Leader epoch the batch was appended under (the current one for a duplicate).
    pub leader_epoch: u32,
    /// For an idempotent producer's retry of a batch already in the log (nothing appended, the
    /// offsets the original's): the original batch's largest record timestamp, which Kafka
    /// answers as the produce's `log_append_time_ms`. Absent otherwise (the HTTP API has no
    /// idempotent producers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_append_time_ms: Option<i64>,
    /// With acks=all: the ISR size the leader counted for the acknowledgement (the replicas
    /// the write stands on; never below `min.insync.replicas` in a correct broker). Null
    /// with acks=0 and acks=1.
    pub isr_size: Option<u32>,
}

/// What a produce request is checked against: the topic's settings and the leader's clock.
#[derive(Debug, Clone, Copy)]
pub struct ProduceLimits {
    /// `max.message.bytes`.
    pub max_message_bytes: u64,
    /// `message.timestamp.difference.max.ms`.
    pub timestamp_difference_max_ms: i64,
    /// The leader's clock: the timestamp of records without one, and the reference for theirs.
    pub now_ms: i64,
}

/// The partition a produce goes to, found (or auto-created) before its records are read, with
/// the limits its batch is checked against.
pub struct ProduceTarget {
    topic: Arc<Topic>,
    partition: Arc<Partition>,
    /// The topic's limits, with the leader's clock when the target was resolved.
    pub limits: ProduceLimits,
}

/// The partition `index` of `topic_name` for a produce: the name checked, the topic created
/// first when `auto.create.topics.enable` allows it (standalone broker only), and its limits.
pub async fn produce_target(
    broker: &Broker,
    topic_name: &str,
    index: u32,
) -> Result<ProduceTarget, ApiError> {
    validate_topic_name(topic_name)?;
    let (topic, partition) = partition_for_produce(broker, topic_name, index).await?;
    let limits = produce_limits(broker, &topic);
    Ok(ProduceTarget {
        topic,
        partition,
        limits,
    })
}

/// The partition, creating its topic first when `auto.create.topics.enable` allows it (standalone
/// broker only).
async fn partition_for_produce(
    broker: &Broker,
    topic: &str,
    partition: u32,
) -> Result<(Arc<Topic>, Arc<Partition>), ApiError> {
    let found = match broker.topics.get(topic) {
        Some(found) => found,
        // Only a standalone broker creates topics itself; in a cluster the controller does, and
        // a produce to an unknown topic is refused there.
        None if broker.config.auto_create_topics_enable && broker.cluster.is_none() => {
            if broker.config.default_replication_factor > 1 {
                return Err(ApiError::new(
                    ErrorKind::InvalidReplicationFactor,
                    format!(
                        "cannot auto-create {topic:?} with default.replication.factor={} on a \
                         single broker",
                        broker.config.default_replication_factor
                    ),
                ));
            }
            let meta = TopicMeta {
                partitions: broker.config.num_partitions,
                replication_factor: broker.config.default_replication_factor,
                configs: Default::default(),
            };
            match broker.topics.create(topic, meta).await {
                Ok(created) => created,
                // Another request created it first.
                Err(e) if e.kind == ErrorKind::TopicAlreadyExists => {
                    broker.topics.get(topic).ok_or(e)?
                }
                Err(e) => return Err(e),
            }
        }
        None => return Err(ApiError::unknown_topic(topic, None)),
    };
    let partition = found
        .partitions
        .get(partition as usize)
        .cloned()
        .ok_or_else(|| ApiError::unknown_topic(topic, Some(partition)))?;
    Ok((found, partition))
}

/// The limits a produce to `topic` is checked against, with the leader's clock now.
fn produce_limits(broker: &Broker, topic: &Topic) -> ProduceLimits {
    ProduceLimits {
        max_message_bytes: topic.config.log_config(&broker.config).max_message_bytes,
        timestamp_difference_max_ms: topic
            .config
            .message_timestamp_difference_max_ms(&broker.config),
        now_ms: crate::clock::timestamp_ms(),
    }
}

/// Kafka's rule for a producer's timestamp (CreateTime): at most
/// `message.timestamp.difference.max.ms` from the leader's clock, either way. A timestamp far
/// in the future would otherwise keep its segment from ever reaching `retention.ms`.
pub fn check_timestamp(
    index: usize,
    timestamp_ms: i64,
    limits: ProduceLimits,
) -> Result<(), ApiError> {
    let distance_ms = (i128::from(timestamp_ms) - i128::from(limits.now_ms)).abs();
    if distance_ms <= i128::from(limits.timestamp_difference_max_ms) {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorKind::InvalidTimestamp,
        format!(
            "record {index} has timestamp_ms {timestamp_ms}, {distance_ms} ms from the broker's \
             clock ({}), more than message.timestamp.difference.max.ms={}; nothing was written",
            limits.now_ms, limits.timestamp_difference_max_ms
        ),
    ))
}

/// A decoded, validated produce: the records with their timestamps, and the request's acks,
/// timeout and leader epoch.
#[derive(Debug)]
pub struct ProduceBatch {
    /// Which replicas must have the batch before the answer.
    pub acks: Acks,
    /// The client's view of the leader epoch (KIP-320), checked before the append.
    pub leader_epoch: Option<u32>,
    /// With acks=all, how long to wait for the HW.
    pub timeout_ms: u64,
    /// The records, appended atomically at consecutive offsets.
    pub records: Vec<Record>,
    /// The idempotent producer's stamp of the batch (Kafka listener only), checked against the
    /// producer's state in the log before the append.
    pub producer: Option<ProducerStamp>,
    /// KIP-890's check of a transactional batch ([`crate::ops::txn_verify`]).
    pub verification: Verification,
}

/// Appends a validated batch to `target`: the leader path in a cluster, the local log alone.
pub async fn produce(
    broker: &Broker,
    target: &ProduceTarget,
    batch: ProduceBatch,
) -> Result<ProduceResponse, ApiError> {
    let (topic, partition) = (&target.topic, &target.partition);
    let log_config = topic.config.log_config(&broker.config);
    // Records in the batch (Kafka's MessagesInPerSec), key and value bytes (BytesInPerSec).
    let count = batch.records.len() as u64;
    let bytes = batch
        .records
        .iter()
        .map(|r| (r.value.len() + r.key.as_ref().map_or(0, Vec::len)) as u64)
        .sum();
    let min_insync_replicas = topic.config.min_insync_replicas(&broker.config);
    let answer = match &broker.cluster {
        // Replicated partition: the leader path of the replication module.
        Some(cluster) => {
            let acks = batch.acks;
            let options = crate::replication::produce::ProduceOptions {
                acks_all: acks == Acks::All,
                timeout_ms: batch.timeout_ms,
                min_insync_replicas,
                leader_epoch: batch.leader_epoch,
                producer: batch.producer,
                verification: batch.verification,
            };
            let appended = cluster
                .produce_with(&topic.name, partition.partition, batch.records, options)
                .await?;
            produce_answer(
                acks,
                appended.base_offset,
                appended.last_offset,
                appended.high_watermark,
                appended.leader_epoch,
                appended.isr_size,
                appended.duplicate,
            )
        }
        None => append_standalone(partition, batch, &log_config, min_insync_replicas).await?,
    };
    Metrics::add(&broker.metrics.bytes_in, bytes);
    Metrics::add(&broker.metrics.messages_in, count);
    Ok(answer)
}

/// A produce of records decoded from a binary batch (the Kafka listener): the same checks and
/// the same leader path as [`produce`]. `batch_bytes` is the size of the batch as the client
/// encoded it, checked against `max.message.bytes`.
pub async fn produce_records(
    broker: &Broker,
    topic_name: &str,
    index: u32,
    input: ProduceInput,
) -> Result<ProduceResponse, ApiError> {
    let target = produce_target(broker, topic_name, index).await?;
    let limits = target.limits;
    if input.batch_bytes > limits.max_message_bytes {
        return Err(ApiError::new(
            ErrorKind::MessageTooLarge,
            format!(
                "the batch is {} bytes, more than max.message.bytes={}",
                input.batch_bytes, limits.max_message_bytes
            ),
        ));
    }
    if input.records.is_empty() {
        return Err(ApiError::invalid_request("records must not be empty"));
    }
    if input.timeout_ms > PRODUCE_TIMEOUT_MAX_MS {
        return Err(ApiError::invalid_request(format!(
            "timeout must be at most {PRODUCE_TIMEOUT_MAX_MS} ms, got {}",
            input.timeout_ms
        )));
    }
    for (i, record) in input.records.iter().enumerate() {
        check_timestamp(i, record.timestamp_ms, limits)?;
    }
    let mut input = input;
    if broker
        .config
        .bugs
        .on(crate::bugs::Bug::TxnStaleEpochAccepted)
    {
        input.producer = input
            .producer
            .map(|stamp| passed_as_current(&target.partition, stamp));
    }
    let batch = ProduceBatch {
        acks: input.acks,
        leader_epoch: input.leader_epoch,
        timeout_ms: input.timeout_ms,
        records: input.records,
        producer: input.producer,
        verification: input.verification,
    };
    produce(broker, &target, batch).await
}

/// Deliberate bug `txn.stale.epoch.accepted`: a transactional batch of an epoch older than the
/// producer's current one is passed off as the current epoch's next batch, so it is appended.
fn passed_as_current(partition: &Partition, stamp: ProducerStamp) -> ProducerStamp {
    if stamp.kind != crate::storage::StampKind::Transactional {
        return stamp;
    }
    let state = partition.lock();
    match state.log.producers().entry(stamp.producer_id) {
        Some(entry) if stamp.producer_epoch < entry.producer_epoch => ProducerStamp {
            producer_epoch: entry.producer_epoch,
            sequence: entry.last_sequence().map_or(0, |last| {
                crate::storage::producer_state::sequence_add(last, 1)
            }),
            ..stamp
        },
        _ => stamp,
    }
}

/// A produce decoded from a binary batch: records with their timestamps, and the request's
/// acks, timeout and leader epoch.
#[derive(Debug)]
pub struct ProduceInput {
    /// Which replicas must have the batch before the answer.
    pub acks: Acks,
    /// With acks=all, how long to wait for the HW.
    pub timeout_ms: u64,
    /// The client's leader epoch (KIP-320), if it sent one.
    pub leader_epoch: Option<u32>,
    /// The records, appended atomically.
    pub records: Vec<Record>,
    /// The encoded size of the batch, checked against `max.message.bytes`.
    pub batch_bytes: u64,
    /// The idempotent producer's id, epoch and base sequence from the batch header, if any.
    pub producer: Option<ProducerStamp>,
    /// KIP-890's check of a transactional batch: the guard of its verification with the
    /// coordinator ([`crate::ops::txn_verify::verify_produce`]), or `Off`.
    pub verification: Verification,
}

/// The answer to a produce: offsets and HW, or nulls with acks=0.
fn produce_answer(
    acks: Acks,
    base_offset: u64,
    last_offset: u64,
    high_watermark: u64,
    leader_epoch: u32,
    isr_size: u32,
    duplicate: Option<i64>,
) -> ProduceResponse {
    let acked = acks != Acks::None;
    ProduceResponse {
        base_offset: acked.then_some(base_offset),
        offsets: acked.then(|| (base_offset..=last_offset).collect()),
        high_watermark: acked.then_some(high_watermark),
        leader_epoch,
        log_append_time_ms: duplicate,
        isr_size: (acks == Acks::All).then_some(isr_size),
    }
}

/// Produce on a standalone broker (RF = 1): append, then with acks=all wait for the HW (at once
/// here, as the leader is the whole ISR).
async fn append_standalone(
    partition: &Partition,
    batch: ProduceBatch,
    log_config: &LogConfig,
    min_insync_replicas: u16,
) -> Result<ProduceResponse, ApiError> {
    crate::replication::leadership_checks::check_client_leader_epoch(
        batch.leader_epoch,
        partition.offsets().leader_epoch,
    )?;
    let required = (batch.acks == Acks::All).then_some(min_insync_replicas);
    // A topic with `flush.messages` set may fsync inside the append, holding the partition lock
    // for milliseconds: run it off the async worker so other requests are not stalled.
    let may_fsync = log_config.flush_messages != crate::storage::FLUSH_MESSAGES_NEVER;
    let (records, producer, verification) = (batch.records, batch.producer, batch.verification);
    let appended = super::run_maybe_blocking(may_fsync, || {
        partition.append_from_producer(records, required, producer, verification)
    })?;
    let mut high_watermark = appended.offsets.high_watermark;
    if batch.acks == Acks::All && high_watermark <= appended.last_offset {
        let wait = Duration::from_millis(batch.timeout_ms);
        if !partition
            .wait_for_high_watermark(appended.last_offset, wait)
            .await
        {
            return Err(ApiError::new(
                ErrorKind::RequestTimedOut,
                format!(
                    "the batch at offsets {}..={} was appended but not replicated to the ISR \
                     within {} ms",
                    appended.base_offset, appended.last_offset, batch.timeout_ms
                ),
            ));
        }
        high_watermark = partition.offsets().high_watermark;
    }
    Ok(produce_answer(
        batch.acks,
        appended.base_offset,
        appended.last_offset,
        high_watermark,
        appended.offsets.leader_epoch,
        // A standalone broker is its partition's whole ISR.
        1,
        appended.duplicate,
    ))
}
