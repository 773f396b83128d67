//! The offload pool as the daemon holds it: opened at start (after removing a device a
//! crashed run left), checked on every tick, closed at shutdown. When it becomes unusable
//! (swapoff'ed or removed under us) offloading stops, instances keep running, and the node
//! says why (health `degraded`, `pool.error`).

use crate::metrics::offload::{MeasureLabel, OffloadMetrics};
use icebox_core::PoolView;
use icebox_mem::{OffloadPool, PoolSpec, PoolStats};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

pub(crate) struct PoolState {
    pool: Mutex<Option<OffloadPool>>,
    cache: Mutex<Cache>,
    /// RAM the pool takes per swapped byte, in millionths (zram: compressed size / stored):
    /// read by every measurement, so a leaf atomic rather than a lock.
    cost_ppm: AtomicU64,
}

#[derive(Default)]
struct Cache {
    stats: Option<PoolStats>,
    error: Option<String>,
}

impl PoolState {
    /// Removes what a crashed daemon of this state directory left, then opens the pool.
    pub fn open(spec: &PoolSpec, state_dir: &Path) -> anyhow::Result<PoolState> {
        match OffloadPool::cleanup_stale(state_dir) {
            Ok(true) => {
                tracing::warn!("removed the offload pool device an earlier run left behind")
            }
            Ok(false) => {}
            Err(e) => tracing::warn!("cannot remove the offload pool an earlier run left: {e}"),
        }
        let pool = match spec {
            PoolSpec::None => None,
            spec => Some(
                OffloadPool::open(spec, state_dir)
                    .map_err(|e| anyhow::anyhow!("cannot open the offload pool: {e}"))?,
            ),
        };
        if mglru_enabled() {
            tracing::info!(
                "this kernel has MGLRU (/sys/kernel/mm/lru_gen): icebox still uses its own \
                 PAGEMAP_SCAN segments and probes (no lru_gen backend yet)"
            );
        }
        if let Some(p) = &pool {
            let s = p.stats();
            tracing::info!(
                kind = s.kind,
                device = s.device.as_deref().unwrap_or("-"),
                capacity = s.capacity_bytes,
                "offload pool ready"
            );
        }
        let state = PoolState {
            pool: Mutex::new(pool),
            cache: Mutex::new(Cache::default()),
            cost_ppm: AtomicU64::new(0),
        };
        state.refresh(None);
        Ok(state)
    }

    /// No pool at all (the pool's unit tests).
    #[cfg(test)]
    pub fn none() -> PoolState {
        PoolState {
            pool: Mutex::new(None),
            cache: Mutex::new(Cache::default()),
            cost_ppm: AtomicU64::new(0),
        }
    }

    pub fn present(&self) -> bool {
        self.pool.lock().unwrap().is_some()
    }

    /// Re-reads the pool's counters and checks it is still usable ([`Self::error`] says why
    /// not).
    pub fn refresh(&self, metrics: Option<&OffloadMetrics>) {
        let (stats, error) = {
            let pool = self.pool.lock().unwrap();
            let Some(p) = pool.as_ref() else {
                return;
            };
            let mut stats = p.stats();
            if fragmented(&stats) {
                match p.compact() {
                    Ok(()) => stats = p.stats(),
                    Err(e) => tracing::debug!("cannot compact the offload pool: {e}"),
                }
            }
            (stats, p.check().err())
        };
        let ppm = if stats.stored_bytes == 0 {
            0
        } else {
            u64::try_from(
                u128::from(stats.memory_bytes) * 1_000_000 / u128::from(stats.stored_bytes),
            )
            .unwrap_or(u64::MAX)
        };
        self.cost_ppm.store(ppm, Ordering::Relaxed);
        if let Some(m) = metrics {
            for (measure, v) in [
                ("capacity", stats.capacity_bytes),
                ("stored", stats.stored_bytes),
                ("memory", stats.memory_bytes),
            ] {
                m.pool_bytes
                    .get_or_create(&MeasureLabel {
                        measure: measure.into(),
                    })
                    .set(i64::try_from(v).unwrap_or(i64::MAX));
            }
        }
        let mut cache = self.cache.lock().unwrap();
        if error.is_some() && cache.error != error {
            tracing::error!(
                "offload pool unusable, offloading stopped: {}",
                error.as_deref().unwrap_or("")
            );
        } else if error.is_none() && cache.error.is_some() {
            tracing::info!("offload pool usable again");
        }
        cache.stats = Some(stats);
        cache.error = error;
    }

