//! One instance of the `vm-shared` backend: a runtime in a partition of its action's VM.

use super::exit::InstanceExit;
use super::host_memory::process_region_rss;
use super::report::{PlugReport, ReclaimReport};
use super::vmhost::SharedVm;
use super::Mode;
use async_trait::async_trait;
use icebox_core::units::MIB;
use icebox_core::MemoryStats;
use icebox_guest::protocol::{InstanceStats, StartRequest};
use icebox_guest::{AgentError, Forwarder};
use icebox_sandbox_api::{
    ExitCause, InstanceSpec, LogCollector, RuntimeClient, Sandbox, SandboxError,
};
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{watch, OnceCell};
use tokio::task::JoinHandle;

pub struct SharedSandbox {
    id: String,
    vm: Arc<SharedVm>,
    partition: u32,
    socket: PathBuf,
    client: RuntimeClient,
    logs: Arc<LogCollector>,
    plug: PlugReport,
    forwarder: Mutex<Option<Forwarder>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    exit: Arc<InstanceExit>,
    /// The agent's `stop`, done once: how long it took (ms).
    stopped: OnceCell<f64>,
    destroyed: AtomicBool,
    reclaim: watch::Sender<Option<ReclaimReport>>,
}

impl SharedSandbox {
    /// Start `spec` in a partition of `vm`: budget, a free partition, plug, the runtime
    /// bound to the partition's node, the host socket.
    pub(super) async fn start(
        vm: &Arc<SharedVm>,
        spec: &InstanceSpec,
        deadline: Instant,
        booted_vm: bool,
    ) -> Result<Arc<SharedSandbox>, SandboxError> {
        let (p, socket, plug) = vm.plug_partition(spec, deadline, booted_vm).await?;
        let sandbox = SharedSandbox::new(spec.id.clone(), vm.clone(), p, socket, plug.clone());
        vm.register(&spec.id, Arc::downgrade(&sandbox.exit));
        let started = async {
            let request = vm.start_request(spec, p)?;
            sandbox.start_runtime(&request).await
        };
        if let Err(e) = started.await {
            Sandbox::destroy(sandbox.as_ref()).await;
            return Err(e);
        }
        vm.plugged(plug);
        Ok(sandbox)
    }

    fn new(
        id: String,
        vm: Arc<SharedVm>,
        partition: u32,
        socket: PathBuf,
        plug: PlugReport,
    ) -> Arc<SharedSandbox> {
        Arc::new(SharedSandbox {
            client: RuntimeClient::new(&socket),
            exit: InstanceExit::new(id.clone()),
            id,
            vm,
            partition,
            socket,
            logs: Arc::new(LogCollector::new()),
            plug,
            forwarder: Mutex::new(None),
            tasks: Mutex::new(Vec::new()),
            stopped: OnceCell::new(),
            destroyed: AtomicBool::new(false),
            reclaim: watch::channel(None).0,
        })
    }

    /// The VM this instance shares with the other instances of its action.
    pub fn shared_vm(&self) -> &Arc<SharedVm> {
        &self.vm
    }

    /// Its partition (1-based; in Squeezy mode also its guest NUMA node).
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// How it got its partition: the wait for memory, the plug.
    pub fn plug_report(&self) -> &PlugReport {
        &self.plug
    }

    pub fn exit_reason(&self) -> Option<&str> {
        self.exit.reason()
    }

    /// The guest's view of this instance (its cgroup), fresh.
    pub async fn guest_stats(&self) -> Result<Option<InstanceStats>, AgentError> {
        Ok(self
            .vm
            .vm()
            .agent
            .stats()
            .await?
            .instances
            .get(&self.id)
            .cloned())
    }

    /// Once `destroy` has begun: the partition's unplug, when it has finished (or timed out).
    pub async fn reclaimed(&self) -> Option<ReclaimReport> {
        if !self.destroyed.load(Ordering::SeqCst) {
            return None;
        }
        let mut rx = self.reclaim.subscribe();
        let report = rx.wait_for(Option::is_some).await.ok()?;
        report.clone()
    }

