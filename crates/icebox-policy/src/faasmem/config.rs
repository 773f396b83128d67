//! FaaSMem's and TMO's tunables. Defaults are the papers' where they give one; the rest are
//! icebox's choices, explained field by field.

use super::rate::SemiWarm;
use crate::clock::Millis;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FaasmemConfig {
    /// §5.3's `t`: at least this long between two rollbacks of the hot pool, so a busy
    /// instance (a request window every few milliseconds) does not spend its life probing.
    pub rollback_interval_ms: Millis,
    /// The init window closes after at most this many requests, flat or not: an instance whose
    /// init segment keeps draining (a cache that never warms) still gets its cold groups
    /// offloaded. The paper's web example settles around 20.
    pub window_max: u32,
    /// The init window closes once the untouched probes decline by at most this share of all
    /// probes per request ("the descent gradient tends to zero", §5.2).
    pub flat_fraction: f64,
    /// Semi-warm offload rate (§6.2).
    pub semiwarm: SemiWarm,
    /// When semi-warm starts for an action without enough reuse history: a minute, a tenth of
    /// OpenWhisk's keep-alive, so a new action keeps its hot pages through short gaps.
    pub semiwarm_default_ms: Millis,
    /// Reuse intervals needed before their p99 replaces `semiwarm_default_ms`: with fewer, the
    /// "p99" is just the largest gap seen, a noisy guess.
    pub semiwarm_min_samples: usize,
    /// Node-wide cap on semi-warm offload, bytes per second, shared uniformly (§6.2); 0 = none.
    pub bandwidth_bytes_per_s: u64,
}

impl FaasmemConfig {
    pub const DEFAULT_ROLLBACK_INTERVAL_MS: Millis = 10_000;
    pub const DEFAULT_WINDOW_MAX: u32 = 50;
    pub const DEFAULT_FLAT_FRACTION: f64 = 0.01;
    pub const DEFAULT_SEMIWARM_DEFAULT_MS: Millis = 60_000;
    pub const DEFAULT_SEMIWARM_MIN_SAMPLES: usize = 5;

    pub fn validate(&self) -> Result<(), FaasmemConfigError> {
        if self.window_max == 0 {
            return Err(FaasmemConfigError::ZeroWindowMax);
        }
        if !(0.0..=1.0).contains(&self.flat_fraction) {
            return Err(FaasmemConfigError::FlatFraction(self.flat_fraction));
        }
        match self.semiwarm {
            SemiWarm::PercentPerSec(p) if !(p > 0.0 && p <= 100.0) => {
                Err(FaasmemConfigError::SemiWarmRate(self.semiwarm.to_string()))
            }
            SemiWarm::BytesPerSec(0) => Err(FaasmemConfigError::SemiWarmRate("0B/s".into())),
            _ => Ok(()),
        }
    }
}

