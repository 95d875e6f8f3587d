//! `POST .../records` (produce), `GET .../records` (fetch), `GET .../offsets`,
//! `POST .../delete-records` and `GET .../replica-log` on one partition: the JSON shapes,
//! decoded into the operations of [`crate::ops::produce`], [`crate::ops::fetch`],
//! [`crate::ops::offsets`] and [`crate::ops::replica_log`].

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::extract::{check_announced_length, decode_json, ApiJson, ApiPath, ApiQuery};
use crate::broker::Broker;
use crate::error::{ApiError, ErrorKind};
use crate::ops::fetch::{fetch_records, FetchParams};
use crate::ops::offsets::{check_latest_available, consumer_offsets, delete_records_before};
use crate::ops::produce::{
    check_timestamp, produce_target, Acks, ProduceBatch, ProduceLimits, ProduceResponse,
    PRODUCE_TIMEOUT_MAX_MS,
};
use crate::ops::replica_log::{
    read_replica_log, ReplicaLogPage, ReplicaLogParams, REPLICA_LOG_MAX_BYTES_DEFAULT,
};
use crate::partition::Isolation;
use crate::storage::{Record, StoredRecord};

/// Default `timeout_ms` of a produce request (Kafka's `request.timeout.ms`).
pub const PRODUCE_TIMEOUT_DEFAULT_MS: u64 = 30_000;
/// Default `max_bytes` of a fetch (Kafka's `max.partition.fetch.bytes`).
pub const FETCH_MAX_BYTES_DEFAULT: u64 = 1 << 20;
/// Bytes Kafka's v2 record batch header takes; counted in the batch size checked against
/// `max.message.bytes`.
pub const BATCH_OVERHEAD_BYTES: u64 = 61;
/// Upper estimate of a v2 record's framing (length, attributes, deltas, header count varints).
pub const RECORD_OVERHEAD_BYTES: u64 = 21;
/// Slack on the HTTP body over `max.message.bytes`: JSON framing and string escapes make the
/// body larger than the batch; the exact batch size is checked after decoding.
pub const PRODUCE_BODY_SLACK_BYTES: u64 = 64 << 10;

/// Parses `"all"`, `"-1"`, `"1"`, `"0"` (strings or numbers); absent = all (Kafka's default).
pub fn parse_acks(value: Option<&Value>) -> Result<Acks, ApiError> {
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
    let acks = parse_acks(request.acks.as_ref())?;
    let timeout_ms = request.timeout_ms.unwrap_or(PRODUCE_TIMEOUT_DEFAULT_MS);
    if timeout_ms > PRODUCE_TIMEOUT_MAX_MS {
        return Err(ApiError::invalid_request(format!(
            "timeout_ms must be at most {PRODUCE_TIMEOUT_MAX_MS}, got {timeout_ms}"
        )));
    }
    let leader_epoch = request.leader_epoch;
    let records = to_records(request, limits)?;
    Ok(ProduceBatch {
        acks,
        leader_epoch,
        timeout_ms,
        records,
        // The HTTP API has no idempotent producers (InitProducerId is on the Kafka listener).
        producer: None,
        verification: crate::storage::producer_state::Verification::Off,
    })
}

/// `POST /v1/topics/{topic}/partitions/{partition}/records`.
pub async fn produce(
    State(broker): State<Arc<Broker>>,
    ApiPath((topic_name, index)): ApiPath<(String, u32)>,
    body: Body,
) -> Result<Json<ProduceResponse>, ApiError> {
    let target = produce_target(&broker, &topic_name, index).await?;
    let batch = read_batch(body, target.limits).await?;
    crate::ops::produce::produce(&broker, &target, batch)
        .await
        .map(Json)
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
    let (mut records, mut offsets) = fetch_records(&broker, &topic, index, params).await?;
    // Transaction markers are the clients' business on the Kafka listener only: here they are
    // skipped (their offsets are gaps, as a Kafka consumer sees them). A read of markers alone
    // goes on past them, so a reader never stalls at one.
    let is_marker = |r: &StoredRecord| r.producer.is_some_and(|p| p.kind.control());
    for _ in 0..MARKER_RUNS_SKIPPED_MAX {
        match records.last() {
            Some(last) if records.iter().all(is_marker) => {
                let next = FetchParams {
                    offset: last.offset as i64 + 1,
                    max_wait_ms: 0,
                    ..params
                };
                (records, offsets) = fetch_records(&broker, &topic, index, next).await?;
            }
            _ => break,
        }
    }
    records.retain(|r| !is_marker(r));
    Ok(Json(FetchResponse {
        records: records.into_iter().map(to_fetched).collect(),
        high_watermark: offsets.high_watermark,
        log_start_offset: offsets.log_start_offset,
        log_end_offset: offsets.log_end_offset,
        leader_epoch: offsets.leader_epoch,
    }))
}

/// Reads of nothing but markers a fetch goes past before it answers what it has.
const MARKER_RUNS_SKIPPED_MAX: usize = 16;

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
        "latest" => {
            check_latest_available(&broker, &topic, index)?;
            offsets.high_watermark
        }
        other => {
            return Err(ApiError::invalid_request(format!(
                "spec must be \"earliest\" or \"latest\", got {other:?}"
            )))
        }
    };
    Ok(Json(OffsetResponse { offset }))
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

/// Query of a replica's own log.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaLogQuery {
    /// First offset wanted; default: the replica's log start offset.
    pub offset: Option<i64>,
    /// About how many bytes of records to return; default 1 MiB, at most 16 MiB.
    pub max_bytes: Option<u64>,
}

/// `GET /v1/topics/{topic}/partitions/{partition}/replica-log?offset=N&max_bytes=B`: this
/// broker's own replica, leader or follower.
pub async fn replica_log(
    State(broker): State<Arc<Broker>>,
    ApiPath((topic, index)): ApiPath<(String, u32)>,
    ApiQuery(query): ApiQuery<ReplicaLogQuery>,
) -> Result<Json<ReplicaLogPage>, ApiError> {
    let params = ReplicaLogParams {
        offset: query.offset,
        max_bytes: query.max_bytes.unwrap_or(REPLICA_LOG_MAX_BYTES_DEFAULT),
    };
    read_replica_log(&broker, &topic, index, params).map(Json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn acks_accepts_kafka_spellings_only() {
        assert_eq!(parse_acks(None).unwrap(), Acks::All);
        assert_eq!(parse_acks(Some(&json!("all"))).unwrap(), Acks::All);
        assert_eq!(parse_acks(Some(&json!(-1))).unwrap(), Acks::All);
        assert_eq!(parse_acks(Some(&json!("1"))).unwrap(), Acks::Leader);
        assert_eq!(parse_acks(Some(&json!(0))).unwrap(), Acks::None);
        for bad in [json!("2"), json!("most"), json!(true), json!(null)] {
            let error = parse_acks(Some(&bad)).unwrap_err();
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
