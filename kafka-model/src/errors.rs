//! Kafka's error codes by name: the names the broker answers with (in the HTTP API's JSON
//! error body and, as numbers, on its Kafka listener) and the names the workloads' clients
//! classify failures by (`fail` or `info`). Only the codes Tidewater answers or branches on are
//! here; the numbers are those of Kafka's protocol guide.

/// One of Kafka's error codes, named as Kafka names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// An unexpected state or a bug on the broker.
    UnknownServerError,
    /// The offset lies outside the partition's log (or is negative).
    OffsetOutOfRange,
    /// A produced batch whose size or CRC is wrong.
    CorruptMessage,
    /// The topic or partition does not exist (on this broker).
    UnknownTopicOrPartition,
    /// The partition has no leader at the moment.
    LeaderNotAvailable,
    /// The broker is not the partition's leader (or follower).
    NotLeaderOrFollower,
    /// The request did not complete in time (acks=all: the HW did not reach it).
    RequestTimedOut,
    /// The request or batch is larger than the broker accepts.
    MessageTooLarge,
    /// Commit metadata longer than `offset.metadata.max.bytes`.
    OffsetMetadataTooLarge,
    /// A broker-to-broker request got no answer (the connection failed or timed out).
    NetworkException,
    /// The coordinator is still loading the group's offsets.
    CoordinatorLoadInProgress,
    /// The group's offsets partition has no leader, or a store failed.
    CoordinatorNotAvailable,
    /// This broker does not coordinate the group.
    NotCoordinator,
    /// The topic name breaks Kafka's rule.
    InvalidTopicException,
    /// acks=all and the ISR is below `min.insync.replicas`: nothing was written.
    NotEnoughReplicas,
    /// acks=all, appended, then the ISR shrank below `min.insync.replicas`: indeterminate.
    NotEnoughReplicasAfterAppend,
    /// `acks` is not one Kafka knows.
    InvalidRequiredAcks,
    /// The request's generation is not the group's current one.
    IllegalGeneration,
    /// The member's protocol type or assignors do not fit the group's.
    InconsistentGroupProtocol,
    /// The group id is empty or too long.
    InvalidGroupId,
    /// The member id is not (or no longer) a member of the group.
    UnknownMemberId,
    /// The session timeout is outside the broker's range.
    InvalidSessionTimeout,
    /// The group is rebalancing: rejoin.
    RebalanceInProgress,
    /// A record timestamp too far from the broker's clock.
    InvalidTimestamp,
    /// An API, version or route the broker does not serve.
    UnsupportedVersion,
    /// A topic of that name exists already.
    TopicAlreadyExists,
    /// A partition count out of range.
    InvalidPartitions,
    /// A replication factor the cluster cannot satisfy.
    InvalidReplicationFactor,
    /// An unknown config name or an invalid value.
    InvalidConfig,
    /// A malformed request.
    InvalidRequest,
    /// An idempotent producer's batch does not continue its last sequence (or a new epoch
    /// does not start at 0).
    OutOfOrderSequenceNumber,
    /// An idempotent producer's batch carries an epoch older than its current one (fenced).
    InvalidProducerEpoch,
    /// A transaction request that the transaction's state does not allow (EndTxn without an
    /// ongoing transaction, a commit of an aborting one).
    InvalidTxnState,
    /// The producer id is not the one the coordinator holds for the transactional id.
    InvalidProducerIdMapping,
    /// A transaction timeout above `transaction.max.timeout.ms` (or not positive).
    InvalidTransactionTimeout,
    /// The producer's previous transaction is still being completed: retry.
    ConcurrentTransactions,
    /// Markers from a coordinator older than one the partition has seen.
    TransactionCoordinatorFenced,
    /// Transactional records without the transactional id they need (or not authorized).
    TransactionalIdAuthorizationFailed,
    /// Not attempted because another part of the same request failed.
    OperationNotAttempted,
    /// The log could not be read or written.
    KafkaStorageError,
    /// A commit's offset or metadata the coordinator cannot store (too large).
    InvalidCommitOffsetSize,
    /// A produce request's records are larger than the segment can hold.
    RecordListTooLarge,
    /// OffsetFetch with `require_stable`: the partition has offsets of a transaction not
    /// ended yet (KIP-447); retry.
    UnstableOffsetCommit,
    /// A fetch session the broker does not have (KIP-227).
    FetchSessionIdNotFound,
    /// The request's leader epoch is older than the partition's.
    FencedLeaderEpoch,
    /// The request's leader epoch is newer than the broker's.
    UnknownLeaderEpoch,
    /// A batch compressed with a codec the broker does not decode.
    UnsupportedCompressionType,
    /// A new leader's HW is not yet known to be current (KIP-207).
    OffsetNotAvailable,
    /// KIP-394: a new member's first JoinGroup (v4 and later) is answered with an id to
    /// join again with.
    MemberIdRequired,
    /// A newer producer with the same transactional id has fenced this one.
    ProducerFenced,
    /// A malformed record batch.
    InvalidRecord,
    /// The transaction cannot go on, but the producer may abort it and continue (KIP-890:
    /// the coordinator's answer when a partition leader verifies a partition the
    /// transaction does not hold).
    TransactionAbortable,
}

