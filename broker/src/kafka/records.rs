//! Produce, Fetch, ListOffsets, OffsetForLeaderEpoch and DeleteRecords: Kafka's framing over
//! the operations of [`crate::ops`] that the HTTP routes call too, so both front doors append,
//! read and refuse alike.

use bytes::{Bytes, BytesMut};
use futures::future::{join_all, select_all, FutureExt};
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    DeleteRecordsRequest, DeleteRecordsResponse, FetchRequest, FetchResponse, ListOffsetsRequest,
    ListOffsetsResponse, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ProduceRequest,
    ProduceResponse, ProducerId,
};
use kafka_protocol::records::{
    Compression, Record as WireRecord, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
};

use super::batch_bounds::{self, BatchRefusal};
use super::decompress::{decompress_capped, DecompressError};
use super::errors::{
    code, of, CORRUPT_MESSAGE, FETCH_SESSION_ID_NOT_FOUND, UNSUPPORTED_COMPRESSION_TYPE,
};
use super::{
    partition_index, reply, topic_text, wire, ConnectionError, KafkaContext, Reply, Request,
};
use crate::broker::Broker;
use crate::error::{ApiError, ErrorKind};
use crate::ops::fetch::{
    fetch_records, FetchParams, FETCH_MAX_BYTES_LIMIT, FETCH_MAX_WAIT_LIMIT_MS,
};
use crate::ops::offsets::{
    check_latest_available, consumer_offsets_at, delete_records_before, end_offset_for_epoch,
    epoch_at, offset_for_timestamp, TimestampSearch,
};
use crate::ops::produce::{produce_records, Acks, ProduceInput};
use crate::ops::txn_verify::verify_produce;
use crate::partition::{Isolation, PartitionOffsets};
use crate::storage::producer_state::Verification;
use crate::storage::{ProducerStamp, Record, StampKind, StoredRecord};
use tidewater_kafka_model::ErrorCode;

/// Why a partition's records were refused before any append, with Kafka's code.
struct Refused {
    code: i16,
    message: String,
}

fn refused(code: i16, message: impl Into<String>) -> Refused {
    Refused {
        code,
        message: message.into(),
    }
}

