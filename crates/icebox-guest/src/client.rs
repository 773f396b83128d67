//! The host's client of one guest agent, over the UNIX socket of QEMU's virtio-serial
//! chardev. Cheap to clone; every clone shares one session.

use crate::lines::{read_json_exact, write_json};
use crate::mux::{self, MuxHandle, MuxStream};
use crate::protocol::{
    Ack, Command, Event, Hello, Open, Reply, Request, StartReply, StartRequest, Stats,
};
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncBufReadExt, BufReader, ReadHalf, WriteHalf};
use tokio::net::UnixStream;
use tokio::sync::oneshot;

/// How long a control request may take unless the call says otherwise (TCG guests are slow).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("the agent did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the agent session has ended")]
    Closed,
    #[error("the agent refused: {0}")]
    Refused(String),
    #[error("bad answer from the agent: {0}")]
    Protocol(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Reply>>>>;

struct Inner {
    mux: MuxHandle,
    control: tokio::sync::Mutex<WriteHalf<MuxStream>>,
    pending: Pending,
    next_id: AtomicU64,
    hello: Hello,
}

#[derive(Clone)]
pub struct AgentClient {
    inner: Arc<Inner>,
}

impl AgentClient {
    /// Connect to the chardev socket at `path` and complete a `hello` within `timeout`. The
    /// socket may not exist yet (QEMU starting) and the agent may still be booting: both are
    /// waited for.
    pub async fn connect(path: &Path, timeout: Duration) -> Result<AgentClient, AgentError> {
        tokio::time::timeout(timeout, Self::connect_inner(path))
            .await
            .map_err(|_| AgentError::Timeout(timeout))?
    }

    async fn connect_inner(path: &Path) -> Result<AgentClient, AgentError> {
        let socket = loop {
            match UnixStream::connect(path).await {
                Ok(s) => break s,
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        };
        let (mux, _inbound) = mux::start(socket, mux::Mode::Client);
        let stream = open_stream(&mux, &Open::Control).await?;
        let (read, write) = tokio::io::split(stream);
        let pending: Pending = Arc::default();
        tokio::spawn(read_replies(read, pending.clone()));
        let mut inner = Inner {
            mux,
            control: tokio::sync::Mutex::new(write),
            pending,
            next_id: AtomicU64::new(1),
            hello: placeholder_hello(),
        };
        inner.hello = call(&inner, Command::Hello, DEFAULT_TIMEOUT).await?;
        Ok(AgentClient {
            inner: Arc::new(inner),
        })
    }

    /// What the agent said when the session began.
    pub fn hello_info(&self) -> &Hello {
        &self.inner.hello
    }

    pub async fn hello(&self) -> Result<Hello, AgentError> {
        call(&self.inner, Command::Hello, DEFAULT_TIMEOUT).await
    }

    pub async fn ping(&self, timeout: Duration) -> Result<(), AgentError> {
        call::<serde_json::Value>(&self.inner, Command::Ping, timeout)
            .await
            .map(|_| ())
    }

    /// Set the guest clock to `time` (the host's now, normally).
    pub async fn set_time(&self, time: SystemTime) -> Result<(), AgentError> {
        let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
        // Nanoseconds since 1970 fit in a u64 until 2554.
        let unix_nanos = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX);
        call::<serde_json::Value>(
            &self.inner,
            Command::SetTime { unix_nanos },
            DEFAULT_TIMEOUT,
        )
        .await
        .map(|_| ())
    }

    /// Start an instance; with `wait_ready_ms` the reply comes once its proxy accepts (an
    /// exit before that is an error carrying the runtime's output).
    pub async fn start(&self, req: &StartRequest) -> Result<StartReply, AgentError> {
        let timeout = DEFAULT_TIMEOUT + Duration::from_millis(req.wait_ready_ms.unwrap_or(0));
        call(&self.inner, Command::Start(req.clone()), timeout).await
    }

    /// Kill the instance's cgroup, wait until it is empty and remove it. Unknown ids are fine.
    pub async fn stop(&self, instance: &str) -> Result<(), AgentError> {
        let cmd = Command::Stop {
            instance: instance.to_string(),
        };
        call::<serde_json::Value>(&self.inner, cmd, DEFAULT_TIMEOUT)
            .await
            .map(|_| ())
    }

    pub async fn freeze(&self, instance: &str) -> Result<(), AgentError> {
        let cmd = Command::Freeze {
            instance: instance.to_string(),
        };
        call::<serde_json::Value>(&self.inner, cmd, DEFAULT_TIMEOUT)
            .await
            .map(|_| ())
    }

    pub async fn thaw(&self, instance: &str) -> Result<(), AgentError> {
        let cmd = Command::Thaw {
            instance: instance.to_string(),
        };
        call::<serde_json::Value>(&self.inner, cmd, DEFAULT_TIMEOUT)
            .await
            .map(|_| ())
    }

    pub async fn stats(&self) -> Result<Stats, AgentError> {
        call(&self.inner, Command::Stats, DEFAULT_TIMEOUT).await
    }

    /// A byte stream to the instance's proxy socket in the guest.
    pub async fn open_connection(&self, instance: &str) -> Result<MuxStream, AgentError> {
        let open = Open::Connect {
            instance: instance.to_string(),
        };
        open_stream(&self.inner.mux, &open).await
    }

    /// The instance's stdout (`fd` 1) or stderr (2); replaces an earlier reader of it.
    pub async fn open_output(&self, instance: &str, fd: u8) -> Result<MuxStream, AgentError> {
        let open = Open::Output {
            instance: instance.to_string(),
            fd,
        };
        open_stream(&self.inner.mux, &open).await
    }

    /// Lifecycle events; it begins with the exits the agent knows of and has not forgotten
    /// (instances not stopped yet), so an event may be seen twice.
    pub async fn events(&self) -> Result<EventStream, AgentError> {
        let stream = open_stream(&self.inner.mux, &Open::Events).await?;
        Ok(EventStream {
            lines: BufReader::new(stream),
        })
    }

    /// Resolves when the session has ended (VM gone, agent dead, or [`Self::close`]).
    pub async fn closed(&self) {
        self.inner.mux.ended().await
    }

    pub fn is_closed(&self) -> bool {
        self.inner.mux.is_ended()
    }

    /// End the session. The agent keeps its instances and waits for the next one.
    pub async fn close(&self) {
        self.inner.mux.close().await
    }
}

pub struct EventStream {
    lines: BufReader<MuxStream>,
}

impl EventStream {
    /// The next event; `None` when the session ended.
    pub async fn next(&mut self) -> Option<Event> {
        let mut line = String::new();
        loop {
            line.clear();
            match self.lines.read_line(&mut line).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => match serde_json::from_str(&line) {
                    Ok(event) => return Some(event),
                    Err(e) => tracing::warn!("unknown agent event {line:?}: {e}"),
                },
            }
        }
    }
}

