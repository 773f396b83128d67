//! The node API (/icebox/v1): health, instances, memory, lifecycle events; and /metrics.

use super::ApiError;
use crate::pool::ControlError;
use crate::state::AppState;
use crate::tenants::Caller;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use axum::Extension;
use axum::Json;
use futures::stream::{self, Stream, StreamExt};
use icebox_core::api::{Health, InstanceView, IsolationView, MemoryView};
use serde::Deserialize;
use std::convert::Infallible;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::BroadcastStream;

pub async fn health(State(state): State<AppState>) -> Json<Health> {
    let backends = state.pool.backends();
    let backend = backends.process();
    let reason = state
        .recorder
        .degraded()
        .or_else(|| {
            state
                .pool
                .offload_pool_error()
                .map(|e| format!("offload pool: {e}; offloading stopped, instances keep running"))
        })
        .or_else(|| state.cluster.as_ref().and_then(|c| c.degraded()));
    Json(Health {
        status: if reason.is_some() { "degraded" } else { "ok" }.into(),
        reason,
        version: env!("CARGO_PKG_VERSION").into(),
        uptime_s: state.started.elapsed().as_secs(),
        isolation: backend.name().into(),
        cgroup: backend.cgroup_version().into(),
        instances: state.pool.instance_count(),
        default_isolation: backends.default.as_str().into(),
        isolations: backends
            .describe()
            .into_iter()
            .map(|(isolation, backend)| IsolationView {
                isolation: isolation.as_str().into(),
                snapshots: backends
                    .get(isolation)
                    .is_ok_and(|b| b.snapshots().is_some()),
                backend: backend.as_ref().ok().map(|b| b.to_string()),
                unavailable: backend.err(),
            })
            .collect(),
        registry: Some(state.recorder.registry_usage(&state.registry)),
        code: Some({
            let usage = state.code.usage();
            icebox_core::api::CodeUsage {
                files: usage.files,
                bytes: usage.bytes,
                max_code_size: state.body.max_code_size,
            }
        }),
    })
}

/// A tenant sees its own instances; the admin key sees every one (stem cells included).
pub async fn instances(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Json<Vec<InstanceView>> {
    let mut views = state.pool.instance_views();
    if !caller.admin {
        views.retain(|v| v.action.contains('/') && caller.sees(super::namespace_of(&v.action)));
    }
    Json(views)
}

/// An instance the caller may not see answers as if it did not exist.
fn check_owner(state: &AppState, caller: &Caller, id: &str) -> Result<(), ApiError> {
    if caller.admin {
        return Ok(());
    }
    match state.pool.instance(id) {
        Some(i) if caller.sees(&i.action.namespace) => Ok(()),
        _ => Err(ApiError::not_found(format!(
            "There is no instance '{id}' (it may have been evicted)."
        ))),
    }
}

#[derive(Deserialize)]
pub struct InstanceQuery {
    fresh: Option<String>,
}

pub async fn instance(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<InstanceQuery>,
) -> Result<Json<InstanceView>, ApiError> {
    check_owner(&state, &caller, &id)?;
    state
        .pool
        .instance_view(&id, super::query::flag("fresh", q.fresh.as_deref(), false)?)
        .await
        .map(Json)
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "There is no instance '{id}' (it may have been evicted)."
            ))
        })
}

/// Evict an idle or frozen instance now; a busy one is refused (409): its activation would die.
pub async fn evict(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    check_owner(&state, &caller, &id)?;
    if state.pool.evict_idle(&id).await {
        return Ok(Json(serde_json::json!({"instance": id, "evicted": true})));
    }
    if state.pool.has_instance(&id) {
        return Err(ApiError::conflict(format!(
            "Instance '{id}' is running an activation; it can be evicted once idle."
        )));
    }
    Err(ApiError::not_found(format!(
        "There is no instance '{id}' (it may have been evicted)."
    )))
}

