//! The broker's errors as Kafka error codes (the protocol guide's table). Names and numbers
//! both come from the shared model's [`ErrorCode`] ([`ErrorKind::kafka`],
//! [`GroupErrorKind::kafka`]); this gives the numbers the listener answers with.

use tidewater_kafka_model::ErrorCode;

use crate::error::{ApiError, ErrorKind};
use crate::group::error::{GroupError, GroupErrorKind};

/// Kafka's code for `kind`.
pub fn code(kind: ErrorKind) -> i16 {
    kind.kafka().code()
}

/// Kafka's code for a group error.
pub fn group_code(kind: GroupErrorKind) -> i16 {
    kind.kafka().code()
}

/// The code and message of an API error.
pub fn of(error: &ApiError) -> (i16, String) {
    (code(error.kind), error.message.clone())
}

/// The code and message of a group error.
pub fn of_group(error: &GroupError) -> (i16, String) {
    match error {
        GroupError::Group { kind, message } => (group_code(*kind), message.clone()),
        GroupError::Api(error) => of(error),
    }
}

/// UNSUPPORTED_COMPRESSION_TYPE, for lz4 and zstd batches (this build decodes none and gzip
/// and snappy).
pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = ErrorCode::UnsupportedCompressionType.code();
/// FETCH_SESSION_ID_NOT_FOUND: this broker creates no fetch sessions (KIP-227).
pub const FETCH_SESSION_ID_NOT_FOUND: i16 = ErrorCode::FetchSessionIdNotFound.code();
/// CORRUPT_MESSAGE, for a produced batch whose size or CRC is wrong (Kafka's
/// `CorruptRecordException`); nothing outside the Kafka listener sees raw batches.
pub const CORRUPT_MESSAGE: i16 = ErrorCode::CorruptMessage.code();

#[cfg(test)]
mod tests {
    use super::*;

    /// Holds the table to the codes the `kafka-protocol` crate carries for the same names.
    #[test]
    fn codes_match_kafkas_names() {
        use kafka_protocol::error::ResponseError;
        let kinds = [
            ErrorKind::UnknownServerError,
            ErrorKind::OffsetOutOfRange,
            ErrorKind::UnknownTopicOrPartition,
            ErrorKind::LeaderNotAvailable,
            ErrorKind::NotLeaderOrFollower,
            ErrorKind::RequestTimedOut,
            ErrorKind::MessageTooLarge,
            ErrorKind::InvalidTopicException,
            ErrorKind::NotEnoughReplicas,
            ErrorKind::NotEnoughReplicasAfterAppend,
            ErrorKind::InvalidRequiredAcks,
            ErrorKind::InvalidTimestamp,
            ErrorKind::UnsupportedVersion,
            ErrorKind::TopicAlreadyExists,
            ErrorKind::InvalidPartitions,
            ErrorKind::InvalidReplicationFactor,
            ErrorKind::InvalidConfig,
            ErrorKind::InvalidRequest,
            ErrorKind::KafkaStorageError,
            ErrorKind::FencedLeaderEpoch,
            ErrorKind::UnknownLeaderEpoch,
            ErrorKind::OffsetNotAvailable,
            ErrorKind::InvalidRecord,
            ErrorKind::OutOfOrderSequenceNumber,
            ErrorKind::InvalidProducerEpoch,
            ErrorKind::InvalidTxnState,
        ];
        for kind in kinds {
            let theirs = ResponseError::try_from_code(code(kind))
                .unwrap_or_else(|| panic!("{} has no code {}", kind.name(), code(kind)));
            let their_name = format!("{theirs:?}");
            let ours: String = kind
                .name()
                .split('_')
                .map(|w| w[..1].to_string() + &w[1..].to_lowercase())
                .collect();
            assert_eq!(their_name, ours, "{}", kind.name());
        }
        let corrupt = ResponseError::try_from_code(CORRUPT_MESSAGE).unwrap();
        assert_eq!(format!("{corrupt:?}"), "CorruptMessage");
    }
}
