//! Errors of the client API: Kafka's error names, one HTTP status each, and the JSON body
//! `{"error": "NAME", "message": "..."}` every failed request answers with.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::partition::AppendError;
use crate::storage::LogError;

/// The cause of a failed request, named as Kafka names its error codes.
///
/// Callers branch on the kind (the harness decides `fail` vs `info` from it), so every kind keeps
/// one name and one HTTP status; `docs/api.md` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The topic or partition does not exist (on this broker).
    UnknownTopicOrPartition,
    /// The topic name breaks Kafka's rule: `[a-zA-Z0-9._-]`, 1..=249 characters, not `.`/`..`.
    InvalidTopicException,
    /// Malformed JSON, a missing field, a bad query parameter or an empty batch.
    InvalidRequest,
    /// `acks` is not one of `all`, `-1`, `1`, `0`.
    InvalidRequiredAcks,
    /// The batch is malformed (Kafka's INVALID_RECORD).
    InvalidRecord,
    /// A record timestamp is further from the leader's clock than
    /// `message.timestamp.difference.max.ms` allows.
    InvalidTimestamp,
    /// A partition count out of range when creating a topic.
    InvalidPartitions,
    /// A replication factor this cluster cannot satisfy.
    InvalidReplicationFactor,
    /// An unknown topic config name or an invalid value.
    InvalidConfig,
    /// The request body or the batch is larger than `message.max.bytes`/`max.message.bytes`.
    MessageTooLarge,
    /// The offset lies outside `[log_start_offset, log_end_offset]` (or above the HW for
    /// delete-records), or is negative.
    OffsetOutOfRange,
    /// A topic of that name exists already.
    TopicAlreadyExists,
    /// This broker is not the leader (or a follower, for inter-broker fetches) of the partition.
    NotLeaderOrFollower,
    /// The request carries a leader epoch older than the partition's current one.
    FencedLeaderEpoch,
    /// The request's leader epoch is newer than this broker's (it has not seen the election yet).
    UnknownLeaderEpoch,
    /// acks=all and the ISR is smaller than `min.insync.replicas`: nothing was written.
    NotEnoughReplicas,
    /// acks=all, appended, then the ISR shrank below `min.insync.replicas`: indeterminate.
    NotEnoughReplicasAfterAppend,
    /// acks=all and the HW did not reach the batch within `timeout_ms`: indeterminate.
    RequestTimedOut,
    /// A new leader's HW is not yet known to be current (KIP-207).
    OffsetNotAvailable,
    /// The partition has no leader at the moment.
    LeaderNotAvailable,
    /// The log could not be read or written (I/O error, corruption found while serving).
    KafkaStorageError,
    /// No route has this path (or method); Kafka answers an unknown API the same way.
    UnsupportedVersion,
    /// A bug or an unexpected state on the broker.
    UnknownServerError,
}

impl ErrorKind {
    /// Kafka's name of the error, as it appears in the `error` field.
    pub fn name(self) -> &'static str {
        match self {
            Self::UnknownTopicOrPartition => "UNKNOWN_TOPIC_OR_PARTITION",
            Self::InvalidTopicException => "INVALID_TOPIC_EXCEPTION",
            Self::InvalidRequest => "INVALID_REQUEST",
            Self::InvalidRequiredAcks => "INVALID_REQUIRED_ACKS",
            Self::InvalidRecord => "INVALID_RECORD",
            Self::InvalidTimestamp => "INVALID_TIMESTAMP",
            Self::InvalidPartitions => "INVALID_PARTITIONS",
            Self::InvalidReplicationFactor => "INVALID_REPLICATION_FACTOR",
            Self::InvalidConfig => "INVALID_CONFIG",
            Self::MessageTooLarge => "MESSAGE_TOO_LARGE",
            Self::OffsetOutOfRange => "OFFSET_OUT_OF_RANGE",
            Self::TopicAlreadyExists => "TOPIC_ALREADY_EXISTS",
            Self::NotLeaderOrFollower => "NOT_LEADER_OR_FOLLOWER",
            Self::FencedLeaderEpoch => "FENCED_LEADER_EPOCH",
            Self::UnknownLeaderEpoch => "UNKNOWN_LEADER_EPOCH",
            Self::NotEnoughReplicas => "NOT_ENOUGH_REPLICAS",
            Self::NotEnoughReplicasAfterAppend => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
            Self::RequestTimedOut => "REQUEST_TIMED_OUT",
            Self::OffsetNotAvailable => "OFFSET_NOT_AVAILABLE",
            Self::LeaderNotAvailable => "LEADER_NOT_AVAILABLE",
            Self::KafkaStorageError => "KAFKA_STORAGE_ERROR",
            Self::UnsupportedVersion => "UNSUPPORTED_VERSION",
            Self::UnknownServerError => "UNKNOWN_SERVER_ERROR",
        }
    }

    /// The HTTP status the error is answered with.
    pub fn status(self) -> StatusCode {
        match self {
            Self::UnknownTopicOrPartition | Self::UnsupportedVersion => StatusCode::NOT_FOUND,
            Self::InvalidTopicException
            | Self::InvalidRequest
            | Self::InvalidRequiredAcks
            | Self::InvalidRecord
            | Self::InvalidTimestamp
            | Self::InvalidPartitions
            | Self::InvalidReplicationFactor
            | Self::InvalidConfig => StatusCode::BAD_REQUEST,
            Self::MessageTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::OffsetOutOfRange => StatusCode::RANGE_NOT_SATISFIABLE,
            Self::TopicAlreadyExists | Self::FencedLeaderEpoch | Self::UnknownLeaderEpoch => {
                StatusCode::CONFLICT
            }
            Self::NotLeaderOrFollower => StatusCode::MISDIRECTED_REQUEST,
            Self::NotEnoughReplicas
            | Self::NotEnoughReplicasAfterAppend
            | Self::OffsetNotAvailable
            | Self::LeaderNotAvailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::RequestTimedOut => StatusCode::GATEWAY_TIMEOUT,
            Self::KafkaStorageError | Self::UnknownServerError => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// A failed request: what went wrong (the kind) and, for people, the details.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", kind.name())]
pub struct ApiError {
    /// Kafka's error kind, which fixes the name and the HTTP status.
    pub kind: ErrorKind,
    /// A sentence naming the offending input (setting, topic, offset, ...).
    pub message: String,
}

impl ApiError {
    /// An error of `kind` with a message for people.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ApiError {
        ApiError {
            kind,
            message: message.into(),
        }
    }

    /// `INVALID_REQUEST` with `message`.
    pub fn invalid_request(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::InvalidRequest, message)
    }

    /// `UNKNOWN_TOPIC_OR_PARTITION` for `topic` (and `partition` when given).
    pub fn unknown_topic(topic: &str, partition: Option<u32>) -> ApiError {
        let message = match partition {
            Some(p) => format!("unknown topic-partition {topic}/{p}"),
            None => format!("unknown topic {topic:?}"),
        };
        ApiError::new(ErrorKind::UnknownTopicOrPartition, message)
    }
}