/// Decodes one partition's `records` of a produce into storage records and the idempotent
/// producer's stamp of the batch: exactly one v2 batch (as Kafka requires of produce v3+), not
/// transactional, no control records, no headers and no null values (this broker stores
/// neither), and a compression this build decodes. The batch's header and its records are
/// bounded first ([`batch_bounds`]), so the crate's decoder never reserves room for counts
/// the bytes do not hold.
fn decode_produce_records(
    records: &Bytes,
    max_message_bytes: u64,
) -> Result<(Vec<Record>, Option<ProducerStamp>), Refused> {
    let invalid = |message: String| refused(code(ErrorKind::InvalidRecord), message);
    // The batch header's attributes (bytes 21..23 of a v2 batch) name its compression; a
    // codec this build cannot decode is answered as such before anything else is checked.
    if records.len() >= 23 && records[16] == 2 {
        let compression = i16::from_be_bytes([records[21], records[22]]) & 0x7;
        if compression == Compression::Lz4 as i16 || compression == Compression::Zstd as i16 {
            return Err(refused(
                UNSUPPORTED_COMPRESSION_TYPE,
                "lz4 and zstd batches are not decoded here; use none, gzip or snappy",
            ));
        }
    }
    let header = batch_bounds::check_header(records).map_err(refusal)?;
    if header.size != records.len() {
        return Err(invalid(
            "a produce must carry exactly one record batch per partition".into(),
        ));
    }
    batch_bounds::check_offset_range(records, &header).map_err(refusal)?;
    // The records are checked where the crate hands them over, after decompression, since a
    // compressed batch's counts can only be checked against its uncompressed bytes.
    let records_refusal = std::cell::RefCell::new(None);
    let checked = |raw: &mut Bytes, compression: Compression| -> anyhow::Result<Bytes> {
        let plain = decompress_capped(std::mem::take(raw), compression, max_message_bytes)
            .map_err(|e| {
                let message = e.to_string();
                *records_refusal.borrow_mut() = Some(decompress_refusal(e));
                anyhow::anyhow!(message)
            })?;
        batch_bounds::check_records(&plain, header.record_count).map_err(|r| {
            let message = format!("{r:?}");
            *records_refusal.borrow_mut() = Some(refusal(r));
            anyhow::anyhow!(message)
        })?;
        Ok(plain)
    };
    let mut buf = records.clone();
    let decoded = RecordBatchDecoder::decode_with_custom_compression(&mut buf, Some(checked));
    if let Some(r) = records_refusal.take() {
        return Err(r);
    }
    let set = decoded.map_err(|e| {
        invalid(format!(
            "cannot decode the record batch (one v2 batch expected; message format v0/v1 is \
             not served): {e}"
        ))
    })?;
    if !buf.is_empty() {
        return Err(invalid(
            "a produce must carry exactly one record batch per partition".into(),
        ));
    }
    let Some(first) = set.records.first() else {
        return Err(invalid("the record batch is empty".into()));
    };
    if first.control {
        // Kafka's `LogValidator`: only the coordinator's WriteTxnMarkers writes markers.
        return Err(invalid(
            "clients are not allowed to write control records".into(),
        ));
    }
    let mut producer = producer_stamp(records).map_err(invalid)?;
    if first.transactional {
        let Some(stamp) = producer.as_mut() else {
            return Err(invalid(
                "a transactional record batch without a producer id".into(),
            ));
        };
        stamp.kind = StampKind::Transactional;
    }
    let now = crate::clock::timestamp_ms();
    let records = set
        .records
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            if !r.headers.is_empty() {
                return Err(invalid(format!(
                    "record {i} has headers, which this broker does not store"
                )));
            }
            let value = r.value.ok_or_else(|| {
                invalid(format!(
                    "record {i} has a null value (tombstones are not supported)"
                ))
            })?;
            Ok(Record {
                key: r.key.map(|k| k.to_vec()),
                value: value.to_vec(),
                timestamp_ms: if r.timestamp < 0 { now } else { r.timestamp },
            })
        })
        .collect::<Result<Vec<Record>, Refused>>()?;
    Ok((records, producer))
}

/// The idempotent producer's id, epoch and base sequence from a v2 batch header (bytes 43..57,
/// already bounded): `None` for producer id -1 (no idempotence). As Kafka's
/// `LogValidator.validateBatch`, a producer id with a negative base sequence (or epoch) is
/// INVALID_RECORD.
fn producer_stamp(batch: &[u8]) -> Result<Option<ProducerStamp>, String> {
    let producer_id = i64::from_be_bytes(batch[43..51].try_into().expect("8 bytes"));
    let producer_epoch = i16::from_be_bytes([batch[51], batch[52]]);
    let sequence = i32::from_be_bytes(batch[53..57].try_into().expect("4 bytes"));
    if producer_id == NO_PRODUCER_ID {
        return Ok(None);
    }
    if producer_id < 0 || producer_epoch < 0 || sequence < 0 {
        return Err(format!(
            "invalid producer id {producer_id}, epoch {producer_epoch} or sequence number \
             {sequence} in a record batch with a producer id"
        ));
    }
    Ok(Some(ProducerStamp {
        producer_id,
        producer_epoch,
        sequence,
        kind: StampKind::Idempotent,
    }))
}

/// A batch refusal as Kafka answers it.
fn refusal(refusal: BatchRefusal) -> Refused {
    match refusal {
        BatchRefusal::Corrupt(message) => refused(CORRUPT_MESSAGE, message),
        BatchRefusal::Invalid(message) => refused(code(ErrorKind::InvalidRecord), message),
    }
}

/// A decompression failure as Kafka answers it.
fn decompress_refusal(error: DecompressError) -> Refused {
    let message = error.to_string();
    match error {
        DecompressError::TooLarge { .. } => refused(code(ErrorKind::MessageTooLarge), message),
        DecompressError::Corrupt(_) => refused(CORRUPT_MESSAGE, message),
        DecompressError::Unsupported(_) => refused(UNSUPPORTED_COMPRESSION_TYPE, message),
    }
}

