//! The keep-alive pool as policies see it: idle and frozen instances with what they cost.

use crate::clock::Millis;
use serde::{Deserialize, Serialize};

/// One idle or frozen instance in the keep-alive pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolEntry {
    pub id: String,
    /// `namespace/name` of the action.
    pub action: String,
    /// When its last activation ended.
    pub idle_since: Millis,
    /// Bytes it costs the keep-alive budget (measured USS/PSS, or its declared limit).
    pub charged: u64,
    pub frozen: bool,
    /// Its own keep-alive, counted from `idle_since`, instead of the policy's TTL (a per-action
    /// window such as the hybrid histogram's; 0: unload at once).
    #[serde(default)]
    pub keep_alive_ms: Option<Millis>,
}

impl PoolEntry {
    /// How long it has been idle at `now`. An `idle_since` later than `now` (a snapshot taken
    /// just before the entry was added) counts as zero rather than wrapping around.
    pub fn idle_for(&self, now: Millis) -> Millis {
        now.saturating_sub(self.idle_since)
    }
}

/// Least recently used first; equal `idle_since` ordered by id, so the order never depends on
/// how the caller happened to collect the pool.
pub fn lru_order(pool: &[PoolEntry]) -> Vec<&PoolEntry> {
    let mut ordered: Vec<&PoolEntry> = pool.iter().collect();
    ordered.sort_unstable_by(|a, b| (a.idle_since, &a.id).cmp(&(b.idle_since, &b.id)));
    ordered
}

/// Sum of the pool's charges, saturating instead of overflowing.
pub fn total_charge(pool: &[PoolEntry]) -> u64 {
    pool.iter()
        .fold(0u64, |sum, e| sum.saturating_add(e.charged))
}

/// A pool entry for tests (crate::testutil re-exports it).
#[cfg(test)]
pub(crate) fn entry(id: &str, idle_since: u64, charged: u64, frozen: bool) -> PoolEntry {
    PoolEntry {
        id: id.to_string(),
        action: format!("guest/{id}"),
        idle_since,
        charged,
        frozen,
        keep_alive_ms: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_for_saturates_at_zero() {
        let e = entry("a", 100, 0, false);
        assert_eq!(e.idle_for(150), 50);
        assert_eq!(e.idle_for(100), 0);
        assert_eq!(e.idle_for(90), 0);
    }

    #[test]
    fn lru_order_is_oldest_first_with_ties_by_id() {
        let pool = vec![
            entry("c", 20, 0, false),
            entry("b", 10, 0, true),
            entry("z", 5, 0, false),
            entry("a", 10, 0, false),
        ];
        let ids: Vec<&str> = lru_order(&pool).iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["z", "a", "b", "c"]);
    }

    #[test]
    fn total_charge_saturates() {
        assert_eq!(total_charge(&[]), 0);
        let pool = vec![entry("a", 0, 3, false), entry("b", 0, 4, true)];
        assert_eq!(total_charge(&pool), 7);
        let huge = vec![entry("a", 0, u64::MAX, false), entry("b", 0, 1, false)];
        assert_eq!(total_charge(&huge), u64::MAX);
    }
}
