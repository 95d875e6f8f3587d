//! The controller role (`tidewater-broker --role controller`): one process that owns the
//! cluster metadata (brokers, topics, replica assignment, leaders, leader epochs, ISRs) and
//! serves it under `/controller/v1/...`.
//!
//! # Layout
//! - `protocol`: request/response types shared with the brokers.
//! - `state`: the pure state machine (registration, fencing, elections, AlterPartition).
//! - `store`: atomic persistence of the state.
//! - this file: the HTTP routes, the session-expiry ticker and the entry point [`run`].
//!
//! Brokers learn changes through their heartbeat (every `broker.heartbeat.interval.ms`, 500 ms
//! here), whose answer carries the metadata whenever its version is newer than theirs, and
//! through the long-poll `GET /controller/v1/metadata?min_version=N&max_wait_ms=W`.

pub mod protocol;
pub mod state;
pub mod store;

use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use tokio::sync::watch;

use crate::clock::now_ms;

use protocol::{
    AlterPartitionRequest, ControllerError, CreateTopicRequest, HeartbeatRequest,
    HeartbeatResponse, RegisterBrokerRequest, RegisterBrokerResponse,
};
use state::{ControllerConfig, ControllerState};
use store::ControllerStore;

/// Longest wait a metadata long poll may ask for.
pub const METADATA_WAIT_MAX_MS: u64 = 30_000;

/// Largest request body the controller accepts (topic configs are small).
const REQUEST_BODY_MAX_BYTES: usize = 1 << 20;

/// Shared state of the controller's HTTP handlers.
struct Controller {
    /// The state machine; a std mutex because every operation is short and never awaits.
    state: Mutex<ControllerState>,
    /// Where every change is persisted before it is acknowledged.
    store: ControllerStore,
    /// Publishes the metadata version so long polls wake on changes.
    version_tx: watch::Sender<u64>,
}

impl Controller {
    /// Runs `op` on the state; if it changed the metadata version, persists the state and
    /// wakes the long polls before answering, so nothing acknowledged is lost on a crash.
    fn apply<T>(
        &self,
        op: impl FnOnce(&mut ControllerState, u64) -> Result<T, ControllerError>,
    ) -> Result<T, ApiError> {
        let mut state = self.state.lock().expect("controller state lock poisoned");
        let before = state.clone();
        let result = op(&mut state, now_ms());
        if state.metadata_version() != before.metadata_version() {
            if let Err(e) = self.store.save(state.snapshot()) {
                // Not persisted means not done: roll back so memory matches disk.
                *state = before;
                return Err(ApiError::Storage(e.to_string()));
            }
            self.version_tx.send_replace(state.metadata_version());
        }
        result.map_err(ApiError::Controller)
    }
}

/// Errors of the controller's routes, in the JSON error shape of the whole API.
enum ApiError {
    Controller(ControllerError),
    BadRequest(String),
    /// The body is over [`REQUEST_BODY_MAX_BYTES`] (413, as on the brokers).
    TooLarge(String),
    Storage(String),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, error, message) = match self {
            ApiError::Controller(e) => (e.error.http_status(), e.error.name(), e.message),
            ApiError::BadRequest(m) => (400, "INVALID_REQUEST", m),
            ApiError::TooLarge(m) => (413, "MESSAGE_TOO_LARGE", m),
            ApiError::Storage(m) => (500, "KAFKA_STORAGE_ERROR", m),
        };
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (
            status,
            Json(serde_json::json!({ "error": error, "message": message })),
        )
            .into_response()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            return ApiError::TooLarge(format!("request body over {REQUEST_BODY_MAX_BYTES} bytes"));
        }
        ApiError::BadRequest(rejection.body_text())
    }
}