    async fn start_runtime(self: &Arc<Self>, request: &StartRequest) -> Result<(), SandboxError> {
        let agent = &self.vm.vm().agent;
        match agent.start(request).await {
            Ok(_) => {}
            Err(AgentError::Timeout(t)) => {
                return Err(SandboxError::StartTimeout(
                    u64::try_from(t.as_millis()).unwrap_or(u64::MAX),
                ))
            }
            Err(e) => return Err(SandboxError::agent("start", e)),
        }
        let mut tasks = Vec::new();
        for (fd, stream) in [(1u8, 0usize), (2, 1)] {
            let output = agent
                .open_output(&self.id, fd)
                .await
                .map_err(|e| SandboxError::agent("output", e))?;
            let logs = self.logs.clone();
            tasks.push(tokio::spawn(async move { logs.pump(output, stream).await }));
        }
        self.tasks.lock().unwrap().extend(tasks);
        let forwarder = Forwarder::serve(agent.clone(), &self.id, &self.socket)?;
        *self.forwarder.lock().unwrap() = Some(forwarder);
        if !self.client.wait_ready(Duration::from_secs(10)).await {
            return Err(SandboxError::Other(anyhow::anyhow!(
                "the host socket forwarder does not accept"
            )));
        }
        Ok(())
    }

    /// Stop the runtime in the guest (its cgroup killed and empty), keeping its partition
    /// plugged; `destroy` then releases it. Idempotent; returns how long the stop took.
    pub async fn stop_runtime(&self) -> f64 {
        *self
            .stopped
            .get_or_init(|| async {
                if self.vm.ended().is_some() {
                    return 0.0;
                }
                let t0 = Instant::now();
                if let Err(e) = self.vm.vm().agent.stop(&self.id).await {
                    tracing::warn!(instance = %self.id, "stopping the runtime in the guest: {e}");
                }
                t0.elapsed().as_secs_f64() * 1e3
            })
            .await
    }
}

/// Run an agent call from a synchronous trait method (freeze/thaw): the agent's session is
/// driven by tasks of the daemon's multi-threaded runtime, which keep running meanwhile.
fn block_on<T>(fut: impl Future<Output = Result<T, AgentError>>) -> std::io::Result<T> {
    let handle = tokio::runtime::Handle::try_current()
        .map_err(|_| std::io::Error::other("vm-shared freeze/thaw needs a tokio runtime"))?;
    if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
        return Err(std::io::Error::other(
            "vm-shared freeze/thaw needs tokio's multi-threaded runtime",
        ));
    }
    tokio::task::block_in_place(|| handle.block_on(fut))
        .map_err(|e| std::io::Error::other(e.to_string()))
}

#[async_trait]
impl Sandbox for SharedSandbox {
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

    /// The VM's QEMU, which every instance of the action shares.
    fn pids(&self) -> Vec<u32> {
        let qemu = &self.vm.vm().qemu;
        if qemu.exit_status().is_some() {
            return Vec::new();
        }
        vec![qemu.pid()]
    }

    /// Host view (uss/pss/rss): what QEMU holds of the instance's partition — in Squeezy mode
    /// the resident part of its device's RAM region; otherwise the host cannot tell one
    /// instance's memory from another's and this is the guest's count of it. Guest view
    /// (`cgroup`): the instance cgroup's memory.current in the guest, at most a second old.
    fn memory(&self) -> MemoryStats {
        let guest = self
            .vm
            .instance_stats(&self.id)
            .map(|s| s.memory_current)
            .unwrap_or(0);
        let host = match self.vm.layout.mode {
            Mode::Squeezy => self.pids().first().and_then(|&pid| {
                process_region_rss(pid, self.vm.layout.device_mib(self.partition) * MIB)
            }),
            Mode::VirtioMem | Mode::Balloon => None,
        }
        .unwrap_or(guest);
        MemoryStats {
            uss: host,
            pss: host,
            rss: host,
            swap: 0,
            cgroup: guest,
        }
    }

    fn freeze(&self) -> std::io::Result<()> {
        block_on(self.vm.vm().agent.freeze(&self.id))
    }

    fn thaw(&self) -> std::io::Result<()> {
        block_on(self.vm.vm().agent.thaw(&self.id))
    }

    async fn exited(&self) {
        self.exit.wait().await
    }

    fn exit_cause(&self) -> Option<ExitCause> {
        self.exit.cause()
    }

    /// Stop the runtime, then unplug its partition in the background: the partition's memory
    /// counts as being released (`memory_budget().releasing`) until the unplug is done, and
    /// [`SharedSandbox::reclaimed`] gives its report.
    async fn destroy(&self) {
        if self.destroyed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.client.close_idle();
        self.forwarder.lock().unwrap().take();
        let stop_ms = self.stop_runtime().await;
        if self.vm.ended().is_some() {
            // The VM is going: destroyed means its QEMU and directory are gone too.
            self.vm.wait_gone().await;
        }
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
        self.exit.mark(ExitCause::Exited, "destroyed".to_string());
        self.vm.unregister(&self.id);
        self.vm.spawn_release(
            self.partition,
            self.id.clone(),
            stop_ms,
            self.reclaim.clone(),
        );
    }
}
