//! One instance as the pool sees it: the sandbox plus the bookkeeping the policies need.

use super::extensions::Extensions;
use icebox_core::{ActionSpec, InstanceState, MemoryStats, RestoreMode};
use icebox_policy::Millis;
use icebox_sandbox::Sandbox;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub struct Instance {
    pub id: String,
    /// The action version this instance was initialised with.
    pub action: Arc<ActionSpec>,
    pub fqn: String,
    pub sandbox: Arc<dyn Sandbox>,
    pub created: Instant,
    /// How it came to be: started, from a stem cell, or restored from a snapshot.
    pub origin: Origin,
    /// Whether the processes are frozen right now. Held while freezing/thawing (and while a
    /// control request such as heap stats thaws it briefly), so a thaw never overtakes the
    /// freeze it must undo.
    pub frozen: tokio::sync::Mutex<bool>,
    pub measured: Mutex<Measured>,
    /// The node's offload pool, for the RAM this instance's swapped pages take in it (its
    /// local memory, whatever technique swapped them).
    pub offload_pool: Arc<super::pool_state::PoolState>,
    /// How it runs concurrent activations (the action's `icebox.sharing`): admission joins
    /// busy instances by it.
    pub sharing: icebox_policy::SharingMode,
    /// The backend it runs in.
    pub isolation: super::backends::Isolation,
    /// The instance cgroup's OOM-kill count when a failed activation last looked (or at start):
    /// a failure with more kills than this was an OOM kill. Read only when an activation
    /// fails, to keep a file read off the warm path; so a kill during an activation that still
    /// succeeded (a child process of the action, say) is counted for the next one that fails.
    pub oom_kills_seen: AtomicU64,
    /// The components' own state on this instance (see component.rs).
    pub ext: Extensions,
}

/// How an instance came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Started,
    /// From a prewarmed runtime (a stem cell): only /init was paid.
    Prewarmed,
    /// From its action's snapshot, in `ms`.
    Restored {
        mode: RestoreMode,
        ms: u64,
    },
}

impl Origin {
    pub fn restored_mode(&self) -> Option<RestoreMode> {
        match self {
            Origin::Restored { mode, .. } => Some(*mode),
            _ => None,
        }
    }
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

    /// The state component `T` attached to this instance, if it did.
    pub fn ext<T: std::any::Any + Send + Sync>(&self) -> Option<&T> {
        self.ext.get::<T>()
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
pub(crate) struct Slot {
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
    /// Its own keep-alive from `idle_since` (a component's window), instead of the TTL.
    pub keep_alive_ms: Option<Millis>,
}