/// Opens (or recovers) the controller state in `data_dir` and serves it on `listener` until
/// `shutdown` completes.
pub async fn run(
    listener: tokio::net::TcpListener,
    config: ControllerConfig,
    limits: crate::http::ConnectionLimits,
    data_dir: &Path,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let store = ControllerStore::open(data_dir)?;
    let state = match store.load()? {
        Some(snapshot) => {
            tracing::info!(
                version = snapshot.metadata_version,
                "controller state recovered"
            );
            ControllerState::from_snapshot(config.clone(), snapshot, now_ms())
        }
        None => ControllerState::new(config.clone()),
    };
    let (version_tx, _) = watch::channel(state.metadata_version());
    let controller = Arc::new(Controller {
        state: Mutex::new(state),
        store,
        version_tx,
    });
    let ticker = tokio::spawn(expire_sessions_forever(
        controller.clone(),
        config.session_timeout_ms,
    ));
    crate::http::serve(listener, router(controller), limits, shutdown).await;
    ticker.abort();
    Ok(())
}

/// The controller's routes.
fn router(controller: Arc<Controller>) -> Router {
    Router::new()
        .route("/controller/v1/brokers/register", post(register))
        .route("/controller/v1/brokers/heartbeat", post(heartbeat))
        .route("/controller/v1/alter-partition", post(alter_partition))
        .route(
            "/controller/v1/allocate-producer-ids",
            post(allocate_producer_ids),
        )
        .route("/controller/v1/topics", post(create_topic))
        .route("/controller/v1/topics/{topic}", delete(delete_topic))
        .route("/controller/v1/metadata", get(metadata))
        .route("/v1/metadata", get(metadata))
        .route(
            "/v1/ping",
            get(|| async { Json(serde_json::json!({"ok": true})) }),
        )
        .fallback(|| async { ApiError::BadRequest("no such route".into()) })
        .layer(axum::extract::DefaultBodyLimit::max(REQUEST_BODY_MAX_BYTES))
        .with_state(controller)
}

/// Fences brokers whose session expired, checking often enough (a tenth of the timeout, at
/// most every 100 ms) that fencing happens within about 10% of `broker.session.timeout.ms`.
async fn expire_sessions_forever(controller: Arc<Controller>, session_timeout_ms: u64) {
    let period_ms = (session_timeout_ms / 10).clamp(10, 100);
    // A gap this long between two checks means this process itself did not run (SIGSTOP, a
    // stalled machine): the brokers' heartbeats were not missing, they were not read. The gap
    // is measured with the same clock reading the expiry uses, so a pause at any point cannot
    // fence brokers for heartbeats the controller could not process.
    let stall_ms = period_ms + session_timeout_ms / 2;
    let mut interval = tokio::time::interval(Duration::from_millis(period_ms));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_check_ms = now_ms();
    loop {
        interval.tick().await;
        let result = controller.apply(|state, now| {
            let stalled = now.saturating_sub(last_check_ms) > stall_ms;
            last_check_ms = now;
            if stalled {
                tracing::warn!(
                    "controller was stalled; restarting every broker session instead of fencing"
                );
                state.restart_sessions(now);
                return Ok(());
            }
            let fenced = state.expire_sessions(now);
            if !fenced.is_empty() {
                tracing::warn!(?fenced, "broker sessions expired; brokers fenced");
            }
            state.elect_offline();
            Ok(())
        });
        if let Err(ApiError::Storage(e)) = result {
            tracing::error!(error = %e, "could not persist controller state");
        }
    }
}

async fn register(
    State(c): State<Arc<Controller>>,
    request: Result<Json<RegisterBrokerRequest>, JsonRejection>,
) -> Result<Json<RegisterBrokerResponse>, ApiError> {
    let Json(request) = request?;
    crate::config::check_node_url(&request.address).map_err(|why| {
        ApiError::Controller(ControllerError::new(
            protocol::ControllerErrorCode::InvalidRequest,
            format!("broker address: {why}"),
        ))
    })?;
    if let Some(kafka_address) = &request.kafka_address {
        crate::config::check_node_url(&format!("http://{kafka_address}")).map_err(|why| {
            ApiError::Controller(ControllerError::new(
                protocol::ControllerErrorCode::InvalidRequest,
                format!("broker Kafka address: {why}"),
            ))
        })?;
    }
    let response = c.apply(|state, now| {
        let broker_epoch = state.register_broker(
            request.broker_id,
            &request.address,
            request.previous_broker_epoch,
            now,
        );
        state.set_kafka_address(request.broker_id, request.kafka_address.clone());
        Ok(RegisterBrokerResponse {
            broker_epoch,
            metadata: state.metadata(),
        })
    })?;
    tracing::info!(
        broker = request.broker_id,
        epoch = response.broker_epoch,
        previous_epoch = ?request.previous_broker_epoch,
        "broker registered"
    );
    Ok(Json(response))
}