async fn open_stream(mux: &MuxHandle, open: &Open) -> Result<MuxStream, AgentError> {
    let mut stream = mux.open().await.map_err(|_| AgentError::Closed)?;
    write_json(&mut stream, open)
        .await
        .map_err(|_| AgentError::Closed)?;
    match read_json_exact::<_, Ack>(&mut stream).await {
        Ok(Some(Ack { ok: true, .. })) => Ok(stream),
        Ok(Some(Ack { error, .. })) => Err(AgentError::Refused(error.unwrap_or_default())),
        Ok(None) => Err(AgentError::Closed),
        Err(e) => Err(AgentError::Protocol(e.to_string())),
    }
}

async fn call<T: DeserializeOwned>(
    inner: &Inner,
    command: Command,
    timeout: Duration,
) -> Result<T, AgentError> {
    let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = oneshot::channel();
    inner.pending.lock().unwrap().insert(id, tx);
    let forget = || {
        inner.pending.lock().unwrap().remove(&id);
    };
    {
        let mut w = inner.control.lock().await;
        if write_json(&mut *w, &Request { id, command }).await.is_err() {
            forget();
            return Err(AgentError::Closed);
        }
    }
    let reply = match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(_)) => return Err(AgentError::Closed),
        Err(_) => {
            forget();
            return Err(AgentError::Timeout(timeout));
        }
    };
    if !reply.ok {
        return Err(AgentError::Refused(reply.error.unwrap_or_default()));
    }
    serde_json::from_value(reply.result.unwrap_or(serde_json::Value::Null))
        .map_err(|e| AgentError::Protocol(e.to_string()))
}

async fn read_replies(read: ReadHalf<MuxStream>, pending: Pending) {
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        match serde_json::from_str::<Reply>(&line) {
            Ok(reply) => {
                if let Some(tx) = pending.lock().unwrap().remove(&reply.id) {
                    let _ = tx.send(reply);
                }
            }
            Err(e) => tracing::warn!("bad control reply {line:?}: {e}"),
        }
    }
    // Dropping the senders fails every call still waiting.
    pending.lock().unwrap().clear();
}

fn placeholder_hello() -> Hello {
    Hello {
        agent_version: String::new(),
        protocol: 0,
        kernel: String::new(),
        memory_total_bytes: 0,
        cpus: 0,
        numa_nodes: Vec::new(),
        instances: Vec::new(),
        uptime_ms: 0,
    }
}