impl ErrorCode {
    /// Every code, in the order of their numbers.
    pub const ALL: [ErrorCode; 52] = [
        ErrorCode::UnknownServerError,
        ErrorCode::OffsetOutOfRange,
        ErrorCode::CorruptMessage,
        ErrorCode::UnknownTopicOrPartition,
        ErrorCode::LeaderNotAvailable,
        ErrorCode::NotLeaderOrFollower,
        ErrorCode::RequestTimedOut,
        ErrorCode::MessageTooLarge,
        ErrorCode::OffsetMetadataTooLarge,
        ErrorCode::NetworkException,
        ErrorCode::CoordinatorLoadInProgress,
        ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotCoordinator,
        ErrorCode::InvalidTopicException,
        ErrorCode::RecordListTooLarge,
        ErrorCode::NotEnoughReplicas,
        ErrorCode::NotEnoughReplicasAfterAppend,
        ErrorCode::InvalidRequiredAcks,
        ErrorCode::IllegalGeneration,
        ErrorCode::InconsistentGroupProtocol,
        ErrorCode::InvalidGroupId,
        ErrorCode::UnknownMemberId,
        ErrorCode::InvalidSessionTimeout,
        ErrorCode::RebalanceInProgress,
        ErrorCode::InvalidCommitOffsetSize,
        ErrorCode::InvalidTimestamp,
        ErrorCode::UnsupportedVersion,
        ErrorCode::TopicAlreadyExists,
        ErrorCode::InvalidPartitions,
        ErrorCode::InvalidReplicationFactor,
        ErrorCode::InvalidConfig,
        ErrorCode::InvalidRequest,
        ErrorCode::OutOfOrderSequenceNumber,
        ErrorCode::InvalidProducerEpoch,
        ErrorCode::InvalidTxnState,
        ErrorCode::InvalidProducerIdMapping,
        ErrorCode::InvalidTransactionTimeout,
        ErrorCode::ConcurrentTransactions,
        ErrorCode::TransactionCoordinatorFenced,
        ErrorCode::TransactionalIdAuthorizationFailed,
        ErrorCode::OperationNotAttempted,
        ErrorCode::KafkaStorageError,
        ErrorCode::FetchSessionIdNotFound,
        ErrorCode::FencedLeaderEpoch,
        ErrorCode::UnknownLeaderEpoch,
        ErrorCode::UnsupportedCompressionType,
        ErrorCode::OffsetNotAvailable,
        ErrorCode::MemberIdRequired,
        ErrorCode::InvalidRecord,
        ErrorCode::UnstableOffsetCommit,
        ErrorCode::ProducerFenced,
        ErrorCode::TransactionAbortable,
    ];