fn acks_of(acks: i16) -> Option<Acks> {
    match acks {
        -1 => Some(Acks::All),
        1 => Some(Acks::Leader),
        0 => Some(Acks::None),
        _ => None,
    }
}

/// Produce: every partition appended as `POST .../records` appends it, concurrently (an
/// acks=all partition waiting for its ISR does not hold up the others). An acks=0 produce is
/// not answered; if it fails, the connection is closed, as Kafka does.
pub async fn produce(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let version = request.version();
    let body: ProduceRequest = request.decode()?;
    let acks = acks_of(body.acks);
    let timeout_ms = u64::try_from(body.timeout_ms).unwrap_or(0);
    let transactional = body.transactional_id.is_some();
    let transactional_id: Option<String> = body
        .transactional_id
        .as_ref()
        .map(|id| id.0.as_str().to_string());
    let transactional_id = transactional_id.as_deref();
    let broker = &context.broker;
    let mut topics = Vec::with_capacity(body.topic_data.len());
    for topic in &body.topic_data {
        let name = topic_text(&topic.name);
        let partitions = topic.partition_data.iter().map(|p| {
            let name = name.clone();
            async move {
                let answer = PartitionProduceResponse::default()
                    .with_index(p.index)
                    .with_base_offset(-1)
                    .with_log_append_time_ms(-1)
                    .with_log_start_offset(-1);
                // The error message is in the answer from v8.
                let fail = |code: i16, message: String| {
                    answer
                        .clone()
                        .with_error_code(code)
                        .with_error_message((version >= 8).then(|| wire(message)))
                };
                let Some(acks) = acks else {
                    return fail(
                        code(ErrorKind::InvalidRequiredAcks),
                        format!("acks must be -1, 0 or 1, got {}", body.acks),
                    );
                };
                let Some(index) = partition_index(p.index) else {
                    return fail(
                        code(ErrorKind::UnknownTopicOrPartition),
                        format!("partition {} is negative", p.index),
                    );
                };
                let Some(records) = &p.records else {
                    return fail(code(ErrorKind::InvalidRecord), "no records".into());
                };
                // The cap on the records once decompressed: the topic's max.message.bytes
                // (the broker's for a topic that does not exist; the produce then fails).
                let max_message_bytes = broker
                    .topics
                    .get(&name)
                    .map_or(broker.config.message_max_bytes, |t| {
                        t.config.log_config(&broker.config).max_message_bytes
                    });
                let log_start = || {
                    broker
                        .topics
                        .partition(&name, index)
                        .map(|p| p.offsets().log_start_offset as i64)
                        .unwrap_or(-1)
                };
                let (records_vec, producer) =
                    match decode_produce_records(records, max_message_bytes) {
                        Ok(decoded) => decoded,
                        Err(refused) => {
                            return fail(refused.code, refused.message).with_log_start_offset(
                                failed_log_start(version, refused.code, log_start),
                            )
                        }
                    };
                // Kafka's `KafkaApis.handleProduceRequest`: transactional records need the
                // request's transactional id (its authorization fails without one).
                if producer.is_some_and(|p| p.kind.transactional()) && !transactional {
                    return fail(
                        ErrorCode::TransactionalIdAuthorizationFailed.code(),
                        "transactional records in a produce without a transactional id".into(),
                    );
                }
                // KIP-890 part 1: a transactional batch that would open a transaction here is
                // checked with the producer's coordinator first.
                let verification = match (producer, transactional_id) {
                    (Some(stamp), Some(id)) => {
                        match verify_produce(broker, &context.transactions, id, &name, index, stamp)
                            .await
                        {
                            Ok(verification) => verification,
                            Err(unverified) => {
                                let code = unverified.code.code();
                                return fail(code, unverified.message).with_log_start_offset(
                                    failed_log_start(version, code, log_start),
                                );
                            }
                        }
                    }
                    _ => Verification::Off,
                };
                let input = ProduceInput {
                    acks,
                    timeout_ms,
                    leader_epoch: None,
                    records: records_vec,
                    batch_bytes: records.len() as u64,
                    producer,
                    verification,
                };
                match produce_records(broker, &name, index, input).await {
                    Ok(produced) => answer
                        .with_base_offset(produced.base_offset.map_or(-1, |o| o as i64))
                        // A duplicate's is the original batch's max timestamp, as Kafka's.
                        .with_log_append_time_ms(produced.log_append_time_ms.unwrap_or(-1))
                        // The log start offset is in the answer from v5.
                        .with_log_start_offset(if version >= 5 { log_start() } else { -1 }),
                    Err(error) => {
                        let (code, message) = of(&error);
                        fail(code, message)
                            .with_log_start_offset(failed_log_start(version, code, log_start))
                    }
                }
            }
        });
        let partitions = join_all(partitions).await;
        topics.push(
            TopicProduceResponse::default()
                .with_name(topic.name.clone())
                .with_partition_responses(partitions),
        );
    }
    if acks == Some(Acks::None) {
        let failed = topics
            .iter()
            .flat_map(|t| &t.partition_responses)
            .find(|p| p.error_code != 0);
        return match failed {
            Some(p) => Err(ConnectionError::Protocol(format!(
                "acks=0 produce failed with error {}: {}",
                p.error_code,
                p.error_message.as_ref().map_or("", |m| m.as_str())
            ))),
            None => Ok(Reply::Nothing),
        };
    }
    Ok(reply(ProduceResponse::default().with_responses(topics)))
}

