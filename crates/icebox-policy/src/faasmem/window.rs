//! The request window of §5.2: how many requests to watch a segment's probe pages before
//! calling the ones still untouched cold.
//!
//! Every request touches some probes, so the count of untouched probes falls, steeply while
//! the function is still warming up (a web cache filling with Pareto-distributed pages), not at
//! all once each request touches the same pages (ML inference). The window closes when the
//! decline has flattened: at most `flat_fraction` of the probes per request, averaged over the
//! trailing half of the requests watched so far. A single quiet request is not enough: on a
//! web trace most requests hit pages already touched, and the next rare page would then land
//! in the offloaded cold set; averaging over half the window asks for a quiet stretch as long
//! as the warming already seen. A stable pattern still closes at the second request.

use super::config::FaasmemConfig;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestWindow {
    /// Untouched probes after each request watched, oldest first (at most `window_max`).
    untouched: Vec<u64>,
    closed: Option<u32>,
}

impl RequestWindow {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the counts seen after one more request. Returns the window (requests watched)
    /// when it closes with this request; `None` while it stays open, and after it closed.
    /// `untouched` above `probes` is clamped; `probes == 0` (nothing to watch) closes at once.
    pub fn observe(&mut self, cfg: &FaasmemConfig, untouched: u64, probes: u64) -> Option<u32> {
        if self.closed.is_some() {
            return None;
        }
        self.untouched.push(untouched.min(probes));
        let n = self.untouched.len();
        let window = u32::try_from(n).unwrap_or(u32::MAX);
        let flat = n >= 2 && {
            let span = n / 2;
            let decline = self.untouched[n - 1 - span].saturating_sub(self.untouched[n - 1]);
            decline as f64 <= cfg.flat_fraction * probes as f64 * span as f64
        };
        if probes == 0 || flat || window >= cfg.window_max {
            self.closed = Some(window);
            self.untouched = Vec::new();
        }
        self.closed
    }

    /// Requests watched so far (the window, once closed).
    pub fn observed(&self) -> u32 {
        self.closed
            .unwrap_or_else(|| u32::try_from(self.untouched.len()).unwrap_or(u32::MAX))
    }

