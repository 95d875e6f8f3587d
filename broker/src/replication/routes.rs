//! The broker-to-broker routes under `/internal/v1/...` (see `protocol` for the shapes).

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use super::manager::{InternalError, ReplicaManager};
use super::protocol::{
    OffsetsForLeaderEpochRequest, ReplicaFetchOffsets, ReplicaFetchRequest, HEADER_HIGH_WATERMARK,
    HEADER_LEADER_EPOCH, HEADER_LOG_END_OFFSET, HEADER_LOG_START_OFFSET,
};

/// The internal routes, to be merged into the broker's router.
pub fn router(manager: Arc<ReplicaManager>) -> Router {
    Router::new()
        .route("/internal/v1/replica-fetch", post(replica_fetch))
        .route(
            "/internal/v1/offsets-for-leader-epoch",
            post(offsets_for_leader_epoch),
        )
        .route("/internal/v1/log", get(local_log))
        .with_state(manager)
}

impl IntoResponse for InternalError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
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

/// Query of the diagnostic log read.
#[derive(serde::Deserialize)]
struct LocalLogQuery {
    topic: String,
    partition: u32,
    #[serde(default)]
    offset: u64,
    /// Defaults to 1 MiB, capped at 16 MiB.
    max_bytes: Option<usize>,
}

/// `GET /internal/v1/log?topic=T&partition=P&offset=N`: a local replica's records, any role.
async fn local_log(
    State(manager): State<Arc<ReplicaManager>>,
    query: Result<Query<LocalLogQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, InternalError> {
    let Query(query) = query.map_err(|e| InternalError {
        name: "INVALID_REQUEST",
        message: e.body_text(),
        offsets: None,
    })?;
    let max_bytes = query.max_bytes.unwrap_or(1 << 20).min(16 << 20);
    Ok(
        Json(manager.read_local_log(&query.topic, query.partition, query.offset, max_bytes)?)
            .into_response(),
    )
}