/// The log start offset of a failed produce's answer, as Kafka's
/// `ReplicaManager.appendToLocalLog` gives it: none (-1) for an unknown partition, a
/// non-leader, a batch too large or corrupt, or a storage error; the partition's log start
/// offset for every other failure at the leader (INVALID_RECORD, NOT_ENOUGH_REPLICAS, ...).
/// In the answer from v5.
fn failed_log_start(version: i16, error_code: i16, log_start: impl Fn() -> i64) -> i64 {
    const WITHOUT: &[ErrorKind] = &[
        ErrorKind::UnknownTopicOrPartition,
        ErrorKind::NotLeaderOrFollower,
        ErrorKind::MessageTooLarge,
        ErrorKind::KafkaStorageError,
    ];
    let without = error_code == CORRUPT_MESSAGE || WITHOUT.iter().any(|k| code(*k) == error_code);
    if version < 5 || without {
        -1
    } else {
        log_start()
    }
}

/// Encodes `records` as v2 batches, one per run of records of the same leader epoch and
/// producer, so a consumer sees each record's epoch as Kafka stores it (KIP-320 uses it to
/// detect truncation) and an idempotent or transactional producer's id, epoch and sequences
/// as it wrote them, with Kafka's transactional and control bits; a marker is a batch of its
/// own (base sequence -1, as Kafka writes control batches).
pub fn encode_batches(records: &[StoredRecord]) -> Result<Bytes, ConnectionError> {
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    let same_batch = |a: &StoredRecord, b: &StoredRecord| {
        let producer = |r: &StoredRecord| {
            r.producer
                .map(|p| (p.producer_id, p.producer_epoch, p.kind))
        };
        a.leader_epoch == b.leader_epoch
            && producer(a) == producer(b)
            && !a.producer.is_some_and(|p| p.kind.control())
    };
    for run in records.chunk_by(same_batch) {
        let first = run[0].offset;
        let wire_records: Vec<WireRecord> = run
            .iter()
            .map(|r| {
                let kind = r.producer.map(|p| p.kind).unwrap_or_default();
                WireRecord {
                    transactional: kind.transactional(),
                    control: kind.control(),
                    delete_horizon: false,
                    partition_leader_epoch: r.leader_epoch as i32,
                    producer_id: r.producer.map_or(NO_PRODUCER_ID, |p| p.producer_id),
                    producer_epoch: r.producer.map_or(NO_PRODUCER_EPOCH, |p| p.producer_epoch),
                    timestamp_type: TimestampType::Creation,
                    offset: r.offset as i64,
                    // The crate keeps records in one batch while offset - sequence is constant.
                    // Without a producer (and for a marker) the base sequence is -1, as Kafka
                    // writes it.
                    sequence: match r.producer {
                        Some(p) if !kind.control() => p.sequence,
                        _ => (r.offset - first) as i32 - 1,
                    },
                    timestamp: r.timestamp_ms,
                    key: r.key.as_ref().map(|k| Bytes::copy_from_slice(k)),
                    value: Some(Bytes::copy_from_slice(&r.value)),
                    headers: Default::default(),
                }
            })
            .collect();
        RecordBatchEncoder::encode(&mut buf, &wire_records, &options)
            .map_err(|e| ConnectionError::Protocol(format!("cannot encode records: {e}")))?;
    }
    Ok(buf.freeze())
}

