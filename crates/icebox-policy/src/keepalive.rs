//! Keep-alive: when an idle instance is frozen, when it is evicted (TTL, then LRU under the
//! pool's memory budget), which one serves the next invocation, and what makes room for a new
//! instance when the node is full.

use crate::clock::Millis;
use crate::pool::{lru_order, PoolEntry};
use serde::{Deserialize, Serialize};

mod evict;
mod hybrid;
#[cfg(test)]
mod tests;

pub use evict::{EvictOrder, ParseEvictOrderError};
pub use hybrid::{HybridConfig, HybridPolicy, IdleHistogram, Windows};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct KeepAliveConfig {
    /// TTL of an idle (or frozen) instance, counted from the end of its last activation.
    pub keep_alive_ms: u64,
    /// Idle → frozen after this. Short, because a frozen instance costs no CPU and thawing
    /// takes ~0.1 ms, but not zero, so back-to-back invocations skip the freeze/thaw pair.
    pub pause_grace_ms: u64,
    /// Memory budget of the keep-alive pool, compared with the sum of `PoolEntry::charged`.
    /// 0 disables keep-alive: every instance is evicted as soon as it is idle.
    pub budget_bytes: u64,
    /// All instances, busy or idle. Must be at least 1.
    pub max_instances: usize,
}

impl KeepAliveConfig {
    /// OpenWhisk's default keep-alive.
    pub const DEFAULT_KEEP_ALIVE_MS: u64 = 10 * 60 * 1000;
    pub const DEFAULT_PAUSE_GRACE_MS: u64 = 50;
    pub const DEFAULT_BUDGET_BYTES: u64 = 2 * 1024 * 1024 * 1024;
    pub const DEFAULT_MAX_INSTANCES: usize = 256;

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_instances == 0 {
            return Err(ConfigError::ZeroMaxInstances);
        }
        Ok(())
    }
}

