//! The broker's errors as HTTP answers: one status per Kafka error name ([`status`],
//! [`group_status`]) and the JSON body `{"error": "NAME", "message": "..."}` every failed
//! request answers with.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::error::{ApiError, ErrorKind};
use crate::group::{GroupError, GroupErrorKind};

/// The HTTP status an error of `kind` is answered with.
pub fn status(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::UnknownTopicOrPartition | ErrorKind::UnsupportedVersion => StatusCode::NOT_FOUND,
        ErrorKind::InvalidTopicException
        | ErrorKind::InvalidRequest
        | ErrorKind::InvalidRequiredAcks
        | ErrorKind::InvalidRecord
        | ErrorKind::InvalidTimestamp
        | ErrorKind::InvalidPartitions
        | ErrorKind::InvalidReplicationFactor
        | ErrorKind::InvalidConfig
        | ErrorKind::OutOfOrderSequenceNumber => StatusCode::BAD_REQUEST,
        ErrorKind::MessageTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::OffsetOutOfRange => StatusCode::RANGE_NOT_SATISFIABLE,
        ErrorKind::TopicAlreadyExists
        | ErrorKind::FencedLeaderEpoch
        | ErrorKind::UnknownLeaderEpoch
        | ErrorKind::InvalidProducerEpoch
        | ErrorKind::InvalidTxnState
        | ErrorKind::TransactionCoordinatorFenced => StatusCode::CONFLICT,
        ErrorKind::NotLeaderOrFollower => StatusCode::MISDIRECTED_REQUEST,
        ErrorKind::NotEnoughReplicas
        | ErrorKind::NotEnoughReplicasAfterAppend
        | ErrorKind::OffsetNotAvailable
        | ErrorKind::LeaderNotAvailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::RequestTimedOut => StatusCode::GATEWAY_TIMEOUT,
        ErrorKind::KafkaStorageError | ErrorKind::UnknownServerError => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

/// The HTTP status a group error of `kind` is answered with.
pub fn group_status(kind: GroupErrorKind) -> StatusCode {
    match kind {
        GroupErrorKind::UnknownMemberId
        | GroupErrorKind::IllegalGeneration
        | GroupErrorKind::RebalanceInProgress => StatusCode::CONFLICT,
        GroupErrorKind::InconsistentGroupProtocol
        | GroupErrorKind::InvalidSessionTimeout
        | GroupErrorKind::InvalidGroupId
        | GroupErrorKind::OffsetMetadataTooLarge => StatusCode::BAD_REQUEST,
        GroupErrorKind::NotCoordinator => StatusCode::MISDIRECTED_REQUEST,
        GroupErrorKind::CoordinatorLoadInProgress | GroupErrorKind::CoordinatorNotAvailable => {
            StatusCode::SERVICE_UNAVAILABLE
        }
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
        let mut response = (status(self.kind), axum::Json(body)).into_response();
        response
            .extensions_mut()
            .insert(ErrorName(self.kind.name()));
        response
    }
}

impl IntoResponse for GroupError {
    fn into_response(self) -> Response {
        let (kind, message) = match self {
            GroupError::Api(error) => return error.into_response(),
            GroupError::Group { kind, message } => (kind, message),
        };
        let body = serde_json::json!({ "error": kind.name(), "message": message });
        let mut response = (group_status(kind), axum::Json(body)).into_response();
        response.extensions_mut().insert(ErrorName(kind.name()));
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::LogError;

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
        assert_eq!(status(error.kind), StatusCode::RANGE_NOT_SATISFIABLE);
        assert!(error.message.contains("offset 9"), "{}", error.message);
    }
}