impl Default for FaasmemConfig {
    fn default() -> Self {
        FaasmemConfig {
            rollback_interval_ms: Self::DEFAULT_ROLLBACK_INTERVAL_MS,
            window_max: Self::DEFAULT_WINDOW_MAX,
            flat_fraction: Self::DEFAULT_FLAT_FRACTION,
            semiwarm: SemiWarm::DEFAULT,
            semiwarm_default_ms: Self::DEFAULT_SEMIWARM_DEFAULT_MS,
            semiwarm_min_samples: Self::DEFAULT_SEMIWARM_MIN_SAMPLES,
            bandwidth_bytes_per_s: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FaasmemConfigError {
    #[error("window_max must be at least 1 request")]
    ZeroWindowMax,
    #[error("flat_fraction must be a fraction between 0 and 1, got {0}")]
    FlatFraction(f64),
    #[error("semi-warm rate {0} never finishes or overshoots: use a percentage in (0, 100] per second, a positive size per second, or off")]
    SemiWarmRate(String),
}

/// TMO (Weiner et al., ASPLOS '22) as the FaaSMem paper runs it: 0.05% of memory every 6 s.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TmoConfig {
    /// Share of the instance's memory reclaimed per period at full speed.
    pub fraction: f64,
    pub period_ms: Millis,
    /// Back off above this `some avg10` memory pressure, in percent as /proc/pressure reports
    /// it. TMO's Senpai targets 0.1%.
    pub psi_some_avg10_max: f64,
    /// Without PSI: back off when more than this share of the instance's offloaded bytes came
    /// back within one period (the reclaim is eating the working set). icebox's choice: 1%
    /// per 6 s means the offloaded set is churning by a tenth a minute.
    pub refault_fraction_max: f64,
}

impl TmoConfig {
    pub const DEFAULT_FRACTION: f64 = 0.0005;
    pub const DEFAULT_PERIOD_MS: Millis = 6_000;
    pub const DEFAULT_PSI_SOME_AVG10_MAX: f64 = 0.1;
    pub const DEFAULT_REFAULT_FRACTION_MAX: f64 = 0.01;

    pub fn validate(&self) -> Result<(), TmoConfigError> {
        if !(self.fraction > 0.0 && self.fraction <= 1.0) {
            return Err(TmoConfigError::Fraction(self.fraction));
        }
        if self.period_ms == 0 {
            return Err(TmoConfigError::ZeroPeriod);
        }
        for (field, value) in [
            ("psi_some_avg10_max", self.psi_some_avg10_max),
            ("refault_fraction_max", self.refault_fraction_max),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(TmoConfigError::Threshold { field, value });
            }
        }
        Ok(())
    }
}

impl Default for TmoConfig {
    fn default() -> Self {
        TmoConfig {
            fraction: Self::DEFAULT_FRACTION,
            period_ms: Self::DEFAULT_PERIOD_MS,
            psi_some_avg10_max: Self::DEFAULT_PSI_SOME_AVG10_MAX,
            refault_fraction_max: Self::DEFAULT_REFAULT_FRACTION_MAX,
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TmoConfigError {
    #[error("fraction must be above 0 and at most 1, got {0}")]
    Fraction(f64),
    #[error("period_ms must be at least 1")]
    ZeroPeriod,
    #[error("{field} must be a non-negative number, got {value}")]
    Threshold { field: &'static str, value: f64 },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_papers_and_valid() {
        let f = FaasmemConfig::default();
        assert_eq!(f.rollback_interval_ms, 10_000);
        assert_eq!(f.window_max, 50);
        assert_eq!(f.flat_fraction, 0.01);
        assert_eq!(f.semiwarm, SemiWarm::PercentPerSec(1.0));
        assert_eq!(f.bandwidth_bytes_per_s, 0);
        assert_eq!(f.validate(), Ok(()));
        let t = TmoConfig::default();
        assert_eq!((t.fraction, t.period_ms), (0.0005, 6_000));
        assert_eq!(t.validate(), Ok(()));
    }

    #[test]
    fn partial_json_keeps_the_other_defaults() {
        let cfg: FaasmemConfig =
            serde_json::from_str(r#"{"window_max": 20, "semiwarm": "1MiB/s"}"#).unwrap();
        assert_eq!(
            cfg,
            FaasmemConfig {
                window_max: 20,
                semiwarm: SemiWarm::BytesPerSec(1 << 20),
                ..FaasmemConfig::default()
            }
        );
        let back: FaasmemConfig =
            serde_json::from_str(&serde_json::to_string(&cfg).unwrap()).unwrap();
        assert_eq!(back, cfg);
        assert!(serde_json::from_str::<FaasmemConfig>(r#"{"semiwarm": "fast"}"#).is_err());
        let tmo: TmoConfig = serde_json::from_str(r#"{"period_ms": 1000}"#).unwrap();
        assert_eq!(tmo.period_ms, 1000);
        assert_eq!(tmo.fraction, TmoConfig::DEFAULT_FRACTION);
    }

    #[test]
    fn validation_names_the_bad_field() {
        let f = FaasmemConfig::default();
        let bad = |cfg: FaasmemConfig| cfg.validate().unwrap_err();
        assert_eq!(
            bad(FaasmemConfig { window_max: 0, ..f }),
            FaasmemConfigError::ZeroWindowMax
        );
        assert!(matches!(
            bad(FaasmemConfig {
                flat_fraction: f64::NAN,
                ..f
            }),
            FaasmemConfigError::FlatFraction(_)
        ));
        for rate in [
            SemiWarm::PercentPerSec(0.0),
            SemiWarm::PercentPerSec(101.0),
            SemiWarm::BytesPerSec(0),
        ] {
            assert!(matches!(
                bad(FaasmemConfig {
                    semiwarm: rate,
                    ..f
                }),
                FaasmemConfigError::SemiWarmRate(_)
            ));
        }
        assert_eq!(
            FaasmemConfig {
                semiwarm: SemiWarm::Off,
                ..f
            }
            .validate(),
            Ok(())
        );

        let t = TmoConfig::default();
        for fraction in [0.0, 1.5, f64::NAN] {
            assert!(matches!(
                TmoConfig { fraction, ..t }.validate(),
                Err(TmoConfigError::Fraction(_))
            ));
        }
        assert_eq!(
            TmoConfig { period_ms: 0, ..t }.validate(),
            Err(TmoConfigError::ZeroPeriod)
        );
        assert!(matches!(
            TmoConfig {
                psi_some_avg10_max: -1.0,
                ..t
            }
            .validate(),
            Err(TmoConfigError::Threshold {
                field: "psi_some_avg10_max",
                ..
            })
        ));
    }
}
