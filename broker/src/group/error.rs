//! Errors of the group operations, with Kafka's names. They are encoded as every other error
//! is (over HTTP the JSON shape `{"error": "NAME", "message": "..."}`, [`crate::http::errors`];
//! over Kafka's protocol its codes) but have their own kinds, as only the group API can answer
//! them.

use tidewater_kafka_model::ErrorCode;

use crate::error::ApiError;

/// A group error kind, named as Kafka names the error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupErrorKind {
    /// The member id is not (or no longer) a member of the group: rejoin without an id.
    UnknownMemberId,
    /// The request's generation is not the group's current one: rejoin.
    IllegalGeneration,
    /// A rebalance is running: rejoin (heartbeat) or retry after it (commit, sync).
    RebalanceInProgress,
    /// The member's assignors share none with the group's members.
    InconsistentGroupProtocol,
    /// `session_timeout_ms` outside the broker's allowed range.
    InvalidSessionTimeout,
    /// The group id is empty or too long.
    InvalidGroupId,
    /// This broker does not lead the group's `__consumer_offsets` partition.
    NotCoordinator,
    /// The coordinator is still loading the group's offsets partition.
    CoordinatorLoadInProgress,
    /// The offsets partition has no leader, or an append to it failed.
    CoordinatorNotAvailable,
    /// Commit metadata longer than `offset.metadata.max.bytes`.
    OffsetMetadataTooLarge,
}

impl GroupErrorKind {
    /// Kafka's error code of this kind (its name and its number), from the shared model.
    pub fn kafka(self) -> ErrorCode {
        match self {
            Self::UnknownMemberId => ErrorCode::UnknownMemberId,
            Self::IllegalGeneration => ErrorCode::IllegalGeneration,
            Self::RebalanceInProgress => ErrorCode::RebalanceInProgress,
            Self::InconsistentGroupProtocol => ErrorCode::InconsistentGroupProtocol,
            Self::InvalidSessionTimeout => ErrorCode::InvalidSessionTimeout,
            Self::InvalidGroupId => ErrorCode::InvalidGroupId,
            Self::NotCoordinator => ErrorCode::NotCoordinator,
            Self::CoordinatorLoadInProgress => ErrorCode::CoordinatorLoadInProgress,
            Self::CoordinatorNotAvailable => ErrorCode::CoordinatorNotAvailable,
            Self::OffsetMetadataTooLarge => ErrorCode::OffsetMetadataTooLarge,
        }
    }

    /// Kafka's name of the error.
    pub fn name(self) -> &'static str {
        self.kafka().name()
    }
}

/// A failed group request: a group kind, or one of the broker's general errors (bad input,
/// storage failures of the offsets topic).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// A group-specific error.
    #[error("{}: {message}", kind.name())]
    Group {
        /// Which error.
        kind: GroupErrorKind,
        /// What happened, for people.
        message: String,
    },
    /// A general API error.
    #[error(transparent)]
    Api(#[from] ApiError),
}

impl GroupError {
    /// A group error of `kind`.
    pub fn new(kind: GroupErrorKind, message: impl Into<String>) -> GroupError {
        GroupError::Group {
            kind,
            message: message.into(),
        }
    }

    /// Kafka's name of the error.
    pub fn name(&self) -> &'static str {
        match self {
            GroupError::Group { kind, .. } => kind.name(),
            GroupError::Api(error) => error.kind.name(),
        }
    }

    /// The group kind, if it is one.
    pub fn kind(&self) -> Option<GroupErrorKind> {
        match self {
            GroupError::Group { kind, .. } => Some(*kind),
            GroupError::Api(_) => None,
        }
    }
}
