//! /api/v1/namespaces/{ns}/actions[/{name}]: deploy, read, delete and invoke actions.

use super::{archive, query, resolve_namespace, ApiError};
use crate::code_store::CodeError;
use crate::invoker::{self, Invocation};
use crate::registry::Unfinished;
use crate::state::AppState;
use crate::tenants::Caller;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use icebox_core::{ActionLimits, ActionSpec, ActivationStatus, Exec, KeyValue};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::time::{Duration, Instant};

/// A blocking invocation still running after this answers 202 with its id (OpenWhisk's rule).
const BLOCKING_WAIT: Duration = Duration::from_secs(60);

/// Every field may be left out on an update (`overwrite=true`): it keeps its stored value.
#[derive(Deserialize)]
struct PutBody<'a> {
    #[serde(default, borrow)]
    exec: Option<PutExec<'a>>,
    #[serde(default)]
    limits: PartialLimits,
    #[serde(default)]
    parameters: Option<Vec<KeyValue>>,
    #[serde(default)]
    annotations: Option<Vec<KeyValue>>,
}

/// The code is borrowed from the request body: a zip's base64 is decoded from there into the
/// code store, never copied whole.
#[derive(Deserialize)]
struct PutExec<'a> {
    kind: String,
    #[serde(default, borrow)]
    code: Cow<'a, str>,
    #[serde(default)]
    binary: Option<bool>,
    #[serde(default)]
    main: Option<String>,
}

#[derive(Deserialize, Default)]
struct PartialLimits {
    memory: Option<u64>,
    timeout: Option<u64>,
    concurrency: Option<u32>,
    logs: Option<u64>,
}

#[derive(Deserialize)]
pub struct PutQuery {
    #[serde(default)]
    overwrite: Option<String>,
}

#[derive(Deserialize)]
pub struct GetQuery {
    #[serde(default)]
    code: Option<String>,
}

#[derive(Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    skip: Option<usize>,
}

#[derive(Deserialize)]
pub struct InvokeQuery {
    #[serde(default)]
    blocking: Option<String>,
    #[serde(default)]
    result: Option<String>,
}

/// The action as OpenWhisk returns it; listings omit the code, and so does this for a zip or
/// jar in the code store (a GET reads it from there: [`action_with_code`]).
pub fn action_json(spec: &ActionSpec, with_code: bool) -> Value {
    let mut exec = json!({"kind": spec.exec.kind, "binary": spec.exec.binary});
    if let Some(main) = &spec.exec.main {
        exec["main"] = json!(main);
    }
    if with_code && spec.exec.sha256.is_none() {
        exec["code"] = json!(spec.exec.code);
    }
    let mut annotations = spec.annotations.clone();
    if !annotations.iter().any(|kv| kv.key == "exec") {
        annotations.push(KeyValue {
            key: "exec".into(),
            value: json!(spec.exec.kind.split(':').next().unwrap_or("")),
        });
    }
    json!({
        "namespace": spec.namespace,
        "name": spec.name,
        "version": spec.version,
        "publish": false,
        "exec": exec,
        "limits": spec.limits,
        "parameters": spec.parameters,
        "annotations": annotations,
        "updated": spec.updated,
    })
}

/// The body the gate read (within the request-body limit); `limit` is the handler's own
/// (the invocation payload), refused in OpenWhisk's words for its "Request".
fn body_bytes(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
    limit: Option<usize>,
) -> Result<Bytes, ApiError> {
    let bytes = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::body_too_large(None, state.body.max_body)
        } else {
            ApiError::bad_request(format!("cannot read the request body: {e}"))
        }
    })?;
    if let Some(limit) = limit.filter(|&l| bytes.len() > l) {
        return Err(ApiError::entity_too_big(
            "Request",
            bytes.len() as u64,
            limit as u64,
        ));
    }
    Ok(bytes)
}

