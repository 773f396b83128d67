//! One host session: the streams the host opens, each served by its own task.

use crate::instances::Agent;
use crate::{stats, system};
use icebox_guest::lines::{read_json_exact, write_json};
use icebox_guest::mux::{self, MuxStream};
use icebox_guest::protocol::{self, Ack, Command, Hello, Open, Reply, Request, Stats};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{broadcast, mpsc};

/// Serve one session until the host disconnects.
pub async fn serve<T>(io: T, agent: Arc<Agent>)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (_handle, mut inbound) = mux::start(io, mux::Mode::Server);
    while let Some(stream) = inbound.recv().await {
        let agent = agent.clone();
        tokio::spawn(async move {
            if let Err(e) = stream_task(stream, agent).await {
                tracing::debug!("stream ended: {e}");
            }
        });
    }
}

fn ack_err(e: impl std::fmt::Display) -> Ack {
    Ack {
        ok: false,
        error: Some(e.to_string()),
    }
}

const ACK_OK: Ack = Ack {
    ok: true,
    error: None,
};

async fn stream_task(mut stream: MuxStream, agent: Arc<Agent>) -> std::io::Result<()> {
    let Some(open) = read_json_exact::<_, Open>(&mut stream).await? else {
        return Ok(());
    };
    match open {
        Open::Control => {
            write_json(&mut stream, &ACK_OK).await?;
            control(stream, agent).await
        }
        Open::Connect { instance } => {
            let path = protocol::guest_socket_path(&instance);
            match tokio::net::UnixStream::connect(&path).await {
                Ok(mut proxy) => {
                    write_json(&mut stream, &ACK_OK).await?;
                    tokio::io::copy_bidirectional(&mut stream, &mut proxy).await?;
                    Ok(())
                }
                Err(e) => {
                    write_json(
                        &mut stream,
                        &ack_err(format!("cannot connect to {path}: {e}")),
                    )
                    .await
                }
            }
        }
        Open::Output { instance, fd } => {
            let Some(inst) = agent.get(&instance) else {
                return write_json(&mut stream, &ack_err(format!("no instance {instance}"))).await;
            };
            let output = match fd {
                1 => inst.stdout.clone(),
                2 => inst.stderr.clone(),
                _ => return write_json(&mut stream, &ack_err("fd must be 1 or 2")).await,
            };
            let reader = output.attach();
            write_json(&mut stream, &ACK_OK).await?;
            while let Some(chunk) = reader.next().await {
                stream.write_all(&chunk).await?;
            }
            stream.shutdown().await
        }
        Open::Events => {
            // Subscribe before replaying: an exit in between is sent twice, never lost.
            let mut rx = agent.events.subscribe();
            write_json(&mut stream, &ACK_OK).await?;
            for event in agent.exited() {
                write_json(&mut stream, &event).await?;
            }
            loop {
                match rx.recv().await {
                    Ok(event) => write_json(&mut stream, &event).await?,
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        for event in agent.exited() {
                            write_json(&mut stream, &event).await?;
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                }
            }
        }
    }
}

/// Requests are served concurrently (a `start` waiting for its proxy must not hold up a
/// `ping`); replies go out in completion order, matched by id.
async fn control(stream: MuxStream, agent: Arc<Agent>) -> std::io::Result<()> {
    let (read, mut write) = tokio::io::split(stream);
    let (tx, mut rx) = mpsc::unbounded_channel::<Reply>();
    let writer = tokio::spawn(async move {
        while let Some(reply) = rx.recv().await {
            if write_json(&mut write, &reply).await.is_err() {
                break;
            }
        }
    });
    let mut lines = BufReader::new(read).lines();
    while let Some(line) = lines.next_line().await? {
        let request: Request = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => {
                let id = serde_json::from_str::<serde_json::Value>(&line)
                    .ok()
                    .and_then(|v| v.get("id")?.as_u64())
                    .unwrap_or(0);
                let _ = tx.send(Reply {
                    id,
                    ok: false,
                    result: None,
                    error: Some(format!("bad request: {e}")),
                });
                continue;
            }
        };
        let agent = agent.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let id = request.id;
            let reply = match handle(request.command, &agent).await {
                Ok(result) => Reply {
                    id,
                    ok: true,
                    result: Some(result),
                    error: None,
                },
                Err(error) => Reply {
                    id,
                    ok: false,
                    result: None,
                    error: Some(error),
                },
            };
            let _ = tx.send(reply);
        });
    }
    drop(tx);
    let _ = writer.await;
    Ok(())
}

fn json<T: serde::Serialize>(v: T) -> Result<serde_json::Value, String> {
    serde_json::to_value(v).map_err(|e| e.to_string())
}

#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "sysconf's CPU count, at least 1 after max(1)"
)]
async fn handle(command: Command, agent: &Arc<Agent>) -> Result<serde_json::Value, String> {
    match command {
        Command::Hello => json(Hello {
            agent_version: env!("CARGO_PKG_VERSION").to_string(),
            protocol: protocol::PROTOCOL_VERSION,
            kernel: system::kernel_release(),
            memory_total_bytes: stats::meminfo().get("MemTotal").copied().unwrap_or(0),
            // SAFETY: sysconf has no preconditions.
            cpus: unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32,
            numa_nodes: stats::numa_nodes(),
            instances: agent.ids(),
            uptime_ms: system::uptime_ms(),
        }),
        Command::Ping => Ok(serde_json::json!({})),
        Command::SetTime { unix_nanos } => {
            system::set_time(unix_nanos).map_err(|e| format!("clock_settime: {e}"))?;
            Ok(serde_json::json!({}))
        }
        Command::Start(req) => json(agent.start(req).await?),
        Command::Stop { instance } => json(agent.stop(&instance).await?),
        Command::Freeze { instance } => json(agent.set_frozen(&instance, true).await?),
        Command::Thaw { instance } => json(agent.set_frozen(&instance, false).await?),
        Command::Stats => json(Stats {
            meminfo: stats::meminfo(),
            nodes: stats::node_meminfo(),
            vmstat: stats::vmstat(),
            instances: agent.instance_stats(),
        }),
    }
}
