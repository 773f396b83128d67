//! HTTP API: the OpenWhisk REST subset under /api/v1, the node API under /icebox/v1, and
//! /metrics. docs/api/openapi.yaml is the contract.

mod actions;
mod activations;
mod archive;
mod error;
mod node;

pub use error::ApiError;

use crate::state::AppState;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use axum::Router;

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
        .with_state(state)
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
