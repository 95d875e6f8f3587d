//! Errors of the group routes, with Kafka's names. They share the JSON shape of every other
//! error (`{"error": "NAME", "message": "..."}`, see `crate::error`) but have their own kinds,
//! as only the group API can answer them.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, ErrorName};

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
    /// Kafka's name of the error.
    pub fn name(self) -> &'static str {
        match self {
            Self::UnknownMemberId => "UNKNOWN_MEMBER_ID",
            Self::IllegalGeneration => "ILLEGAL_GENERATION",
            Self::RebalanceInProgress => "REBALANCE_IN_PROGRESS",
            Self::InconsistentGroupProtocol => "INCONSISTENT_GROUP_PROTOCOL",
            Self::InvalidSessionTimeout => "INVALID_SESSION_TIMEOUT",
            Self::InvalidGroupId => "INVALID_GROUP_ID",
            Self::NotCoordinator => "NOT_COORDINATOR",
            Self::CoordinatorLoadInProgress => "COORDINATOR_LOAD_IN_PROGRESS",
            Self::CoordinatorNotAvailable => "COORDINATOR_NOT_AVAILABLE",
            Self::OffsetMetadataTooLarge => "OFFSET_METADATA_TOO_LARGE",
        }
    }

    /// The HTTP status it is answered with.
    pub fn status(self) -> StatusCode {
        match self {
            Self::UnknownMemberId | Self::IllegalGeneration | Self::RebalanceInProgress => {
                StatusCode::CONFLICT
            }
            Self::InconsistentGroupProtocol
            | Self::InvalidSessionTimeout
            | Self::InvalidGroupId
            | Self::OffsetMetadataTooLarge => StatusCode::BAD_REQUEST,
            Self::NotCoordinator => StatusCode::MISDIRECTED_REQUEST,
            Self::CoordinatorLoadInProgress | Self::CoordinatorNotAvailable => {
                StatusCode::SERVICE_UNAVAILABLE
            }
        }
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

impl IntoResponse for GroupError {
    fn into_response(self) -> Response {
        let (kind, message) = match self {
            GroupError::Api(error) => return error.into_response(),
            GroupError::Group { kind, message } => (kind, message),
        };
        let body = serde_json::json!({ "error": kind.name(), "message": message });
        let mut response = (kind.status(), axum::Json(body)).into_response();
        response.extensions_mut().insert(ErrorName(kind.name()));
        response
    }
}
