//! HTTP/1.1 client for an action proxy's UNIX socket, with connection reuse: the warm path
//! must not pay a connect + handshake per activation.

use crate::output_budget::{Charge, OutputBudget};
use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::UnixStream;

/// Largest response accepted from a runtime (OpenWhisk caps results far lower; this only
/// protects the daemon).
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot connect to the runtime: {0}")]
    Connect(std::io::Error),
    /// The connection broke mid-request: usually the runtime died.
    #[error("the runtime closed the connection: {0}")]
    Transport(String),
    #[error("the runtime's response exceeds {MAX_RESPONSE_BYTES} bytes")]
    TooLarge,
    /// The node's output budget had no room left for the response.
    #[error("the node already holds {0} bytes of activation output, its most")]
    NoRoom(u64),
}

#[derive(Debug, Clone)]
pub struct RuntimeReply {
    pub status: u16,
    pub body: Bytes,
}

impl RuntimeReply {
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

pub struct RuntimeClient {
    socket: PathBuf,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
    /// The directory `socket` is reached through, when it is not on the daemon's own
    /// filesystem; held for the client's life so its fd number always names that directory.
    _dir: Option<OwnedFd>,
}

impl RuntimeClient {
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        RuntimeClient {
            socket: socket.into(),
            idle: Mutex::new(Vec::new()),
            _dir: None,
        }
    }

    /// A client for the socket `name` inside an open directory (e.g. one in another mount
    /// namespace): connects through `/proc/self/fd/N/name`, as UNIX sockets have no connectat.
    pub fn in_dir(dir: OwnedFd, name: &str) -> Self {
        let socket = PathBuf::from(format!("/proc/self/fd/{}/{name}", dir.as_raw_fd()));
        RuntimeClient {
            socket,
            idle: Mutex::new(Vec::new()),
            _dir: Some(dir),
        }
    }

    /// For an instance that died before its socket could be reached: every request fails to
    /// connect.
    pub fn unreachable() -> Self {
        RuntimeClient::new(PathBuf::new())
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Poll until the socket accepts a connection (kept for the first request).
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut pause = Duration::from_micros(200);
        loop {
            if let Ok(sender) = self.connect().await {
                self.idle.lock().unwrap().push(sender);
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(5));
        }
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, RuntimeError> {
        let stream = UnixStream::connect(&self.socket)
            .await
            .map_err(RuntimeError::Connect)?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| RuntimeError::Transport(e.to_string()))?;
        tokio::spawn(async move {
            // Ends when either side closes; errors are seen by the request that was in flight.
            let _ = conn.await;
        });
        Ok(sender)
    }

    /// A pooled connection (true) or a new one (false).
    async fn sender(&self) -> Result<(SendRequest<Full<Bytes>>, bool), RuntimeError> {
        loop {
            let reused = self.idle.lock().unwrap().pop();
            match reused {
                Some(s) if !s.is_closed() => return Ok((s, true)),
                Some(_) => continue,
                None => return Ok((self.connect().await?, false)),
            }
        }
    }

    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<RuntimeReply, RuntimeError> {
        self.request_within(method, path, body, None)
            .await
            .map(|(reply, _)| reply)
    }

    /// A request whose response takes from `budget` as it is read (returned with it: hold it
    /// as long as the response is held); a response that does not fit is refused.
    async fn request_within(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
        budget: Option<&Arc<OutputBudget>>,
    ) -> Result<(RuntimeReply, Charge), RuntimeError> {
        let (mut sender, reused) = self.sender().await?;
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "runtime")
            .header("content-type", "application/json")
            .body(Full::new(body))
            .expect("static request parts are valid");
        let resp = match send(&mut sender, req).await {
            Ok(resp) => resp,
            // A pooled connection closed under us before the request went out (the runtime
            // closed it, or died while idle): nothing was delivered, so a new connection may
            // carry it. If the runtime is gone, that connect fails as Connect, which callers
            // know means the request never reached the action.
            Err(Unsent(Some(req), _)) if reused => {
                sender = self.connect().await?;
                send(&mut sender, req)
                    .await
                    .map_err(|e| RuntimeError::Transport(e.1))?
            }
            Err(e) => return Err(RuntimeError::Transport(e.1)),
        };
        let status = resp.status().as_u16();
        let mut incoming = resp.into_body();
        let mut body = BytesMut::new();
        let mut charge = Charge::default();
        while let Some(frame) = incoming.frame().await {
            let frame = frame.map_err(|e| RuntimeError::Transport(e.to_string()))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if body.len() + data.len() > MAX_RESPONSE_BYTES {
                return Err(RuntimeError::TooLarge);
            }
            if let Some(budget) = budget {
                if !budget.try_take(data.len() as u64, &mut charge) {
                    return Err(RuntimeError::NoRoom(budget.limit()));
                }
            }
            body.extend_from_slice(&data);
        }
        self.idle.lock().unwrap().push(sender);
        Ok((
            RuntimeReply {
                status,
                body: body.freeze(),
            },
            charge,
        ))
    }

    pub async fn post_json(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<RuntimeReply, RuntimeError> {
        let bytes = Bytes::from(serde_json::to_vec(body).expect("JSON values serialize"));
        self.request(Method::POST, path, bytes).await
    }

    /// [`Self::post_json`] whose response takes from the node's output budget.
    pub async fn post_json_within(
        &self,
        path: &str,
        body: &serde_json::Value,
        budget: &Arc<OutputBudget>,
    ) -> Result<(RuntimeReply, Charge), RuntimeError> {
        let bytes = Bytes::from(serde_json::to_vec(body).expect("JSON values serialize"));
        self.request_within(Method::POST, path, bytes, Some(budget))
            .await
    }

    pub async fn get(&self, path: &str) -> Result<RuntimeReply, RuntimeError> {
        self.request(Method::GET, path, Bytes::new()).await
    }

    /// Drop pooled connections (before freezing for a long time, or on destroy).
    pub fn close_idle(&self) {
        self.idle.lock().unwrap().clear();
    }
}

/// A request that failed, given back when it never left (the second field says why).
struct Unsent(Option<Request<Full<Bytes>>>, String);

async fn send(
    sender: &mut SendRequest<Full<Bytes>>,
    req: Request<Full<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, Unsent> {
    if let Err(e) = sender.ready().await {
        return Err(Unsent(Some(req), e.to_string()));
    }
    sender.try_send_request(req).await.map_err(|mut e| {
        let req = e.take_message();
        Unsent(req, e.into_error().to_string())
    })
}