/// One partition of a fetch, as asked.
#[derive(Clone)]
struct FetchAsk {
    topic: String,
    partition: i32,
    params: FetchParams,
}

/// Fetch for consumers: every partition read as `GET .../records` reads it (HW or LEO by
/// isolation level, KIP-320 leader epochs; a new leader serves its lagging HW); when nothing is
/// visible anywhere, waits up to `max_wait_ms` for the first partition to have some. No
/// fetch sessions are created (session id 0: the client sends full fetches).
pub async fn fetch(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let version = request.version();
    let body: FetchRequest = request.decode()?;
    let broker = &context.broker;
    if body.session_id != 0 {
        return Ok(reply(
            FetchResponse::default()
                .with_error_code(FETCH_SESSION_ID_NOT_FOUND)
                .with_session_id(0),
        ));
    }
    // READ_UNCOMMITTED reads below the HW, READ_COMMITTED below the last stable offset.
    let isolation = if body.isolation_level == 1
        && !broker.config.bugs.on(crate::bugs::Bug::TxnLsoIgnoresOpen)
    {
        Isolation::Stable
    } else {
        Isolation::Committed
    };
    let mut asks = Vec::new();
    for topic in &body.topics {
        for p in &topic.partitions {
            asks.push(FetchAsk {
                topic: topic_text(&topic.topic),
                partition: p.partition,
                params: FetchParams {
                    offset: p.fetch_offset,
                    max_bytes: u64::try_from(p.partition_max_bytes)
                        .unwrap_or(0)
                        .min(FETCH_MAX_BYTES_LIMIT),
                    max_wait_ms: 0,
                    isolation,
                    leader_epoch: u32::try_from(p.current_leader_epoch).ok(),
                },
            });
        }
    }
    let mut results = read_all(broker, &asks).await;
    let nothing = results
        .iter()
        .all(|r| matches!(r, Ok((records, _)) if records.is_empty()));
    let max_wait_ms = u64::try_from(body.max_wait_ms)
        .unwrap_or(0)
        .min(FETCH_MAX_WAIT_LIMIT_MS);
    if nothing && max_wait_ms > 0 && !asks.is_empty() {
        // Long poll: the first partition with records (or the wait's end) answers for all.
        let waits = asks.iter().map(|ask| {
            let mut params = ask.params;
            params.max_wait_ms = max_wait_ms;
            let topic = ask.topic.clone();
            let index = partition_index(ask.partition).unwrap_or(0);
            async move {
                fetch_records(broker, &topic, index, params)
                    .await
                    .map(|_| ())
            }
            .boxed()
        });
        let _ = select_all(waits).await;
        results = read_all(broker, &asks).await;
    }
    let max_total = u64::try_from(body.max_bytes).unwrap_or(u64::MAX);
    let mut total = 0u64;
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    for (ask, result) in asks.iter().zip(results) {
        let data = PartitionData::default()
            .with_partition_index(ask.partition)
            .with_high_watermark(-1)
            .with_last_stable_offset(-1)
            .with_log_start_offset(-1);
        let data = match result {
            Ok((mut records, offsets)) => {
                // Stay under the request's max_bytes, but always return the first partition's
                // records (KIP-74).
                let size: u64 = records.iter().map(|r| r.value.len() as u64 + 70).sum();
                if total > 0 && total + size > max_total {
                    records.clear();
                }
                total += size;
                let last_stable_offset = reported_last_stable_offset(broker, &offsets);
                // Kafka's `collectAbortedTransactions` over what is returned.
                let aborted = (body.isolation_level == 1).then(|| {
                    let from = u64::try_from(ask.params.offset).unwrap_or(0);
                    let to = records.last().map_or(from, |r| r.offset + 1);
                    aborted_transactions(broker, &ask.topic, ask.partition, from, to)
                });
                data.with_high_watermark(offsets.high_watermark as i64)
                    .with_last_stable_offset(last_stable_offset as i64)
                    // The log start offset is in the answer from v5.
                    .with_log_start_offset(if version >= 5 {
                        offsets.log_start_offset as i64
                    } else {
                        -1
                    })
                    // Kafka answers the list to READ_COMMITTED fetches only, and null to
                    // READ_UNCOMMITTED ones (`LocalLog.read`).
                    .with_aborted_transactions(aborted)
                    .with_records(Some(encode_batches(&records)?))
            }
            Err(error) => data
                .with_error_code(code(error.kind))
                // Kafka answers an unknown partition before reading (an empty list) and the
                // log's refusals without one (null).
                .with_aborted_transactions(
                    (error.kind == ErrorKind::UnknownTopicOrPartition).then(Vec::new),
                )
                .with_records(Some(Bytes::new())),
        };
        match topics.last_mut() {
            Some(last) if topic_text(&last.topic) == ask.topic => last.partitions.push(data),
            _ => topics.push(
                FetchableTopicResponse::default()
                    .with_topic(kafka_protocol::messages::TopicName(wire(ask.topic.clone())))
                    .with_partitions(vec![data]),
            ),
        }
    }
    Ok(reply(
        FetchResponse::default()
            .with_session_id(0)
            .with_responses(topics),
    ))
}