    /// Whether a step may move `bytes` now: the pool is usable and has room for them.
    pub fn room_for(&self, bytes: u64) -> Result<(), &'static str> {
        let cache = self.cache.lock().unwrap();
        if cache.error.is_some() {
            return Err("pool_unusable");
        }
        match &cache.stats {
            Some(s) if s.free_bytes() < bytes.max(1) => Err("pool_full"),
            Some(_) => Ok(()),
            None => Err("pool_unusable"),
        }
    }

    /// The RAM `swapped` bytes of an instance take in the pool.
    pub fn local_cost(&self, swapped: u64) -> u64 {
        let ppm = u128::from(self.cost_ppm.load(Ordering::Relaxed));
        u64::try_from(u128::from(swapped) * ppm / 1_000_000).unwrap_or(u64::MAX)
    }

    pub fn error(&self) -> Option<String> {
        self.cache.lock().unwrap().error.clone()
    }

    pub fn view(&self) -> PoolView {
        let cache = self.cache.lock().unwrap();
        match &cache.stats {
            None => PoolView {
                kind: "none".into(),
                ..Default::default()
            },
            Some(s) => PoolView {
                kind: s.kind.to_string(),
                device: s.device.clone(),
                capacity_bytes: s.capacity_bytes,
                stored_bytes: s.stored_bytes,
                memory_bytes: s.memory_bytes,
                compression_ratio: s.compression_ratio,
                error: cache.error.clone(),
            },
        }
    }

    /// What a compressed-RAM-only pool (icebox's zram) holds now: (stored, compressed) bytes,
    /// read fresh, for judging what one offload step gained. None for a pool with a disk tier
    /// or none (there moving a page out of RAM is the gain, whatever it compresses to).
    pub fn compression_sample(&self) -> Option<(u64, u64)> {
        let pool = self.pool.lock().unwrap();
        let stats = pool.as_ref()?.stats();
        (stats.kind == "zram").then_some((stats.stored_bytes, stats.compressed_bytes))
    }

    /// Daemon shutdown: swapoff (pages come back into RAM) and remove icebox's device.
    pub fn close(&self) {
        if let Some(pool) = self.pool.lock().unwrap().take() {
            if let Err(e) = pool.close() {
                tracing::error!("cannot remove the offload pool: {e}; the next start removes it");
            }
        }
    }
}

/// Whether the host has MGLRU turned on (FaaSMem's own mechanism): detected, never assumed.
fn mglru_enabled() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/lru_gen/enabled")
        .ok()
        .and_then(|s| u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok())
        .is_some_and(|mask| mask != 0)
}

/// Whether the pool's allocator holds much more RAM than its compressed pages need (pages
/// freed in it leave its zspages partly empty): that RAM is local memory for nothing.
fn fragmented(stats: &PoolStats) -> bool {
    const SLACK: u64 = 4 << 20;
    stats.memory_bytes > stats.compressed_bytes + stats.compressed_bytes / 4 + SLACK
}

impl Drop for PoolState {
    /// A start that fails after the pool was opened must not leave the device on.
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compacts_only_when_the_allocator_holds_much_more_than_the_pages_need() {
        let stats = |memory_mib: u64, compressed_mib: u64| PoolStats {
            kind: "zram",
            memory_bytes: memory_mib << 20,
            compressed_bytes: compressed_mib << 20,
            ..Default::default()
        };
        assert!(!fragmented(&stats(0, 0)));
        assert!(!fragmented(&stats(104, 100)));
        assert!(!fragmented(&stats(129, 100)));
        assert!(fragmented(&stats(140, 100)));
        assert!(fragmented(&stats(30, 2)));
    }
}
