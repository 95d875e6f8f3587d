//! Extractors that turn every malformed request into the API's JSON error shape: axum's own
//! rejections (JSON syntax, missing fields, bad query parameters or path segments, oversized
//! bodies) become `INVALID_REQUEST` (400) or `MESSAGE_TOO_LARGE` (413).

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ErrorKind};

/// A JSON body. Unlike `axum::Json` it does not insist on a `Content-Type` header, so
/// `curl -d '{...}'` works.
pub struct ApiJson<T>(pub T);

/// Decodes a JSON body, naming the field and position of the first problem.
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::invalid_request(format!("malformed JSON body: {e}")))
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        check_announced_length(request.body(), super::ADMIN_BODY_MAX_BYTES as u64)?;
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(ErrorKind::MessageTooLarge, "request body too large")
                } else {
                    ApiError::invalid_request(rejection.body_text())
                }
            })?;
        decode_json(&bytes).map(ApiJson)
    }
}

/// Refuses a body whose announced length (`Content-Length`) is over `limit_bytes` with 413
/// before any of it is read: reading up to the limit first would make the client wait for an
/// answer until it had sent that much, or until the connection's body deadline if it never does.
pub fn check_announced_length(body: &Body, limit_bytes: u64) -> Result<(), ApiError> {
    let announced = body.size_hint().lower();
    if announced <= limit_bytes {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorKind::MessageTooLarge,
        format!("request body of {announced} bytes announced, over the limit of {limit_bytes}"),
    ))
}

/// Query parameters; a parameter that does not parse is `INVALID_REQUEST`.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| ApiQuery(value))
            .map_err(|rejection: QueryRejection| ApiError::invalid_request(rejection.body_text()))
    }
}

/// Path parameters; a segment that does not parse (e.g. partition `x`) is `INVALID_REQUEST`.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(value)| ApiPath(value))
            .map_err(|rejection: PathRejection| ApiError::invalid_request(rejection.body_text()))
    }
}
