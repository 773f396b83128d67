//! HTTP API: the OpenWhisk REST subset under /api/v1, the node API under /icebox/v1, and
//! /metrics. docs/api/openapi.yaml is the contract.

mod actions;
mod activations;
mod archive;
mod cluster;
mod gate;
mod node;
mod query;
mod snapshots;
mod tenants;

pub use crate::error::ApiError;

use crate::state::AppState;
use crate::tenants::Caller;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::get;
use axum::Router;

pub fn router(state: AppState) -> Router {
    // A trailing slash is trimmed before routing (serve/trailing_slash.rs), so every path
    // answers with and without one, as OpenWhisk does.
    let openwhisk = Router::new()
        .route("/namespaces", get(tenants::openwhisk_list))
        .route("/namespaces/{namespace}/actions", get(actions::list))
        .route(
            "/namespaces/{namespace}/actions/{name}",
            get(actions::get)
                .put(actions::put)
                .delete(actions::delete)
                .post(actions::invoke),
        )
        .route(
            "/namespaces/{namespace}/activations",
            get(activations::list),
        )
        .route(
            "/namespaces/{namespace}/activations/{id}",
            get(activations::get),
        )
        .route(
            "/namespaces/{namespace}/activations/{id}/result",
            get(activations::result),
        )
        .route(
            "/namespaces/{namespace}/activations/{id}/logs",
            get(activations::logs),
        );
    let node_api = Router::new()
        .route("/health", get(node::health))
        .route("/instances", get(node::instances))
        .route("/instances/{id}", get(node::instance).delete(node::evict))
        .route("/instances/{id}/stats", get(node::instance_stats))
        .route(
            "/instances/{id}/reclaim",
            axum::routing::post(node::reclaim),
        )
        .route("/memory", get(node::memory))
        .route("/events", get(node::events))
        .route("/namespaces", get(tenants::list))
        .route(
            "/namespaces/{namespace}",
            axum::routing::put(tenants::put).delete(tenants::delete),
        )
        .route(
            "/namespaces/{namespace}/keys",
            axum::routing::post(tenants::create_key),
        )
        .route("/keys/{uuid}", axum::routing::delete(tenants::revoke_key))
        .route("/cluster", get(cluster::view))
        .route("/code/{sha256}", get(cluster::code))
        .route("/snapshots", get(snapshots::list))
        .route(
            "/snapshots/{namespace}/{name}",
            axum::routing::post(snapshots::build).delete(snapshots::delete),
        );
    // Layers run bottom-up: errors are made JSON last, the key is checked before the body is
    // read, and only then is the body read.
    Router::new()
        .nest("/api/v1", openwhisk)
        .nest("/icebox/v1", node_api)
        .route("/metrics", get(node::metrics))
        .fallback(|| async { ApiError::not_found("The requested resource does not exist.") })
        // Our own limit check answers 413 in OpenWhisk's error shape; this only stops axum's
        // smaller default from interfering.
        .layer(DefaultBodyLimit::max(state.body.max_body + 1))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            gate::read_body,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            gate::require_key,
        ))
        .layer(middleware::from_fn(gate::json_errors))
        .layer(middleware::map_response_with_state(
            state.clone(),
            cluster::name_node,
        ))
        .with_state(state)
}

/// The namespace part of an action's `namespace/name`.
pub fn namespace_of(fqn: &str) -> &str {
    fqn.split_once('/').map_or(fqn, |(ns, _)| ns)
}

/// `_` is the caller's namespace; another name must be the caller's own, or any existing one
/// for the admin key. A namespace the caller may not see answers as if it did not exist.
pub fn resolve_namespace(
    state: &AppState,
    caller: &Caller,
    requested: &str,
) -> Result<String, ApiError> {
    if requested == "_" || requested == caller.namespace {
        return Ok(caller.namespace.clone());
    }
    if caller.admin && state.tenants.exists(requested) {
        return Ok(requested.to_string());
    }
    Err(ApiError::not_found(format!(
        "The namespace '{requested}' does not exist (this key owns '{}'; use '_' for it).",
        caller.namespace
    )))
}
