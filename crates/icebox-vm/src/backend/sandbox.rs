//! One instance of the `vm` backend: a VM whose agent runs one runtime.

use super::{host_socket, VmBackendConfig};
use crate::vm::Vm;
use async_trait::async_trait;
use icebox_core::MemoryStats;
use icebox_guest::protocol::{Event, InstanceStats, Stats};
use icebox_guest::{AgentError, EventStream, Forwarder};
use icebox_sandbox::{ExitCause, LogCollector, RuntimeClient, Sandbox};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

pub struct VmSandbox {
    id: String,
    vm: Vm,
    client: RuntimeClient,
    logs: Arc<LogCollector>,
    cfg: VmBackendConfig,
    forwarder: Mutex<Option<Forwarder>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    exit_cause: OnceLock<ExitCause>,
    /// Why the instance ended, in words (runtime exit, agent silent, QEMU gone…).
    exit_reason: OnceLock<String>,
    exit_notify: Notify,
    frozen: AtomicBool,
    /// Bumped by every freeze and thaw, so a ping that failed across one is not held against
    /// the agent.
    pauses: AtomicU64,
    destroyed: AtomicBool,
}

impl VmSandbox {
    pub(super) fn new(
        id: String,
        vm: Vm,
        logs: Arc<LogCollector>,
        cfg: VmBackendConfig,
    ) -> Arc<VmSandbox> {
        let client = RuntimeClient::new(host_socket(&vm.paths.dir));
        Arc::new(VmSandbox {
            id,
            vm,
            client,
            logs,
            cfg,
            forwarder: Mutex::new(None),
            tasks: Mutex::new(Vec::new()),
            exit_cause: OnceLock::new(),
            exit_reason: OnceLock::new(),
            exit_notify: Notify::new(),
            frozen: AtomicBool::new(false),
            pauses: AtomicU64::new(0),
            destroyed: AtomicBool::new(false),
        })
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
        let mine = stats.instances.get(&self.id).cloned();
        Ok((stats, mine))
    }

    /// After the runtime started: its output into the log collector, the host socket, and
    /// the watch that ends the instance.
    pub(super) async fn attach(self: &Arc<Self>, events: EventStream) -> Result<(), AgentError> {
        let agent = &self.vm.agent;
        let mut tasks = Vec::new();
        for (fd, stream) in [(1u8, 0usize), (2, 1)] {
            let output = agent.open_output(&self.id, fd).await?;
            let logs = self.logs.clone();
            tasks.push(tokio::spawn(async move { logs.pump(output, stream).await }));
        }
        let forwarder =
            Forwarder::serve(agent.clone(), &self.id, &host_socket(&self.vm.paths.dir))?;
        *self.forwarder.lock().unwrap() = Some(forwarder);
        tasks.push(tokio::spawn(watch(Arc::downgrade(self), events)));
        self.tasks.lock().unwrap().extend(tasks);
        Ok(())
    }

    fn mark_exited(&self, cause: ExitCause, reason: String) {
        if self.exit_cause.set(cause).is_ok() {
            tracing::debug!(instance = %self.id, "{reason}");
            let _ = self.exit_reason.set(reason);
        }
        self.exit_notify.notify_waiters();
    }
}

/// Ends the instance on the first of: its runtime exits (an agent event), the agent session
/// ends, QEMU exits, the agent stops answering pings.
async fn watch(me: std::sync::Weak<VmSandbox>, mut events: EventStream) {
    let Some(this) = me.upgrade() else { return };
    let id = this.id.clone();
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
        loop {
            let notified = self.exit_notify.notified();
            if self.exit_cause.get().is_some() {
                return;
            }
            notified.await;
        }
    }

    fn exit_cause(&self) -> Option<ExitCause> {
        self.exit_cause.get().copied()
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
        self.mark_exited(ExitCause::Exited, "destroyed".to_string());
        if let Err(e) = std::fs::remove_dir_all(&self.vm.paths.dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(instance = %self.id, "cannot remove the VM's directory: {e}");
            }
        }
        tracing::debug!(instance = %self.id, pid = self.vm.qemu.pid(), "VM destroyed");
    }
}
