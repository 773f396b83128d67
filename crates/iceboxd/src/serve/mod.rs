//! Serving HTTP/1.1 on a listener with the limits a daemon facing untrusted clients needs:
//! a deadline for request headers (which is also the keep-alive idle timeout: hyper starts it
//! whenever it waits for the next request), a cap on open connections that makes room by
//! closing the longest-idle one, and a shutdown that finishes within a grace period whatever
//! clients do (follow streams, half-sent headers or bodies). axum::serve has none of these
//! knobs, so the accept loop is ours; HTTP itself is hyper's.

mod body_limits;
mod busy_body;
mod connections;
mod metrics;
mod parse_errors;
mod trailing_slash;

pub use body_limits::BodyLimits;
pub use connections::ConnectionStats;
pub use metrics::ConnectionCollector;

use axum::body::Body;
use axum::Router;
use connections::{Admission, Connections};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower::ServiceExt;

#[derive(Debug, Clone, Copy)]
pub struct ServeLimits {
    /// Time a client has to send a request's headers, counted from when the connection is
    /// ready for its next request (so it also closes idle keep-alive connections).
    pub header_timeout: Duration,
    /// Open connections at most; a new one beyond it replaces the longest-idle one.
    pub max_connections: usize,
    /// After shutdown starts, how long open requests may finish before their connections
    /// are dropped.
    pub shutdown_grace: Duration,
}

pub enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

/// Serves `app` until `shutdown` resolves, then stops accepting, asks every connection to
/// finish and drops those still open after the grace period.
pub async fn serve(
    listener: Listener,
    app: Router,
    limits: ServeLimits,
    stats: Arc<ConnectionStats>,
    shutdown: impl Future<Output = ()>,
) {
    let connections = Arc::new(Connections::new(limits.max_connections, stats));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = accept(&listener) => match accepted {
                Ok(Accepted::Tcp(stream)) => {
                    let _ = stream.set_nodelay(true);
                    spawn_connection(&mut tasks, stream, &app, &connections, &limits, &stop_rx);
                }
                Ok(Accepted::Unix(stream)) => spawn_connection(&mut tasks, stream, &app, &connections, &limits, &stop_rx),
                Err(e) => {
                    // Out of fds or a connection reset before accept: not fatal for the
                    // server; back off briefly so EMFILE does not spin.
                    tracing::debug!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            },
            // Reap finished connections so the set does not grow with every client.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let open = tasks.len();
    if open > 0 {
        tracing::info!(
            "waiting up to {:?} for {open} connection(s) to finish",
            limits.shutdown_grace
        );
    }
    let drained = tokio::time::timeout(limits.shutdown_grace, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            "dropping {} connection(s) still open after the shutdown grace period",
            tasks.len()
        );
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}

enum Accepted {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

async fn accept(listener: &Listener) -> std::io::Result<Accepted> {
    match listener {
        Listener::Tcp(l) => l.accept().await.map(|(s, _)| Accepted::Tcp(s)),
        Listener::Unix(l) => l.accept().await.map(|(s, _)| Accepted::Unix(s)),
    }
}

fn spawn_connection<IO>(
    tasks: &mut JoinSet<()>,
    io: IO,
    app: &Router,
    connections: &Arc<Connections>,
    limits: &ServeLimits,
    stop: &watch::Receiver<bool>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let conn = match connections.admit() {
        Admission::Admitted(conn) => conn,
        Admission::Refused => return, // dropping `io` closes it
    };
    let app = app.clone();
    let header_timeout = limits.header_timeout;
    let mut stop = stop.clone();
    let tracked = conn.clone();
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        trailing_slash::trim_trailing_slash(&mut req);
        let busy = tracked.busy();
        let app = app.clone();
        async move {
            let response = app
                .oneshot(req.map(Body::new))
                .await
                .unwrap_or_else(|never: Infallible| match never {});
            // The connection stays busy until the response body is sent: a follow stream or
            // a slow download is not idle.
            Ok::<_, Infallible>(
                response.map(|body| Body::new(busy_body::BusyBody::new(body, busy))),
            )
        }
    });
    tasks.spawn(async move {
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .keep_alive(true);
        let served = builder.serve_connection(
            TokioIo::new(parse_errors::JsonParseErrors::new(io)),
            service,
        );
        tokio::pin!(served);
        let mut closing = false;
        // An idle connection closed to make room goes at once, even if it is half-way
        // through a header (which graceful shutdown would wait for).
        let evicted = tokio::time::sleep(Duration::MAX);
        tokio::pin!(evicted);
        let mut evicting = false;
        loop {
            tokio::select! {
                result = served.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!("connection ended: {e}");
                    }
                    break;
                }
                _ = conn.close_requested(), if !evicting => {
                    evicting = true;
                    evicted.as_mut().reset(tokio::time::Instant::now() + EVICTION_GRACE);
                    if !closing {
                        closing = true;
                        served.as_mut().graceful_shutdown();
                    }
                }
                _ = &mut evicted, if evicting => break,
                changed = stop.changed(), if !closing => {
                    if changed.is_err() || *stop.borrow() {
                        closing = true;
                        served.as_mut().graceful_shutdown();
                    }
                }
            }
        }
        conn.finished();
    });
}

/// How long an idle connection chosen to make room may take to close on its own.
const EVICTION_GRACE: Duration = Duration::from_millis(200);
