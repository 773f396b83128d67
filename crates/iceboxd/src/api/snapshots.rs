//! The node API's snapshots (/icebox/v1/snapshots, docs/snapshots.md): list them, build one
//! now, discard one.

use super::{resolve_namespace, ApiError};
use crate::pool::snapshots::ActionSnapshots;
use crate::state::AppState;
use crate::tenants::Caller;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use icebox_core::api::SnapshotView;
use serde_json::json;

fn snapshots(state: &AppState) -> Option<&ActionSnapshots> {
    state.pool.component::<ActionSnapshots>()
}

pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Json<Vec<SnapshotView>> {
    let mut views = snapshots(&state).map_or_else(Vec::new, |s| s.views());
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
    let component = snapshots(&state)
        .ok_or_else(|| ApiError::conflict("Snapshots are not part of this node's pool."))?;
    component
        .request(&state.pool, &action)
        .map_err(ApiError::conflict)?;
    let views: Vec<SnapshotView> = component
        .views()
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
    let deleted = snapshots(&state).map_or(0, |s| s.discard(&fqn));
    if deleted == 0 {
        return Err(ApiError::not_found(format!(
            "The action '{fqn}' has no snapshot."
        )));
    }
    Ok(Json(json!({"action": fqn, "deleted": deleted})))
}
