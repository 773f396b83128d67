//! The TMO baseline (Weiner et al., ASPLOS '22, as the FaaSMem paper runs it): every period,
//! reclaim a small share of a kept-alive instance through the kernel's own LRU; halve the step
//! while memory is under pressure (down to a pause), double it back after each calm period.

use super::config::TmoConfig;
use crate::clock::Millis;

/// The feedback signal of one period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pressure {
    /// `some avg10` of memory PSI (the instance's cgroup `memory.pressure`, or the node's
    /// /proc/pressure/memory), in percent. An unreadable value (NaN) counts as pressure.
    Psi(f64),
    /// Where PSI is unavailable: bytes of the instance that came back from swap during the last
    /// period, and bytes of it offloaded (swapped) now. Pressure when the refaults exceed
    /// `refault_fraction_max` of the offloaded bytes.
    Refaults {
        refaulted_bytes: u64,
        offloaded_bytes: u64,
    },
}

impl Pressure {
    pub fn is_high(&self, cfg: &TmoConfig) -> bool {
        match *self {
            Pressure::Psi(avg10) => avg10.is_nan() || avg10 > cfg.psi_some_avg10_max,
            Pressure::Refaults {
                refaulted_bytes,
                offloaded_bytes,
            } => refaulted_bytes as f64 > cfg.refault_fraction_max * offloaded_bytes as f64,
        }
    }
}

impl From<f64> for Pressure {
    fn from(psi_some_avg10: f64) -> Self {
        Pressure::Psi(psi_some_avg10)
    }
}

/// One instance's reclaim pace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TmoController {
    next_due: Millis,
    /// The step is `1 / 2^halvings` of the full step; `PAUSED_AFTER` halvings stop it.
    halvings: u32,
}

impl TmoController {
    /// Consecutive pressured periods until reclaim stops: the step has fallen to 1/16 by then,
    /// and one more halving would no longer reclaim a page on most instances anyway.
    pub const PAUSED_AFTER: u32 = 5;

    /// Due at once: a kept-alive instance starts reclaiming on the first tick.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes to reclaim from the instance now (0 when not due, or paused). When due: halve the
    /// step under `pressure`, double it back (up to the full step) without, then reclaim
    /// `fraction × instance_bytes × multiplier`, and become due again a period later. Missed
    /// periods are not made up.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
    )]
    pub fn tick(
        &mut self,
        cfg: &TmoConfig,
        now: Millis,
        pressure: impl Into<Pressure>,
        instance_bytes: u64,
    ) -> u64 {
        if now < self.next_due {
            return 0;
        }
        self.next_due = now.saturating_add(cfg.period_ms.max(1));
        self.halvings = if pressure.into().is_high(cfg) {
            (self.halvings + 1).min(Self::PAUSED_AFTER)
        } else {
            self.halvings.saturating_sub(1)
        };
        (cfg.fraction * instance_bytes as f64 * self.multiplier()) as u64
    }

    /// When the next tick is due.
    pub fn next_due(&self) -> Millis {
        self.next_due
    }

    /// Share of the full step the next tick will take before its pressure reading: 1, 1/2, ...
    /// 1/16, or 0 when paused.
    pub fn multiplier(&self) -> f64 {
        if self.halvings >= Self::PAUSED_AFTER {
            0.0
        } else {
            1.0 / f64::from(1u32 << self.halvings)
        }
    }

    pub fn paused(&self) -> bool {
        self.halvings >= Self::PAUSED_AFTER
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use icebox_core::units::GIB;
    const CALM: f64 = 0.0;
    const HIGH: f64 = 5.0;

    #[test]
    fn reclaims_the_papers_share_once_per_period() {
        let cfg = TmoConfig::default();
        let mut tmo = TmoController::new();
        // 0.05% of 1 GiB.
        assert_eq!(tmo.tick(&cfg, 0, CALM, GIB), 536_870);
        assert_eq!(tmo.next_due(), 6_000);
        assert_eq!(tmo.tick(&cfg, 5_999, CALM, GIB), 0);
        assert_eq!(tmo.tick(&cfg, 6_000, CALM, GIB), 536_870);
        // A late tick reclaims once, and the period restarts from it.
        assert_eq!(tmo.tick(&cfg, 60_000, CALM, GIB), 536_870);
        assert_eq!(tmo.next_due(), 66_000);
        // Time going backwards is just "not due".
        assert_eq!(tmo.tick(&cfg, 1, CALM, GIB), 0);
    }

    #[test]
    fn backs_off_under_pressure_and_recovers() {
        let cfg = TmoConfig::default();
        let full = 536_870;
        let mut tmo = TmoController::new();
        let mut t = 0;
        let mut tick = |psi: f64| {
            let b = tmo.tick(&cfg, t, psi, GIB);
            t += cfg.period_ms;
            (b, tmo)
        };
        assert_eq!(tick(CALM).0, full);
        // Halving each pressured period, down to a pause.
        let steps: Vec<u64> = (0..7).map(|_| tick(HIGH).0).collect();
        assert_eq!(steps, [full / 2, full / 4, full / 8, full / 16, 0, 0, 0]);
        assert!(tick(HIGH).1.paused());
        // Doubling back, one calm period at a time.
        let steps: Vec<u64> = (0..6).map(|_| tick(CALM).0).collect();
        assert_eq!(steps, [full / 16, full / 8, full / 4, full / 2, full, full]);
        let (_, state) = tick(CALM);
        assert_eq!((state.multiplier(), state.paused()), (1.0, false));
        // Exactly at the limit is calm; an unreadable PSI is not.
        assert_eq!(tick(cfg.psi_some_avg10_max).0, full);
        assert_eq!(tick(f64::NAN).0, full / 2);
    }

    #[test]
    fn refaults_stand_in_for_psi() {
        let cfg = TmoConfig::default();
        let refaults = |refaulted_bytes, offloaded_bytes| Pressure::Refaults {
            refaulted_bytes,
            offloaded_bytes,
        };
        assert!(!refaults(0, 0).is_high(&cfg));
        assert!(!refaults(10, 1_000).is_high(&cfg));
        assert!(refaults(11, 1_000).is_high(&cfg));
        assert!(refaults(1, 0).is_high(&cfg));

        let mut tmo = TmoController::new();
        assert_eq!(tmo.tick(&cfg, 0, refaults(500, 1_000), GIB), 536_870 / 2);
        assert_eq!(tmo.tick(&cfg, 6_000, refaults(0, 1_000), GIB), 536_870);
        assert!(Pressure::from(0.2).is_high(&cfg));
    }
}
