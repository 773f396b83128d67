//! QEMU's machine protocol (QMP) over a UNIX socket: the async client ([`Qmp`]) with command
//! ids and events, and a blocking one ([`QmpSync`]) for the warm path's synchronous
//! freeze/thaw. Each needs its own monitor (one `-mon` per socket in [`crate::VmConfig`]).

use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::UnixStream;
use tokio::sync::{broadcast, oneshot, watch};

#[derive(Debug, thiserror::Error)]
pub enum QmpError {
    #[error("QMP {command}: {class}: {desc}")]
    Command {
        command: String,
        class: String,
        desc: String,
    },
    #[error("QMP connection closed")]
    Closed,
    #[error("QMP did not answer within {0:?}")]
    Timeout(Duration),
    #[error("QMP: {0}")]
    Io(#[from] std::io::Error),
}

/// An asynchronous QMP event (`STOP`, `RESUME`, `SHUTDOWN`, `MIGRATION`, `BALLOON_CHANGE`, …).
#[derive(Debug, Clone)]
pub struct QmpEvent {
    pub event: String,
    pub data: Value,
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, (String, String)>>>>>;

#[derive(Clone)]
pub struct Qmp {
    writer: Arc<tokio::sync::Mutex<OwnedWriteHalf>>,
    pending: Pending,
    next_id: Arc<AtomicU64>,
    events: broadcast::Sender<QmpEvent>,
    closed: watch::Receiver<bool>,
}

pub const QMP_TIMEOUT: Duration = Duration::from_secs(30);

impl Qmp {
    /// Connect (waiting for QEMU to create the socket), read the greeting, enter command mode.
    pub async fn connect(path: &Path, timeout: Duration) -> Result<Qmp, QmpError> {
        tokio::time::timeout(timeout, Self::connect_inner(path))
            .await
            .map_err(|_| QmpError::Timeout(timeout))?
    }

    async fn connect_inner(path: &Path) -> Result<Qmp, QmpError> {
        let stream = loop {
            match UnixStream::connect(path).await {
                Ok(s) => break s,
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        };
        let (read, write) = stream.into_split();
        let mut lines = tokio::io::BufReader::new(read).lines();
        let greeting = lines.next_line().await?.ok_or(QmpError::Closed)?;
        if !greeting.contains("\"QMP\"") {
            return Err(QmpError::Io(std::io::Error::other(format!(
                "not a QMP greeting: {greeting}"
            ))));
        }
        let pending: Pending = Arc::default();
        let (events, _) = broadcast::channel(256);
        let (closed_tx, closed) = watch::channel(false);
        {
            let pending = pending.clone();
            let events = events.clone();
            tokio::spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                        continue;
                    };
                    if let Some(event) = msg.get("event").and_then(Value::as_str) {
                        let _ = events.send(QmpEvent {
                            event: event.to_string(),
                            data: msg.get("data").cloned().unwrap_or(Value::Null),
                        });
                        continue;
                    }
                    let Some(id) = msg.get("id").and_then(Value::as_u64) else {
                        continue;
                    };
                    let Some(tx) = pending.lock().unwrap().remove(&id) else {
                        continue;
                    };
                    let _ = tx.send(match msg.get("error") {
                        Some(e) => Err((
                            e.get("class")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                            e.get("desc")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                        )),
                        None => Ok(msg.get("return").cloned().unwrap_or(Value::Null)),
                    });
                }
                pending.lock().unwrap().clear();
                let _ = closed_tx.send(true);
            });
        }
        let qmp = Qmp {
            writer: Arc::new(tokio::sync::Mutex::new(write)),
            pending,
            next_id: Arc::new(AtomicU64::new(1)),
            events,
            closed,
        };
        qmp.execute("qmp_capabilities", None).await?;
        Ok(qmp)
    }

    /// Run a command; `Ok` carries its `return` value.
    pub async fn execute(
        &self,
        command: &str,
        arguments: Option<Value>,
    ) -> Result<Value, QmpError> {
        self.execute_timeout(command, arguments, QMP_TIMEOUT).await
    }

    pub async fn execute_timeout(
        &self,
        command: &str,
        arguments: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, QmpError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut msg = json!({"execute": command, "id": id});
        if let Some(args) = arguments {
            msg["arguments"] = args;
        }
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let mut line = serde_json::to_vec(&msg).expect("serializable");
        line.push(b'\n');
        if self.writer.lock().await.write_all(&line).await.is_err() {
            self.pending.lock().unwrap().remove(&id);
            return Err(QmpError::Closed);
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(Ok(v))) => Ok(v),
            Ok(Ok(Err((class, desc)))) => Err(QmpError::Command {
                command: command.to_string(),
                class,
                desc,
            }),
            Ok(Err(_)) => Err(QmpError::Closed),
            Err(_) => {
                self.pending.lock().unwrap().remove(&id);
                Err(QmpError::Timeout(timeout))
            }
        }
    }

    pub fn events(&self) -> broadcast::Receiver<QmpEvent> {
        self.events.subscribe()
    }

    pub async fn closed(&self) {
        let mut c = self.closed.clone();
        let _ = c.wait_for(|c| *c).await;
    }

    pub async fn stop(&self) -> Result<(), QmpError> {
        self.execute("stop", None).await.map(drop)
    }

    pub async fn cont(&self) -> Result<(), QmpError> {
        self.execute("cont", None).await.map(drop)
    }

    /// `running`, `paused`, `inmigrate`, `postmigrate`, …
    pub async fn status(&self) -> Result<String, QmpError> {
        let v = self.execute("query-status", None).await?;
        Ok(v.get("status")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string())
    }

    pub async fn qom_set(&self, path: &str, property: &str, value: Value) -> Result<(), QmpError> {
        let args = json!({"path": path, "property": property, "value": value});
        self.execute("qom-set", Some(args)).await.map(drop)
    }

    pub async fn qom_get(&self, path: &str, property: &str) -> Result<Value, QmpError> {
        self.execute("qom-get", Some(json!({"path": path, "property": property})))
            .await
    }

    pub async fn query_memory_devices(&self) -> Result<Value, QmpError> {
        self.execute("query-memory-devices", None).await
    }

    /// Ask the balloon driver to leave the guest `bytes` of RAM.
    pub async fn balloon(&self, bytes: u64) -> Result<(), QmpError> {
        self.execute("balloon", Some(json!({"value": bytes})))
            .await
            .map(drop)
    }

    /// The guest's current RAM size as the balloon sees it, in bytes.
    pub async fn query_balloon(&self) -> Result<u64, QmpError> {
        let v = self.execute("query-balloon", None).await?;
        Ok(v.get("actual").and_then(Value::as_u64).unwrap_or(0))
    }

    pub async fn migrate_set_capabilities(&self, caps: &[(&str, bool)]) -> Result<(), QmpError> {
        let list: Vec<Value> = caps
            .iter()
            .map(|(c, on)| json!({"capability": c, "state": on}))
            .collect();
        self.execute(
            "migrate-set-capabilities",
            Some(json!({"capabilities": list})),
        )
        .await
        .map(drop)
    }

    pub async fn migrate(&self, uri: &str) -> Result<(), QmpError> {
        self.execute("migrate", Some(json!({"uri": uri})))
            .await
            .map(drop)
    }

    pub async fn migrate_incoming(&self, uri: &str) -> Result<(), QmpError> {
        self.execute("migrate-incoming", Some(json!({"uri": uri})))
            .await
            .map(drop)
    }

    pub async fn query_migrate(&self) -> Result<Value, QmpError> {
        self.execute("query-migrate", None).await
    }

    /// Ask QEMU to exit (it answers before it goes).
    pub async fn quit(&self, timeout: Duration) -> Result<(), QmpError> {
        self.execute_timeout("quit", None, timeout).await.map(drop)
    }
}

