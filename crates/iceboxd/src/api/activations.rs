//! /api/v1/namespaces/{ns}/activations: activation records, results and logs.

use super::{resolve_namespace, ApiError};
use crate::registry::ActivationFilter;
use crate::state::AppState;
use crate::tenants::Caller;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use icebox_core::ActivationRecord;
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Deserialize)]
pub struct ListQuery {
    name: Option<String>,
    limit: Option<usize>,
    skip: Option<usize>,
    since: Option<u64>,
    upto: Option<u64>,
    docs: Option<String>,
}

pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(namespace): Path<String>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let namespace = resolve_namespace(&state, &caller, &namespace)?;
    if q.limit.is_some_and(|l| l > crate::registry::MAX_LIST_LIMIT) {
        return Err(ApiError::bad_request(format!(
            "The value of 'limit' must be at most {}.",
            crate::registry::MAX_LIST_LIMIT
        )));
    }
    let filter = ActivationFilter {
        // OpenWhisk clients may send a qualified name ("ns/action"): the action part filters.
        name: q
            .name
            .map(|n| n.rsplit('/').next().unwrap_or(&n).to_string()),
        limit: q.limit.unwrap_or(crate::registry::DEFAULT_LIST_LIMIT),
        skip: q.skip.unwrap_or(0),
        since: q.since,
        upto: q.upto,
    };
    let docs = super::query::flag("docs", q.docs.as_deref(), false)?;
    // The list comes from the registry: records answered but still in the writer's hands
    // would be missing from it.
    state
        .recorder
        .written_in(&namespace, std::time::Duration::from_secs(1))
        .await;
    let registry = state.registry.clone();
    let records =
        tokio::task::spawn_blocking(move || registry.list_activations(&namespace, &filter))
            .await??;
    let items = records
        .into_iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
            if !docs {
                if let Some(o) = v.as_object_mut() {
                    o.remove("logs");
                    o.remove("response");
                }
            }
            v
        })
        .collect();
    Ok(Json(Value::Array(items)))
}

/// Invocations refused while unwritten records are at their bound: 503, retry later.
impl From<crate::recorder::Backlogged> for ApiError {
    fn from(e: crate::recorder::Backlogged) -> Self {
        ApiError {
            status: axum::http::StatusCode::SERVICE_UNAVAILABLE,
            message: e.to_string(),
            retry_after: Some(5),
        }
    }
}

async fn fetch(
    state: &AppState,
    caller: &Caller,
    namespace: &str,
    id: &str,
) -> Result<ActivationRecord, ApiError> {
    let namespace = resolve_namespace(state, caller, namespace)?;
    if let Some(record) = state.recorder.pending(&namespace, id) {
        return Ok(record);
    }
    let registry = state.registry.clone();
    let lookup = id.to_string();
    let found =
        tokio::task::spawn_blocking(move || registry.get_activation(&namespace, &lookup)).await??;
    found.ok_or_else(|| {
        ApiError::not_found(format!(
            "The requested resource does not exist: activation '{id}'."
        ))
    })
}

/// The record here, or (in a cluster) from the node that holds it.
async fn fetch_or_remote(
    state: &AppState,
    caller: &Caller,
    namespace: &str,
    id: &str,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<Result<ActivationRecord, Response>, ApiError> {
    match fetch(state, caller, namespace, id).await {
        Err(e) if e.status == StatusCode::NOT_FOUND => {
            match super::cluster::remote_activation(state, id, uri, headers).await {
                Some(remote) => Ok(Err(remote)),
                None => Err(e),
            }
        }
        other => other.map(Ok),
    }
}

pub async fn get(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((namespace, id)): Path<(String, String)>,
    axum::extract::OriginalUri(uri): axum::extract::OriginalUri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    Ok(
        match fetch_or_remote(&state, &caller, &namespace, &id, &uri, &headers).await? {
            Ok(record) => Json(record).into_response(),
            Err(remote) => remote,
        },
    )
}

pub async fn result(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((namespace, id)): Path<(String, String)>,
    axum::extract::OriginalUri(uri): axum::extract::OriginalUri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    Ok(
        match fetch_or_remote(&state, &caller, &namespace, &id, &uri, &headers).await? {
            Ok(record) => {
                Json(serde_json::to_value(record.response).unwrap_or(Value::Null)).into_response()
            }
            Err(remote) => remote,
        },
    )
}

pub async fn logs(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((namespace, id)): Path<(String, String)>,
    axum::extract::OriginalUri(uri): axum::extract::OriginalUri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    Ok(
        match fetch_or_remote(&state, &caller, &namespace, &id, &uri, &headers).await? {
            Ok(record) => Json(json!({"logs": record.logs})).into_response(),
            Err(remote) => remote,
        },
    )
}
