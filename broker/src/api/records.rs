//! Produce, fetch, list offsets and delete records on one partition.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::extract::{check_announced_length, decode_json, ApiJson, ApiPath, ApiQuery};
use crate::error::{ApiError, ErrorKind};
use crate::metrics::Metrics;
use crate::partition::{Isolation, Partition, PartitionOffsets};
use crate::server::{now_ms, Broker};
use crate::storage::{LogConfig, Record, StoredRecord};
use crate::topics::{validate_topic_name, Topic, TopicMeta};

/// Default `timeout_ms` of a produce request (Kafka's `request.timeout.ms`).
pub const PRODUCE_TIMEOUT_DEFAULT_MS: u64 = 30_000;
/// Bound on `timeout_ms`: a delayed produce never holds its request longer.
pub const PRODUCE_TIMEOUT_MAX_MS: u64 = 300_000;
/// Default `max_bytes` of a fetch (Kafka's `max.partition.fetch.bytes`).
pub const FETCH_MAX_BYTES_DEFAULT: u64 = 1 << 20;
/// Bound on `max_bytes` of a fetch, so one response cannot exhaust memory.
pub const FETCH_MAX_BYTES_LIMIT: u64 = 64 << 20;
/// Bound on `max_wait_ms` of a long-polling fetch.
pub const FETCH_MAX_WAIT_LIMIT_MS: u64 = 30_000;
/// Bytes Kafka's v2 record batch header takes; counted in the batch size checked against
/// `max.message.bytes`.
pub const BATCH_OVERHEAD_BYTES: u64 = 61;
/// Upper estimate of a v2 record's framing (length, attributes, deltas, header count varints).
pub const RECORD_OVERHEAD_BYTES: u64 = 21;
/// Slack on the HTTP body over `max.message.bytes`: JSON framing and string escapes make the
/// body larger than the batch; the exact batch size is checked after decoding.
pub const PRODUCE_BODY_SLACK_BYTES: u64 = 64 << 10;

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

impl Acks {
    /// Parses `"all"`, `"-1"`, `"1"`, `"0"` (strings or numbers); absent = all (Kafka's default).
    pub fn parse(value: Option<&Value>) -> Result<Acks, ApiError> {
        let text = match value {
            None => return Ok(Acks::All),
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            Some(other) => other.to_string(),
        };
        match text.as_str() {
            "all" | "-1" => Ok(Acks::All),
            "1" => Ok(Acks::Leader),
            "0" => Ok(Acks::None),
            _ => Err(ApiError::new(
                ErrorKind::InvalidRequiredAcks,
                format!("acks must be \"all\", \"-1\", \"1\" or \"0\", got {text}"),
            )),
        }
    }
}

/// Body of a produce request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProduceRequest {
    /// `"all"`, `"1"` or `"0"`.
    pub acks: Option<Value>,
    /// With acks=all, how long to wait for the HW; default 30000, at most 300000.
    pub timeout_ms: Option<u64>,
    /// The batch, appended atomically at consecutive offsets.
    pub records: Vec<ProduceRecord>,
    /// The leader epoch the client believes current (KIP-320), optional: an older one is
    /// FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH, and nothing is written.
    pub leader_epoch: Option<u32>,
}

/// One record to produce. Keys and values are UTF-8 strings.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProduceRecord {
    /// Optional key.
    pub key: Option<String>,
    /// The value.
    pub value: String,
    /// Creation time; defaults to the broker's clock.
    pub timestamp_ms: Option<i64>,
}

/// Answer of a produce request. With acks=0 the offsets and HW are null.
#[derive(Debug, Serialize)]
pub struct ProduceResponse {
    /// Offset of the first record.
    pub base_offset: Option<u64>,
    /// Offset of each record, in request order.
    pub offsets: Option<Vec<u64>>,
    /// The partition's HW after the produce.
    pub high_watermark: Option<u64>,
    /// Leader epoch the batch was appended under.
    pub leader_epoch: u32,
    /// With acks=all: the ISR size the leader counted for the acknowledgement (the replicas
    /// the write stands on; never below `min.insync.replicas` in a correct broker). Null
    /// with acks=0 and acks=1.
    pub isr_size: Option<u32>,
}