impl Default for KeepAliveConfig {
    fn default() -> Self {
        KeepAliveConfig {
            keep_alive_ms: Self::DEFAULT_KEEP_ALIVE_MS,
            pause_grace_ms: Self::DEFAULT_PAUSE_GRACE_MS,
            budget_bytes: Self::DEFAULT_BUDGET_BYTES,
            max_instances: Self::DEFAULT_MAX_INSTANCES,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("max_instances must be at least 1 (with 0 no instance could ever start)")]
    ZeroMaxInstances,
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum EvictionReason {
    KeepAliveExpired,
    MemoryBudget,
    InstanceLimit,
}

impl EvictionReason {
    /// The same spelling as the serde form, for event details and metric labels.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What to do when a new instance must start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Start it once these pool entries are evicted (reason `InstanceLimit`), least recently
    /// used first. Usually empty (there is room) or one id; more when `max_instances` was
    /// lowered below the current population.
    Start { evict: Vec<String> },
    /// Busy instances alone fill `max_instances`: evicting idle ones cannot make room, so the
    /// invocation waits for a busy instance to finish.
    Queue,
}

#[derive(Debug, Clone)]
pub struct KeepAlivePolicy {
    cfg: KeepAliveConfig,
}

impl KeepAlivePolicy {
    pub fn new(cfg: KeepAliveConfig) -> Self {
        KeepAlivePolicy { cfg }
    }

    pub fn config(&self) -> &KeepAliveConfig {
        &self.cfg
    }

    /// When an entry idle since `idle_since` has been idle for the whole TTL; `None` when that
    /// lies beyond `u64` milliseconds (never). One entry at a time, for callers that keep
    /// their own timers (the simulator).
    pub fn expires_at(&self, idle_since: Millis) -> Option<Millis> {
        idle_since.checked_add(self.cfg.keep_alive_ms)
    }

    /// When this entry's keep-alive ends: its own window if it has one, else the TTL.
    pub fn entry_expires_at(&self, e: &PoolEntry) -> Option<Millis> {
        match e.keep_alive_ms {
            Some(window) => e.idle_since.checked_add(window),
            None => self.expires_at(e.idle_since),
        }
    }

    /// Expired exactly when it has been idle for its whole keep-alive.
    fn expired(&self, e: &PoolEntry, now: Millis) -> bool {
        self.entry_expires_at(e).is_some_and(|at| now >= at)
    }

    /// Idle, not yet frozen, idle for at least the pause grace, least recently used first.
    /// Entries whose TTL has expired are left out: they are about to be evicted, and freezing
    /// them first would only delay that. Apply [`Self::evictions`] before this, so budget
    /// victims are not frozen needlessly either.
    pub fn to_freeze(&self, pool: &[PoolEntry], now: Millis) -> Vec<String> {
        lru_order(pool)
            .into_iter()
            .filter(|e| {
                !e.frozen && e.idle_for(now) >= self.cfg.pause_grace_ms && !self.expired(e, now)
            })
            .map(|e| e.id.clone())
            .collect()
    }

    /// Every eviction due at `now`: TTL expiries first, then least recently used entries until
    /// the remaining pool's total charge fits the budget. Within each group, oldest first.
    pub fn evictions(&self, pool: &[PoolEntry], now: Millis) -> Vec<(String, EvictionReason)> {
        let (expired, live): (Vec<&PoolEntry>, Vec<&PoolEntry>) = lru_order(pool)
            .into_iter()
            .partition(|e| self.expired(e, now));
        let mut out: Vec<(String, EvictionReason)> = expired
            .iter()
            .map(|e| (e.id.clone(), EvictionReason::KeepAliveExpired))
            .collect();

        // Entries may be charged 0 (not measured yet, or fully paged out), so "total ≤ 0" would
        // keep them; budget 0 is the operator's switch for no keep-alive at all.
        let budget = u128::from(self.cfg.budget_bytes);
        let mut total: u128 = live.iter().map(|e| u128::from(e.charged)).sum();
        for e in live {
            if self.cfg.budget_bytes > 0 && total <= budget {
                break;
            }
            total -= u128::from(e.charged);
            out.push((e.id.clone(), EvictionReason::MemoryBudget));
        }
        out
    }

    /// Whether a pool holding `total` bytes of charge must give up entries for the budget
    /// ([`Self::evictions`] would name some); budget 0 means no keep-alive at all.
    pub fn over_budget(&self, total: u64) -> bool {
        self.cfg.budget_bytes == 0 || total > self.cfg.budget_bytes
    }

    /// A new instance must start while `running` instances are busy (creating, initializing
    /// or running) and `pool` holds the idle/frozen ones. Evicts the fewest least recently
    /// used pool entries that bring the population below `max_instances`.
    pub fn admit_new_instance(&self, pool: &[PoolEntry], running: usize) -> Admission {
        let Some(pool_room) = self
            .cfg
            .max_instances
            .checked_sub(running)
            .and_then(|free| free.checked_sub(1))
        else {
            return Admission::Queue;
        };
        let excess = pool.len().saturating_sub(pool_room);
        let evict = lru_order(pool)
            .into_iter()
            .take(excess)
            .map(|e| e.id.clone())
            .collect();
        Admission::Start { evict }
    }

    /// A new instance needs `need` bytes of a host budget that has `free` (Squeezy's N:1 VMs:
    /// plugged partitions under a host memory limit); `pool` holds the idle instances that
    /// hold parts of that budget, charged what they hold. The least recently used go until
    /// their release covers the shortfall; none if it is already covered, all if even that is
    /// not enough (the start then waits for busy ones).
    pub fn room_for(&self, pool: &[PoolEntry], need: u64, free: u64) -> Vec<String> {
        let mut short = need.saturating_sub(free);
        let mut out = Vec::new();
        for e in lru_order(pool) {
            if short == 0 {
                break;
            }
            short = short.saturating_sub(e.charged);
            out.push(e.id.clone());
        }
        out
    }

    /// Which of an action's idle instances serves its next invocation: an unfrozen one if any
    /// (a thaw costs time), and among those the most recently used, so the rest age out and
    /// the TTL can shrink the action's pool to what its load needs. Equal candidates go to the
    /// smallest id. `candidates` are the pool entries of one action.
    pub fn choose_warm<'a>(&self, candidates: &'a [PoolEntry]) -> Option<&'a PoolEntry> {
        candidates.iter().max_by(|a, b| {
            (!a.frozen, a.idle_since)
                .cmp(&(!b.frozen, b.idle_since))
                .then_with(|| b.id.cmp(&a.id))
        })
    }

    /// The earliest time after `now` at which `to_freeze` or `evictions` would answer
    /// differently with no other event, i.e. how long the daemon may sleep. Deadlines already
    /// reached are left out: those decisions are due at `now`, and repeating them (say, after
    /// a failed freeze) must not turn the daemon's loop into a busy loop. `None` when nothing
    /// is pending (empty pool, or only deadlines beyond `u64` milliseconds).
    pub fn next_deadline(&self, pool: &[PoolEntry], now: Millis) -> Option<Millis> {
        pool.iter()
            .flat_map(|e| {
                let expiry = self.entry_expires_at(e);
                // An entry reaching its TTL first is evicted, never frozen.
                let freeze = e
                    .idle_since
                    .checked_add(self.cfg.pause_grace_ms)
                    .filter(|&f| !e.frozen && expiry.is_none_or(|x| f < x));
                [freeze, expiry]
            })
            .flatten()
            .filter(|&t| t > now)
            .min()
    }
}