/// The last stable offset a fetch reports: the partition's, or the HW under the deliberate
/// bug `txn.lso.ignores.open`.
fn reported_last_stable_offset(broker: &Broker, offsets: &PartitionOffsets) -> u64 {
    if broker.config.bugs.on(crate::bugs::Bug::TxnLsoIgnoresOpen) {
        offsets.high_watermark
    } else {
        offsets.last_stable_offset
    }
}

/// The aborted transactions of `topic`/`partition` whose records may lie in `[from, to)`.
fn aborted_transactions(
    broker: &Broker,
    topic: &str,
    partition: i32,
    from: u64,
    to: u64,
) -> Vec<AbortedTransaction> {
    let Some(index) = partition_index(partition) else {
        return Vec::new();
    };
    let Ok(log) = broker.topics.partition(topic, index) else {
        return Vec::new();
    };
    log.aborted_transactions(from, to)
        .into_iter()
        .map(|a| {
            AbortedTransaction::default()
                .with_producer_id(ProducerId(a.producer_id))
                .with_first_offset(a.first_offset as i64)
        })
        .collect()
}

/// Reads every asked partition without waiting.
async fn read_all(
    broker: &Broker,
    asks: &[FetchAsk],
) -> Vec<Result<(Vec<StoredRecord>, PartitionOffsets), ApiError>> {
    join_all(asks.iter().map(|ask| async move {
        match partition_index(ask.partition) {
            Some(index) => fetch_records(broker, &ask.topic, index, ask.params).await,
            None => Err(ApiError::unknown_topic(&ask.topic, None)),
        }
    }))
    .await
}

/// Kafka's special timestamps in ListOffsets.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

