//! Namespaces and keys (/icebox/v1/namespaces, /icebox/v1/keys): the admin key's to manage.

use super::{query, ApiError};
use crate::state::AppState;
use crate::tenants::{check_namespace_name, Caller, NamespaceRow, Quotas};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Extension;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

fn require_admin(caller: &Caller) -> Result<(), ApiError> {
    if caller.admin {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "The supplied authentication is not authorized to access this resource: namespaces and keys are managed with the admin key.",
        ))
    }
}

fn namespace_json(state: &AppState, row: &NamespaceRow) -> Value {
    let keys = state.tenants.key_uuids();
    json!({
        "name": row.name,
        "created": row.created,
        "limits": row.quotas,
        "keys": keys.get(&row.name).cloned().unwrap_or_default(),
        "inFlight": state.tenants.in_flight(&row.name),
    })
}

fn not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("The namespace '{name}' does not exist."))
}

/// OpenWhisk's `GET /api/v1/namespaces` (`wsk namespace list`): the caller's namespace, or
/// every namespace for the admin key, as names.
pub async fn openwhisk_list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Value>, ApiError> {
    if !caller.admin {
        return Ok(Json(json!([caller.namespace])));
    }
    let registry = state.registry.clone();
    let rows = tokio::task::spawn_blocking(move || registry.namespaces()).await??;
    Ok(Json(json!(rows
        .into_iter()
        .map(|r| r.name)
        .collect::<Vec<_>>())))
}

pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Value>, ApiError> {
    require_admin(&caller)?;
    let registry = state.registry.clone();
    let rows = tokio::task::spawn_blocking(move || registry.namespaces()).await??;
    Ok(Json(Value::Array(
        rows.iter().map(|r| namespace_json(&state, r)).collect(),
    )))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PutBody {
    #[serde(default)]
    limits: Quotas,
}

#[derive(Deserialize)]
pub struct PutQuery {
    overwrite: Option<String>,
}

/// Creates a namespace (409 if it exists), or with `overwrite=true` sets its limits.
pub async fn put(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Query(q): Query<PutQuery>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    require_admin(&caller)?;
    check_namespace_name(&name).map_err(ApiError::bad_request)?;
    let overwrite = query::flag("overwrite", q.overwrite.as_deref(), false)?;
    let body: PutBody = if body.iter().all(|b| b.is_ascii_whitespace()) {
        PutBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::bad_request(format!(
                "The request content was malformed: {e} (expected {{\"limits\": {{\"invocationsPerMinute\", \"concurrentInvocations\", \"memoryShare\"}}}})."
            ))
        })?
    };
    if body.limits.invocations_per_minute == Some(0)
        || body.limits.concurrent_invocations == Some(0)
    {
        return Err(ApiError::bad_request(
            "A limit of 0 would refuse every invocation: leave the limit out for none.",
        ));
    }
    if state.cluster.is_some() {
        crate::cluster::put_namespace(&state, &name, body.limits, overwrite).await?;
    }
    // In a cluster etcd already refused a second create; this node's copy follows it.
    let local_overwrite = overwrite || state.cluster.is_some();
    let registry = state.registry.clone();
    let row = tokio::task::spawn_blocking(move || {
        let row = registry.put_namespace(&name, body.limits, local_overwrite)?;
        Ok::<_, crate::registry::RegistryError>(row)
    })
    .await??;
    reload(&state).await?;
    Ok(Json(namespace_json(&state, &row)))
}

#[derive(Deserialize)]
pub struct DeleteQuery {
    force: Option<String>,
}

