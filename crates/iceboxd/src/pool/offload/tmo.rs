//! The TMO baseline (Weiner et al., ASPLOS'22, as FaaSMem compares against it): every period
//! each kept-alive instance gives a small fraction of its memory to the kernel's own LRU
//! reclaim (the cgroup's proactive reclaim), slowing down when the node shows memory
//! pressure. No segments, no semi-warm: the kernel chooses the pages.

use crate::pool::Pool;
use icebox_core::InstanceState;
use icebox_policy::{Millis, OffloadMode, Pressure};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The kernel reclaims at least this much per call (SWAP_CLUSTER_MAX pages): TMO's 0.05 % of
/// a small instance is far less, so its steps are owed until they add up to a batch —
/// otherwise a 3 MiB instance would give up 128 KiB every 6 s, 85 times TMO's rate.
const KERNEL_RECLAIM_BATCH: u64 = 32 * 4096;

impl Pool {
    pub(in crate::pool) fn tmo_round(self: &Arc<Self>, now: Millis) {
        let pressure = self.tmo_pressure();
        for slot in self.slots.snapshot() {
            let instance = slot.instance.clone();
            // Frozen only: on cgroup v1 the reclaim briefly lowers the memory limit, which an
            // instance allocating at that moment could hit.
            if instance.offload.mode != OffloadMode::Tmo || slot.state != InstanceState::Frozen {
                continue;
            }
            let bytes = {
                let Ok(mut state) = instance.offload.state.try_lock() else {
                    continue;
                };
                let size = instance.measured_memory().uss;
                state.tmo_owed += state.tmo.tick(&self.offload.cfg.tmo, now, pressure, size);
                if state.tmo_owed < KERNEL_RECLAIM_BATCH {
                    continue;
                }
                std::mem::take(&mut state.tmo_owed)
            };
            if let Err(reason) = self.offload.pool.room_for(bytes) {
                self.skip(reason);
                continue;
            }
            let pool = self.clone();
            tokio::spawn(async move {
                // Held through the reclaim, so no request thaws the instance meanwhile.
                let frozen = instance.frozen.lock().await;
                if !*frozen {
                    return;
                }
                let inst = instance.clone();
                let t = std::time::Instant::now();
                let result =
                    tokio::task::spawn_blocking(move || inst.sandbox.reclaim_memory(bytes)).await;
                drop(frozen);
                match result {
                    Ok(Ok(freed)) => pool.note_step(
                        &instance,
                        "tmo",
                        &icebox_mem::OffloadReport {
                            advised_bytes: bytes,
                            offloaded_bytes: freed,
                            took: t.elapsed(),
                        },
                    ),
                    Ok(Err(e)) => {
                        tracing::debug!(instance = %instance.id, "TMO reclaim failed: {e}")
                    }
                    Err(_) => {}
                }
            });
        }
    }

    /// Memory PSI of the node; where the kernel has no PSI, the bytes swapped in since the
    /// last round against the bytes the pool holds (TMO's refault signal).
    fn tmo_pressure(&self) -> Pressure {
        if let Ok(psi) = icebox_mem::memory_pressure() {
            return Pressure::Psi(psi.some.avg10);
        }
        let pages = icebox_mem::pages_swapped_in().unwrap_or(0);
        let before = self.offload.swap_ins.swap(pages, Ordering::Relaxed);
        Pressure::Refaults {
            refaulted_bytes: pages.saturating_sub(before) * icebox_mem::PAGE_SIZE,
            offloaded_bytes: self.offload.pool.view().stored_bytes,
        }
    }

    /// Semi-warm and TMO, from the manager loop: at most once a second.
    pub(in crate::pool) fn offload_round(self: &Arc<Self>, now: Millis) {
        if !self.offload.pool.present() {
            return;
        }
        let Some(elapsed) = self.offload.round_due(now) else {
            return;
        };
        self.offload.pool.refresh(Some(&self.metrics.offload));
        self.semiwarm_round(now, elapsed);
        self.tmo_round(now);
    }
}
