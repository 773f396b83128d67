//! The dynamic activation threshold (Desiccant §4.5.1): reclaim only while the idle pool uses
//! more than a fraction of its budget; an eviction drops the fraction so the pool is kept
//! further from the budget, and each quiet interval raises it again to save CPU.

use super::config::DesiccantConfig;
use crate::clock::Millis;

/// The threshold is a pure function of the time since the last eviction: nothing ticks, so
/// the daemon and the simulator may ask at any time, in any order, and get the same answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ReclaimThreshold {
    after_eviction: f64,
    step: f64,
    step_ms: Millis,
    max: f64,
    last_eviction: Option<Millis>,
}

impl ReclaimThreshold {
    pub fn new(cfg: &DesiccantConfig) -> Self {
        ReclaimThreshold {
            after_eviction: cfg.threshold_after_eviction,
            step: cfg.threshold_step,
            step_ms: cfg.threshold_step_ms,
            max: cfg.threshold_max,
            last_eviction: None,
        }
    }

    /// An instance was evicted at `now` to keep the pool within its memory budget
    /// (`EvictionReason::MemoryBudget`): the pressure this threshold answers. TTL expiries say
    /// nothing about memory, so they are not reported. A report older than one already seen
    /// changes nothing, so events may arrive out of order.
    pub fn on_eviction(&mut self, now: Millis) {
        self.last_eviction = Some(self.last_eviction.map_or(now, |t| t.max(now)));
    }

    pub fn last_eviction(&self) -> Option<Millis> {
        self.last_eviction
    }

    /// The threshold at `now`, as a fraction of the budget: `threshold_after_eviction` until
    /// one full `threshold_step_ms` has passed since the last eviction, then one
    /// `threshold_step` more per full interval, up to `threshold_max`. A node that has never
    /// evicted is at `threshold_max`, as if its last eviction were long ago.
    pub fn current(&self, now: Millis) -> f64 {
        let Some(at) = self.last_eviction else {
            return self.max;
        };
        let Some(steps) = now.saturating_sub(at).checked_div(self.step_ms) else {
            return self.max;
        };
        match self.steps_to_max() {
            Some(cap) if steps >= cap => self.max,
            _ => round_fraction(self.after_eviction + self.step * steps as f64).min(self.max),
        }
    }

    /// True while the idle pool's charged memory is strictly above the threshold. Never with a
    /// zero budget: keep-alive is then off, and nothing stays idle long enough to reclaim.
    pub fn should_reclaim(&self, charged: u64, budget: u64, now: Millis) -> bool {
        budget > 0 && charged as f64 > self.current(now) * budget as f64
    }

    /// When `current` next changes if no eviction happens, so the daemon can sleep until then.
    /// `None` once the threshold has reached its maximum (or before any eviction).
    pub fn next_change(&self, now: Millis) -> Option<Millis> {
        let at = self.last_eviction?;
        let steps = now.saturating_sub(at).checked_div(self.step_ms)?;
        if steps >= self.steps_to_max()? {
            return None;
        }
        at.checked_add(self.step_ms.checked_mul(steps + 1)?)
    }

    /// Full intervals after an eviction at which the threshold is back at its maximum; `None`
    /// when it never rises (a zero step).
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
    )]
    fn steps_to_max(&self) -> Option<u64> {
        if self.after_eviction >= self.max {
            return Some(0);
        }
        if self.step.is_nan() || self.step <= 0.0 {
            return None;
        }
        // `as` saturates, so an absurdly small step means "practically never".
        Some(round_fraction((self.max - self.after_eviction) / self.step).ceil() as u64)
    }
}

