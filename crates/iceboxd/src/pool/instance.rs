//! One instance as the pool sees it: the sandbox plus the bookkeeping the policies need.

use icebox_core::{ActionSpec, InstanceState, MemoryStats, RestoreMode};
use icebox_policy::Millis;
use icebox_sandbox::Sandbox;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub struct Instance {
    pub id: String,
    /// The action version this instance was initialised with.
    pub action: Arc<ActionSpec>,
    pub fqn: String,
    pub sandbox: Arc<dyn Sandbox>,
    pub created: Instant,
    /// How frozen garbage is handled for this instance (node default or the action's choice).
    pub mode: icebox_policy::ReclaimMode,
    /// Whether the processes are frozen right now. Held while freezing/thawing (and while a
    /// control request such as heap stats thaws it briefly), so a thaw never overtakes the
    /// freeze it must undo.
    pub frozen: tokio::sync::Mutex<bool>,
    pub measured: Mutex<Measured>,
    /// FaaSMem / TMO books.
    pub offload: super::offload::OffloadBook,
    /// The node's offload pool, for the RAM this instance's swapped pages take in it.
    pub offload_pool: Arc<super::PoolState>,
    /// How it runs concurrent activations (the action's `icebox.sharing`).
    pub sharing: icebox_policy::SharingMode,
    /// The runtime's last account of its isolates or contexts (`sharing` of /icebox/stats).
    pub sharing_stats: super::sharing::SharingStats,
    /// The backend it runs in.
    pub isolation: super::backends::Isolation,
    /// Set when it was restored from a snapshot rather than started.
    pub restore: Option<Restore>,
    /// Its first activation is being recorded for the snapshot's loading set (FaaSnap).
    pub recording: AtomicBool,
    /// The instance cgroup's OOM-kill count when a failed activation last looked (or at start):
    /// a failure with more kills than this was an OOM kill. Read only when an activation
    /// fails, to keep a file read off the warm path; so a kill during an activation that still
    /// succeeded (a child process of the action, say) is counted for the next one that fails.
    pub oom_kills_seen: AtomicU64,
}

/// How an instance came from its action's snapshot.
#[derive(Debug, Clone)]
pub struct Restore {
    pub mode: RestoreMode,
    /// The snapshot's image directory (where the loading set is written after recording).
    pub image_dir: PathBuf,
    /// The action version the snapshot is of.
    pub version: String,
    pub ms: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub memory: MemoryStats,
    /// USS plus the RAM its swapped pages take in a compressed offload pool: what it costs
    /// in local memory.
    pub local: u64,
    pub pids: Vec<u32>,
    /// Wall clock (ms since epoch) of the measurement; 0 = never.
    pub at_ms: u64,
}

impl Instance {
    pub fn measure(&self) -> MemoryStats {
        let pids = self.sandbox.pids();
        let memory = self.sandbox.memory();
        *self.measured.lock().unwrap() = Measured {
            memory,
            local: memory.uss + self.offload_pool.local_cost(memory.swap),
            pids,
            at_ms: crate::now_ms(),
        };
        memory
    }

    pub fn last_measured(&self) -> Measured {
        self.measured.lock().unwrap().clone()
    }

    pub fn measured_memory(&self) -> MemoryStats {
        self.measured.lock().unwrap().memory
    }

    /// Local memory as of the last measurement (see [`Measured::local`]).
    pub fn measured_local(&self) -> u64 {
        self.measured.lock().unwrap().local
    }

    /// Thaw if frozen; returns how long the thaw took when one was needed.
    pub async fn ensure_thawed(&self) -> std::io::Result<Option<std::time::Duration>> {
        let mut frozen = self.frozen.lock().await;
        if !*frozen {
            return Ok(None);
        }
        let t = Instant::now();
        self.sandbox.thaw()?;
        *frozen = false;
        Ok(Some(t.elapsed()))
    }
}

/// The pool's books on one instance (kept in [`super::slots::Slots`]).
#[derive(Clone)]
pub(super) struct Slot {
    pub instance: Arc<Instance>,
    pub state: InstanceState,
    pub in_flight: u32,
    pub invocations: u64,
    /// Policy clock: when the last activation ended.
    pub idle_since: Millis,
    /// Set when the action was updated or deleted: never reuse, evict once idle.
    pub stale: bool,
    /// Policy clock: when it was last frozen; None while thawed.
    pub frozen_since: Option<Millis>,
    /// A reclaim is running on it right now.
    pub reclaiming: bool,
    /// Reclaimed since its last activation: nothing new to reclaim.
    pub reclaimed_since_last_run: bool,
}