/// ListOffsets: earliest (the log start offset), latest (the HW), a timestamp (the first
/// committed record at or after it) and MAX_TIMESTAMP, on the leader, with KIP-320 epochs.
pub async fn list_offsets(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let version = request.version();
    let body: ListOffsetsRequest = request.decode()?;
    let broker = &context.broker;
    let mut topics = Vec::with_capacity(body.topics.len());
    for topic in &body.topics {
        let name = topic_text(&topic.name);
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let answer = ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_timestamp(-1)
                .with_offset(-1)
                .with_leader_epoch(-1);
            let outcome = async {
                let index = partition_index(p.partition_index)
                    .ok_or_else(|| ApiError::unknown_topic(&name, None))?;
                let client_epoch = u32::try_from(p.current_leader_epoch).ok();
                let offsets = consumer_offsets_at(broker, &name, index, client_epoch)?;
                let search = |search| {
                    offset_for_timestamp(broker, &name, index, search, offsets.log_start_offset)
                };
                let found = match p.timestamp {
                    EARLIEST => Some((offsets.log_start_offset, -1)),
                    // READ_COMMITTED's latest is the last stable offset (Kafka's
                    // `fetchOffsetForTimestamp` with isolation level 1).
                    // KIP-207 gates the latest offset only (Kafka's
                    // `fetchOffsetForTimestamp`).
                    LATEST => {
                        check_latest_available(broker, &name, index)?;
                        if body.isolation_level == 1 {
                            Some((reported_last_stable_offset(broker, &offsets), -1))
                        } else {
                            Some((offsets.high_watermark, -1))
                        }
                    }
                    MAX_TIMESTAMP => search(TimestampSearch::Largest).await?,
                    target if target >= 0 => search(TimestampSearch::AtOrAfter(target)).await?,
                    other => {
                        return Err(ApiError::invalid_request(format!(
                            "timestamp {other} is not served (-1 latest, -2 earliest, -3 max, or a time)"
                        )))
                    }
                };
                Ok::<_, ApiError>(found.map(|(offset, timestamp)| {
                    let epoch_offset = if p.timestamp == LATEST {
                        offset.saturating_sub(1)
                    } else {
                        offset
                    };
                    let epoch = epoch_at(broker, &name, index, epoch_offset);
                    (offset, timestamp, epoch.map_or(-1, |e| e as i32))
                }))
            }
            .await;
            partitions.push(match outcome {
                Ok(Some((offset, timestamp, epoch))) => answer
                    .with_offset(offset as i64)
                    .with_timestamp(timestamp)
                    // The leader epoch is in the answer from v4.
                    .with_leader_epoch(if version >= 4 { epoch } else { -1 }),
                Ok(None) => answer,
                Err(error) => answer.with_error_code(code(error.kind)),
            });
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    Ok(reply(ListOffsetsResponse::default().with_topics(topics)))
}

/// OffsetForLeaderEpoch for consumers (KIP-320): the end offset of the largest epoch at or
/// below the one asked, from the leader's epoch cache.
pub fn offset_for_leader_epoch(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let body: OffsetForLeaderEpochRequest = request.decode()?;
    let broker = &context.broker;
    let mut topics = Vec::with_capacity(body.topics.len());
    for topic in &body.topics {
        let name = topic_text(&topic.topic);
        let partitions = topic
            .partitions
            .iter()
            .map(|p| {
                let answer = EpochEndOffset::default()
                    .with_partition(p.partition)
                    .with_leader_epoch(-1)
                    .with_end_offset(-1);
                let outcome = partition_index(p.partition)
                    .ok_or_else(|| ApiError::unknown_topic(&name, None))
                    .and_then(|index| {
                        let current = u32::try_from(p.current_leader_epoch).ok();
                        end_offset_for_epoch(broker, &name, index, current, p.leader_epoch)
                    });
                match outcome {
                    Ok(Some((epoch, end))) => answer
                        .with_leader_epoch(epoch as i32)
                        .with_end_offset(end as i64),
                    Ok(None) => answer,
                    Err(error) => answer.with_error_code(code(error.kind)),
                }
            })
            .collect();
        topics.push(
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic.clone())
                .with_partitions(partitions),
        );
    }
    Ok(reply(
        OffsetForLeaderEpochResponse::default().with_topics(topics),
    ))
}

/// DeleteRecords: moves each partition's log start offset as `POST .../delete-records` does.
pub async fn delete_records(
    request: &mut Request,
    context: &KafkaContext,
) -> Result<Reply, ConnectionError> {
    let body: DeleteRecordsRequest = request.decode()?;
    let mut topics = Vec::with_capacity(body.topics.len());
    for topic in &body.topics {
        let name = topic_text(&topic.name);
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let answer = DeleteRecordsPartitionResult::default()
                .with_partition_index(p.partition_index)
                .with_low_watermark(-1);
            let outcome = match partition_index(p.partition_index) {
                Some(index) => delete_records_before(&context.broker, &name, index, p.offset).await,
                None => Err(ApiError::unknown_topic(&name, None)),
            };
            partitions.push(match outcome {
                Ok(low) => answer.with_low_watermark(low as i64),
                Err(error) => answer.with_error_code(code(error.kind)),
            });
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    Ok(reply(DeleteRecordsResponse::default().with_topics(topics)))
}
