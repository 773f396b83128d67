//! The hybrid histogram keep-alive policy of Shahrad et al., "Serverless in the Wild" (ATC '20):
//! per function, a histogram of idle times (end of the last activation to the start of the
//! next) in 1-minute bins over 4 hours. When it is representative, an instance that goes idle
//! is unloaded at once and pre-warmed again after the *pre-warm window* (the 5th percentile,
//! less a 10 % margin), then kept for the *keep-alive window* (up to the 99th percentile, plus
//! a 10 % margin). With too few samples, or too many idle times beyond the histogram's range,
//! it falls back to a fixed TTL with no pre-warming.
//!
//! Pure: the caller tells [`IdleHistogram`] when activations start and end (times from an
//! injected clock) and asks [`HybridPolicy::windows`] what to do with an instance going idle.

use crate::clock::Millis;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HybridConfig {
    pub bin_ms: Millis,
    /// The histogram covers idle times in [0, range_ms); longer ones count as out of range.
    pub range_ms: Millis,
    /// Percentile (0–100) whose bin start, less the margin, is the pre-warm window.
    pub head_percentile: f64,
    /// Percentile (0–100) whose bin end, plus the margin, ends the keep-alive window.
    pub tail_percentile: f64,
    /// Safety margin: the pre-warm window shrinks and the keep-alive end grows by this fraction.
    pub margin: f64,
    /// Below this many in-range idle times the histogram says too little: fixed TTL.
    pub min_samples: u32,
    /// Above this fraction of idle times out of range the pattern is longer than the
    /// histogram (the paper switches to time-series forecasting there): fixed TTL.
    pub max_out_of_range: f64,
    /// The fixed TTL of the fallback, counted from the end of the last activation.
    pub fallback_keep_alive_ms: Millis,
}

impl HybridConfig {
    pub const DEFAULT_BIN_MS: Millis = 60_000;
    pub const DEFAULT_RANGE_MS: Millis = 4 * 60 * 60_000;
    pub const DEFAULT_FALLBACK_KEEP_ALIVE_MS: Millis = 10 * 60_000;
}

impl Default for HybridConfig {
    fn default() -> Self {
        HybridConfig {
            bin_ms: Self::DEFAULT_BIN_MS,
            range_ms: Self::DEFAULT_RANGE_MS,
            head_percentile: 5.0,
            tail_percentile: 99.0,
            margin: 0.10,
            min_samples: 10,
            max_out_of_range: 0.5,
            fallback_keep_alive_ms: Self::DEFAULT_FALLBACK_KEEP_ALIVE_MS,
        }
    }
}

/// What to do with an instance that went idle at `idle_since`: unload it now when
/// `prewarm_ms` > 0 and load it again at `idle_since + prewarm_ms`; either way it is evicted at
/// [`Windows::expires_at`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Windows {
    pub prewarm_ms: Millis,
    /// Counted from the pre-warm (or, without one, from the end of the activation).
    pub keep_alive_ms: Millis,
    pub from_histogram: bool,
}

impl Windows {
    pub fn prewarm_at(&self, idle_since: Millis) -> Option<Millis> {
        (self.prewarm_ms > 0).then(|| idle_since.saturating_add(self.prewarm_ms))
    }

    /// `None` when the window reaches beyond `u64` milliseconds (never).
    pub fn expires_at(&self, idle_since: Millis) -> Option<Millis> {
        idle_since
            .checked_add(self.prewarm_ms)?
            .checked_add(self.keep_alive_ms)
    }
}

/// One function's idle-time histogram and what it needs to measure the next idle time.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdleHistogram {
    bins: Vec<u32>,
    in_range: u32,
    out_of_range: u32,
    running: u32,
    last_end: Option<Millis>,
}

impl IdleHistogram {
    pub fn new() -> Self {
        Self::default()
    }

