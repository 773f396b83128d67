//! The TMO baseline (Weiner et al., ASPLOS'22, as FaaSMem compares against it): every period
//! each kept-alive instance gives a small fraction of its memory to the kernel's own LRU
//! reclaim (the cgroup's proactive reclaim), slowing down when the node shows memory
//! pressure. No segments, no semi-warm: the kernel chooses the pages.

use super::faasmem::book_of;
use super::Offload;
use crate::pool::Pool;
use icebox_core::InstanceState;
use icebox_policy::{Millis, OffloadMode, Pressure};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The kernel reclaims at least this much per call (SWAP_CLUSTER_MAX pages): TMO's 0.05 % of
/// a small instance is far less, so its steps are owed until they add up to a batch —
/// otherwise a 3 MiB instance would give up 128 KiB every 6 s, 85 times TMO's rate.
const KERNEL_RECLAIM_BATCH: u64 = 32 * 4096;

impl Offload {
    fn tmo_round(&self, pool: &Arc<Pool>, now: Millis) {
        let pressure = self.tmo_pressure();
        for slot in pool.slots.snapshot() {
            let instance = slot.instance.clone();
            let Some(book) = book_of(&instance) else {
                continue;
            };
            // Frozen only: on cgroup v1 the reclaim briefly lowers the memory limit, which an
            // instance allocating at that moment could hit.
            if book.mode != OffloadMode::Tmo
                || slot.state != InstanceState::Frozen
                || !pool.allows(&instance.action, icebox_policy::Technique::Offload)
            {
                continue;
            }
            let bytes = {
                let Ok(mut state) = book.state.try_lock() else {
                    continue;
                };
                let size = instance.measured_memory().uss;
                state.tmo_owed += state.tmo.tick(&self.cfg.tmo, now, pressure, size);
                if state.tmo_owed < KERNEL_RECLAIM_BATCH {
                    continue;
                }
                std::mem::take(&mut state.tmo_owed)
            };
            if let Err(reason) = self.offload_pool.room_for(bytes) {
                self.skip(pool, reason);
                continue;
            }
            let pool = pool.clone();
            tokio::spawn(async move {
                // Held through the reclaim, so no request thaws the instance meanwhile.
                let frozen = instance.frozen.lock().await;
                if !*frozen {
                    return;
                }
                let inst = instance.clone();
                let on = pool.clone();
                let t = std::time::Instant::now();
                let result = tokio::task::spawn_blocking(move || {
                    let freed = inst.sandbox.reclaim_memory(bytes);
                    if let Some(me) = on.component::<Offload>() {
                        me.step_done(&on);
                    }
                    freed
                })
                .await;
                drop(frozen);
                let Some(me) = pool.component::<Offload>() else {
                    return;
                };
                match result {
                    Ok(Ok(freed)) => me.note_step(
                        &pool,
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
        let before = self.swap_ins.swap(pages, Ordering::Relaxed);
        Pressure::Refaults {
            refaulted_bytes: pages.saturating_sub(before) * icebox_mem::PAGE_SIZE,
            offloaded_bytes: self.offload_pool.view().stored_bytes,
        }
    }

    /// Semi-warm and TMO, from the manager loop: at most once a second.
    pub(super) fn round(&self, pool: &Arc<Pool>, now: Millis) {
        if !self.offload_pool.present() {
            return;
        }
        let Some(elapsed) = self.round_due(now) else {
            return;
        };
        self.watch_pool(pool);
        self.semiwarm_round(pool, now, elapsed);
        self.tmo_round(pool, now);
    }
}