fn parse_json<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::bad_request(format!("The request content was malformed: {what}: {e}"))
    })
}

fn check_name(name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 256
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.@ ".contains(c))
        && !name.starts_with([' ', '.', '-']);
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "The action name '{name}' is not valid: use letters, digits, '_', '-', '.', '@' and spaces (not first), at most 256 characters."
        )))
    }
}

pub async fn put(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((namespace, name)): Path<(String, String)>,
    Query(q): Query<PutQuery>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let namespace = resolve_namespace(&state, &caller, &namespace)?;
    check_name(&name)?;
    let overwrite = query::flag("overwrite", q.overwrite.as_deref(), false)?;
    let bytes = body_bytes(&state, body, None)?;
    // Held until the action is cached: no collection of unused code removes the file it names
    // (a new upload's, or the stored one an update keeps) before.
    let naming = state.code.naming.read().await;
    let existing = if overwrite {
        state.action(&namespace, &name)
    } else {
        None
    };
    let old_stored = existing.as_ref().is_some_and(|a| a.exec.sha256.is_some());
    // Parsing borrows the code from the body and decoding writes it to a file: off the async
    // workers, and the body is dropped as soon as that is done.
    let parsing = state.clone();
    let parsed =
        tokio::task::spawn_blocking(move || parse_put(&parsing, &bytes, existing.as_deref()))
            .await?;
    let new_stored = matches!(&parsed, Ok((_, exec)) if exec.sha256.is_some());
    let result = match parsed {
        Ok((body, exec)) => store_put(&state, naming, body, exec, namespace, name, overwrite).await,
        Err(e) => {
            drop(naming);
            Err(e)
        }
    };
    // The old version's file, or a file stored for a refused update, may be unused now.
    if old_stored || new_stored || result.is_err() {
        state.collect_code().await;
    }
    result
}

/// The request body's fields with the new exec checked (a zip or jar already in the code
/// store), or the stored one on an update that leaves it out.
fn parse_put(
    state: &AppState,
    bytes: &[u8],
    existing: Option<&ActionSpec>,
) -> Result<(PutFields, Exec), ApiError> {
    let body: PutBody<'_> = parse_json(bytes, "action")?;
    let exec = match (body.exec, existing) {
        (Some(exec), _) => validate_exec(state, exec)?,
        (None, Some(old)) => old.exec.clone(),
        (None, None) => {
            return Err(ApiError::bad_request(
                "The action has no exec: give exec.kind and exec.code.",
            ))
        }
    };
    let fields = PutFields {
        limits: body.limits,
        parameters: body.parameters,
        annotations: body.annotations,
    };
    Ok((fields, exec))
}

/// What an action PUT gives besides its exec, owned (the body is gone once parsed).
struct PutFields {
    limits: PartialLimits,
    parameters: Option<Vec<KeyValue>>,
    annotations: Option<Vec<KeyValue>>,
}