/// Deletes a namespace with its keys; one that still has actions only with `force=true`, and
/// then its actions, their instances and activation records go too.
pub async fn delete(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Query(q): Query<DeleteQuery>,
) -> Result<Json<Value>, ApiError> {
    require_admin(&caller)?;
    let force = query::flag("force", q.force.as_deref(), false)?;
    if name == state.tenants.admin_namespace() {
        return Err(ApiError::bad_request(format!(
            "The namespace '{name}' is the admin key's own and cannot be deleted."
        )));
    }
    if !state.tenants.exists(&name) {
        return Err(not_found(&name));
    }
    let registry = state.registry.clone();
    let ns = name.clone();
    let actions = tokio::task::spawn_blocking(move || registry.action_count(&ns)).await??;
    if actions > 0 && !force {
        return Err(ApiError::conflict(format!(
            "The namespace '{name}' has {actions} action(s): delete them first, or delete with force=true to remove them with it."
        )));
    }
    if state.cluster.is_some() {
        crate::cluster::delete_namespace(&state, &name).await?;
    }
    // Its actions leave the cache first, so nothing new starts, then their instances go.
    let fqns: Vec<String> = {
        let mut cache = state.actions.write().unwrap();
        let names: Vec<(String, String)> = cache
            .keys()
            .filter(|(ns, _)| *ns == name)
            .cloned()
            .collect();
        names
            .into_iter()
            .filter_map(|k| cache.remove(&k))
            .map(|a| a.fqn())
            .collect()
    };
    for fqn in &fqns {
        state.pool.retire_action(fqn).await;
    }
    // Records already answered but not yet written would outlive the delete: let the
    // writer catch up first (bounded; the registry takes them within milliseconds when well).
    state
        .recorder
        .written_in(&name, std::time::Duration::from_secs(5))
        .await;
    let registry = state.registry.clone();
    let ns = name.clone();
    tokio::task::spawn_blocking(move || registry.delete_namespace(&ns)).await??;
    state.collect_code().await;
    reload(&state).await?;
    Ok(Json(
        json!({"namespace": name, "deleted": true, "actions": fqns.len()}),
    ))
}

/// A new key for the namespace: the only time its secret is shown.
pub async fn create_key(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    require_admin(&caller)?;
    if !state.tenants.exists(&name) {
        return Err(not_found(&name));
    }
    let key = {
        let state = state.clone();
        tokio::task::spawn_blocking(move || state.tenants.create_key(&state.registry, &name))
            .await?
            .map_err(ApiError::internal)?
    };
    if state.cluster.is_some() {
        share_key(&state, &key.uuid).await?;
    }
    Ok(Json(json!({
        "namespace": key.namespace,
        "uuid": key.uuid,
        "key": key.key,
        "auth": key.as_basic(),
    })))
}

/// Revokes a key; requests with it are 401 from now on.
pub async fn revoke_key(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(uuid): Path<String>,
) -> Result<Json<Value>, ApiError> {
    require_admin(&caller)?;
    match state.tenants.key(&uuid) {
        None => Err(ApiError::not_found(format!("There is no key '{uuid}'."))),
        Some((_, true)) => Err(ApiError::bad_request(
            "The admin key is the node's own (--auth or the state directory's auth file) and cannot be revoked here.",
        )),
        Some((namespace, false)) => {
            if state.cluster.is_some() {
                crate::cluster::delete_key(&state, &uuid).await?;
            }
            let registry = state.registry.clone();
            let id = uuid.clone();
            tokio::task::spawn_blocking(move || registry.delete_key(&id)).await??;
            reload(&state).await?;
            Ok(Json(
                json!({"uuid": uuid, "namespace": namespace, "revoked": true}),
            ))
        }
    }
}

/// The key and quota tables again from the registry, off the async threads (SQLite blocks).
async fn reload(state: &AppState) -> Result<(), ApiError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || state.tenants.reload(&state.registry)).await??;
    Ok(())
}

/// Publishes a key just stored here to the cluster; if etcd refuses, the key is taken back
/// (a key only one node knows would work or not depending on where a request lands).
async fn share_key(state: &AppState, uuid: &str) -> Result<(), ApiError> {
    let registry = state.registry.clone();
    let id = uuid.to_string();
    let row = tokio::task::spawn_blocking(move || {
        registry
            .keys()
            .map(|keys| keys.into_iter().find(|k| k.uuid == id))
    })
    .await??
    .ok_or_else(|| ApiError::internal("the new key vanished before it could be shared"))?;
    if let Err(e) = crate::cluster::put_key(state, &row).await {
        let registry = state.registry.clone();
        let id = uuid.to_string();
        tokio::task::spawn_blocking(move || registry.delete_key(&id)).await??;
        reload(state).await?;
        return Err(e.into());
    }
    Ok(())
}
