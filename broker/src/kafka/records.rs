//! Produce, Fetch, ListOffsets, OffsetForLeaderEpoch and DeleteRecords over the same
//! functions as the HTTP API (`crate::api::records`), so both front doors append, read and
//! refuse alike.

use bytes::{Bytes, BytesMut};
use futures::future::{join_all, select_all, FutureExt};
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
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
    ProduceResponse,
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
use crate::api::records::{
    consumer_offsets, delete_records_before, fetch_records, produce_records, Acks, FetchParams,
    ProduceInput,
};
use crate::error::{ApiError, ErrorKind};
use crate::partition::Isolation;
use crate::server::now_ms;
use crate::storage::{Record, StoredRecord};

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

/// Decodes one partition's `records` of a produce into storage records: exactly one v2 batch
/// (as Kafka requires of produce v3+), no idempotent or transactional producer state, no
/// control records, no headers and no null values (this broker stores neither), and a
/// compression this build decodes. The batch's header and its records are bounded first
/// ([`batch_bounds`]), so the crate's decoder never reserves room for counts the bytes do
/// not hold.
fn decode_produce_records(records: &Bytes, max_message_bytes: u64) -> Result<Vec<Record>, Refused> {
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
    if first.transactional || first.control {
        return Err(invalid(
            "transactional and control batches are not supported".into(),
        ));
    }
    if first.producer_id != NO_PRODUCER_ID {
        return Err(invalid(format!(
            "producer id {} given, but idempotent producers are not supported (InitProducerId \
             is not served)",
            first.producer_id
        )));
    }
    let now = now_ms();
    set.records
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
        .collect()
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
                if transactional {
                    return fail(
                        code(ErrorKind::InvalidRequest),
                        "transactions are not supported".into(),
                    );
                }
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
                let records_vec = match decode_produce_records(records, max_message_bytes) {
                    Ok(records) => records,
                    Err(refused) => return fail(refused.code, refused.message),
                };
                let input = ProduceInput {
                    acks,
                    timeout_ms,
                    leader_epoch: None,
                    records: records_vec,
                    batch_bytes: records.len() as u64,
                };
                match produce_records(broker, &name, index, input).await {
                    Ok(produced) => {
                        let log_start = broker
                            .topics
                            .partition(&name, index)
                            .map(|p| p.offsets().log_start_offset as i64)
                            .unwrap_or(-1);
                        answer
                            .with_base_offset(produced.base_offset.map_or(-1, |o| o as i64))
                            // The log start offset is in the answer from v5.
                            .with_log_start_offset(if version >= 5 { log_start } else { -1 })
                    }
                    Err(error) => {
                        let (code, message) = of(&error);
                        fail(code, message)
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

/// Encodes `records` as v2 batches, one per run of records of the same leader epoch, so a
/// consumer sees each record's epoch as Kafka stores it (KIP-320 uses it to detect
/// truncation).
pub fn encode_batches(records: &[StoredRecord]) -> Result<Bytes, ConnectionError> {
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    for run in records.chunk_by(|a, b| a.leader_epoch == b.leader_epoch) {
        let first = run[0].offset;
        let wire_records: Vec<WireRecord> = run
            .iter()
            .map(|r| WireRecord {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: r.leader_epoch as i32,
                producer_id: NO_PRODUCER_ID,
                producer_epoch: NO_PRODUCER_EPOCH,
                timestamp_type: TimestampType::Creation,
                offset: r.offset as i64,
                // Constant offset - sequence keeps the run in one batch; the base sequence is
                // -1, as for a producer without idempotence.
                sequence: (r.offset - first) as i32 - 1,
                timestamp: r.timestamp_ms,
                key: r.key.as_ref().map(|k| Bytes::copy_from_slice(k)),
                value: Some(Bytes::copy_from_slice(&r.value)),
                headers: Default::default(),
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
/// isolation level, KIP-320 leader epochs, KIP-207 OFFSET_NOT_AVAILABLE); when nothing is
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
    // Consumers read below the HW at either isolation level: without transactions the last
    // stable offset is the HW.
    let isolation = Isolation::Committed;
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
                        .min(crate::api::records::FETCH_MAX_BYTES_LIMIT),
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
        .min(crate::api::records::FETCH_MAX_WAIT_LIMIT_MS);
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
                data.with_high_watermark(offsets.high_watermark as i64)
                    .with_last_stable_offset(offsets.high_watermark as i64)
                    // The log start offset is in the answer from v5.
                    .with_log_start_offset(if version >= 5 {
                        offsets.log_start_offset as i64
                    } else {
                        -1
                    })
                    .with_aborted_transactions(Some(Vec::new()))
                    .with_records(Some(encode_batches(&records)?))
            }
            Err(error) => data
                .with_error_code(code(error.kind))
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

/// Reads every asked partition without waiting.
async fn read_all(
    broker: &crate::server::Broker,
    asks: &[FetchAsk],
) -> Vec<Result<(Vec<StoredRecord>, crate::partition::PartitionOffsets), ApiError>> {
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

/// The epoch of the record at `offset` (the newest epoch that starts at or below it).
fn epoch_at(broker: &crate::server::Broker, topic: &str, index: u32, offset: u64) -> i32 {
    let Ok(partition) = broker.topics.partition(topic, index) else {
        return -1;
    };
    let state = partition.lock();
    state
        .log
        .epochs()
        .entries()
        .iter()
        .rev()
        .find(|e| e.start_offset <= offset)
        .map_or(-1, |e| e.epoch as i32)
}

/// Scans the committed records for the first with a timestamp at or after `target`, or the
/// one with the largest timestamp (MAX_TIMESTAMP). This broker keeps no time index, so the
/// scan reads the log.
async fn scan_timestamps(
    context: &KafkaContext,
    topic: &str,
    index: u32,
    target: i64,
    from: u64,
) -> Result<Option<(u64, i64)>, ApiError> {
    let mut offset = from;
    let mut best: Option<(u64, i64)> = None;
    loop {
        let params = FetchParams {
            offset: offset as i64,
            max_bytes: 1 << 20,
            max_wait_ms: 0,
            isolation: Isolation::Committed,
            leader_epoch: None,
        };
        let (records, _) = fetch_records(&context.broker, topic, index, params).await?;
        let Some(last) = records.last() else {
            return Ok(best);
        };
        offset = last.offset + 1;
        for record in &records {
            if target == MAX_TIMESTAMP {
                if best.is_none_or(|(_, t)| record.timestamp_ms > t) {
                    best = Some((record.offset, record.timestamp_ms));
                }
            } else if record.timestamp_ms >= target {
                return Ok(Some((record.offset, record.timestamp_ms)));
            }
        }
    }
}

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
                if let (Some(cluster), Ok(epoch)) =
                    (&broker.cluster, u32::try_from(p.current_leader_epoch))
                {
                    cluster.check_consumer_read_at(&name, index, Some(epoch))?;
                }
                let offsets = consumer_offsets(broker, &name, index)?;
                let found = match p.timestamp {
                    EARLIEST => Some((offsets.log_start_offset, -1)),
                    LATEST => Some((offsets.high_watermark, -1)),
                    target if target == MAX_TIMESTAMP || target >= 0 => {
                        scan_timestamps(context, &name, index, target, offsets.log_start_offset)
                            .await?
                    }
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
                    (offset, timestamp, epoch_at(broker, &name, index, epoch_offset))
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
                let outcome = (|| {
                    let index = partition_index(p.partition)
                        .ok_or_else(|| ApiError::unknown_topic(&name, None))?;
                    let current = u32::try_from(p.current_leader_epoch).ok();
                    let partition = broker.topics.partition(&name, index)?;
                    match &broker.cluster {
                        Some(cluster) => cluster.check_consumer_read_at(&name, index, current)?,
                        None => crate::replication::manager::check_client_leader_epoch(
                            current,
                            partition.offsets().leader_epoch,
                        )?,
                    }
                    let requested = u32::try_from(p.leader_epoch).map_err(|_| {
                        ApiError::invalid_request(format!(
                            "leader epoch {} is negative",
                            p.leader_epoch
                        ))
                    })?;
                    let state = partition.lock();
                    Ok::<_, ApiError>(state.log.end_offset_for_epoch(requested))
                })();
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
