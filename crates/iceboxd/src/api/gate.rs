//! What every request passes before a handler: the key check (from the headers alone, before
//! a byte of the body is kept), then the body read into memory under the body limit, a
//! time limit and a node-wide byte budget; and on the way out, errors in OpenWhisk's JSON
//! shape even when axum's extractors produced them.

use super::ApiError;
use crate::serve::BodyLimits;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use futures::StreamExt;
use icebox_core::units::MIB;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Paths answered without a key.
const PUBLIC_PATHS: [&str; 2] = ["/icebox/v1/health", "/metrics"];

/// How much of a refused or oversized body is read and thrown away (never kept), and for how
/// long, so that its client gets to read the answer rather than a broken pipe.
const DRAIN_MAX: u64 = 128 * MIB;
const DRAIN_TIME: Duration = Duration::from_secs(2);

/// Refuses a request without a valid key before its body is read, so an unauthenticated
/// client cannot make the daemon hold its payload. The body is drained (discarded, up to a
/// bound) and the connection closed, so the client reads the 401.
pub async fn require_key(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    if PUBLIC_PATHS.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match state.tenants.authenticate(header) {
        Ok(caller) => {
            // Handlers scope everything they read or change to this caller.
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        Err(e) => {
            drain(req.into_body()).await;
            close_after(ApiError::unauthorized(e.to_string()).into_response())
        }
    }
}

/// Reads the body (up to the payload limit) before the handler runs, holding budget permits
/// for what it keeps until the handler's answer is built. A reply sent while the client is
/// still writing its body reaches it as a broken pipe rather than as the reply; reading it
/// first avoids that, and lets the limits apply in one place.
pub async fn read_body(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let limits = &state.body;
    let (parts, body) = req.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = declared.filter(|&n| n > limits.max_body as u64) {
        drain_if_small(body, declared).await;
        return close_after(ApiError::body_too_large(Some(n), limits.max_body).into_response());
    }
    let deadline = tokio::time::Instant::now() + limits.timeout;
    let (kept, _permits) = match read_within_budget(limits, body, declared, deadline).await {
        Ok(read) => read,
        Err(refusal) => return close_after(refusal.into_response()),
    };
    next.run(Request::from_parts(parts, Body::from(kept))).await
}

async fn read_within_budget(
    limits: &BodyLimits,
    body: Body,
    declared: Option<u64>,
    deadline: tokio::time::Instant,
) -> Result<(bytes::Bytes, Option<OwnedSemaphorePermit>), ApiError> {
    let mut permits: Option<OwnedSemaphorePermit> = None;
    // A declared length is reserved up front; a chunked body chunk by chunk.
    // Above max_payload (a usize) it was refused already.
    let mut reserved = usize::try_from(declared.unwrap_or(0)).unwrap_or(usize::MAX);
    reserve(&limits.budget, reserved, &mut permits, deadline).await?;
    let mut stream = body.into_data_stream();
    let mut kept = BytesMut::with_capacity(reserved);
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next())
            .await
            .map_err(|_| {
                ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "The request body was not received within {} seconds.",
                        limits.timeout.as_secs()
                    ),
                )
            })?;
        let Some(chunk) = next else { break };
        let chunk = chunk
            .map_err(|e| ApiError::bad_request(format!("cannot read the request body: {e}")))?;
        if kept.len() + chunk.len() > limits.max_body {
            let rest = Body::from_stream(stream);
            drain(rest).await;
            return Err(ApiError::body_too_large(None, limits.max_body));
        }
        let needed = (kept.len() + chunk.len()).saturating_sub(reserved);
        if needed > 0 {
            reserve(&limits.budget, needed, &mut permits, deadline).await?;
            reserved += needed;
        }
        kept.extend_from_slice(&chunk);
    }
    Ok((kept.freeze(), permits))
}

/// Waits for `n` more bytes of the budget and adds them to `permits`.
/// Past the deadline the node is too busy holding other bodies: 503, retry later.
async fn reserve(
    budget: &Arc<Semaphore>,
    n: usize,
    permits: &mut Option<OwnedSemaphorePermit>,
    deadline: tokio::time::Instant,
) -> Result<(), ApiError> {
    if n == 0 {
        return Ok(());
    }
    // One acquisition takes at most u32::MAX permits, so a body over 4 GiB (a --max-payload
    // that large) is reserved in parts; `n as u32` reserved only n mod 2^32 of it.
    let mut left = n;
    while left > 0 {
        let part = left.min(u32::MAX as usize);
        left -= part;
        let acquire = budget
            .clone()
            .acquire_many_owned(u32::try_from(part).expect("at most u32::MAX"));
        let got = match tokio::time::timeout_at(deadline, acquire).await {
            Ok(Ok(got)) => got,
            Ok(Err(_)) => return Err(ApiError::internal("the request-body budget is closed")),
            Err(_) => {
                let mut busy = ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "The node is holding too many request bodies in memory; retry later.",
                );
                busy.retry_after = Some(1);
                return Err(busy);
            }
        };
        match permits {
            Some(p) => p.merge(got),
            None => *permits = Some(got),
        }
    }
    Ok(())
}

async fn drain_if_small(body: Body, declared: Option<u64>) {
    if declared.is_none_or(|n| n <= DRAIN_MAX) {
        drain(body).await;
    }
}

/// Reads and discards up to DRAIN_MAX bytes for at most DRAIN_TIME.
async fn drain(body: Body) {
    let mut stream = body.into_data_stream();
    let _ = tokio::time::timeout(DRAIN_TIME, async {
        let mut drained = 0u64;
        while let Some(Ok(chunk)) = stream.next().await {
            drained += chunk.len() as u64;
            if drained > DRAIN_MAX {
                break;
            }
        }
    })
    .await;
}

/// The connection closes after this answer: what the client may still be sending is not read.
fn close_after(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// axum's own rejections (a malformed query or path, a wrong method) are plain text; clients
/// of an OpenWhisk API expect `{"error", "code"}` for every error.
pub async fn json_errors(req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 << 10)
        .await
        .unwrap_or_default();
    let mut message = String::from_utf8_lossy(&text).trim().to_string();
    if message.is_empty() {
        message = status.canonical_reason().unwrap_or("error").to_string();
    }
    let mut rebuilt = ApiError::new(status, message).into_response();
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            rebuilt.headers_mut().insert(name.clone(), value.clone());
        }
    }
    rebuilt
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body of more than u32::MAX bytes holds as many permits as it has bytes (a
    /// --max-payload over 4 GiB): before, `n as u32` kept only n mod 2^32 of them.
    #[tokio::test]
    async fn a_body_over_4_gib_reserves_all_of_its_bytes() {
        let total = 5usize << 30;
        let budget = Arc::new(Semaphore::new(total));
        let n = (4usize << 30) + 10;
        let mut permits = None;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        reserve(&budget, n, &mut permits, deadline).await.unwrap();
        assert_eq!(budget.available_permits(), total - n);
        drop(permits);
        assert_eq!(budget.available_permits(), total);
    }
}
