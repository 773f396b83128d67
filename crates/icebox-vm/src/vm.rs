//! One booted VM: its QEMU process, an agent session and two QMP monitors (async for
//! everything, blocking for the synchronous freeze/thaw), all files in one directory.
//! Both the 1:1 backend and N:1 VMs start theirs through [`Vm::boot`].

use crate::qemu::{QemuProcess, VmConfig};
use crate::qmp::{Qmp, QmpSync};
use icebox_guest::AgentClient;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The files of a VM in its directory.
#[derive(Debug, Clone)]
pub struct VmPaths {
    pub dir: PathBuf,
    pub agent_socket: PathBuf,
    pub qmp_socket: PathBuf,
    pub qmp_sync_socket: PathBuf,
    pub console_log: PathBuf,
    pub qemu_log: PathBuf,
}

impl VmPaths {
    pub fn new(dir: &Path) -> VmPaths {
        VmPaths {
            dir: dir.to_path_buf(),
            agent_socket: dir.join("agent.sock"),
            qmp_socket: dir.join("qmp.sock"),
            qmp_sync_socket: dir.join("qmp-sync.sock"),
            console_log: dir.join("console.log"),
            qemu_log: dir.join("qemu.log"),
        }
    }

    /// Point `config`'s sockets and console at these files.
    pub fn apply(&self, config: &mut VmConfig) {
        config.agent_socket = self.agent_socket.clone();
        config.qmp_sockets = vec![self.qmp_socket.clone(), self.qmp_sync_socket.clone()];
        config.console_log = Some(self.console_log.clone());
    }

    /// The last lines of the guest console and of QEMU's own output, for error messages.
    pub fn diagnostics(&self) -> String {
        let tail = |p: &Path| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(15)..].join("\n")
        };
        format!(
            "QEMU: {}\nguest console:\n{}",
            tail(&self.qemu_log).trim(),
            tail(&self.console_log)
        )
    }
}

pub struct Vm {
    pub paths: VmPaths,
    pub qemu: Arc<QemuProcess>,
    pub qmp: Qmp,
    qmp_sync: Mutex<QmpSync>,
    pub agent: AgentClient,
}

#[derive(Debug, thiserror::Error)]
pub enum BootError {
    #[error("QEMU exited during boot ({status}).\n{diagnostics}")]
    QemuExited { status: String, diagnostics: String },
    #[error("the guest agent did not answer within {timeout:?}.\n{diagnostics}")]
    AgentTimeout {
        timeout: Duration,
        diagnostics: String,
    },
    #[error("{0}")]
    Other(String),
}

impl Vm {
    /// Start QEMU with `config` (its sockets and logs pointed into `paths`) and wait until the
    /// agent answers `hello`. On failure QEMU is killed; the directory is left to the caller.
    pub async fn boot(
        qemu_bin: &str,
        mut config: VmConfig,
        paths: VmPaths,
        timeout: Duration,
    ) -> Result<Vm, BootError> {
        paths.apply(&mut config);
        let qemu = QemuProcess::spawn(qemu_bin, &config.args(), &paths.dir, &paths.qemu_log)
            .map_err(|e| BootError::Other(format!("cannot start {qemu_bin}: {e}")))?;
        let connected = async {
            let agent = AgentClient::connect(&paths.agent_socket, timeout).await;
            let qmp = Qmp::connect(&paths.qmp_socket, timeout).await;
            (agent, qmp)
        };
        let result = tokio::select! {
            r = connected => r,
            status = qemu.exited() => {
                return Err(BootError::QemuExited { status: status.to_string(), diagnostics: paths.diagnostics() });
            }
        };
        let fail = |e: BootError| {
            qemu.kill();
            Err(e)
        };
        let (agent, qmp) = match result {
            (Ok(a), Ok(q)) => (a, q),
            (Err(icebox_guest::AgentError::Timeout(_)), _) => {
                return fail(BootError::AgentTimeout {
                    timeout,
                    diagnostics: paths.diagnostics(),
                })
            }
            (Err(e), _) => return fail(BootError::Other(format!("agent: {e}"))),
            (_, Err(e)) => return fail(BootError::Other(format!("QMP: {e}"))),
        };
        let qmp_sync = match QmpSync::connect(&paths.qmp_sync_socket, Duration::from_secs(10)) {
            Ok(q) => q,
            Err(e) => return fail(BootError::Other(format!("QMP (sync): {e}"))),
        };
        Ok(Vm {
            paths,
            qemu,
            qmp,
            qmp_sync: Mutex::new(qmp_sync),
            agent,
        })
    }

    /// Pause every vCPU (blocking; milliseconds).
    pub fn pause(&self) -> std::io::Result<()> {
        self.qmp_sync.lock().unwrap().execute("stop").map(drop)
    }

    pub fn resume(&self) -> std::io::Result<()> {
        self.qmp_sync.lock().unwrap().execute("cont").map(drop)
    }

    /// End the VM: `quit`, then SIGKILL if QEMU is still there after `grace`. Returns once
    /// QEMU has exited (or could not be killed within a few seconds more).
    pub async fn shutdown(&self, grace: Duration) {
        if self.qemu.exit_status().is_none() {
            let _ = self.qmp.quit(grace).await;
            if tokio::time::timeout(grace, self.qemu.exited())
                .await
                .is_err()
                && !self.qemu.kill_and_wait(Duration::from_secs(5)).await
            {
                tracing::error!(pid = self.qemu.pid(), "QEMU did not die after SIGKILL");
            }
        }
    }
}

