//! One instance of the `vm` backend: a VM whose agent runs one runtime.

use super::{host_socket, VmBackendConfig};
use crate::vm::Vm;
use async_trait::async_trait;
use icebox_core::MemoryStats;
use icebox_guest::protocol::{Event, InstanceStats, Stats};
use icebox_guest::{AgentError, EventStream, Forwarder};
use icebox_sandbox_api::ExitLatch;
use icebox_sandbox_api::{ExitCause, LogCollector, RuntimeClient, Sandbox};
use std::any::Any;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};
use tokio::task::JoinHandle;

pub struct VmSandbox {
    id: String,
    /// The id the agent in the guest knows the runtime by: `id`, except in a VM restored from
    /// a snapshot, where it is the template's.
    guest_id: String,
    vm: Vm,
    client: RuntimeClient,
    logs: Arc<LogCollector>,
    cfg: VmBackendConfig,
    forwarder: Mutex<Option<Forwarder>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    exit: ExitLatch,
    /// Why the instance ended, in words (runtime exit, agent silent, QEMU gone…).
    exit_reason: OnceLock<String>,
    frozen: AtomicBool,
    /// Bumped by every freeze and thaw, so a ping that failed across one is not held against
    /// the agent.
    pauses: AtomicU64,
    destroyed: AtomicBool,
    /// Set for a VM whose RAM is a shared file it can be snapshotted from.
    snapshot_source: OnceLock<SnapshotSource>,
    /// Set for a VM restored from a snapshot.
    restored: Option<Box<dyn RestoredVm>>,
}

/// What a VM restored from a snapshot keeps beside it while it runs (the snapshot module's
/// `Restored`: its loader, its recorder, its figures). The sandbox stops it when the VM goes
/// and reports its figures; the snapshot module, built on this backend, gets its own type
/// back (`restored_as`). A trait, so that this backend does not depend on that module.
pub trait RestoredVm: Any + Send + Sync {
    /// The instance is going: whatever still runs beside it stops.
    fn stop(&self);
    /// What `Sandbox::restore_stats` reports.
    fn stats(&self) -> serde_json::Value;
}

/// What a snapshot of this VM is taken from and must record.
#[derive(Debug, Clone)]
pub struct SnapshotSource {
    /// The guest RAM, a file on a tmpfs mapped shared by QEMU; removed with the VM.
    pub ram_file: PathBuf,
    /// The runtime's directory name (python, nodejs, java).
    pub runtime: String,
    pub memory_mib: u64,
}

impl VmSandbox {
    pub(super) fn new(
        id: String,
        vm: Vm,
        logs: Arc<LogCollector>,
        cfg: VmBackendConfig,
    ) -> Arc<VmSandbox> {
        Self::build(id.clone(), id, vm, logs, cfg, None)
    }

    /// A sandbox for a VM restored from a snapshot whose runtime the guest knows as
    /// `guest_id`.
    pub(crate) fn restored(
        id: String,
        guest_id: String,
        vm: Vm,
        cfg: VmBackendConfig,
        restored: Box<dyn RestoredVm>,
    ) -> Arc<VmSandbox> {
        let logs = Arc::new(LogCollector::new());
        Self::build(id, guest_id, vm, logs, cfg, Some(restored))
    }

    fn build(
        id: String,
        guest_id: String,
        vm: Vm,
        logs: Arc<LogCollector>,
        cfg: VmBackendConfig,
        restored: Option<Box<dyn RestoredVm>>,
    ) -> Arc<VmSandbox> {
        let client = RuntimeClient::new(host_socket(&vm.paths.dir));
        Arc::new(VmSandbox {
            id,
            guest_id,
            vm,
            client,
            logs,
            cfg,
            forwarder: Mutex::new(None),
            tasks: Mutex::new(Vec::new()),
            exit: ExitLatch::default(),
            exit_reason: OnceLock::new(),
            frozen: AtomicBool::new(false),
            pauses: AtomicU64::new(0),
            destroyed: AtomicBool::new(false),
            snapshot_source: OnceLock::new(),
            restored,
        })
    }

