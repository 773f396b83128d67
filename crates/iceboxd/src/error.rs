//! Errors in OpenWhisk's shape: `{"error": "...", "code": "<transaction id>"}`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            retry_after: None,
        }
    }
    pub fn bad_request(m: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, m)
    }
    pub fn unauthorized(m: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, m)
    }
    pub fn not_found(m: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, m)
    }
    pub fn conflict(m: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, m)
    }
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("The request content exceeds the maximum allowed size of {limit} bytes."),
        )
    }
    pub fn too_many(retry_after: u64) -> Self {
        ApiError {
            status: StatusCode::TOO_MANY_REQUESTS,
            message: "Too many requests: every instance is busy and the invocation queue is full. Retry later.".into(),
            retry_after: Some(retry_after),
        }
    }
    pub fn internal(m: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, m)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = icebox_core::ids::random_hex128();
        let mut resp = (
            self.status,
            Json(json!({"error": self.message, "code": code})),
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"iceboxd\""),
            );
        }
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

impl From<crate::registry::RegistryError> for ApiError {
    fn from(e: crate::registry::RegistryError) -> Self {
        match e {
            crate::registry::RegistryError::Conflict(m) => ApiError::conflict(m),
            other => ApiError::internal(other.to_string()),
        }
    }
}

impl From<tokio::task::JoinError> for ApiError {
    fn from(e: tokio::task::JoinError) -> Self {
        ApiError::internal(format!("internal task failed: {e}"))
    }
}