    /// An activation starts at `now`. The first one after the function was completely idle
    /// records the idle time since the last end; concurrent starts record nothing.
    pub fn on_start(&mut self, cfg: &HybridConfig, now: Millis) {
        if self.running == 0 {
            if let Some(end) = self.last_end {
                self.record(cfg, now.saturating_sub(end));
            }
        }
        self.running += 1;
    }

    /// An activation ends at `now`.
    pub fn on_end(&mut self, now: Millis) {
        self.running = self.running.saturating_sub(1);
        self.last_end = Some(self.last_end.map_or(now, |t| t.max(now)));
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
    )]
    pub fn record(&mut self, cfg: &HybridConfig, idle_ms: Millis) {
        if idle_ms >= cfg.range_ms || cfg.bin_ms == 0 {
            self.out_of_range += 1;
            return;
        }
        let bin = (idle_ms / cfg.bin_ms) as usize;
        if self.bins.len() <= bin {
            self.bins.resize(bin + 1, 0);
        }
        self.bins[bin] += 1;
        self.in_range += 1;
    }

    pub fn samples(&self) -> u32 {
        self.in_range
    }

    pub fn out_of_range(&self) -> u32 {
        self.out_of_range
    }

    /// Index of the bin holding the `p`-th percentile of the in-range samples.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
    )]
    fn percentile_bin(&self, p: f64) -> usize {
        // The smallest bin whose cumulative count reaches p % of the samples (at least one).
        let want = ((p / 100.0) * f64::from(self.in_range)).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (i, &c) in self.bins.iter().enumerate() {
            seen += u64::from(c);
            if seen >= want {
                return i;
            }
        }
        self.bins.len().saturating_sub(1)
    }
}

#[derive(Debug, Clone)]
pub struct HybridPolicy {
    cfg: HybridConfig,
}

impl HybridPolicy {
    pub fn new(cfg: HybridConfig) -> Self {
        HybridPolicy { cfg }
    }

    pub fn config(&self) -> &HybridConfig {
        &self.cfg
    }

