//! The cluster's side of the API: where an invocation runs (here or forwarded once to the node
//! placement picks), reading an activation another node holds, the cluster view, and the
//! archive download peers use.

use super::ApiError;
use crate::cluster::{Cluster, ForwardOutcome, Outgoing, FORWARDED_BY};
use crate::state::AppState;
use crate::tenants::Caller;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use icebox_core::units::MIB;
use icebox_core::ActionSpec;
use std::time::Duration;

/// A node that receives a request a client sent (not one a peer forwarded).
fn from_client(headers: &HeaderMap) -> bool {
    !headers.contains_key(FORWARDED_BY)
}

/// Where at most the first three candidates are tried: the one placement chose, and two more
/// when a target cannot even be connected to (nothing ran there).
const TRIES: usize = 3;

/// `Some(response)` when the invocation ran on another node; `None` to run it here.
pub async fn route_invocation(
    state: &AppState,
    action: &ActionSpec,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
    blocking: bool,
) -> Result<Option<Response>, ApiError> {
    let Some(cluster) = &state.cluster else {
        return Ok(None);
    };
    if !from_client(headers) {
        return Ok(None);
    }
    let need = action.limits.memory.saturating_mul(MIB);
    let candidates = cluster.place(&action.fqn(), need);
    // The answer may take the action's whole time limit, then OpenWhisk's blocking wait caps it.
    let timeout = if blocking {
        Duration::from_millis(action.limits.timeout).min(super::actions::BLOCKING_WAIT)
            + Duration::from_secs(10)
    } else {
        Duration::from_secs(10)
    };
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    for (member, reason) in candidates.into_iter().take(TRIES) {
        if member.id == cluster.node_id() {
            cluster.stats.placed(reason);
            return Ok(None);
        }
        let out = Outgoing {
            method: Method::POST,
            path_and_query: path,
            authorization: headers.get(header::AUTHORIZATION),
            content_type: headers.get(header::CONTENT_TYPE),
            body: body.clone(),
            timeout,
        };
        match cluster.forward(&member, out).await {
            // A node that has not yet mirrored a new action answers 404 before running
            // anything: the next node (or this one, which has it) runs it.
            ForwardOutcome::Answered(response) if response.status() == StatusCode::NOT_FOUND => {
                cluster.stats.forwarded("unknown-there");
                tracing::debug!(node = %member.id, "forward target does not know the action yet");
            }
            ForwardOutcome::Answered(response) => {
                cluster.stats.placed(reason);
                cluster.stats.forwarded("answered");
                return Ok(Some(response));
            }
            ForwardOutcome::NotSent(why) => {
                cluster.stats.forwarded("unreachable");
                tracing::warn!(node = %member.id, "forward not delivered, trying the next node: {why}");
            }
            ForwardOutcome::Lost(why) => {
                cluster.stats.forwarded("lost");
                return Err(ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    format!(
                        "The invocation was forwarded to node '{}', which did not answer ({why}). \
                         It may have run there; it was not sent anywhere else.",
                        member.id
                    ),
                ));
            }
        }
    }
    // Every node tried was unreachable (or the cluster is degraded): this node runs it.
    cluster
        .stats
        .placed(icebox_policy::PlacementReason::Overflow);
    Ok(None)
}

/// An activation this node does not hold, read from the node that does (by the index).
pub async fn remote_activation(
    state: &AppState,
    id: &str,
    uri: &Uri,
    headers: &HeaderMap,
) -> Option<Response> {
    let cluster = state.cluster.as_ref()?;
    if !from_client(headers) {
        return None;
    }
    let owner = cluster.activation_owner(id).await?;
    if owner.id == cluster.node_id() {
        return None;
    }
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let out = Outgoing {
        method: Method::GET,
        path_and_query: path,
        authorization: headers.get(header::AUTHORIZATION),
        content_type: None,
        body: Bytes::new(),
        timeout: Duration::from_secs(10),
    };
    match cluster.forward(&owner, out).await {
        ForwardOutcome::Answered(response) => Some(response),
        ForwardOutcome::NotSent(why) | ForwardOutcome::Lost(why) => Some(
            ApiError::new(
                StatusCode::BAD_GATEWAY,
                format!(
                    "The activation '{id}' is held by node '{}', which cannot be read now: {why}",
                    owner.id
                ),
            )
            .into_response(),
        ),
    }
}

fn cluster_of(state: &AppState) -> Result<&Cluster, ApiError> {
    state.cluster.as_deref().ok_or_else(|| {
        ApiError::not_found("This node is not in a cluster (start iceboxd with --cluster).")
    })
}

fn require_admin(caller: &Caller, what: &str) -> Result<(), ApiError> {
    if caller.admin {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("The supplied authentication is not authorized to access this resource: {what} needs the admin key."),
        ))
    }
}

/// GET /icebox/v1/cluster: the nodes, their memory and warm instances, as this node sees them.
pub async fn view(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<serde_json::Value>, ApiError> {
    require_admin(&caller, "the cluster view")?;
    Ok(Json(cluster_of(&state)?.view()))
}

/// GET /icebox/v1/code/{sha256}: a stored archive as base64, for a peer that lacks it.
pub async fn code(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(sha256): Path<String>,
) -> Result<Response, ApiError> {
    require_admin(&caller, "stored code")?;
    cluster_of(&state)?;
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::bad_request(
            "A code id is 64 hex digits (its SHA-256).",
        ));
    }
    let exec = icebox_core::Exec {
        kind: String::new(),
        code: String::new(),
        binary: true,
        main: None,
        sha256: Some(sha256.clone()),
    };
    let reading = state.clone();
    let text = tokio::task::spawn_blocking(move || reading.code.code_of(&exec))
        .await?
        .map_err(|_| ApiError::not_found(format!("This node has no code {sha256}.")))?;
    Ok(([(header::CONTENT_TYPE, "text/plain")], Body::from(text)).into_response())
}

/// Every answer of a cluster node names the node that made it (a forwarded one keeps the
/// header the target set), so clients and tests see where an invocation ran.
pub async fn name_node(State(state): State<AppState>, mut response: Response) -> Response {
    if let Some(cluster) = &state.cluster {
        if !response.headers().contains_key(RAN_ON) {
            if let Ok(v) = HeaderValue::from_str(cluster.node_id()) {
                response.headers_mut().insert(RAN_ON, v);
            }
        }
    }
    response
}

pub const RAN_ON: &str = "x-icebox-node";