/// Rounds to a billionth, so that repeated steps land on the decimal the operator wrote:
/// 0.6 + 6 × 0.05 reaches 0.9 in six steps, not seven, and 0.6 + 0.05 is the same `f64` as
/// the literal 0.65 (an exact quotient of integers is correctly rounded).
fn round_fraction(x: f64) -> f64 {
    (x * 1e9).round() / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    fn threshold() -> ReclaimThreshold {
        ReclaimThreshold::new(&DesiccantConfig::default())
    }

    #[test]
    fn starts_at_the_maximum_before_any_eviction() {
        let t = threshold();
        assert_eq!(t.last_eviction(), None);
        assert_eq!(t.current(0), 0.90);
        assert_eq!(t.current(Millis::MAX), 0.90);
        assert_eq!(t.next_change(0), None);
    }

    #[test]
    fn drops_to_sixty_on_eviction_then_climbs_five_points_every_two_seconds() {
        let clock = ManualClock::new(10_000);
        let mut t = threshold();
        t.on_eviction(clock.now_ms());
        assert_eq!(t.current(clock.now_ms()), 0.60);

        let expected = [
            (1_999, 0.60),
            (2_000, 0.65),
            (3_999, 0.65),
            (4_000, 0.70),
            (6_000, 0.75),
            (8_000, 0.80),
            (9_999, 0.80),
            (10_000, 0.85),
            (11_999, 0.85),
            (12_000, 0.90),
            (14_000, 0.90),
            (1_000_000, 0.90),
        ];
        for (since, want) in expected {
            clock.set(10_000 + since);
            assert_eq!(t.current(clock.now_ms()), want, "{since} ms after eviction");
        }
    }

    #[test]
    fn a_new_eviction_restarts_the_climb_and_stale_reports_do_not() {
        let clock = ManualClock::new(0);
        let mut t = threshold();
        t.on_eviction(0);
        clock.set(7_000);
        assert_eq!(t.current(clock.now_ms()), 0.75);
        t.on_eviction(clock.now_ms());
        assert_eq!(t.current(clock.now_ms()), 0.60);
        t.on_eviction(1_000);
        assert_eq!(t.last_eviction(), Some(7_000));
        clock.advance(2_000);
        assert_eq!(t.current(clock.now_ms()), 0.65);
        // Asked about a moment before the eviction it knows of: still the post-eviction floor.
        assert_eq!(t.current(6_000), 0.60);
    }

    #[test]
    fn next_change_is_the_next_step_boundary_until_the_cap() {
        let mut t = threshold();
        t.on_eviction(5_000);
        assert_eq!(t.next_change(5_000), Some(7_000));
        assert_eq!(t.next_change(6_999), Some(7_000));
        assert_eq!(t.next_change(7_000), Some(9_000));
        assert_eq!(t.next_change(15_000), Some(17_000));
        assert_eq!(t.next_change(16_999), Some(17_000));
        assert_eq!(t.current(17_000), 0.90);
        assert_eq!(t.next_change(17_000), None);
        for now in (5_000..17_000).step_by(250) {
            let next = t.next_change(now).unwrap();
            assert!(t.current(next) > t.current(now));
            assert_eq!(t.current(next - 1), t.current(now));
        }
    }

    #[test]
    fn should_reclaim_only_strictly_above_the_threshold() {
        let clock = ManualClock::new(0);
        let mut t = threshold();
        assert!(!t.should_reclaim(900, 1_000, clock.now_ms()));
        assert!(t.should_reclaim(901, 1_000, clock.now_ms()));

        t.on_eviction(clock.now_ms());
        assert!(!t.should_reclaim(600, 1_000, clock.now_ms()));
        assert!(t.should_reclaim(601, 1_000, clock.now_ms()));
        clock.advance(2_000);
        assert!(!t.should_reclaim(650, 1_000, clock.now_ms()));
        assert!(t.should_reclaim(651, 1_000, clock.now_ms()));
        // Over budget (evictions pending) is above any threshold.
        assert!(t.should_reclaim(5_000, 1_000, clock.now_ms()));
        assert!(!t.should_reclaim(0, 1_000, clock.now_ms()));
        assert!(!t.should_reclaim(u64::MAX, 0, clock.now_ms()));
    }

    #[test]
    fn other_configurations() {
        let fixed = ReclaimThreshold::new(&DesiccantConfig {
            threshold_after_eviction: 0.7,
            threshold_max: 0.7,
            ..DesiccantConfig::default()
        });
        let mut t = fixed.clone();
        t.on_eviction(0);
        assert_eq!(t.current(0), 0.7);
        assert_eq!(t.next_change(0), None);

        let mut no_rise = ReclaimThreshold::new(&DesiccantConfig {
            threshold_step: 0.0,
            ..DesiccantConfig::default()
        });
        no_rise.on_eviction(0);
        assert_eq!(no_rise.current(1_000_000_000), 0.60);
        assert_eq!(no_rise.next_change(1_000_000_000), None);

        let mut uneven = ReclaimThreshold::new(&DesiccantConfig {
            threshold_after_eviction: 0.5,
            threshold_step: 0.15,
            threshold_step_ms: 1_000,
            threshold_max: 0.9,
            ..DesiccantConfig::default()
        });
        uneven.on_eviction(0);
        assert_eq!(uneven.current(1_000), 0.65);
        assert_eq!(uneven.current(2_000), 0.80);
        // The last step is cut at the maximum.
        assert_eq!(uneven.current(3_000), 0.90);
        assert_eq!(uneven.next_change(2_500), Some(3_000));
        assert_eq!(uneven.next_change(3_000), None);

        // Steps land on the decimals written, although 0.1 + 2 × 0.1 is not 0.3 in f64.
        let mut tenths = ReclaimThreshold::new(&DesiccantConfig {
            threshold_after_eviction: 0.1,
            threshold_step: 0.1,
            threshold_max: 0.7,
            ..DesiccantConfig::default()
        });
        tenths.on_eviction(0);
        let seen: Vec<f64> = (0..8).map(|k| tenths.current(k * 2_000)).collect();
        assert_eq!(seen, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.7]);
        assert!(!tenths.should_reclaim(300, 1_000, 4_000));
        assert!(tenths.should_reclaim(301, 1_000, 4_000));
    }
}
