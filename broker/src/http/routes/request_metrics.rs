//! The middleware that counts every HTTP request in [`crate::metrics::Metrics`], by route
//! template and the error name the handler answered with.

use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::broker::Broker;
use crate::http::errors::ErrorName;

/// Middleware: counts every request by its route template (not the raw path, so label values
/// stay bounded) and the error name the handler put in the response.
pub async fn track_requests(
    State(broker): State<Arc<Broker>>,
    request: Request,
    next: Next,
) -> Response {
    let method = request.method().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".to_string());
    let response = next.run(request).await;
    let error = response
        .extensions()
        .get::<ErrorName>()
        .map(|e| e.0)
        .unwrap_or("NONE");
    broker.metrics.count_request(&method, &route, error);
    response
}
