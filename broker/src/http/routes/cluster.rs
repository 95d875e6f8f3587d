//! `GET /v1/metadata`, `GET /v1/status`, `GET /metrics`, `GET /v1/ping`: the JSON (and text)
//! of [`crate::ops::cluster`].

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;

use crate::broker::Broker;
use crate::ops::cluster::{Metadata, Status};

/// `GET /v1/metadata`.
pub async fn metadata(State(broker): State<Arc<Broker>>) -> Json<Metadata> {
    Json(crate::ops::cluster::metadata(&broker))
}

/// `GET /v1/status`.
pub async fn status(State(broker): State<Arc<Broker>>) -> Json<Status> {
    Json(crate::ops::cluster::status(&broker))
}

/// `GET /metrics`: Prometheus text format 0.0.4.
pub async fn metrics(State(broker): State<Arc<Broker>>) -> impl IntoResponse {
    let body = crate::ops::cluster::metrics_text(&broker);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}

/// `GET /v1/ping`: the cheapest route, the baseline of the throughput benchmark.
pub async fn ping() -> &'static str {
    "pong"
}
