//! Offloading idle instances' memory to the node's offload pool (kernel swap: icebox's own
//! zram device or the operator's swap), FaaSMem-style (segments, hot pool, semi-warm) or as
//! the TMO baseline. The decisions come from icebox_policy::faasmem; the page bookkeeping and
//! the pool from icebox_mem; this module keeps the per-instance books and runs the steps.
//!
//! The component's hooks are in `component.rs`.
//!
//! Locks: [`Offload`]'s own mutexes (pool, reuse histories) and each instance's
//! [`OffloadBook`] are never taken while a pool lock is held, nor one inside the other except
//! book → the offload pool's state (its locks are leaves).

mod background;
mod component;
mod faasmem;
mod tmo;
mod watch;

use crate::pool::pool_state::PoolState;
use icebox_core::{ActionSpec, OffloadView, SegmentView};
use icebox_mem::{Puckets, SegmentBytes};
use icebox_policy::{
    FaasmemConfig, InstanceOffload, Millis, OffloadMode, ReuseHistory, TmoConfig, TmoController,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The node's offload settings (flags).
#[derive(Debug, Clone)]
pub struct OffloadConfig {
    /// Node default; an action's `icebox.offload` annotation overrides it.
    pub mode: OffloadMode,
    pub faasmem: FaasmemConfig,
    pub tmo: TmoConfig,
    /// Pages per probe group (FaaSMem's hot/cold detection without accessed bits).
    pub group_pages: u64,
}

/// Node-wide offload state: the offload component.
pub struct Offload {
    pub cfg: OffloadConfig,
    pub offload_pool: Arc<PoolState>,
    /// Per action: how long its instances stayed idle before their next request (semi-warm
    /// starts at the p99 of these).
    reuse: Mutex<HashMap<String, ReuseHistory>>,
    /// Policy clock of the last semi-warm / TMO tick.
    last_tick: Mutex<Option<Millis>>,
    /// /proc/vmstat pswpin at the last TMO round (its refault signal without PSI).
    swap_ins: AtomicU64,
    /// Why the pool is unusable, as last told to the instances (None: usable).
    pool_announced: Mutex<Option<String>>,
}

impl Offload {
    pub fn new(cfg: OffloadConfig, offload_pool: Arc<PoolState>) -> Offload {
        Offload {
            cfg,
            offload_pool,
            reuse: Mutex::new(HashMap::new()),
            last_tick: Mutex::new(None),
            swap_ins: AtomicU64::new(icebox_mem::pages_swapped_in().unwrap_or(0)),
            pool_announced: Mutex::new(None),
        }
    }

    /// The action's `icebox.offload` annotation, else the node's mode; `none` when the node
    /// has no pool to offload into.
    pub fn mode_of(&self, action: &ActionSpec) -> OffloadMode {
        if !self.offload_pool.present() {
            return OffloadMode::None;
        }
        action
            .annotation("icebox.offload")
            .and_then(|v| v.as_str())
            .and_then(|s| s.parse().ok())
            .unwrap_or(self.cfg.mode)
    }

    /// A kept-alive instance of `action` was reused after `idle_ms`.
    pub fn record_reuse(&self, action: &str, idle_ms: Millis) {
        self.reuse
            .lock()
            .unwrap()
            .entry(action.to_string())
            .or_default()
            .record(idle_ms);
    }

    /// How long an idle instance of `action` stays fully warm before semi-warm begins.
    pub fn semiwarm_after(&self, action: &str) -> Millis {
        match self.reuse.lock().unwrap().get(action) {
            Some(h) => h.semiwarm_after(&self.cfg.faasmem),
            None => self.cfg.faasmem.semiwarm_default_ms,
        }
    }

    /// Whether a semi-warm/TMO round is due at `now` (one a second); returns the time since
    /// the last round (0 for the first).
    fn round_due(&self, now: Millis) -> Option<Millis> {
        let mut last = self.last_tick.lock().unwrap();
        let elapsed = match *last {
            None => 0,
            Some(t) if now.saturating_sub(t) < ROUND_MS => return None,
            Some(t) => now - t,
        };
        *last = Some(now);
        Some(elapsed)
    }
}

/// On a compressed-RAM pool a page that compresses to 80 % of its size frees only 20 % of
/// it, at the price of a fault to get it back: below that gain an instance's pages stay.
pub(crate) const MIN_COMPRESSION_GAIN: f64 = 0.20;
/// A step that moved less than this says too little to judge by.
const MIN_JUDGED_BYTES: u64 = 1 << 20;

/// Whether a step that moved `stored` bytes into a compressed pool, which took `compressed`
/// bytes of it, was worth it; None when it moved too little to tell.
pub(crate) fn worth_offloading(stored: u64, compressed: u64) -> Option<bool> {
    if stored < MIN_JUDGED_BYTES {
        return None;
    }
    let gain = 1.0 - compressed as f64 / stored as f64;
    Some(gain >= MIN_COMPRESSION_GAIN)
}

/// How often semi-warm and TMO act (the paper's rates are per second).
pub(crate) const ROUND_MS: Millis = 1000;

/// One instance's offload books (its per-instance state).
pub struct OffloadBook {
    pub mode: OffloadMode,
    /// Bytes icebox moved out of this instance, and bytes of them that came back.
    moved: AtomicU64,
    refaulted: AtomicU64,
    /// The last semi-warm period's state is cleared by the next request.
    semiwarm: AtomicBool,
    /// Its pages gained too little in the compressed pool: no more steps (see
    /// [`worth_offloading`]).
    incompressible: AtomicBool,
    /// Held through a whole step (page-table scans, page-outs): never taken by readers.
    state: Mutex<BookState>,
    /// What the last step found, for readers (a leaf lock).
    shown: Mutex<Shown>,
}

#[derive(Default, Clone, Copy)]
struct Shown {
    segments: Option<SegmentBytes>,
    request_window: Option<u32>,
}

#[derive(Default)]
struct BookState {
    /// FaaSMem's page buckets, once the runtime barrier was recorded.
    puckets: Option<Puckets>,
    policy: InstanceOffload,
    /// Local bytes when the current semi-warm period began (percent rates are of this).
    semiwarm_size: u64,
    tmo: TmoController,
    /// TMO bytes decided but not yet reclaimed (see tmo.rs: the kernel's batch).
    tmo_owed: u64,
}

impl OffloadBook {
    pub fn new(mode: OffloadMode) -> OffloadBook {
        OffloadBook {
            mode,
            moved: AtomicU64::new(0),
            refaulted: AtomicU64::new(0),
            semiwarm: AtomicBool::new(false),
            incompressible: AtomicBool::new(false),
            state: Mutex::new(BookState::default()),
            shown: Mutex::new(Shown::default()),
        }
    }

    fn add_moved(&self, bytes: u64) {
        self.moved.fetch_add(bytes, Ordering::Relaxed);
    }

    fn add_refaulted(&self, bytes: u64) {
        self.refaulted.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn incompressible(&self) -> bool {
        self.incompressible.load(Ordering::Relaxed)
    }

    pub fn in_semiwarm(&self) -> bool {
        self.semiwarm.load(Ordering::Relaxed)
    }

    /// The instance was claimed for a request: a semi-warm period ends here.
    pub fn end_semiwarm(&self) {
        self.semiwarm.store(false, Ordering::Relaxed);
    }

    fn show(&self, state: &BookState, segments: SegmentBytes) {
        *self.shown.lock().unwrap() = Shown {
            segments: Some(segments),
            request_window: state.policy.request_window(),
        };
    }

    /// The API view; `local` and `swapped` come from the last measurement. Never blocks on a
    /// running offload step (its numbers are shown as of the last one).
    pub fn view(&self, local: u64, swapped: u64) -> OffloadView {
        let shown = *self.shown.lock().unwrap();
        let segments = shown.segments.map(|b| SegmentView {
            runtime: b.runtime,
            init: b.init,
            execution: b.execution,
            hot: b.hot,
        });
        let request_window = shown.request_window;
        OffloadView {
            mode: self.mode.to_string(),
            local_bytes: local,
            offloaded_bytes: swapped,
            moved_bytes: self.moved.load(Ordering::Relaxed),
            refaulted_bytes: self.refaulted.load(Ordering::Relaxed),
            segments,
            request_window,
            semiwarm: self.in_semiwarm(),
            incompressible: self.incompressible(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::worth_offloading;

    #[test]
    fn a_step_is_judged_by_what_its_pages_compressed_to() {
        const MIB: u64 = 1 << 20;
        assert_eq!(worth_offloading(64 * MIB, 8 * MIB), Some(true), "8:1 text");
        assert_eq!(
            worth_offloading(64 * MIB, 51 * MIB),
            Some(true),
            "20 % gained"
        );
        assert_eq!(
            worth_offloading(64 * MIB, 52 * MIB),
            Some(false),
            "under 20 %"
        );
        assert_eq!(
            worth_offloading(64 * MIB, 66 * MIB),
            Some(false),
            "random bytes"
        );
        assert_eq!(worth_offloading(MIB / 2, MIB), None, "too little to tell");
    }
}