/// The name of the error a response carries, stored in the response's extensions so the metrics
/// middleware can count requests by route and error without parsing bodies.
#[derive(Debug, Clone, Copy)]
pub struct ErrorName(pub &'static str);

/// The JSON body of every error response.
#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'static str,
    message: &'a str,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: self.kind.name(),
            message: &self.message,
        };
        let mut response = (self.kind.status(), axum::Json(body)).into_response();
        response
            .extensions_mut()
            .insert(ErrorName(self.kind.name()));
        response
    }
}

impl From<LogError> for ApiError {
    fn from(error: LogError) -> ApiError {
        match error {
            LogError::OffsetOutOfRange {
                offset,
                log_start_offset,
                log_end_offset,
            } => ApiError::new(
                ErrorKind::OffsetOutOfRange,
                format!(
                    "offset {offset} is outside [{log_start_offset}, {log_end_offset}] \
                     (log start offset, log end offset)"
                ),
            ),
            LogError::RecordTooLarge { size, max } => ApiError::new(
                ErrorKind::MessageTooLarge,
                format!("the batch is {size} bytes, more than max.message.bytes={max}"),
            ),
            LogError::InvalidOffset(message) => ApiError::new(ErrorKind::OffsetOutOfRange, message),
            LogError::InvalidRecord(message) => ApiError::new(ErrorKind::InvalidRecord, message),
            LogError::Io(error) => ApiError::new(
                ErrorKind::KafkaStorageError,
                format!("log I/O error: {error}"),
            ),
            error @ LogError::Roll { .. } => {
                ApiError::new(ErrorKind::KafkaStorageError, error.to_string())
            }
            LogError::Corrupt(message) => ApiError::new(
                ErrorKind::KafkaStorageError,
                format!("corrupt log: {message}"),
            ),
            LogError::Deleted => ApiError::new(
                ErrorKind::UnknownTopicOrPartition,
                "the topic was deleted while the request was served",
            ),
        }
    }
}

impl From<AppendError> for ApiError {
    fn from(error: AppendError) -> ApiError {
        match error {
            AppendError::NotEnoughReplicas {
                isr_size,
                min_insync_replicas,
            } => ApiError::new(
                ErrorKind::NotEnoughReplicas,
                format!(
                    "the ISR has {isr_size} replica(s), fewer than min.insync.replicas={min_insync_replicas}; nothing was written"
                ),
            ),
            AppendError::Log(error) => error.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_response_has_kafka_name_status_and_extension() {
        let response = ApiError::unknown_topic("t0", Some(3)).into_response();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let name = response.extensions().get::<ErrorName>().unwrap().0;
        assert_eq!(name, "UNKNOWN_TOPIC_OR_PARTITION");
    }

    #[test]
    fn offset_out_of_range_maps_to_416() {
        let error = ApiError::from(LogError::OffsetOutOfRange {
            offset: 9,
            log_start_offset: 0,
            log_end_offset: 4,
        });
        assert_eq!(error.kind, ErrorKind::OffsetOutOfRange);
        assert_eq!(error.kind.status(), StatusCode::RANGE_NOT_SATISFIABLE);
        assert!(error.message.contains("offset 9"), "{}", error.message);
    }
}
