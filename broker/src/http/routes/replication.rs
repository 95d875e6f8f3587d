//! The broker-to-broker routes under `/internal/v1/...` (the shapes are
//! [`crate::replication::protocol`]'s), served by the leader side of
//! [`crate::replication::fetch_serving`].

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};

use crate::ops::txn_markers::{write_markers, MarkersAnswer, TxnMarker};
use crate::ops::txn_verify::{self, VerifyRequest};
use crate::replication::fetch_serving::InternalError;
use crate::replication::protocol::{
    OffsetsForLeaderEpochRequest, ReplicaFetchOffsets, ReplicaFetchRequest, HEADER_HIGH_WATERMARK,
    HEADER_LEADER_EPOCH, HEADER_LOG_END_OFFSET, HEADER_LOG_START_OFFSET,
};
use crate::replication::ReplicaManager;

/// The internal routes, to be merged into the broker's router.
pub fn router(manager: Arc<ReplicaManager>) -> Router {
    Router::new()
        .route("/internal/v1/replica-fetch", post(replica_fetch))
        .route(
            "/internal/v1/offsets-for-leader-epoch",
            post(offsets_for_leader_epoch),
        )
        .with_state(manager)
}

/// The transaction coordinator's route to partition leaders: `POST /internal/v1/txn-markers`
/// with a [`TxnMarker`], answered with a [`MarkersAnswer`] (one outcome per partition).
pub fn marker_router(broker: Arc<crate::broker::Broker>) -> Router {
    Router::new()
        .route("/internal/v1/txn-markers", post(txn_markers))
        .with_state(broker)
}

/// A partition leader's route to the transaction coordinator (KIP-890 part 1): `POST
/// /internal/v1/txn-verify` with a [`VerifyRequest`], answered with a [`VerifyAnswer`].
pub fn verify_router(transactions: Arc<crate::txn::TransactionCoordinator>) -> Router {
    Router::new()
        .route("/internal/v1/txn-verify", post(txn_verify))
        .with_state(transactions)
}

async fn txn_verify(
    State(transactions): State<Arc<crate::txn::TransactionCoordinator>>,
    body: Result<Json<VerifyRequest>, JsonRejection>,
) -> Response {
    match body {
        Ok(Json(request)) => Json(txn_verify::answer(&transactions, request).await).into_response(),
        Err(rejection) => bad_json(rejection).into_response(),
    }
}

async fn txn_markers(
    State(broker): State<Arc<crate::broker::Broker>>,
    body: Result<Json<TxnMarker>, JsonRejection>,
) -> Response {
    match body {
        Ok(Json(marker)) => {
            let results = write_markers(&broker, marker).await;
            Json(MarkersAnswer::of(results)).into_response()
        }
        Err(rejection) => bad_json(rejection).into_response(),
    }
}

/// The HTTP status of an internal error, by its Kafka name.
fn status(error: &InternalError) -> u16 {
    match error.name {
        "UNKNOWN_TOPIC_OR_PARTITION" => 404,
        "NOT_LEADER_OR_FOLLOWER" => 421,
        "FENCED_LEADER_EPOCH" | "UNKNOWN_LEADER_EPOCH" => 409,
        "OFFSET_OUT_OF_RANGE" => 416,
        "INVALID_REQUEST" => 400,
        _ => 500,
    }
}

impl IntoResponse for InternalError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(status(&self)).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = Json(serde_json::json!({ "error": self.name, "message": self.message }));
        let mut response = (status, body).into_response();
        if let Some(offsets) = self.offsets {
            add_offset_headers(&mut response, &offsets);
        }
        response
    }
}

fn bad_json(rejection: JsonRejection) -> InternalError {
    InternalError {
        name: "INVALID_REQUEST",
        message: rejection.body_text(),
        offsets: None,
    }
}

fn add_offset_headers(response: &mut Response, offsets: &ReplicaFetchOffsets) {
    let headers = response.headers_mut();
    let pairs = [
        (HEADER_HIGH_WATERMARK, offsets.high_watermark),
        (HEADER_LOG_START_OFFSET, offsets.log_start_offset),
        (HEADER_LOG_END_OFFSET, offsets.log_end_offset),
        (HEADER_LEADER_EPOCH, u64::from(offsets.leader_epoch)),
    ];
    for (name, value) in pairs {
        headers.insert(name, HeaderValue::from(value));
    }
}

async fn replica_fetch(
    State(manager): State<Arc<ReplicaManager>>,
    request: Result<Json<ReplicaFetchRequest>, JsonRejection>,
) -> Result<Response, InternalError> {
    let Json(request) = request.map_err(bad_json)?;
    let (offsets, body) = manager.handle_replica_fetch(&request).await?;
    let mut response = (
        [(axum::http::header::CONTENT_TYPE, "application/octet-stream")],
        body,
    )
        .into_response();
    add_offset_headers(&mut response, &offsets);
    Ok(response)
}

async fn offsets_for_leader_epoch(
    State(manager): State<Arc<ReplicaManager>>,
    request: Result<Json<OffsetsForLeaderEpochRequest>, JsonRejection>,
) -> Result<Response, InternalError> {
    let Json(request) = request.map_err(bad_json)?;
    Ok(Json(manager.offsets_for_leader_epoch(&request)?).into_response())
}
