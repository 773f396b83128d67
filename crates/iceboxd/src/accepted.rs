//! Every 202 that hands a client an activation id leaves only once that id is stored: a
//! daemon killed while the activation runs then leaves it unfinished in the registry, and the
//! next start records it as failed, instead of the id being a 404 forever.
//!
//! Held here, where answers leave, rather than in the invoke handler: it covers every answer
//! that carries an id (a non-blocking invocation, and a blocking one past its wait), and reads
//! only the public contract of those answers (`POST .../actions/{name}`, 202,
//! `{"activationId": ...}`).

use crate::registry::Unfinished;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use percent_encoding::percent_decode_str;

/// A 202 body is one short JSON object; anything longer is not an invocation's.
const MAX_ACCEPTED_BODY: usize = 4096;

pub async fn hold_until_stored(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let invoked = (req.method() == Method::POST)
        .then(|| invoked_action(req.uri().path()))
        .flatten();
    let arrived_ms = crate::now_ms();
    let response = next.run(req).await;
    let Some((namespace, name)) = invoked.filter(|_| response.status() == StatusCode::ACCEPTED)
    else {
        return response;
    };
    let (parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_ACCEPTED_BODY).await {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::error!("cannot read the 202 answer of an invocation: {e}");
            return Response::from_parts(parts, Body::empty());
        }
    };
    let id = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.get("activationId")?.as_str().map(str::to_string));
    if let Some(activation_id) = id {
        // The namespace as the handler resolved it (`_` is the caller's own).
        let namespace = crate::api::resolve_namespace(&state, &namespace).unwrap_or(namespace);
        let version = state
            .action(&namespace, &name)
            .map(|a| a.version.clone())
            .unwrap_or_default();
        let unfinished = Unfinished {
            activation_id,
            subject: state.key.namespace.clone(),
            namespace,
            name,
            version,
            start: arrived_ms,
        };
        let id = unfinished.activation_id.clone();
        if let Err(why) = state.recorder.accept(unfinished).await {
            tracing::warn!(activation = %id, "answering 202 with the id kept in memory only: {why}");
        }
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// (namespace, action) of `/api/v1/namespaces/{ns}/actions/{name}`, decoded as the router does.
fn invoked_action(path: &str) -> Option<(String, String)> {
    let rest = path.strip_prefix("/api/v1/namespaces/")?;
    let mut parts = rest.split('/');
    let (namespace, kind, name) = (parts.next()?, parts.next()?, parts.next()?);
    if kind != "actions" || name.is_empty() || parts.any(|p| !p.is_empty()) {
        return None;
    }
    let decode = |s: &str| {
        percent_decode_str(s)
            .decode_utf8()
            .ok()
            .map(|s| s.into_owned())
    };
    Some((decode(namespace)?, decode(name)?))
}

#[cfg(test)]
mod tests {
    use super::invoked_action;

    #[test]
    fn only_invocation_paths_are_held() {
        let got = invoked_action;
        assert_eq!(
            got("/api/v1/namespaces/_/actions/hello"),
            Some(("_".into(), "hello".into()))
        );
        assert_eq!(
            got("/api/v1/namespaces/guest/actions/my%20action/"),
            Some(("guest".into(), "my action".into()))
        );
        assert_eq!(got("/api/v1/namespaces/_/actions/"), None);
        assert_eq!(got("/api/v1/namespaces/_/activations/x"), None);
        assert_eq!(got("/icebox/v1/snapshots/guest/hello"), None);
        assert_eq!(got("/api/v1/namespaces/_/actions/a/b"), None);
    }
}