/// A QEMU started with `-incoming defer` whose device state was loaded from a VM snapshot:
/// paused, its agent not yet connected. [`IncomingVm::resume`] makes it a [`Vm`]. Dropping it
/// kills its QEMU.
pub struct IncomingVm {
    pub paths: VmPaths,
    pub qemu: Arc<QemuProcess>,
    pub qmp: Qmp,
    qmp_sync: Option<QmpSync>,
}

impl Vm {
    /// Start QEMU with `config` (which must have `incoming_defer` and the snapshot's memory
    /// backend) and load the device state from `state` with the `x-ignore-shared` capability:
    /// the guest RAM is the file `config` maps, not part of the stream. The VM stays paused.
    pub async fn incoming(
        qemu_bin: &str,
        mut config: VmConfig,
        paths: VmPaths,
        state: &Path,
        timeout: Duration,
    ) -> Result<IncomingVm, BootError> {
        paths.apply(&mut config);
        config.incoming_defer = true;
        let qemu = QemuProcess::spawn(qemu_bin, &config.args(), &paths.dir, &paths.qemu_log)
            .map_err(|e| BootError::Other(format!("cannot start {qemu_bin}: {e}")))?;
        let loaded = async {
            let qmp = Qmp::connect(&paths.qmp_socket, timeout)
                .await
                .map_err(|e| format!("QMP: {e}"))?;
            let qmp_sync = QmpSync::connect(&paths.qmp_sync_socket, Duration::from_secs(10))
                .map_err(|e| format!("QMP (sync): {e}"))?;
            qmp.migrate_set_capabilities(&[("x-ignore-shared", true)])
                .await
                .map_err(|e| e.to_string())?;
            let uri = format!("exec:cat {}", crate::qmp::shell_quote(state));
            qmp.migrate_incoming(&uri)
                .await
                .map_err(|e| e.to_string())?;
            wait_migration(&qmp, timeout).await?;
            Ok::<_, String>((qmp, qmp_sync))
        };
        let result = tokio::select! {
            r = loaded => r,
            status = qemu.exited() => {
                return Err(BootError::QemuExited { status: status.to_string(), diagnostics: paths.diagnostics() });
            }
        };
        match result {
            Ok((qmp, qmp_sync)) => Ok(IncomingVm {
                paths,
                qemu,
                qmp,
                qmp_sync: Some(qmp_sync),
            }),
            Err(e) => {
                qemu.kill();
                Err(BootError::Other(format!(
                    "loading the snapshot's device state failed: {e}\n{}",
                    paths.diagnostics()
                )))
            }
        }
    }
}

/// Polls `query-migrate` until the migration completed (QEMU emits no reply to
/// `migrate-incoming` once the stream is in, only a status).
pub(crate) async fn wait_migration(qmp: &Qmp, timeout: Duration) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let info = qmp.query_migrate().await.map_err(|e| e.to_string())?;
        match info.get("status").and_then(|s| s.as_str()).unwrap_or("") {
            "completed" => return Ok(()),
            "failed" | "cancelled" => {
                let why = info
                    .get("error-desc")
                    .and_then(|s| s.as_str())
                    .unwrap_or("no reason given");
                return Err(format!("migration failed: {why}"));
            }
            _ => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("migration not completed within {timeout:?}"));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

impl IncomingVm {
    /// Run the guest (`cont`) and open a new agent session: the agent has been waiting for one
    /// since the snapshot's session was closed.
    pub async fn resume(mut self, timeout: Duration) -> Result<Vm, BootError> {
        if let Err(e) = self.qmp.cont().await {
            return Err(BootError::Other(format!("cont: {e}")));
        }
        let agent = tokio::select! {
            r = AgentClient::connect(&self.paths.agent_socket, timeout) => r,
            status = self.qemu.exited() => {
                return Err(BootError::QemuExited { status: status.to_string(), diagnostics: self.paths.diagnostics() });
            }
        };
        let agent = match agent {
            Ok(a) => a,
            Err(icebox_guest::AgentError::Timeout(_)) => {
                return Err(BootError::AgentTimeout {
                    timeout,
                    diagnostics: self.paths.diagnostics(),
                })
            }
            Err(e) => return Err(BootError::Other(format!("agent: {e}"))),
        };
        let qmp_sync = self.qmp_sync.take().expect("taken only here");
        Ok(Vm {
            paths: self.paths.clone(),
            qemu: self.qemu.clone(),
            qmp: self.qmp.clone(),
            qmp_sync: Mutex::new(qmp_sync),
            agent,
        })
    }
}

impl Drop for IncomingVm {
    /// Not resumed (a failed restore): nobody else will end this QEMU. After `resume` the
    /// [`Vm`] owns it.
    fn drop(&mut self) {
        if self.qmp_sync.is_some() && self.qemu.exit_status().is_none() {
            self.qemu.kill();
        }
    }
}

impl Drop for Vm {
    /// Nobody can reach a VM whose handle is gone: it must not outlive it (a panicking test,
    /// an abandoned start). A daemon that crashes runs no Drop; its VMs are orphans for
    /// `cleanup_orphans`.
    fn drop(&mut self) {
        if self.qemu.exit_status().is_none() {
            self.qemu.kill();
        }
    }
}