/// Runs `f` in place, telling a multi-threaded runtime first when `may_block` so it moves this
/// worker's other tasks elsewhere (`block_in_place`). Cheap appends (one write(2)) skip the
/// hand-off, which would cost more than the write.
pub fn run_maybe_blocking<R>(may_block: bool, f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let multi_thread = Handle::try_current()
        .map(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
        .unwrap_or(false);
    if may_block && multi_thread {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
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

/// What a produce request is checked against: the topic's settings and the leader's clock.
#[derive(Debug, Clone, Copy)]
struct ProduceLimits {
    /// `max.message.bytes`.
    max_message_bytes: u64,
    /// `message.timestamp.difference.max.ms`.
    timestamp_difference_max_ms: i64,
    /// The leader's clock: the timestamp of records without one, and the reference for theirs.
    now_ms: i64,
}

/// Checks the batch against `max.message.bytes` and its timestamps against
/// `message.timestamp.difference.max.ms`, and turns it into storage records.
fn to_records(request: ProduceRequest, limits: ProduceLimits) -> Result<Vec<Record>, ApiError> {
    let max_message_bytes = limits.max_message_bytes;
    if request.records.is_empty() {
        return Err(ApiError::invalid_request("records must not be empty"));
    }
    let payload: u64 = request
        .records
        .iter()
        .map(|r| r.key.as_ref().map_or(0, |k| k.len()) as u64 + r.value.len() as u64)
        .sum();
    let size =
        BATCH_OVERHEAD_BYTES + payload + RECORD_OVERHEAD_BYTES * request.records.len() as u64;
    if size > max_message_bytes {
        return Err(ApiError::new(
            ErrorKind::MessageTooLarge,
            format!(
                "the batch is about {size} bytes, more than max.message.bytes={max_message_bytes}"
            ),
        ));
    }
    for (i, timestamp_ms) in request
        .records
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.timestamp_ms.map(|t| (i, t)))
    {
        check_timestamp(i, timestamp_ms, limits)?;
    }
    Ok(request
        .records
        .into_iter()
        .map(|r| Record {
            key: r.key.map(String::into_bytes),
            value: r.value.into_bytes(),
            timestamp_ms: r.timestamp_ms.unwrap_or(limits.now_ms),
        })
        .collect())
}

/// Kafka's rule for a producer's timestamp (CreateTime): at most
/// `message.timestamp.difference.max.ms` from the leader's clock, either way. A timestamp far
/// in the future would otherwise keep its segment from ever reaching `retention.ms`.
fn check_timestamp(index: usize, timestamp_ms: i64, limits: ProduceLimits) -> Result<(), ApiError> {
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

/// A decoded, validated produce request.
struct ProduceBatch {
    acks: Acks,
    /// The client's view of the leader epoch, checked before the append.
    leader_epoch: Option<u32>,
    timeout_ms: u64,
    records: Vec<Record>,
    /// Records in the batch (Kafka's MessagesInPerSec).
    count: u64,
    /// Key and value bytes (Kafka's BytesInPerSec).
    bytes: u64,
}

/// Reads the body (bounded by the topic's `max.message.bytes`), decodes and validates it.
async fn read_batch(body: Body, limits: ProduceLimits) -> Result<ProduceBatch, ApiError> {
    let max_message_bytes = limits.max_message_bytes;
    let body_limit = max_message_bytes
        .saturating_mul(2)
        .saturating_add(PRODUCE_BODY_SLACK_BYTES);
    check_announced_length(&body, body_limit)?;
    let bytes = axum::body::to_bytes(body, usize::try_from(body_limit).unwrap_or(usize::MAX))
        .await
        .map_err(|_| {
            ApiError::new(
                ErrorKind::MessageTooLarge,
                format!(
                    "request body over {body_limit} bytes (max.message.bytes={max_message_bytes})"
                ),
            )
        })?;
    let request: ProduceRequest = decode_json(&bytes)?;
    let acks = Acks::parse(request.acks.as_ref())?;
    let timeout_ms = request.timeout_ms.unwrap_or(PRODUCE_TIMEOUT_DEFAULT_MS);
    if timeout_ms > PRODUCE_TIMEOUT_MAX_MS {
        return Err(ApiError::invalid_request(format!(
            "timeout_ms must be at most {PRODUCE_TIMEOUT_MAX_MS}, got {timeout_ms}"
        )));
    }
    let leader_epoch = request.leader_epoch;
    let records = to_records(request, limits)?;
    let bytes = records
        .iter()
        .map(|r| (r.value.len() + r.key.as_ref().map_or(0, Vec::len)) as u64)
        .sum();
    Ok(ProduceBatch {
        acks,
        leader_epoch,
        timeout_ms,
        count: records.len() as u64,
        bytes,
        records,
    })
}

/// The answer to a produce: offsets and HW, or nulls with acks=0.
fn produce_answer(
    acks: Acks,
    base_offset: u64,
    last_offset: u64,
    high_watermark: u64,
    leader_epoch: u32,
    isr_size: u32,
) -> ProduceResponse {
    let acked = acks != Acks::None;
    ProduceResponse {
        base_offset: acked.then_some(base_offset),
        offsets: acked.then(|| (base_offset..=last_offset).collect()),
        high_watermark: acked.then_some(high_watermark),
        leader_epoch,
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
    crate::replication::manager::check_client_leader_epoch(
        batch.leader_epoch,
        partition.offsets().leader_epoch,
    )?;
    let required = (batch.acks == Acks::All).then_some(min_insync_replicas);
    // A topic with `flush.messages` set may fsync inside the append, holding the partition lock
    // for milliseconds: run it off the async worker so other requests are not stalled.
    let may_fsync = log_config.flush_messages != crate::storage::FLUSH_MESSAGES_NEVER;
    let records = batch.records;
    let appended = run_maybe_blocking(may_fsync, || partition.append(records, required))?;
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
    ))
}

/// `POST /v1/topics/{topic}/partitions/{partition}/records`.
pub async fn produce(
    State(broker): State<Arc<Broker>>,
    ApiPath((topic_name, index)): ApiPath<(String, u32)>,
    body: Body,
) -> Result<Json<ProduceResponse>, ApiError> {
    validate_topic_name(&topic_name)?;
    let (topic, partition) = partition_for_produce(&broker, &topic_name, index).await?;
    let limits = produce_limits(&broker, &topic);
    let batch = read_batch(body, limits).await?;
    produce_batch(&broker, &topic, &partition, batch)
        .await
        .map(Json)
}

/// The limits a produce to `topic` is checked against, with the leader's clock now.
fn produce_limits(broker: &Broker, topic: &Topic) -> ProduceLimits {
    ProduceLimits {
        max_message_bytes: topic.config.log_config(&broker.config).max_message_bytes,
        timestamp_difference_max_ms: topic
            .config
            .message_timestamp_difference_max_ms(&broker.config),
        now_ms: now_ms(),
    }
}

/// A produce of records decoded by another front end (the Kafka listener): the same checks
/// and the same leader path as `POST .../records`. `batch_bytes` is the size of the batch as
/// the client encoded it, checked against `max.message.bytes`.
pub async fn produce_records(
    broker: &Broker,
    topic_name: &str,
    index: u32,
    input: ProduceInput,
) -> Result<ProduceResponse, ApiError> {
    validate_topic_name(topic_name)?;
    let (topic, partition) = partition_for_produce(broker, topic_name, index).await?;
    let limits = produce_limits(broker, &topic);
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
    let bytes = input
        .records
        .iter()
        .map(|r| (r.value.len() + r.key.as_ref().map_or(0, Vec::len)) as u64)
        .sum();
    let batch = ProduceBatch {
        acks: input.acks,
        leader_epoch: input.leader_epoch,
        timeout_ms: input.timeout_ms,
        count: input.records.len() as u64,
        bytes,
        records: input.records,
    };
    produce_batch(broker, &topic, &partition, batch).await
}

/// A produce decoded by another front end: records with their timestamps, and the request's
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
}

/// Appends a validated batch: the leader path in a cluster, the local log alone.
async fn produce_batch(
    broker: &Broker,
    topic: &Topic,
    partition: &Partition,
    batch: ProduceBatch,
) -> Result<ProduceResponse, ApiError> {
    let log_config = topic.config.log_config(&broker.config);
    let (count, bytes) = (batch.count, batch.bytes);
    let min_insync_replicas = topic.config.min_insync_replicas(&broker.config);
    let answer = match &broker.cluster {
        // Replicated partition: the leader path of the replication module.
        Some(cluster) => {
            let acks = batch.acks;
            let options = crate::replication::manager::ProduceOptions {
                acks_all: acks == Acks::All,
                timeout_ms: batch.timeout_ms,
                min_insync_replicas,
                leader_epoch: batch.leader_epoch,
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
            )
        }
        None => append_standalone(partition, batch, &log_config, min_insync_replicas).await?,
    };
    Metrics::add(&broker.metrics.bytes_in, bytes);
    Metrics::add(&broker.metrics.messages_in, count);
    Ok(answer)
}

/// Query of a fetch.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FetchQuery {
    /// First offset wanted.
    pub offset: i64,
    /// About how many bytes of records to return (at least one record if any is visible).
    pub max_bytes: Option<u64>,
    /// Long poll: how long to wait for records when none is visible at `offset`.
    pub max_wait_ms: Option<u64>,
    /// `committed` (below the HW, default) or `uncommitted` (below the LEO).
    pub isolation: Option<String>,
    /// The leader epoch the client believes current (KIP-320), optional: an older one is
    /// FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH.
    pub leader_epoch: Option<u32>,
}