async fn heartbeat(
    State(c): State<Arc<Controller>>,
    request: Result<Json<HeartbeatRequest>, JsonRejection>,
) -> Result<Json<HeartbeatResponse>, ApiError> {
    let Json(request) = request?;
    let response = c.apply(|state, now| {
        state.heartbeat(request.broker_id, request.broker_epoch, now)?;
        let metadata_version = state.metadata_version();
        let metadata = (metadata_version != request.metadata_version).then(|| state.metadata());
        Ok(HeartbeatResponse {
            metadata_version,
            metadata,
        })
    })?;
    Ok(Json(response))
}

async fn alter_partition(
    State(c): State<Arc<Controller>>,
    request: Result<Json<AlterPartitionRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = request?;
    let partition = c.apply(|state, _| state.alter_partition(&request))?;
    tracing::info!(
        topic = %request.topic, partition = request.partition, isr = ?partition.isr,
        partition_epoch = partition.partition_epoch, "ISR changed"
    );
    Ok(Json(partition).into_response())
}

async fn allocate_producer_ids(
    State(c): State<Arc<Controller>>,
    request: Result<Json<protocol::AllocateProducerIdsRequest>, JsonRejection>,
) -> Result<Json<protocol::ProducerIdBlock>, ApiError> {
    let Json(request) = request?;
    let block =
        c.apply(|state, _| state.allocate_producer_ids(request.broker_id, request.broker_epoch))?;
    tracing::info!(
        broker = request.broker_id,
        first = block.first_producer_id,
        size = block.size,
        "producer id block allocated"
    );
    Ok(Json(block))
}

async fn create_topic(
    State(c): State<Arc<Controller>>,
    request: Result<Json<CreateTopicRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = request?;
    let topic = c.apply(|state, _| state.create_topic(&request))?;
    Ok((StatusCode::CREATED, Json(topic)).into_response())
}

async fn delete_topic(
    State(c): State<Arc<Controller>>,
    UrlPath(topic): UrlPath<String>,
) -> Result<Response, ApiError> {
    c.apply(|state, _| state.delete_topic(&topic))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Query of the metadata long poll.
#[derive(Deserialize)]
struct MetadataQuery {
    /// Answer once the version is at least this (immediately when absent).
    min_version: Option<u64>,
    /// Longest wait, capped at [`METADATA_WAIT_MAX_MS`].
    max_wait_ms: Option<u64>,
}

async fn metadata(
    State(c): State<Arc<Controller>>,
    query: Result<Query<MetadataQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    if let Some(min_version) = query.min_version {
        let wait = Duration::from_millis(query.max_wait_ms.unwrap_or(0).min(METADATA_WAIT_MAX_MS));
        let mut rx = c.version_tx.subscribe();
        // Times out quietly: the caller gets the current (older) metadata and asks again.
        let _ = tokio::time::timeout(wait, rx.wait_for(|&v| v >= min_version)).await;
    }
    let metadata = c
        .state
        .lock()
        .expect("controller state lock poisoned")
        .metadata();
    Ok(Json(metadata).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::ControllerErrorCode;

    #[test]
    fn api_error_uses_kafka_names_and_statuses() {
        let err = ApiError::Controller(ControllerError::new(
            ControllerErrorCode::FencedLeaderEpoch,
            "x",
        ));
        assert_eq!(err.into_response().status(), StatusCode::CONFLICT);
        let err = ApiError::BadRequest("bad".into());
        assert_eq!(err.into_response().status(), StatusCode::BAD_REQUEST);
    }
}
