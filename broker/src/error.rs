//! Errors of the broker's operations: Kafka's error names ([`ErrorKind`]) and the failed
//! request ([`ApiError`]) every operation refuses with, whichever front door asked. Each front
//! door encodes them its own way: the HTTP routes as one status per kind and the JSON body
//! `{"error": "NAME", "message": "..."}` ([`crate::http::errors`]), the Kafka listener as
//! Kafka's error codes ([`crate::kafka::errors`]).

use tidewater_kafka_model::ErrorCode;

use crate::partition::AppendError;
use crate::storage::producer_state::ProducerError;
use crate::storage::LogError;

/// The cause of a failed request, named as Kafka names its error codes.
///
/// Callers branch on the kind (the harness decides `fail` vs `info` from it), so every kind keeps
/// one name (and one HTTP status, [`crate::http::errors::status`]); `docs/api.md` lists them.
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
    /// An idempotent producer's batch does not continue its last sequence, or a new producer
    /// epoch does not start at sequence 0: nothing was written.
    OutOfOrderSequenceNumber,
    /// An idempotent producer's batch carries an epoch below its current one (a fenced
    /// producer): nothing was written.
    InvalidProducerEpoch,
    /// A producer with a transaction open in the partition sent a batch outside it (Kafka's
    /// INVALID_TXN_STATE from `ProducerAppendInfo`): nothing was written.
    InvalidTxnState,
    /// A transaction marker from a coordinator older than the last one to end the producer's
    /// transactions here (Kafka's TRANSACTION_COORDINATOR_FENCED from
    /// `ProducerAppendInfo.appendEndTxnMarker`): nothing was written.
    TransactionCoordinatorFenced,
}

impl ErrorKind {
    /// Kafka's error code of this kind (its name and its number), from the shared model.
    pub fn kafka(self) -> ErrorCode {
        match self {
            Self::UnknownTopicOrPartition => ErrorCode::UnknownTopicOrPartition,
            Self::InvalidTopicException => ErrorCode::InvalidTopicException,
            Self::InvalidRequest => ErrorCode::InvalidRequest,
            Self::InvalidRequiredAcks => ErrorCode::InvalidRequiredAcks,
            Self::InvalidRecord => ErrorCode::InvalidRecord,
            Self::InvalidTimestamp => ErrorCode::InvalidTimestamp,
            Self::InvalidPartitions => ErrorCode::InvalidPartitions,
            Self::InvalidReplicationFactor => ErrorCode::InvalidReplicationFactor,
            Self::InvalidConfig => ErrorCode::InvalidConfig,
            Self::MessageTooLarge => ErrorCode::MessageTooLarge,
            Self::OffsetOutOfRange => ErrorCode::OffsetOutOfRange,
            Self::TopicAlreadyExists => ErrorCode::TopicAlreadyExists,
            Self::NotLeaderOrFollower => ErrorCode::NotLeaderOrFollower,
            Self::FencedLeaderEpoch => ErrorCode::FencedLeaderEpoch,
            Self::UnknownLeaderEpoch => ErrorCode::UnknownLeaderEpoch,
            Self::NotEnoughReplicas => ErrorCode::NotEnoughReplicas,
            Self::NotEnoughReplicasAfterAppend => ErrorCode::NotEnoughReplicasAfterAppend,
            Self::RequestTimedOut => ErrorCode::RequestTimedOut,
            Self::OffsetNotAvailable => ErrorCode::OffsetNotAvailable,
            Self::LeaderNotAvailable => ErrorCode::LeaderNotAvailable,
            Self::KafkaStorageError => ErrorCode::KafkaStorageError,
            Self::UnsupportedVersion => ErrorCode::UnsupportedVersion,
            Self::UnknownServerError => ErrorCode::UnknownServerError,
            Self::OutOfOrderSequenceNumber => ErrorCode::OutOfOrderSequenceNumber,
            Self::InvalidProducerEpoch => ErrorCode::InvalidProducerEpoch,
            Self::InvalidTxnState => ErrorCode::InvalidTxnState,
            Self::TransactionCoordinatorFenced => ErrorCode::TransactionCoordinatorFenced,
        }
    }

    /// Kafka's name of the error, as it appears in the `error` field.
    pub fn name(self) -> &'static str {
        self.kafka().name()
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
            LogError::Producer(error) => {
                let kind = match error {
                    ProducerError::InvalidProducerEpoch { .. } => ErrorKind::InvalidProducerEpoch,
                    ProducerError::OutsideTransaction { .. }
                    | ProducerError::NotVerified { .. } => ErrorKind::InvalidTxnState,
                    ProducerError::OutOfOrderSequence { .. } => ErrorKind::OutOfOrderSequenceNumber,
                    ProducerError::CoordinatorFenced { .. } => {
                        ErrorKind::TransactionCoordinatorFenced
                    }
                };
                ApiError::new(kind, error.to_string())
            }
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