/// A fetched record.
#[derive(Debug, Serialize)]
pub struct FetchedRecord {
    /// Its offset.
    pub offset: u64,
    /// Its key, if any.
    pub key: Option<String>,
    /// Its value.
    pub value: String,
    /// Its timestamp.
    pub timestamp_ms: i64,
}

/// Answer of a fetch.
#[derive(Debug, Serialize)]
pub struct FetchResponse {
    /// Records from the requested offset, in offset order.
    pub records: Vec<FetchedRecord>,
    /// The partition's HW at the time of the read.
    pub high_watermark: u64,
    /// The partition's log start offset.
    pub log_start_offset: u64,
    /// The partition's LEO.
    pub log_end_offset: u64,
    /// The leader's epoch.
    pub leader_epoch: u32,
}

fn parse_isolation(isolation: Option<&str>) -> Result<Isolation, ApiError> {
    match isolation {
        None | Some("committed") => Ok(Isolation::Committed),
        Some("uncommitted") => Ok(Isolation::Uncommitted),
        Some(other) => Err(ApiError::invalid_request(format!(
            "isolation must be \"committed\" or \"uncommitted\", got {other:?}"
        ))),
    }
}

fn non_negative_offset(offset: i64) -> Result<u64, ApiError> {
    u64::try_from(offset).map_err(|_| {
        ApiError::new(
            ErrorKind::OffsetOutOfRange,
            format!("offset {offset} is negative"),
        )
    })
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn to_fetched(record: StoredRecord) -> FetchedRecord {
    FetchedRecord {
        offset: record.offset,
        key: record.key.map(text),
        value: text(record.value),
        timestamp_ms: record.timestamp_ms,
    }
}

/// `GET /v1/topics/{topic}/partitions/{partition}/records?offset=N&...`.
pub async fn fetch(
    State(broker): State<Arc<Broker>>,
    ApiPath((topic, index)): ApiPath<(String, u32)>,
    ApiQuery(query): ApiQuery<FetchQuery>,
) -> Result<Json<FetchResponse>, ApiError> {
    let params = FetchParams {
        offset: query.offset,
        max_bytes: query.max_bytes.unwrap_or(FETCH_MAX_BYTES_DEFAULT),
        max_wait_ms: query.max_wait_ms.unwrap_or(0),
        isolation: parse_isolation(query.isolation.as_deref())?,
        leader_epoch: query.leader_epoch,
    };
    let (records, offsets) = fetch_records(&broker, &topic, index, params).await?;
    Ok(Json(FetchResponse {
        records: records.into_iter().map(to_fetched).collect(),
        high_watermark: offsets.high_watermark,
        log_start_offset: offsets.log_start_offset,
        log_end_offset: offsets.log_end_offset,
        leader_epoch: offsets.leader_epoch,
    }))
}

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
    match &broker.cluster {
        Some(cluster) => cluster.check_consumer_read_at(topic, index, params.leader_epoch)?,
        None => crate::replication::manager::check_client_leader_epoch(
            params.leader_epoch,
            partition.offsets().leader_epoch,
        )?,
    }
    let offset = non_negative_offset(params.offset)?;
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

/// Query of list offsets.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListOffsetsQuery {
    /// `earliest` (log start offset) or `latest` (HW, as Kafka answers read_uncommitted
    /// consumers).
    pub spec: String,
}