async fn store_put(
    state: &AppState,
    naming: tokio::sync::RwLockReadGuard<'_, ()>,
    body: PutFields,
    exec: Exec,
    namespace: String,
    name: String,
    overwrite: bool,
) -> Result<Response, ApiError> {
    // Read again: the update is built on what is stored now.
    let existing = if overwrite {
        state.action(&namespace, &name)
    } else {
        None
    };
    let base = existing.as_ref().map(|a| a.limits).unwrap_or_default();
    let limits = ActionLimits {
        memory: body.limits.memory.unwrap_or(base.memory),
        timeout: body.limits.timeout.unwrap_or(base.timeout),
        concurrency: body.limits.concurrency.unwrap_or(base.concurrency),
        logs: body.limits.logs.unwrap_or(base.logs),
    };
    limits
        .validate()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let spec = ActionSpec {
        namespace: namespace.clone(),
        name: name.clone(),
        exec,
        limits,
        parameters: body
            .parameters
            .or_else(|| existing.as_ref().map(|a| a.parameters.clone()))
            .unwrap_or_default(),
        annotations: body
            .annotations
            .or_else(|| existing.as_ref().map(|a| a.annotations.clone()))
            .unwrap_or_default(),
        version: String::new(),
        updated: 0,
    };
    let language = state
        .pool
        .runtimes()
        .resolve(&spec.exec.kind)
        .map(|r| r.language().to_string())
        .unwrap_or_default();
    crate::pool::sharing::validate(&spec.annotations, &language, spec.limits.memory)
        .map_err(ApiError::bad_request)?;
    let archive = spec
        .exec
        .sha256
        .as_deref()
        .and_then(|sha256| state.code.open_archive(sha256).ok());
    crate::pool::sharing::validate_code(&spec, archive).map_err(ApiError::bad_request)?;
    state
        .pool
        .backends()
        .validate(&spec.annotations)
        .map_err(ApiError::bad_request)?;
    crate::pool::snapshots::validate(&spec.annotations).map_err(ApiError::bad_request)?;
    crate::pool::choice::validate(&spec.annotations).map_err(ApiError::bad_request)?;
    let registry = state.registry.clone();
    let stored = if let Some(cluster) = &state.cluster {
        // The cluster decides the version; this node's registry mirrors it.
        let code = crate::cluster_sync::inline_code(state, &spec).await;
        let stored = crate::cluster::put_action(cluster, spec, overwrite, code).await?;
        let copy = stored.clone();
        tokio::task::spawn_blocking(move || registry.store_action(&copy)).await??;
        stored
    } else {
        tokio::task::spawn_blocking(move || registry.put_action(spec, overwrite)).await??
    };
    let fqn = stored.fqn();
    let stored = state.cache_action(stored);
    drop(naming);
    // Instances of the previous version must not serve the new one.
    state.pool.retire_action(&fqn).await;
    state.pool.action_deployed(&stored);
    Ok(Json(action_json(&stored, true)).into_response())
}

pub async fn get(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((namespace, name)): Path<(String, String)>,
    Query(q): Query<GetQuery>,
) -> Result<Json<Value>, ApiError> {
    let namespace = resolve_namespace(&state, &caller, &namespace)?;
    let with_code = query::flag("code", q.code.as_deref(), true)?;
    let spec = crate::cluster_sync::find_action(&state, &namespace, &name)
        .await
        .ok_or_else(|| not_found(&namespace, &name))?;
    let mut action = action_json(&spec, with_code);
    if with_code && spec.exec.sha256.is_some() {
        let reading = state.clone();
        let code = tokio::task::spawn_blocking(move || reading.code.code_of(&spec.exec))
            .await?
            .map_err(|e| ApiError::internal(format!("the action's code cannot be read: {e}")))?;
        action["exec"]["code"] = Value::String(code);
    }
    Ok(Json(action))
}

pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(namespace): Path<String>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let namespace = resolve_namespace(&state, &caller, &namespace)?;
    let registry = state.registry.clone();
    let (limit, skip) = (
        q.limit.unwrap_or(crate::registry::DEFAULT_LIST_LIMIT),
        q.skip.unwrap_or(0),
    );
    if limit > crate::registry::MAX_LIST_LIMIT {
        return Err(ApiError::bad_request(
            "The value of 'limit' must be at most 200.",
        ));
    }
    let specs = tokio::task::spawn_blocking(move || registry.list_actions(&namespace, limit, skip))
        .await??;
    Ok(Json(Value::Array(
        specs.iter().map(action_summary_json).collect(),
    )))
}

/// A list item, as OpenWhisk lists actions: metadata only — `exec` is kind and binary, and the
/// default parameters (which may hold secrets) are left out.
fn action_summary_json(spec: &ActionSpec) -> Value {
    let mut item = action_json(spec, false);
    if let Some(fields) = item.as_object_mut() {
        fields.remove("parameters");
    }
    item["exec"] = json!({"kind": spec.exec.kind, "binary": spec.exec.binary});
    item
}