    /// The window, once closed.
    pub fn closed(&self) -> Option<u32> {
        self.closed
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::SplitMix64;

    /// Feeds `counts` until the window closes; returns where.
    pub(crate) fn close_at(cfg: &FaasmemConfig, probes: u64, counts: &[u64]) -> Option<u32> {
        let mut w = RequestWindow::new();
        counts.iter().find_map(|&u| w.observe(cfg, u, probes))
    }

    /// A web function whose init segment is mostly an HTML cache: `entries` cached pages of
    /// `size` probes each, requested with Pareto (Zipf s = 1) popularity, plus `cold` probes no
    /// request touches. Expected untouched probes after each of `n` requests.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_possible_wrap,
        clippy::cast_sign_loss,
        reason = "an exponent counting windows: small; float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
    )]
    pub(crate) fn pareto_cache(entries: u32, size: u64, cold: u64, n: u32) -> (u64, Vec<u64>) {
        let weights: Vec<f64> = (1..=entries).map(|r| 1.0 / f64::from(r)).collect();
        let total: f64 = weights.iter().sum();
        let probes = cold + u64::from(entries) * size;
        let counts = (1..=n)
            .map(|k| {
                let cached: f64 = weights
                    .iter()
                    .map(|w| size as f64 * (1.0 - w / total).powi(k as i32))
                    .sum();
                cold + cached.round() as u64
            })
            .collect();
        (probes, counts)
    }

    #[test]
    fn a_stable_pattern_closes_at_the_second_request() {
        let cfg = FaasmemConfig::default();
        // ML inference: the first request touches the model, every later one the same pages.
        assert_eq!(close_at(&cfg, 1000, &[700, 700, 700]), Some(2));
        // A little noise (under 1% of the probes) is still flat.
        assert_eq!(close_at(&cfg, 1000, &[700, 695, 695]), Some(2));
        // Still declining at the second request, flat at the third.
        assert_eq!(close_at(&cfg, 1000, &[900, 800, 800, 800]), Some(3));
    }

    #[test]
    fn a_pareto_web_cache_closes_around_twenty() {
        let cfg = FaasmemConfig::default();
        let (probes, counts) = pareto_cache(32, 62, 500, 60);
        let window = close_at(&cfg, probes, &counts).unwrap();
        assert!((15..=30).contains(&window), "closed at {window}");
        // Each request first finds new pages (2% of the probes), then mostly the tail trickles in.
        let decline = |k: usize| (counts[k - 1] - counts[k]) as f64 / probes as f64;
        assert!(decline(1) > 2.0 * cfg.flat_fraction, "{}", decline(1));
        assert!(decline(window as usize) <= cfg.flat_fraction);
    }

    #[test]
    #[expect(
        clippy::cast_possible_truncation,
        reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
    )]
    fn a_sampled_web_trace_does_not_close_on_one_quiet_request() {
        // Each request fetches 3 pages: most hit pages already touched (no decline at all),
        // which must not close the window the way a stable pattern does.
        let cfg = FaasmemConfig::default();
        let (entries, size, cold) = (32u64, 62u64, 500u64);
        let weights: Vec<f64> = (1..=entries).map(|r| 1.0 / r as f64).collect();
        let total: f64 = weights.iter().sum();
        let mut windows: Vec<u32> = (0..50)
            .map(|seed| {
                let mut rng = SplitMix64::new(seed);
                let mut touched = vec![false; entries as usize];
                let counts: Vec<u64> = (0..cfg.window_max)
                    .map(|_| {
                        for _ in 0..3 {
                            let mut x = rng.next_u64() as f64 / u64::MAX as f64 * total;
                            let pick = weights
                                .iter()
                                .position(|w| {
                                    x -= w;
                                    x <= 0.0
                                })
                                .unwrap_or(entries as usize - 1);
                            touched[pick] = true;
                        }
                        cold + size * touched.iter().filter(|t| !**t).count() as u64
                    })
                    .collect();
                close_at(&cfg, cold + entries * size, &counts).unwrap()
            })
            .collect();
        windows.sort_unstable();
        let median = windows[windows.len() / 2];
        assert!(median >= 10, "median window {median}: {windows:?}");
    }

    #[test]
    fn closes_at_window_max_at_the_latest() {
        let cfg = FaasmemConfig {
            window_max: 10,
            ..FaasmemConfig::default()
        };
        // Declines by 5% of the probes every request, forever.
        let counts: Vec<u64> = (0..100).map(|k| 10_000 - 500 * k).collect();
        assert_eq!(close_at(&cfg, 10_000, &counts), Some(10));
        let one = FaasmemConfig {
            window_max: 1,
            ..cfg
        };
        assert_eq!(close_at(&one, 10_000, &counts), Some(1));
    }

    #[test]
    fn odd_inputs_are_tolerated() {
        let cfg = FaasmemConfig::default();
        // Nothing to watch: closes at once.
        assert_eq!(close_at(&cfg, 0, &[0]), Some(1));
        assert_eq!(close_at(&cfg, 0, &[5]), Some(1));
        // More untouched than probes is clamped; a rising count is no decline.
        assert_eq!(close_at(&cfg, 100, &[500, 100]), Some(2));
        assert_eq!(close_at(&cfg, 100, &[50, 80]), Some(2));
        // Once closed it stays closed and reports nothing new.
        let mut w = RequestWindow::new();
        assert_eq!(w.observe(&cfg, 10, 10), None);
        assert_eq!(w.observed(), 1);
        assert_eq!(w.observe(&cfg, 10, 10), Some(2));
        assert_eq!(w.observe(&cfg, 0, 10), None);
        assert_eq!((w.observed(), w.closed()), (2, Some(2)));
    }

    #[test]
    fn the_decline_is_averaged_over_the_trailing_half() {
        let cfg = FaasmemConfig::default();
        // 1000 probes: flat means at most 10 per request. After a steep start, one quiet
        // request at the 4th is not enough (the last two average 25), the 5th makes it.
        let counts = [900, 800, 750, 750, 750];
        assert_eq!(close_at(&cfg, 1000, &counts), Some(5));
    }
}