/// Answer of list offsets.
#[derive(Debug, Serialize)]
pub struct OffsetResponse {
    /// The offset asked for.
    pub offset: u64,
}

/// `GET /v1/topics/{topic}/partitions/{partition}/offsets?spec=earliest|latest`.
pub async fn list_offsets(
    State(broker): State<Arc<Broker>>,
    ApiPath((topic, index)): ApiPath<(String, u32)>,
    ApiQuery(query): ApiQuery<ListOffsetsQuery>,
) -> Result<Json<OffsetResponse>, ApiError> {
    let offsets = consumer_offsets(&broker, &topic, index)?;
    let offset = match query.spec.as_str() {
        "earliest" => offsets.log_start_offset,
        "latest" => offsets.high_watermark,
        other => {
            return Err(ApiError::invalid_request(format!(
                "spec must be \"earliest\" or \"latest\", got {other:?}"
            )))
        }
    };
    Ok(Json(OffsetResponse { offset }))
}

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

/// Body of delete-records.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteRecordsRequest {
    /// New log start offset; -1 = the HW (Kafka's convention).
    pub offset: i64,
}

/// Answer of delete-records.
#[derive(Debug, Serialize)]
pub struct DeleteRecordsResponse {
    /// The log start offset after the deletion.
    pub low_watermark: u64,
}

