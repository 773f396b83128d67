//! Requests to other nodes: an invocation placed elsewhere, a GET of an activation another
//! node holds, a stored archive. A request that never reached the target (it refused or did
//! not accept the connection) ran nothing and may go to the next candidate; one that was sent
//! and got no answer may have run, so it is never sent again: the client gets a clear error.

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, Response};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use icebox_core::units::MIB_USIZE;
use std::time::Duration;

/// Set on a forwarded request (the sender's node id): the receiver runs it itself, so a
/// request is forwarded at most once whatever each node believes about the others.
pub const FORWARDED_BY: &str = "x-icebox-forwarded-by";

const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// A base64 archive up to OpenWhisk's 48 MiB code limit, with room.
const MAX_CODE_TEXT: usize = 80 * MIB_USIZE;

pub struct Outgoing<'a> {
    pub method: Method,
    pub path_and_query: &'a str,
    pub authorization: Option<&'a HeaderValue>,
    pub content_type: Option<&'a HeaderValue>,
    pub body: Bytes,
    /// How long the answer may take (the action's own time, and room).
    pub timeout: Duration,
}

pub enum ForwardOutcome {
    Answered(Response<Body>),
    /// Not delivered: nothing ran there.
    NotSent(String),
    /// Delivered, then no answer: it may have run.
    Lost(String),
}

pub struct Peers {
    client: Client<HttpConnector, Full<Bytes>>,
    admin_basic: String,
}

impl Peers {
    pub fn new(admin_basic: String) -> Peers {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        Peers {
            client: Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(30))
                .build(connector),
            admin_basic,
        }
    }

    pub async fn send(&self, base: &str, from: &str, out: Outgoing<'_>) -> ForwardOutcome {
        let mut request = Request::builder()
            .method(out.method)
            .uri(format!(
                "{}{}",
                base.trim_end_matches('/'),
                out.path_and_query
            ))
            .header(FORWARDED_BY, from);
        if let Some(auth) = out.authorization {
            request = request.header(axum::http::header::AUTHORIZATION, auth);
        }
        if let Some(ct) = out.content_type {
            request = request.header(axum::http::header::CONTENT_TYPE, ct);
        }
        let request = match request.body(Full::new(out.body)) {
            Ok(r) => r,
            Err(e) => return ForwardOutcome::NotSent(format!("bad forward request: {e}")),
        };
        match tokio::time::timeout(out.timeout, self.client.request(request)).await {
            Err(_) => ForwardOutcome::Lost(format!(
                "{base} accepted the request but did not answer within {:?}",
                out.timeout
            )),
            Ok(Err(e)) if e.is_connect() => {
                ForwardOutcome::NotSent(format!("cannot connect to {base}: {e}"))
            }
            Ok(Err(e)) => ForwardOutcome::Lost(format!("{base} failed while answering: {e}")),
            Ok(Ok(response)) => ForwardOutcome::Answered(response.map(Body::new)),
        }
    }

    /// A stored archive (as base64 text) from the node at `base`.
    pub async fn fetch_code(&self, base: &str, sha256: &str) -> Result<String, String> {
        let auth = HeaderValue::from_str(&self.admin_basic).map_err(|e| e.to_string())?;
        let path = format!("/icebox/v1/code/{sha256}");
        let out = Outgoing {
            method: Method::GET,
            path_and_query: &path,
            authorization: Some(&auth),
            content_type: None,
            body: Bytes::new(),
            timeout: Duration::from_secs(60),
        };
        let response = match self.send(base, "code-fetch", out).await {
            ForwardOutcome::Answered(r) => r,
            ForwardOutcome::NotSent(why) | ForwardOutcome::Lost(why) => return Err(why),
        };
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_CODE_TEXT)
            .collect()
            .await
            .map_err(|e| format!("reading the code from {base}: {e}"))?
            .to_bytes();
        if !status.is_success() {
            return Err(format!(
                "{base} answered {status}: {}",
                String::from_utf8_lossy(&body)
            ));
        }
        String::from_utf8(body.to_vec()).map_err(|e| e.to_string())
    }
}