    pub(crate) fn set_snapshot_source(&self, source: SnapshotSource) {
        let _ = self.snapshot_source.set(source);
    }

    pub fn snapshot_source(&self) -> Option<&SnapshotSource> {
        self.snapshot_source.get()
    }

    pub fn guest_id(&self) -> &str {
        &self.guest_id
    }

    /// The restore state of a VM restored from a snapshot, if it is a `T`.
    pub(crate) fn restored_as<T: RestoredVm>(&self) -> Option<&T> {
        let state: &dyn Any = self.restored.as_deref()?;
        state.downcast_ref()
    }

    /// Ends the host's side of the VM (forwarder, agent session) and leaves the guest
    /// waiting for a new session: what a snapshot must hold.
    pub(crate) async fn detach(&self) {
        self.client.close_idle();
        self.forwarder.lock().unwrap().take();
        self.vm.agent.close().await;
    }

    /// The VM: its QEMU process, QMP and agent session (for snapshots and measurements).
    pub fn vm(&self) -> &Vm {
        &self.vm
    }

    /// Why the instance ended, once it has.
    pub fn exit_reason(&self) -> Option<&str> {
        self.exit_reason.get().map(String::as_str)
    }

    /// The guest's view of memory: the whole guest and this instance's cgroup.
    pub async fn guest_stats(&self) -> Result<(Stats, Option<InstanceStats>), AgentError> {
        let stats = self.vm.agent.stats().await?;
        let mine = stats.instances.get(&self.guest_id).cloned();
        Ok((stats, mine))
    }

    /// After the runtime started: its output into the log collector, the host socket, and
    /// the watch that ends the instance.
    pub(crate) async fn attach(self: &Arc<Self>, events: EventStream) -> Result<(), AgentError> {
        let agent = &self.vm.agent;
        let mut tasks = Vec::new();
        for (fd, stream) in [(1u8, 0usize), (2, 1)] {
            let output = agent.open_output(&self.guest_id, fd).await?;
            let logs = self.logs.clone();
            tasks.push(tokio::spawn(async move { logs.pump(output, stream).await }));
        }
        let forwarder = Forwarder::serve(
            agent.clone(),
            &self.guest_id,
            &host_socket(&self.vm.paths.dir),
        )?;
        *self.forwarder.lock().unwrap() = Some(forwarder);
        tasks.push(tokio::spawn(watch(Arc::downgrade(self), events)));
        self.tasks.lock().unwrap().extend(tasks);
        Ok(())
    }

    fn mark_exited(&self, cause: ExitCause, reason: String) {
        self.exit.set_then(cause, || {
            tracing::debug!(instance = %self.id, "{reason}");
            let _ = self.exit_reason.set(reason);
        });
    }
}