#[derive(Deserialize)]
pub struct StatsQuery {
    gc: Option<String>,
}

/// The runtime's heap statistics (its /icebox/stats), optionally after a full collection.
pub async fn instance_stats(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<StatsQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    check_owner(&state, &caller, &id)?;
    let gc = super::query::flag("gc", q.gc.as_deref(), false)?;
    let path = if gc {
        "/icebox/stats?gc=1"
    } else {
        "/icebox/stats"
    };
    state
        .pool
        .runtime_get(&id, path)
        .await
        .map(Json)
        .map_err(|e| match e {
            ControlError::NotFound(_) => ApiError::not_found(format!(
                "There is no instance '{id}' (it may have been evicted)."
            )),
            other => ApiError::new(
                axum::http::StatusCode::BAD_GATEWAY,
                format!("heap statistics of instance '{id}': {other}"),
            ),
        })
}

#[derive(Deserialize)]
pub struct ReclaimQuery {
    variant: Option<String>,
}

/// Reclaim one idle instance's frozen garbage now (Desiccant), whatever the policy thinks.
pub async fn reclaim(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<ReclaimQuery>,
) -> Result<Json<icebox_core::api::ReclaimReport>, ApiError> {
    check_owner(&state, &caller, &id)?;
    let desiccant = state
        .pool
        .component::<crate::pool::desiccant::Desiccant>()
        .ok_or_else(|| ApiError::conflict("Desiccant is not part of this node's pool."))?;
    desiccant
        .reclaim(&state.pool, &id, q.variant)
        .await
        .map(Json)
        .map_err(|e| match e {
            ControlError::NotFound(_) => ApiError::not_found(format!(
                "There is no instance '{id}' (it may have been evicted)."
            )),
            ControlError::Busy(_) => ApiError::conflict(e.to_string()),
            ControlError::Status { status: 400, body } => {
                ApiError::bad_request(format!("the runtime refused the reclaim: {body}"))
            }
            other => ApiError::new(
                axum::http::StatusCode::BAD_GATEWAY,
                format!("reclaim of instance '{id}': {other}"),
            ),
        })
}

pub async fn memory(State(state): State<AppState>) -> Json<MemoryView> {
    Json(state.pool.memory_view())
}

pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    state.pool.refresh_gauges();
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
}

#[derive(Deserialize)]
pub struct EventsQuery {
    since: Option<u64>,
    follow: Option<String>,
}

pub async fn events(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let follow = super::query::flag("follow", q.follow.as_deref(), true)?;
    let last_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    // No cursor: live events only.
    let since = q.since.or(last_id);
    let (past, rx) = state.events.subscribe(since.unwrap_or(u64::MAX));
    let last_replayed = past.last().map(|e| e.seq).or(since).unwrap_or(0);
    let to_event = |e: &icebox_core::LifecycleEvent| {
        Event::default()
            .id(e.seq.to_string())
            .event("lifecycle")
            .json_data(e)
            .expect("events serialize")
    };
    // A tenant's stream carries its own instances' events only.
    let visible = move |e: &icebox_core::LifecycleEvent| {
        caller.admin || (e.action.contains('/') && caller.sees(super::namespace_of(&e.action)))
    };
    let replay = stream::iter(
        past.iter()
            .filter(|e| visible(e))
            .map(to_event)
            .map(Ok)
            .collect::<Vec<_>>(),
    );
    let live = BroadcastStream::new(rx).filter_map(move |item| {
        let out = match item {
            Ok(e) if e.seq > last_replayed && visible(&e) => Some(Ok(to_event(&e))),
            Ok(_) => None,
            // A slow reader skipped events: say so, it can re-read from its cursor.
            Err(BroadcastStreamRecvError::Lagged(n)) => {
                Some(Ok(Event::default().event("lagged").data(n.to_string())))
            }
        };
        async move { out }
    });
    let stream = if follow {
        replay.chain(live).boxed()
    } else {
        replay.boxed()
    };
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