    /// Kafka's name of the code: `NOT_ENOUGH_REPLICAS`.
    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::UnknownServerError => "UNKNOWN_SERVER_ERROR",
            ErrorCode::OffsetOutOfRange => "OFFSET_OUT_OF_RANGE",
            ErrorCode::CorruptMessage => "CORRUPT_MESSAGE",
            ErrorCode::UnknownTopicOrPartition => "UNKNOWN_TOPIC_OR_PARTITION",
            ErrorCode::LeaderNotAvailable => "LEADER_NOT_AVAILABLE",
            ErrorCode::NotLeaderOrFollower => "NOT_LEADER_OR_FOLLOWER",
            ErrorCode::RequestTimedOut => "REQUEST_TIMED_OUT",
            ErrorCode::MessageTooLarge => "MESSAGE_TOO_LARGE",
            ErrorCode::OffsetMetadataTooLarge => "OFFSET_METADATA_TOO_LARGE",
            ErrorCode::NetworkException => "NETWORK_EXCEPTION",
            ErrorCode::CoordinatorLoadInProgress => "COORDINATOR_LOAD_IN_PROGRESS",
            ErrorCode::CoordinatorNotAvailable => "COORDINATOR_NOT_AVAILABLE",
            ErrorCode::NotCoordinator => "NOT_COORDINATOR",
            ErrorCode::InvalidTopicException => "INVALID_TOPIC_EXCEPTION",
            ErrorCode::NotEnoughReplicas => "NOT_ENOUGH_REPLICAS",
            ErrorCode::NotEnoughReplicasAfterAppend => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
            ErrorCode::InvalidRequiredAcks => "INVALID_REQUIRED_ACKS",
            ErrorCode::IllegalGeneration => "ILLEGAL_GENERATION",
            ErrorCode::InconsistentGroupProtocol => "INCONSISTENT_GROUP_PROTOCOL",
            ErrorCode::InvalidGroupId => "INVALID_GROUP_ID",
            ErrorCode::UnknownMemberId => "UNKNOWN_MEMBER_ID",
            ErrorCode::InvalidSessionTimeout => "INVALID_SESSION_TIMEOUT",
            ErrorCode::RebalanceInProgress => "REBALANCE_IN_PROGRESS",
            ErrorCode::InvalidTimestamp => "INVALID_TIMESTAMP",
            ErrorCode::UnsupportedVersion => "UNSUPPORTED_VERSION",
            ErrorCode::TopicAlreadyExists => "TOPIC_ALREADY_EXISTS",
            ErrorCode::InvalidPartitions => "INVALID_PARTITIONS",
            ErrorCode::InvalidReplicationFactor => "INVALID_REPLICATION_FACTOR",
            ErrorCode::InvalidConfig => "INVALID_CONFIG",
            ErrorCode::InvalidRequest => "INVALID_REQUEST",
            ErrorCode::OutOfOrderSequenceNumber => "OUT_OF_ORDER_SEQUENCE_NUMBER",
            ErrorCode::InvalidProducerEpoch => "INVALID_PRODUCER_EPOCH",
            ErrorCode::InvalidTxnState => "INVALID_TXN_STATE",
            ErrorCode::InvalidProducerIdMapping => "INVALID_PRODUCER_ID_MAPPING",
            ErrorCode::InvalidTransactionTimeout => "INVALID_TRANSACTION_TIMEOUT",
            ErrorCode::ConcurrentTransactions => "CONCURRENT_TRANSACTIONS",
            ErrorCode::TransactionCoordinatorFenced => "TRANSACTION_COORDINATOR_FENCED",
            ErrorCode::TransactionalIdAuthorizationFailed => {
                "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
            }
            ErrorCode::OperationNotAttempted => "OPERATION_NOT_ATTEMPTED",
            ErrorCode::KafkaStorageError => "KAFKA_STORAGE_ERROR",
            ErrorCode::InvalidCommitOffsetSize => "INVALID_COMMIT_OFFSET_SIZE",
            ErrorCode::RecordListTooLarge => "RECORD_LIST_TOO_LARGE",
            ErrorCode::UnstableOffsetCommit => "UNSTABLE_OFFSET_COMMIT",
            ErrorCode::FetchSessionIdNotFound => "FETCH_SESSION_ID_NOT_FOUND",
            ErrorCode::FencedLeaderEpoch => "FENCED_LEADER_EPOCH",
            ErrorCode::UnknownLeaderEpoch => "UNKNOWN_LEADER_EPOCH",
            ErrorCode::UnsupportedCompressionType => "UNSUPPORTED_COMPRESSION_TYPE",
            ErrorCode::OffsetNotAvailable => "OFFSET_NOT_AVAILABLE",
            ErrorCode::MemberIdRequired => "MEMBER_ID_REQUIRED",
            ErrorCode::ProducerFenced => "PRODUCER_FENCED",
            ErrorCode::InvalidRecord => "INVALID_RECORD",
            ErrorCode::TransactionAbortable => "TRANSACTION_ABORTABLE",
        }
    }

    /// Kafka's number of the code.
    pub const fn code(self) -> i16 {
        match self {
            ErrorCode::UnknownServerError => -1,
            ErrorCode::OffsetOutOfRange => 1,
            ErrorCode::CorruptMessage => 2,
            ErrorCode::UnknownTopicOrPartition => 3,
            ErrorCode::LeaderNotAvailable => 5,
            ErrorCode::NotLeaderOrFollower => 6,
            ErrorCode::RequestTimedOut => 7,
            ErrorCode::MessageTooLarge => 10,
            ErrorCode::OffsetMetadataTooLarge => 12,
            ErrorCode::NetworkException => 13,
            ErrorCode::CoordinatorLoadInProgress => 14,
            ErrorCode::CoordinatorNotAvailable => 15,
            ErrorCode::NotCoordinator => 16,
            ErrorCode::InvalidTopicException => 17,
            ErrorCode::NotEnoughReplicas => 19,
            ErrorCode::NotEnoughReplicasAfterAppend => 20,
            ErrorCode::InvalidRequiredAcks => 21,
            ErrorCode::IllegalGeneration => 22,
            ErrorCode::InconsistentGroupProtocol => 23,
            ErrorCode::InvalidGroupId => 24,
            ErrorCode::UnknownMemberId => 25,
            ErrorCode::InvalidSessionTimeout => 26,
            ErrorCode::RebalanceInProgress => 27,
            ErrorCode::InvalidTimestamp => 32,
            ErrorCode::UnsupportedVersion => 35,
            ErrorCode::TopicAlreadyExists => 36,
            ErrorCode::InvalidPartitions => 37,
            ErrorCode::InvalidReplicationFactor => 38,
            ErrorCode::InvalidConfig => 40,
            ErrorCode::InvalidRequest => 42,
            ErrorCode::OutOfOrderSequenceNumber => 45,
            ErrorCode::InvalidProducerEpoch => 47,
            ErrorCode::InvalidTxnState => 48,
            ErrorCode::InvalidProducerIdMapping => 49,
            ErrorCode::InvalidTransactionTimeout => 50,
            ErrorCode::ConcurrentTransactions => 51,
            ErrorCode::TransactionCoordinatorFenced => 52,
            ErrorCode::TransactionalIdAuthorizationFailed => 53,
            ErrorCode::OperationNotAttempted => 55,
            ErrorCode::KafkaStorageError => 56,
            ErrorCode::InvalidCommitOffsetSize => 28,
            ErrorCode::RecordListTooLarge => 18,
            ErrorCode::UnstableOffsetCommit => 88,
            ErrorCode::FetchSessionIdNotFound => 70,
            ErrorCode::FencedLeaderEpoch => 74,
            ErrorCode::UnknownLeaderEpoch => 75,
            ErrorCode::UnsupportedCompressionType => 76,
            ErrorCode::OffsetNotAvailable => 78,
            ErrorCode::MemberIdRequired => 79,
            ErrorCode::ProducerFenced => 90,
            ErrorCode::InvalidRecord => 87,
            ErrorCode::TransactionAbortable => 120,
        }
    }

    /// The code named `name`, if it is one of these.
    pub fn from_name(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|e| e.name() == name)
    }

    /// The code numbered `code`, if it is one of these.
    pub fn from_code(code: i16) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|e| e.code() == code)
    }

    /// Whether `name` names one of `codes`.
    pub fn named_in(name: &str, codes: &[ErrorCode]) -> bool {
        ErrorCode::from_name(name).is_some_and(|e| codes.contains(&e))
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Holds the table to the names and numbers the `kafka-protocol` crate carries.
    #[test]
    fn names_and_codes_match_kafkas() {
        use kafka_protocol::error::ResponseError;
        for e in ErrorCode::ALL {
            let theirs = ResponseError::try_from_code(e.code())
                .unwrap_or_else(|| panic!("{e} has no code {}", e.code()));
            let ours: String = e
                .name()
                .split('_')
                .map(|w| w[..1].to_string() + &w[1..].to_lowercase())
                .collect();
            assert_eq!(format!("{theirs:?}"), ours, "{e}");
        }
    }

    #[test]
    fn names_and_codes_are_unique_and_read_back() {
        for (i, e) in ErrorCode::ALL.into_iter().enumerate() {
            assert_eq!(ErrorCode::from_name(e.name()), Some(e));
            assert_eq!(ErrorCode::from_code(e.code()), Some(e));
            assert!(
                ErrorCode::ALL[..i].iter().all(|d| d.code() < e.code()),
                "{e} in order"
            );
        }
        assert_eq!(ErrorCode::from_name("SOMETHING_NEW"), None);
        assert!(ErrorCode::named_in(
            "NOT_COORDINATOR",
            &[ErrorCode::NotCoordinator]
        ));
        assert!(!ErrorCode::named_in(
            "NOT_COORDINATOR",
            &[ErrorCode::RebalanceInProgress]
        ));
    }
}