/// Ends the instance on the first of: its runtime exits (an agent event), the agent session
/// ends, QEMU exits, the agent stops answering pings.
async fn watch(me: std::sync::Weak<VmSandbox>, mut events: EventStream) {
    let Some(this) = me.upgrade() else { return };
    let id = this.guest_id.clone();
    let agent = this.vm.agent.clone();
    let qemu = this.vm.qemu.clone();
    let (interval, timeout) = (this.cfg.ping_interval, this.cfg.ping_timeout);
    drop(this);
    let runtime_exit = async {
        while let Some(event) = events.next().await {
            let Event::Exited {
                instance,
                code,
                signal,
                oom,
            } = event;
            if instance == id {
                return Some((code, signal, oom));
            }
        }
        None
    };
    let pings = async {
        loop {
            tokio::time::sleep(interval).await;
            let Some(this) = me.upgrade() else {
                return String::new();
            };
            let pauses = this.pauses.load(Ordering::SeqCst);
            if this.frozen.load(Ordering::SeqCst) {
                continue;
            }
            drop(this);
            match agent.ping(timeout).await {
                Ok(()) => {}
                Err(AgentError::Timeout(_)) => {
                    let Some(this) = me.upgrade() else {
                        return String::new();
                    };
                    if this.pauses.load(Ordering::SeqCst) == pauses
                        && !this.frozen.load(Ordering::SeqCst)
                    {
                        return format!("the guest agent did not answer a ping within {timeout:?}");
                    }
                }
                Err(e) => return format!("the guest agent session failed: {e}"),
            }
        }
    };
    let session_ended = async {
        // The session usually ends because QEMU did: say so, once its status is in.
        match tokio::time::timeout(Duration::from_secs(2), qemu.exited()).await {
            Ok(status) => format!("QEMU exited ({status})"),
            Err(_) => "the guest agent session ended".to_string(),
        }
    };
    let (cause, reason) = tokio::select! {
        exit = runtime_exit => match exit {
            Some((code, signal, oom)) => (
                if oom { ExitCause::OutOfMemory } else { ExitCause::Exited },
                format!("the runtime exited (code {code:?}, signal {signal:?}, OOM-killed: {oom})"),
            ),
            None => (ExitCause::Exited, session_ended.await),
        },
        _ = agent.closed() => (ExitCause::Exited, session_ended.await),
        status = qemu.exited() => (ExitCause::Exited, format!("QEMU exited ({status})")),
        reason = pings => (ExitCause::Exited, reason),
    };
    if let Some(this) = me.upgrade() {
        this.mark_exited(cause, reason);
    }
}

#[async_trait]
impl Sandbox for VmSandbox {
    fn id(&self) -> &str {
        &self.id
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn client(&self) -> &RuntimeClient {
        &self.client
    }

    fn logs(&self) -> &Arc<LogCollector> {
        &self.logs
    }

    fn pids(&self) -> Vec<u32> {
        if self.vm.qemu.exit_status().is_some() {
            return Vec::new();
        }
        vec![self.vm.qemu.pid()]
    }

    /// The host's view: what the QEMU process holds (guest RAM it touched, QEMU itself).
    fn memory(&self) -> MemoryStats {
        icebox_mem::measure_pids(&self.pids())
    }

    fn freeze(&self) -> std::io::Result<()> {
        self.pauses.fetch_add(1, Ordering::SeqCst);
        self.frozen.store(true, Ordering::SeqCst);
        self.vm.pause()
    }

    fn thaw(&self) -> std::io::Result<()> {
        self.vm.resume()?;
        self.frozen.store(false, Ordering::SeqCst);
        self.pauses.fetch_add(1, Ordering::SeqCst);
        // A paused guest's clock stood still: set it again (the runtime compares
        // __OW_DEADLINE with it). Asynchronous, as thaw is not.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let agent = self.vm.agent.clone();
            handle.spawn(async move {
                if let Err(e) = agent.set_time(SystemTime::now()).await {
                    tracing::debug!("cannot set the guest clock after a thaw: {e}");
                }
            });
        }
        Ok(())
    }

    async fn exited(&self) {
        self.exit.wait().await
    }

    fn exit_cause(&self) -> Option<ExitCause> {
        self.exit.get()
    }

    async fn destroy(&self) {
        if self.destroyed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.client.close_idle();
        self.forwarder.lock().unwrap().take();
        self.vm.shutdown(Duration::from_secs(2)).await;
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
        if let Some(restored) = &self.restored {
            restored.stop();
        }
        self.mark_exited(ExitCause::Exited, "destroyed".to_string());
        if let Some(source) = self.snapshot_source.get() {
            if let Err(e) = std::fs::remove_file(&source.ram_file) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(instance = %self.id, "cannot remove the VM's RAM file: {e}");
                }
            }
        }
        if let Err(e) = std::fs::remove_dir_all(&self.vm.paths.dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(instance = %self.id, "cannot remove the VM's directory: {e}");
            }
        }
        tracing::debug!(instance = %self.id, pid = self.vm.qemu.pid(), "VM destroyed");
    }

    fn restore_stats(&self) -> Option<serde_json::Value> {
        self.restored.as_ref().map(|r| r.stats())
    }
}