pub async fn delete(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((namespace, name)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let namespace = resolve_namespace(&state, &caller, &namespace)?;
    let shared = match &state.cluster {
        Some(cluster) => Some(crate::cluster::delete_action(cluster, &namespace, &name).await?),
        None => None,
    };
    let registry = state.registry.clone();
    let (ns, n) = (namespace.clone(), name.clone());
    let deleted = tokio::task::spawn_blocking(move || registry.delete_action(&ns, &n)).await??;
    // In a cluster etcd says whether it existed (this node's copy may lag behind).
    let spec = match shared {
        Some(shared) => shared.or(deleted),
        None => deleted,
    }
    .ok_or_else(|| not_found(&namespace, &name))?;
    state.forget_action(&namespace, &name);
    state.pool.retire_action(&spec.fqn()).await;
    if spec.exec.sha256.is_some() {
        state.collect_code().await;
    }
    Ok(Json(action_json(&spec, false)))
}

/// Checks kind, code and archive of a new `exec`, resolving kind aliases. A zip or jar goes
/// to the code store (its size checked before decoding, its archive after).
fn validate_exec(state: &AppState, exec: PutExec<'_>) -> Result<Exec, ApiError> {
    let runtime = state.pool.runtimes().resolve(&exec.kind).ok_or_else(|| {
        ApiError::bad_request(format!(
            "The kind '{}' is not supported; supported kinds: {}.",
            exec.kind,
            state.pool.runtimes().kinds().join(", ")
        ))
    })?;
    let language = runtime.language().to_string();
    let code = exec.code;
    if code.trim().is_empty() {
        return Err(ApiError::bad_request(
            "The action has no code: exec.code is empty.",
        ));
    }
    // OpenWhisk takes code that is all base64 for an archive when `binary` is not given (its
    // npm client sends a Buffer's base64 without the flag).
    let binary = exec
        .binary
        .unwrap_or_else(|| crate::code_store::is_base64(&code));
    let main = exec.main.filter(|m| !m.is_empty());
    if language == "java" && !binary {
        return Err(ApiError::bad_request(
            "Java actions must be a jar: set exec.binary to true and exec.code to the base64 jar.",
        ));
    }
    if language == "java" && main.is_none() {
        return Err(ApiError::bad_request(
            "Java actions need exec.main: the class name (Class or Class#method).",
        ));
    }
    let max = state.body.max_code_size;
    let (code, sha256) = if binary {
        let what = if language == "java" { "jar" } else { "zip" };
        let stored = state
            .code
            .put_base64(&code, max, |file| archive::validate(file, what).map(|_| ()))
            .map_err(|e| match e {
                CodeError::TooLarge(size, max) => ApiError::entity_too_big("exec", size, max),
                CodeError::NotBase64(_) | CodeError::BadArchive(_) => {
                    ApiError::bad_request(e.to_string())
                }
                CodeError::Io(_) => ApiError::internal(e.to_string()),
            })?;
        (String::new(), Some(stored.sha256))
    } else {
        if code.len() as u64 > max {
            return Err(ApiError::entity_too_big("exec", code.len() as u64, max));
        }
        (code.into_owned(), None)
    };
    Ok(Exec {
        kind: runtime.kind.clone(),
        code,
        binary,
        main,
        sha256,
    })
}

/// The 202 leaves only once its activation id is stored (committed in the recorder's next
/// batch): a daemon killed while the activation runs then leaves it unfinished, and the next
/// start records it as failed, instead of the id being a 404 forever. While the registry
/// refuses writes the id is kept in memory with the records, as they are.
async fn accepted(state: &AppState, unfinished: Unfinished) -> Response {
    let id = unfinished.activation_id.clone();
    if let Err(why) = state.recorder.accept(unfinished).await {
        tracing::warn!(activation = %id, "answering 202 with the id kept in memory only: {why}");
    }
    (StatusCode::ACCEPTED, Json(json!({"activationId": id}))).into_response()
}

fn not_found(namespace: &str, name: &str) -> ApiError {
    ApiError::not_found(format!(
        "The requested resource does not exist: action '{namespace}/{name}'."
    ))
}

pub async fn invoke(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((namespace, name)): Path<(String, String)>,
    Query(q): Query<InvokeQuery>,
    axum::extract::OriginalUri(uri): axum::extract::OriginalUri,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    let arrived_ms = crate::now_ms();
    let namespace = resolve_namespace(&state, &caller, &namespace)?;
    let blocking = query::flag("blocking", q.blocking.as_deref(), false)?;
    let result_only = query::flag("result", q.result.as_deref(), false)?;
    let action = crate::cluster_sync::find_action(&state, &namespace, &name)
        .await
        .ok_or_else(|| not_found(&namespace, &name))?;
    let bytes = body_bytes(&state, body, Some(state.body.max_payload))?;
    if let Some(ran_elsewhere) = super::cluster::route_invocation(
        &state,
        &action,
        &uri,
        &headers,
        &bytes,
        blocking.then_some(BLOCKING_WAIT),
    )
    .await?
    {
        return Ok(ran_elsewhere);
    }
    let params: Map<String, Value> = if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        Map::new()
    } else {
        match parse_json::<Value>(&bytes, "parameters")? {
            Value::Object(m) => m,
            _ => {
                return Err(ApiError::bad_request(
                    "The request content was malformed: parameters must be a JSON object.",
                ))
            }
        }
    };
    // The caller's namespace quotas (OpenWhisk throttles the invoking identity); the slot is
    // held until the activation ends, blocking or not.
    let in_flight = state
        .tenants
        .admit(&caller.namespace, arrived_ms)
        .map_err(|e| ApiError::new(StatusCode::TOO_MANY_REQUESTS, e.to_string()))?;
    state.recorder.admit()?;
    // The one queue check: a full queue answers 429 here, blocking or not.
    let ticket = invoker::admit(&state, &action)?;
    // Only actions that ask for it get the caller's key (OpenWhisk's rule).
    let api_key = action.provides_api_key().then(|| caller.basic.clone());
    let activation_id = invoker::new_activation_id();
    if let Some(cluster) = &state.cluster {
        cluster.index_activation(&activation_id);
    }
    let version = action.version.clone();
    let inv = Invocation {
        params: action.merged_parameters(&params),
        action,
        activation_id: activation_id.clone(),
        subject: caller.namespace.clone(),
        api_key,
        arrived,
        arrived_ms,
    };
    let task_state = state.clone();
    let run = async move {
        let _in_flight = in_flight;
        invoker::invoke(&task_state, inv, ticket).await
    };
    let unfinished = Unfinished {
        activation_id: activation_id.clone(),
        namespace: namespace.clone(),
        name: name.clone(),
        version: version.clone(),
        subject: caller.namespace.clone(),
        start: arrived_ms,
    };
    if !blocking {
        tokio::spawn(run);
        return Ok(accepted(&state, unfinished).await);
    }
    // Runs on this request's task (no hand-off on the warm path); if the client hangs up or
    // the blocking wait ends, the activation goes on by itself and is recorded.
    let mut run = crate::detach::Detachable::new(run);
    let record = match tokio::time::timeout(BLOCKING_WAIT, &mut run).await {
        Err(_) => return Ok(accepted(&state, unfinished).await),
        Ok(outcome) => outcome?,
    };
    let status = match record.response.status {
        ActivationStatus::Success => StatusCode::OK,
        ActivationStatus::InternalError => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_GATEWAY,
    };
    let body = if result_only {
        record.response.result.clone()
    } else {
        serde_json::to_value(&record).unwrap_or(Value::Null)
    };
    Ok((status, Json(body)).into_response())
}
