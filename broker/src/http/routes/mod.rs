//! The broker's HTTP routes (`docs/api.md`): request and response shapes, and handlers that
//! are thin codecs over the operations.
//!
//! Each handler parses its request into a typed struct (malformed input -> `INVALID_REQUEST`
//! through [`extract`]), calls one operation of [`crate::ops`] (or the group coordinator, or
//! the replication side), and maps the outcome to JSON.
//!
//! - [`topics`]: create, list, describe, delete topics.
//! - [`records`]: produce, fetch, list offsets, delete records, this replica's own log.
//! - [`cluster`]: metadata, status, metrics, ping.
//! - [`groups`]: consumer groups (join, sync, heartbeat, leave, offsets, describe, list).
//! - [`replication`]: the broker-to-broker routes under `/internal/v1`.
//! - [`request_metrics`]: the middleware that counts requests by route and error.
//! - [`extract`]: extractors that answer malformed input with the JSON error.

pub mod cluster;
pub mod extract;
pub mod groups;
pub mod records;
pub mod replication;
pub mod request_metrics;
pub mod topics;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::{middleware, Router};

use crate::broker::Broker;
use crate::error::{ApiError, ErrorKind};
use request_metrics::track_requests;

/// Bound on the body of requests other than produce (topic creation, delete-records): these
/// are small documents.
pub const ADMIN_BODY_MAX_BYTES: usize = 1 << 20;

/// The client routes under `/v1` plus `/metrics`, without fallbacks or layers. Inter-broker and
/// controller routes are merged next to these in [`router`].
pub fn client_routes() -> Router<Arc<Broker>> {
    let partition = "/v1/topics/{topic}/partitions/{partition}";
    Router::new()
        .route("/v1/ping", get(cluster::ping))
        .route("/v1/topics", post(topics::create).get(topics::list))
        .route(
            "/v1/topics/{topic}",
            get(topics::describe).delete(topics::delete),
        )
        .route(
            &format!("{partition}/records"),
            post(records::produce).get(records::fetch),
        )
        .route(&format!("{partition}/offsets"), get(records::list_offsets))
        .route(
            &format!("{partition}/replica-log"),
            get(records::replica_log),
        )
        .route(
            &format!("{partition}/delete-records"),
            post(records::delete_records),
        )
        .route("/v1/metadata", get(cluster::metadata))
        .route("/v1/status", get(cluster::status))
        .route("/metrics", get(cluster::metrics))
}

/// The whole application: routes, JSON errors for unknown routes and methods, body limits and
/// request metrics; the group routes on `coordinator`.
pub fn router(
    broker: Arc<Broker>,
    coordinator: Arc<crate::group::GroupCoordinator>,
    transactions: Arc<crate::txn::TransactionCoordinator>,
) -> Router {
    let app = client_routes()
        .merge(groups::routes(coordinator))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(ADMIN_BODY_MAX_BYTES))
        .layer(middleware::from_fn_with_state(
            broker.clone(),
            track_requests,
        ))
        .with_state(broker.clone());
    // Broker-to-broker routes of a cluster; outside the client metrics and body limits.
    match &broker.cluster {
        Some(cluster) => app
            .merge(replication::router(cluster.clone()))
            .merge(replication::marker_router(broker.clone()))
            .merge(replication::verify_router(transactions)),
        None => app,
    }
}

async fn unknown_route(uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        ErrorKind::UnsupportedVersion,
        format!("no route for {}; see docs/api.md", uri.path()),
    )
}

async fn method_not_allowed(
    method: axum::http::Method,
    uri: axum::http::Uri,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let error = ApiError::new(
        ErrorKind::UnsupportedVersion,
        format!("method {method} is not allowed on {}", uri.path()),
    );
    let mut response = error.into_response();
    *response.status_mut() = axum::http::StatusCode::METHOD_NOT_ALLOWED;
    response
}