    /// The windows for an instance of the function whose histogram is `h`, going idle now.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
    )]
    pub fn windows(&self, h: &IdleHistogram) -> Windows {
        let c = &self.cfg;
        let total = h.in_range + h.out_of_range;
        let too_far =
            total > 0 && f64::from(h.out_of_range) > c.max_out_of_range * f64::from(total);
        if h.in_range < c.min_samples.max(1) || too_far {
            return Windows {
                prewarm_ms: 0,
                keep_alive_ms: c.fallback_keep_alive_ms,
                from_histogram: false,
            };
        }
        let head_start = h.percentile_bin(c.head_percentile) as u64 * c.bin_ms;
        let tail_end = (h.percentile_bin(c.tail_percentile) as u64 + 1) * c.bin_ms;
        let prewarm_ms = (head_start as f64 * (1.0 - c.margin)).round().max(0.0) as Millis;
        let end = (tail_end as f64 * (1.0 + c.margin)).round() as Millis;
        Windows {
            prewarm_ms,
            keep_alive_ms: end.saturating_sub(prewarm_ms),
            from_histogram: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    const MIN: Millis = 60_000;

    fn cfg() -> HybridConfig {
        HybridConfig {
            min_samples: 5,
            ..HybridConfig::default()
        }
    }

    /// Drives one activation of `run_ms` after an idle gap of `gap_ms`, on the manual clock.
    fn activation(h: &mut IdleHistogram, c: &HybridConfig, clock: &ManualClock, gap_ms: Millis) {
        clock.advance(gap_ms);
        h.on_start(c, clock.now_ms());
        clock.advance(100);
        h.on_end(clock.now_ms());
    }

    #[test]
    fn few_samples_fall_back_to_the_fixed_ttl() {
        let c = cfg();
        let p = HybridPolicy::new(c);
        let clock = ManualClock::new(0);
        let mut h = IdleHistogram::new();
        let w = p.windows(&h);
        assert_eq!(
            w,
            Windows {
                prewarm_ms: 0,
                keep_alive_ms: 10 * MIN,
                from_histogram: false
            }
        );
        assert_eq!(w.expires_at(1_000), Some(1_000 + 10 * MIN));
        assert_eq!(w.prewarm_at(1_000), None);
        // The first activation has no previous end, so n activations give n - 1 idle times.
        for _ in 0..5 {
            activation(&mut h, &c, &clock, 3 * MIN);
        }
        assert_eq!(h.samples(), 4);
        assert!(!p.windows(&h).from_histogram);
        activation(&mut h, &c, &clock, 3 * MIN);
        assert!(p.windows(&h).from_histogram);
    }

    #[test]
    fn regular_gaps_prewarm_before_the_next_call_and_keep_past_it() {
        let c = cfg();
        let p = HybridPolicy::new(c);
        let clock = ManualClock::new(0);
        let mut h = IdleHistogram::new();
        // Idle exactly 30 min between calls: every sample lands in bin 30.
        for _ in 0..20 {
            activation(&mut h, &c, &clock, 30 * MIN);
        }
        let w = p.windows(&h);
        assert!(w.from_histogram);
        // Head: bin 30 starts at 30 min; less 10 %.
        assert_eq!(w.prewarm_ms, (30 * MIN) * 9 / 10);
        // Tail: bin 30 ends at 31 min; plus 10 %.
        assert_eq!(w.prewarm_ms + w.keep_alive_ms, 31 * MIN * 11 / 10);
        let idle_since = clock.now_ms();
        let warm_from = w.prewarm_at(idle_since).unwrap();
        let until = w.expires_at(idle_since).unwrap();
        assert!(warm_from < idle_since + 30 * MIN && until > idle_since + 30 * MIN);
    }

    #[test]
    fn short_gaps_do_not_prewarm() {
        let c = cfg();
        let p = HybridPolicy::new(c);
        let mut h = IdleHistogram::new();
        for gap in [5_000, 20_000, 50_000, 10_000, 30_000, 2 * MIN + 1] {
            h.record(&c, gap);
        }
        let w = p.windows(&h);
        assert!(w.from_histogram);
        assert_eq!(w.prewarm_ms, 0);
        // 99th percentile is in bin 2 (ends at 3 min), plus 10 %.
        assert_eq!(w.keep_alive_ms, 3 * MIN * 11 / 10);
    }

    #[test]
    fn mostly_out_of_range_idle_times_fall_back() {
        let c = cfg();
        let p = HybridPolicy::new(c);
        let mut h = IdleHistogram::new();
        for _ in 0..6 {
            h.record(&c, MIN);
        }
        for _ in 0..7 {
            h.record(&c, 5 * 60 * MIN);
        }
        assert_eq!(h.out_of_range(), 7);
        assert!(!p.windows(&h).from_histogram);
        h.record(&c, MIN);
        h.record(&c, MIN);
        assert!(p.windows(&h).from_histogram);
    }

    #[test]
    fn concurrent_activations_record_one_idle_time() {
        let c = cfg();
        let mut h = IdleHistogram::new();
        h.on_start(&c, 0);
        h.on_start(&c, 10);
        h.on_end(100);
        h.on_start(&c, 150);
        h.on_end(200);
        h.on_end(300);
        assert_eq!(h.samples(), 0, "the function was never completely idle");
        h.on_start(&c, 300 + 2 * MIN);
        assert_eq!(h.samples(), 1);
        assert_eq!(h.bins[2], 1);
    }

    #[test]
    fn windows_saturate_instead_of_overflowing() {
        let w = Windows {
            prewarm_ms: 10,
            keep_alive_ms: Millis::MAX,
            from_histogram: true,
        };
        assert_eq!(w.expires_at(5), None);
        assert_eq!(w.prewarm_at(Millis::MAX), Some(Millis::MAX));
    }
}