/// `path` as one word for the shell QEMU runs `exec:` migration URIs with.
pub fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.to_string_lossy().replace('\'', r"'\''"))
}

/// A blocking QMP client: `Sandbox::freeze`/`thaw` are synchronous, and a VM's are one
/// command each.
pub struct QmpSync {
    reader: BufReader<std::os::unix::net::UnixStream>,
    writer: std::os::unix::net::UnixStream,
    next_id: u64,
}

impl QmpSync {
    pub fn connect(path: &Path, timeout: Duration) -> std::io::Result<QmpSync> {
        let stream = std::os::unix::net::UnixStream::connect(path)?;
        stream.set_read_timeout(Some(timeout))?;
        let mut q = QmpSync {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            next_id: 1,
        };
        let mut greeting = String::new();
        q.reader.read_line(&mut greeting)?;
        q.execute("qmp_capabilities")?;
        Ok(q)
    }

    pub fn execute(&mut self, command: &str) -> std::io::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let mut line =
            serde_json::to_vec(&json!({"execute": command, "id": id})).expect("serializable");
        line.push(b'\n');
        self.writer.write_all(&line)?;
        loop {
            let mut reply = String::new();
            if self.reader.read_line(&mut reply)? == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::BrokenPipe,
                    "QMP closed",
                ));
            }
            let Ok(msg) = serde_json::from_str::<Value>(&reply) else {
                continue;
            };
            if msg.get("id").and_then(Value::as_u64) != Some(id) {
                continue; // an event
            }
            return match msg.get("error") {
                Some(e) => Err(std::io::Error::other(format!("QMP {command}: {e}"))),
                None => Ok(msg.get("return").cloned().unwrap_or(Value::Null)),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn exec_uris_survive_quotes_and_spaces_in_paths() {
        let p = std::path::Path::new("/s/it's a dir/state");
        let quoted = super::shell_quote(p);
        assert_eq!(quoted, r"'/s/it'\''s a dir/state'");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {quoted}"))
            .output()
            .unwrap();
        assert_eq!(out.stdout, p.as_os_str().as_encoded_bytes());
    }
}
