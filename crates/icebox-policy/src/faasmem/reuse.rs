//! When semi-warm starts (§6.1): the p99 of an action's container reuse intervals (how long
//! its instances stayed idle before their next request), so 99% of reuses find their hot
//! pages still local.

use super::config::FaasmemConfig;
use crate::clock::Millis;
use std::collections::VecDeque;

/// One action's recent reuse intervals, a bounded ring: the newest replace the oldest, so the
/// estimate follows a changing invocation pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReuseHistory {
    intervals: VecDeque<Millis>,
    capacity: usize,
}

impl Default for ReuseHistory {
    fn default() -> Self {
        Self::new()
    }
}

impl ReuseHistory {
    /// Enough samples for a p99 that is not just the maximum (ten above it), few enough to
    /// follow a day's changes in the invocation pattern.
    pub const DEFAULT_CAPACITY: usize = 1000;

    pub fn new() -> Self {
        Self::with_capacity(Self::DEFAULT_CAPACITY)
    }

    /// A ring of `capacity` intervals (at least 1).
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        ReuseHistory {
            intervals: VecDeque::with_capacity(capacity.min(Self::DEFAULT_CAPACITY)),
            capacity,
        }
    }

    /// An instance of the action went from idle to its next request after `interval_ms`.
    pub fn record(&mut self, interval_ms: Millis) {
        if self.intervals.len() == self.capacity {
            self.intervals.pop_front();
        }
        self.intervals.push_back(interval_ms);
    }

    pub fn len(&self) -> usize {
        self.intervals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    /// Nearest-rank percentile (`pct` in (0, 100]): the smallest recorded interval that at
    /// least `pct`% of the recorded intervals do not exceed. `None` without samples.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
    )]
    pub fn percentile(&self, pct: f64) -> Option<Millis> {
        if self.intervals.is_empty() {
            return None;
        }
        let mut sorted: Vec<Millis> = self.intervals.iter().copied().collect();
        sorted.sort_unstable();
        let n = sorted.len();
        let rank = (pct.clamp(0.0, 100.0) / 100.0 * n as f64).ceil() as usize;
        Some(sorted[rank.clamp(1, n) - 1])
    }

    /// How long an idle instance of this action stays fully warm before semi-warm starts:
    /// the p99 once there are `semiwarm_min_samples` intervals, else `semiwarm_default_ms`.
    pub fn semiwarm_after(&self, cfg: &FaasmemConfig) -> Millis {
        match self.percentile(99.0) {
            Some(p99) if self.len() >= cfg.semiwarm_min_samples => p99,
            _ => cfg.semiwarm_default_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p99_of_a_known_distribution() {
        let mut h = ReuseHistory::new();
        // 1..=1000 s, shuffled order does not matter: p99 is the 990th value.
        for i in (1..=1000u64).rev() {
            h.record(i * 1000);
        }
        assert_eq!(h.percentile(99.0), Some(990_000));
        assert_eq!(h.percentile(50.0), Some(500_000));
        assert_eq!(h.percentile(100.0), Some(1_000_000));
        assert_eq!(h.percentile(0.0), Some(1_000));
        assert_eq!(h.semiwarm_after(&FaasmemConfig::default()), 990_000);

        // 100 samples: 98 short gaps and 2 long ones. Nearest rank 99 is a long one.
        let mut h = ReuseHistory::new();
        for _ in 0..98 {
            h.record(2_000);
        }
        h.record(300_000);
        h.record(400_000);
        assert_eq!(h.percentile(99.0), Some(300_000));
        assert_eq!(h.percentile(98.0), Some(2_000));
    }

    #[test]
    fn too_few_samples_use_the_default() {
        let cfg = FaasmemConfig::default();
        let mut h = ReuseHistory::new();
        assert_eq!(h.percentile(99.0), None);
        assert_eq!(h.semiwarm_after(&cfg), cfg.semiwarm_default_ms);
        for _ in 0..cfg.semiwarm_min_samples - 1 {
            h.record(5_000);
        }
        assert_eq!(h.semiwarm_after(&cfg), cfg.semiwarm_default_ms);
        h.record(5_000);
        assert_eq!(h.semiwarm_after(&cfg), 5_000);
        let eager = FaasmemConfig {
            semiwarm_min_samples: 0,
            ..cfg
        };
        assert_eq!(
            ReuseHistory::new().semiwarm_after(&eager),
            cfg.semiwarm_default_ms
        );
    }

    #[test]
    fn the_ring_forgets_the_oldest() {
        let mut h = ReuseHistory::with_capacity(3);
        for i in [100, 1, 2, 3] {
            h.record(i);
        }
        assert_eq!(h.len(), 3);
        assert_eq!(h.percentile(100.0), Some(3));
        let mut tiny = ReuseHistory::with_capacity(0);
        tiny.record(7);
        tiny.record(8);
        assert_eq!((tiny.len(), tiny.percentile(99.0)), (1, Some(8)));
        let mut full = ReuseHistory::new();
        for i in 0..5_000 {
            full.record(i);
        }
        assert_eq!(full.len(), ReuseHistory::DEFAULT_CAPACITY);
        assert_eq!(full.percentile(0.0), Some(4_000));
    }
}