/// `POST /v1/topics/{topic}/partitions/{partition}/delete-records`.
pub async fn delete_records(
    State(broker): State<Arc<Broker>>,
    ApiPath((topic, index)): ApiPath<(String, u32)>,
    ApiJson(request): ApiJson<DeleteRecordsRequest>,
) -> Result<Json<DeleteRecordsResponse>, ApiError> {
    let low_watermark = delete_records_before(&broker, &topic, index, request.offset).await?;
    Ok(Json(DeleteRecordsResponse { low_watermark }))
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
        offset => non_negative_offset(offset)?,
    };
    match &broker.cluster {
        Some(cluster) => cluster.delete_records(topic, index, offset).await,
        None => Ok(partition.delete_records_before(offset)?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn acks_accepts_kafka_spellings_only() {
        assert_eq!(Acks::parse(None).unwrap(), Acks::All);
        assert_eq!(Acks::parse(Some(&json!("all"))).unwrap(), Acks::All);
        assert_eq!(Acks::parse(Some(&json!(-1))).unwrap(), Acks::All);
        assert_eq!(Acks::parse(Some(&json!("1"))).unwrap(), Acks::Leader);
        assert_eq!(Acks::parse(Some(&json!(0))).unwrap(), Acks::None);
        for bad in [json!("2"), json!("most"), json!(true), json!(null)] {
            let error = Acks::parse(Some(&bad)).unwrap_err();
            assert_eq!(error.kind, ErrorKind::InvalidRequiredAcks, "{bad}");
        }
    }

    #[test]
    fn batch_size_is_checked_against_max_message_bytes() {
        let request = |value: &str| ProduceRequest {
            acks: None,
            timeout_ms: None,
            leader_epoch: None,
            records: vec![ProduceRecord {
                key: Some("k".into()),
                value: value.into(),
                timestamp_ms: Some(5),
            }],
        };
        let limits = ProduceLimits {
            max_message_bytes: BATCH_OVERHEAD_BYTES + RECORD_OVERHEAD_BYTES + 1 + 10,
            timestamp_difference_max_ms: i64::MAX,
            now_ms: 1_000,
        };
        let records = to_records(request("0123456789"), limits).unwrap();
        assert_eq!(records[0].timestamp_ms, 5);
        assert_eq!(records[0].key.as_deref(), Some(&b"k"[..]));
        let error = to_records(request("0123456789a"), limits).unwrap_err();
        assert_eq!(error.kind, ErrorKind::MessageTooLarge);
    }

    #[test]
    fn timestamps_must_be_within_the_difference_of_the_leaders_clock() {
        let request = |timestamps: &[Option<i64>]| ProduceRequest {
            acks: None,
            timeout_ms: None,
            leader_epoch: None,
            records: timestamps
                .iter()
                .map(|&timestamp_ms| ProduceRecord {
                    key: None,
                    value: "v".into(),
                    timestamp_ms,
                })
                .collect(),
        };
        let limits = |timestamp_difference_max_ms| ProduceLimits {
            max_message_bytes: 1 << 20,
            timestamp_difference_max_ms,
            now_ms: 1_000_000,
        };
        let bounded = limits(1_000);
        let records =
            to_records(request(&[Some(999_000), None, Some(1_001_000)]), bounded).unwrap();
        let stamps: Vec<i64> = records.iter().map(|r| r.timestamp_ms).collect();
        assert_eq!(stamps, vec![999_000, 1_000_000, 1_001_000]);
        for outside in [998_999, 1_001_001, i64::MAX, i64::MIN, 0] {
            let error = to_records(request(&[None, Some(outside)]), bounded).unwrap_err();
            assert_eq!(error.kind, ErrorKind::InvalidTimestamp, "{outside}");
            assert!(error.message.starts_with("record 1 "), "{}", error.message);
        }
        // Kafka's default accepts any timestamp within i64::MAX of the clock.
        let default = limits(i64::MAX);
        assert!(to_records(request(&[Some(i64::MAX), Some(0)]), default).is_ok());
        assert!(to_records(request(&[Some(i64::MIN)]), default).is_err());
    }
}
