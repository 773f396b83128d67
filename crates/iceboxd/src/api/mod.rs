//! HTTP API: the OpenWhisk REST subset under /api/v1, the node API under /icebox/v1, and
//! /metrics. docs/api/openapi.yaml is the contract.

mod actions;
mod activations;
mod archive;
mod error;
mod node;
mod query;

pub use error::ApiError;

use crate::state::AppState;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use bytes::BytesMut;
use futures::StreamExt;
use std::time::Duration;

pub fn router(state: AppState) -> Router {
    let openwhisk = Router::new()
        .route("/namespaces/{namespace}/actions", get(actions::list))
        .route(
            "/namespaces/{namespace}/actions/{name}",
            get(actions::get).put(actions::put).delete(actions::delete).post(actions::invoke),
        )
        .route("/namespaces/{namespace}/activations", get(activations::list))
        .route("/namespaces/{namespace}/activations/{id}", get(activations::get))
        .route("/namespaces/{namespace}/activations/{id}/result", get(activations::result))
        .route("/namespaces/{namespace}/activations/{id}/logs", get(activations::logs));
    let node_api = Router::new()
        .route("/instances", get(node::instances))
        .route("/instances/{id}", get(node::instance))
        .route("/instances/{id}/stats", get(node::instance_stats))
        .route("/instances/{id}/reclaim", axum::routing::post(node::reclaim))
        .route("/memory", get(node::memory))
        .route("/events", get(node::events));
    let authenticated = Router::new()
        .nest("/api/v1", openwhisk)
        .nest("/icebox/v1", node_api)
        .layer(middleware::from_fn_with_state(state.clone(), require_key));
    Router::new()
        .merge(authenticated)
        .route("/icebox/v1/health", get(node::health))
        .route("/metrics", get(node::metrics))
        .fallback(|| async { ApiError::not_found("The requested resource does not exist.") })
        // Our own limit check answers 413 in OpenWhisk's error shape; this only stops axum's
        // smaller default from interfering.
        .layer(DefaultBodyLimit::max(state.max_payload + 1))
        .layer(middleware::from_fn_with_state(state.clone(), read_body))
        .with_state(state)
}

/// How much of an oversized body is read and thrown away, and for how long, so that its
/// client gets to read the 413.
const DRAIN_MAX: usize = 64 << 20;
const DRAIN_TIME: Duration = Duration::from_secs(10);

/// Reads every request body (up to the payload limit) before anything answers. A reply sent
/// while the client is still writing its body reaches it as a broken pipe rather than as the
/// reply, and unread body bytes make hyper close a keep-alive connection the client is about
/// to reuse: both happened for 413 and for 401 (which refuses before reading).
async fn read_body(State(state): State<AppState>, req: Request, next: Next) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let limit = state.max_payload;
    let declared = parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > DRAIN_MAX as u64) {
        // Too big to be worth reading just to be polite.
        return Err(ApiError::too_large(limit));
    }
    let mut stream = body.into_data_stream();
    let mut kept = BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad_request(format!("cannot read the request body: {e}")))?;
        if kept.len() + chunk.len() > limit {
            let drain = async {
                let mut drained = 0usize;
                while let Some(Ok(chunk)) = stream.next().await {
                    drained += chunk.len();
                    if drained > DRAIN_MAX {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(DRAIN_TIME, drain).await;
            return Err(ApiError::too_large(limit));
        }
        kept.extend_from_slice(&chunk);
    }
    Ok(next.run(Request::from_parts(parts, Body::from(kept.freeze()))).await)
}

async fn require_key(State(state): State<AppState>, req: Request, next: Next) -> Result<Response, ApiError> {
    let header = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    crate::auth::check_basic(header, &state.key).map_err(|e| ApiError::unauthorized(e.to_string()))?;
    Ok(next.run(req).await)
}

/// `_` is the caller's namespace; any other name must be it.
pub fn resolve_namespace(state: &AppState, requested: &str) -> Result<String, ApiError> {
    if requested == "_" || requested == state.key.namespace {
        Ok(state.key.namespace.clone())
    } else {
        Err(ApiError::not_found(format!(
            "The namespace '{requested}' does not exist (this key owns '{}'; use '_' for it).",
            state.key.namespace
        )))
    }
}
