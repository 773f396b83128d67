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
    /// A request body over the node's limit, worded as OpenWhisk's controller (akka-http)
    /// words it; `size` is unknown while a body without a length is streaming.
    pub fn body_too_large(size: Option<u64>, limit: usize) -> Self {
        let size = size.map_or("while streaming".to_string(), |n| n.to_string());
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "The request content was malformed:\nEntityStreamSizeException: incoming entity size ({size}) exceeded size limit ({limit} bytes)! This is the node's request-body limit (--max-body)."
            ),
        )
    }
    /// A part of the request over its own limit, in OpenWhisk's words: `field` is "exec"
    /// for action code, "Request" for an invocation body.
    pub fn entity_too_big(field: &str, size: u64, limit: u64) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("{field} larger than allowed: {size} > {limit} bytes."),
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

impl From<crate::cluster::ClusterError> for ApiError {
    fn from(e: crate::cluster::ClusterError) -> Self {
        use crate::cluster::ClusterError;
        match e {
            ClusterError::Unavailable(_) => {
                let mut err = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string());
                err.retry_after = Some(5);
                err
            }
            ClusterError::Conflict | ClusterError::AlreadyExists(_) => {
                ApiError::conflict(e.to_string())
            }
            ClusterError::Corrupt(_) => ApiError::internal(e.to_string()),
        }
    }
}
