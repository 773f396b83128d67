use crate::client::RuntimeClient;
use crate::logs::LogCollector;
use crate::manifest::RuntimeManifest;
use async_trait::async_trait;
use icebox_core::{LoadingSetInfo, MemoryStats, RestoreMode, SnapshotInfo};
use std::path::Path;
use std::sync::Arc;

/// Environment variables a restored runtime takes from `POST /icebox/restored` (sent by the
/// daemon with the new instance's values) rather than keeping its snapshot's: they may differ
/// between the template and the restored instance (the API host moves with the daemon's
/// listen address) without making the snapshot unusable.
pub const RESTORE_ENV: &[&str] = &["__OW_API_HOST"];

/// Everything a backend needs to start one instance.
#[derive(Debug, Clone)]
pub struct InstanceSpec {
    pub id: String,
    /// `namespace/name`, for logs and labels only.
    pub action: String,
    pub runtime: RuntimeManifest,
    pub memory_limit_bytes: u64,
    pub pids_max: u64,
    /// Size of the instance's private /tmp.
    pub tmp_bytes: u64,
    pub concurrency: u32,
    /// Share the host network (only when the action asks for it).
    pub network: bool,
    /// Extra environment for the runtime process.
    pub env: Vec<(String, String)>,
}

/// Why an instance's runtime is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCause {
    /// The kernel OOM-killed a process of the instance (memory limit exceeded).
    OutOfMemory,
    /// The instance hit its pids limit (fork bomb) before dying.
    PidsLimit,
    /// The runtime exited by itself or was killed from outside.
    Exited,
}

pub use crate::error::SandboxError;

/// One running action proxy. Implementations must make `freeze`/`thaw` cheap (they sit on
/// the warm path) and `destroy` idempotent.
#[async_trait]
pub trait Sandbox: Send + Sync {
    fn id(&self) -> &str;
    /// For a backend to recognise its own sandboxes (snapshots are taken by the backend).
    fn as_any(&self) -> &dyn std::any::Any;
    /// HTTP client for the proxy's UNIX socket.
    fn client(&self) -> &RuntimeClient;
    /// Output of the runtime, split per activation by the sentinel line.
    fn logs(&self) -> &Arc<LogCollector>;
    /// Host PIDs of every process of the instance.
    fn pids(&self) -> Vec<u32>;
    /// Measured memory of all the instance's processes (plus its cgroup counter if any).
    fn memory(&self) -> MemoryStats;
    fn freeze(&self) -> std::io::Result<()>;
    fn thaw(&self) -> std::io::Result<()>;
    /// Asks the kernel to reclaim `bytes` of the instance's memory through its own LRU (the
    /// coldest pages first; anonymous ones only if there is swap); returns the bytes freed.
    /// Works on a frozen instance.
    fn reclaim_memory(&self, bytes: u64) -> std::io::Result<u64> {
        let _ = bytes;
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "this sandbox backend cannot reclaim memory",
        ))
    }
    /// Resolves when the runtime process has exited.
    async fn exited(&self);
    /// Set once the runtime exited: why.
    fn exit_cause(&self) -> Option<ExitCause>;
    /// How many processes of the instance the kernel OOM-killed so far (its memory cgroup's
    /// count, which includes kills for tmpfs and shared-memory pages charged to it). Read
    /// before and after an activation, it tells an OOM death apart before the runtime's exit
    /// is seen.
    fn oom_kills(&self) -> u64 {
        0
    }
    /// Kill every process and release every resource; safe to call more than once.
    async fn destroy(&self);
    /// How this instance's memory is being brought in, when it was restored from a snapshot:
    /// the mode, pages served on fault, prefetched, zero-filled, bytes read (JSON, for
    /// events and views).
    fn restore_stats(&self) -> Option<serde_json::Value> {
        None
    }
}

/// The file a snapshot directory describes itself in, whichever backend wrote it (each backend
/// has its own format inside).
pub const SNAPSHOT_META_FILE: &str = "snapshot.json";

/// Snapshot and restore, for backends that can (SandboxBackend::snapshots). A snapshot
/// directory belongs to the backend that wrote it; the pool only names it and decides when.
#[async_trait]
pub trait Snapshots: Send + Sync {
    /// Write a snapshot of `sandbox` (started by this backend, idle, with no open connection
    /// to its proxy) into the empty directory `dir`. The sandbox is gone afterwards.
    async fn snapshot(
        &self,
        sandbox: &Arc<dyn Sandbox>,
        dir: &Path,
    ) -> Result<SnapshotInfo, SandboxError>;
    /// Start a new instance from the snapshot in `dir`, ready (its proxy accepting) when this
    /// returns. A snapshot that is missing, corrupt or from another runtime build is an error:
    /// the caller falls back to a normal start.
    async fn restore(
        &self,
        spec: InstanceSpec,
        dir: &Path,
        mode: RestoreMode,
    ) -> Result<Arc<dyn Sandbox>, SandboxError>;
    /// End the recording of a sandbox restored with [`RestoreMode::Record`] and write the
    /// loading set into `dir`, next to the snapshot.
    async fn finish_record(
        &self,
        sandbox: &Arc<dyn Sandbox>,
        dir: &Path,
    ) -> Result<LoadingSetInfo, SandboxError>;
}

#[async_trait]
pub trait SandboxBackend: Send + Sync {
    /// `crun`, `none`, `vm` or `vm-shared`.
    fn name(&self) -> &'static str;
    /// `v1`, `v2` or `none`.
    fn cgroup_version(&self) -> &'static str;
    /// Start the runtime and return once its socket accepts connections.
    async fn start(&self, spec: InstanceSpec) -> Result<Arc<dyn Sandbox>, SandboxError>;
    /// Remove everything a previous run of this daemon (same state dir) left behind:
    /// processes, cgroups, instance directories. Returns how many instances were cleaned.
    async fn cleanup_orphans(&self) -> anyhow::Result<usize>;
    /// Remove the backend's own top-level resources at shutdown (after all instances).
    async fn shutdown(&self);
    /// Snapshot and restore, when this backend supports them here.
    fn snapshots(&self) -> Option<&dyn Snapshots> {
        None
    }
    /// For a backend that hands instances memory out of a fixed host budget (Squeezy's N:1
    /// VMs plug a partition per instance): the budget now. The pool evicts idle instances of
    /// this backend when a new one would not fit, and `start` waits (boundedly) for the
    /// memory they release.
    fn memory_budget(&self) -> Option<MemoryBudget> {
        None
    }
    /// What one instance of `spec` takes from that budget.
    fn instance_charge(&self, spec: &InstanceSpec) -> u64 {
        spec.memory_limit_bytes
    }
    /// How many instances of one action this backend can host at once (an N:1 VM has N
    /// partitions); `None`: no limit of its own. Past it the pool queues invocations for the
    /// action's instances instead of starting more.
    fn instances_per_action(&self) -> Option<usize> {
        None
    }
}

/// A backend's host memory budget (see [`SandboxBackend::memory_budget`]), bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    pub limit: u64,
    /// Handed to instances (plugged, or being plugged).
    pub in_use: u64,
    /// Being given back (instances gone, their memory not yet unplugged).
    pub releasing: u64,
}

impl MemoryBudget {
    /// What is free once the releases in flight complete.
    pub fn free_soon(&self) -> u64 {
        self.limit
            .saturating_sub(self.in_use.saturating_sub(self.releasing))
    }
}
