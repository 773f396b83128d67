//! The node API's snapshots (/icebox/v1/snapshots, docs/snapshots.md): list them, build one
//! now, discard one.

use super::{resolve_namespace, ApiError};
use crate::state::AppState;
use crate::tenants::Caller;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use icebox_core::api::SnapshotView;
use serde_json::json;

pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Json<Vec<SnapshotView>> {
    let mut views = state.pool.snapshot_views();
    views.retain(|v| caller.sees(super::namespace_of(&v.action)));
    Json(views)
}

/// Builds the action's snapshot now unless it has one: 202 with its state.
pub async fn build(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((namespace, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let namespace = resolve_namespace(&state, &caller, &namespace)?;
    let action = state.action(&namespace, &name).ok_or_else(|| {
        ApiError::not_found(format!("The action '{namespace}/{name}' does not exist."))
    })?;
    state
        .pool
        .request_snapshot(&action)
        .map_err(ApiError::conflict)?;
    let views: Vec<SnapshotView> = state
        .pool
        .snapshot_views()
        .into_iter()
        .filter(|v| v.action == action.fqn())
        .collect();
    Ok((StatusCode::ACCEPTED, Json(views)).into_response())
}

/// Discards the action's snapshots (the next cold start starts normally and builds anew).
pub async fn delete(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((namespace, name)): Path<(String, String)>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let namespace = resolve_namespace(&state, &caller, &namespace)?;
    let fqn = format!("{namespace}/{name}");
    let deleted = state.pool.discard_snapshots(&fqn);
    if deleted == 0 {
        return Err(ApiError::not_found(format!(
            "The action '{fqn}' has no snapshot."
        )));
    }
    Ok(Json(json!({"action": fqn, "deleted": deleted})))
}
