//! The cluster's state: instances, nodes and per-function bookkeeping.
//!
//! Queues of instance references (a function's idle stack, a node's LRU order, Desiccant's
//! eligible list) are lazy: an entry carries the instance's generation when it was queued,
//! and every state change bumps the generation, so stale entries are skipped when popped
//! instead of being searched for and removed.

use icebox_policy::{IdleHistogram, ReclaimThreshold};
use std::collections::{BTreeSet, VecDeque};

pub type Ref = (u32, u32);

#[derive(Debug, Clone, Default)]
pub struct Inst {
    pub func: u32,
    pub node: u32,
    pub in_flight: u32,
    pub gen: u32,
    pub alive: bool,
    pub idle: bool,
    /// Bytes charged to its node now.
    pub charge: u64,
    /// When its cold start ends; activations that join earlier wait for it.
    pub ready_at: u64,
    pub reclaimed: bool,
    /// Position in its function's busy list while busy.
    pub busy_pos: u32,
    /// Its key in the node's frequency order while idle.
    pub evict_key: (u64, u64),
}

#[derive(Debug, Clone)]
pub struct Node {
    pub cap: u64,
    /// The cap is a keep-alive budget of idle instances only (`SimConfig::budget_idle_only`).
    pub idle_only: bool,
    pub used: u64,
    /// Charge of its idle instances: what evictions could free.
    pub idle_mem: u64,
    pub idle_count: u32,
    pub cores_used: u32,
    /// Idle instances, least recently used first (lazy).
    pub lru: VecDeque<Ref>,
    /// Idle instances by `EvictOrder::key`, for frequency eviction (exact, not lazy).
    pub by_key: BTreeSet<((u64, u64), u32)>,
    /// Idle instances past Desiccant's frozen timeout, not reclaimed yet (lazy).
    pub eligible: VecDeque<Ref>,
    pub threshold: ReclaimThreshold,
}

impl Node {
    pub fn new(cap: u64, idle_only: bool, threshold: ReclaimThreshold) -> Self {
        Node {
            cap,
            idle_only,
            used: 0,
            idle_mem: 0,
            idle_count: 0,
            cores_used: 0,
            lru: VecDeque::new(),
            by_key: BTreeSet::new(),
            eligible: VecDeque::new(),
            threshold,
        }
    }

    pub fn free(&self) -> u64 {
        if self.idle_only {
            self.free_keep_alive()
        } else {
            self.cap.saturating_sub(self.used)
        }
    }

    /// What placement sees as free: the node less its idle instances, as the daemon's
    /// keep-alive budget charges only idle and frozen instances.
    pub fn free_keep_alive(&self) -> u64 {
        self.cap.saturating_sub(self.idle_mem)
    }

    /// Free memory plus what evicting every idle instance (but `own`, bytes of one that is
    /// about to be reused) would free.
    pub fn reachable(&self, own: u64) -> u64 {
        if self.idle_only {
            // Memory never stops a start: only idle instances are capped.
            return u64::MAX;
        }
        self.free() + self.idle_mem.saturating_sub(own)
    }
}

#[derive(Debug, Clone, Default)]
pub struct Func {
    /// Busy instances (with activations in flight).
    pub busy: Vec<u32>,
    /// Idle instances on each node that has held any: placement asks per node.
    pub idle: Vec<IdleOn>,
    pub invocations: u64,
    pub hist: IdleHistogram,
}

/// A function's idle instances on one node.
#[derive(Debug, Clone, Default)]
pub struct IdleOn {
    pub node: u32,
    /// Live entries of `stack`.
    pub count: u32,
    /// Most recently idle on top (lazy).
    pub stack: Vec<Ref>,
}

impl Func {
    pub fn idle_on_mut(&mut self, node: u32) -> &mut IdleOn {
        let k = match self.idle.iter().position(|x| x.node == node) {
            Some(k) => k,
            None => {
                self.idle.push(IdleOn {
                    node,
                    ..IdleOn::default()
                });
                self.idle.len() - 1
            }
        };
        &mut self.idle[k]
    }
}

/// Drops stale entries once a lazy queue holds far more entries than live ones, so its size
/// stays proportional to the idle instances rather than to the invocations.
pub fn compact<C>(queue: &mut C, live: u32, keep: impl FnMut(&Ref) -> bool)
where
    C: Retain,
{
    if queue.len() > 2 * live as usize + 1024 {
        queue.retain_refs(keep);
    }
}

pub trait Retain {
    fn len(&self) -> usize;
    fn retain_refs(&mut self, keep: impl FnMut(&Ref) -> bool);
}

impl Retain for Vec<Ref> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn retain_refs(&mut self, keep: impl FnMut(&Ref) -> bool) {
        self.retain(keep)
    }
}

impl Retain for VecDeque<Ref> {
    fn len(&self) -> usize {
        VecDeque::len(self)
    }
    fn retain_refs(&mut self, keep: impl FnMut(&Ref) -> bool) {
        self.retain(keep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_drops_stale_entries_only_when_large() {
        let mut q: Vec<Ref> = (0..2000).map(|i| (i, 0)).collect();
        compact(&mut q, 10, |r| r.0 < 5);
        assert_eq!(q.len(), 5);
        let mut small: Vec<Ref> = (0..100).map(|i| (i, 0)).collect();
        compact(&mut small, 10, |_| false);
        assert_eq!(small.len(), 100);
    }
}
