//! Desiccant's tunables. The threshold defaults are those of Desiccant's artifact; the rest are
//! icebox's choices, explained field by field.

use crate::clock::Millis;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DesiccantConfig {
    /// Activation threshold (fraction of the keep-alive budget) right after an eviction: the
    /// platform is short of memory, so reclaim starts early.
    pub threshold_after_eviction: f64,
    /// How much the threshold rises per `threshold_step_ms` without an eviction, so a node
    /// that stopped evicting spends less and less CPU on reclaims.
    pub threshold_step: f64,
    pub threshold_step_ms: Millis,
    /// Where the rise stops; also the threshold of a node that has never evicted anything.
    pub threshold_max: f64,
    /// Only instances frozen at least this long are reclaimed: one invoked again a moment
    /// later would have been thawed for nothing, and would make its caller wait for the
    /// reclaim. Ten seconds outlasts the gaps inside most bursts yet is short beside the
    /// ten-minute keep-alive, so most of an idle instance's life is spent reclaimed.
    pub frozen_timeout_ms: Millis,
    /// For an instance when no instance on the node has been reclaimed yet: the share of its
    /// memory assumed to survive a reclaim. Measured here: Node 132→45 MB, Java 178→50 MB,
    /// Python 25→13 MB; one half is on the pessimistic side of those, so instances with real
    /// profiles win ties against guesses.
    pub prior_retained_fraction: f64,
    /// The CPU time assumed for such a reclaim (measured: Node ~25 ms, Java ~35 ms, Python a
    /// few ms). Only the ratio to profiled instances matters for the order.
    pub prior_cpu_ms: f64,
}

impl DesiccantConfig {
    pub const DEFAULT_THRESHOLD_AFTER_EVICTION: f64 = 0.60;
    pub const DEFAULT_THRESHOLD_STEP: f64 = 0.05;
    pub const DEFAULT_THRESHOLD_STEP_MS: Millis = 2_000;
    pub const DEFAULT_THRESHOLD_MAX: f64 = 0.90;
    pub const DEFAULT_FROZEN_TIMEOUT_MS: Millis = 10_000;
    pub const DEFAULT_PRIOR_RETAINED_FRACTION: f64 = 0.5;
    pub const DEFAULT_PRIOR_CPU_MS: f64 = 20.0;

    pub fn validate(&self) -> Result<(), DesiccantConfigError> {
        for (field, value) in [
            ("threshold_after_eviction", self.threshold_after_eviction),
            ("threshold_step", self.threshold_step),
            ("threshold_max", self.threshold_max),
            ("prior_retained_fraction", self.prior_retained_fraction),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(DesiccantConfigError::NotAFraction { field, value });
            }
        }
        if self.threshold_after_eviction > self.threshold_max {
            return Err(DesiccantConfigError::ThresholdAboveMax {
                after_eviction: self.threshold_after_eviction,
                max: self.threshold_max,
            });
        }
        if self.threshold_step_ms == 0 {
            return Err(DesiccantConfigError::ZeroStepInterval);
        }
        if !(self.prior_cpu_ms.is_finite() && self.prior_cpu_ms > 0.0) {
            return Err(DesiccantConfigError::PriorCpu(self.prior_cpu_ms));
        }
        Ok(())
    }
}

impl Default for DesiccantConfig {
    fn default() -> Self {
        DesiccantConfig {
            threshold_after_eviction: Self::DEFAULT_THRESHOLD_AFTER_EVICTION,
            threshold_step: Self::DEFAULT_THRESHOLD_STEP,
            threshold_step_ms: Self::DEFAULT_THRESHOLD_STEP_MS,
            threshold_max: Self::DEFAULT_THRESHOLD_MAX,
            frozen_timeout_ms: Self::DEFAULT_FROZEN_TIMEOUT_MS,
            prior_retained_fraction: Self::DEFAULT_PRIOR_RETAINED_FRACTION,
            prior_cpu_ms: Self::DEFAULT_PRIOR_CPU_MS,
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DesiccantConfigError {
    #[error("{field} must be a fraction between 0 and 1, got {value}")]
    NotAFraction { field: &'static str, value: f64 },
    #[error(
        "threshold_after_eviction ({after_eviction}) must not exceed threshold_max ({max}): \
         an eviction would raise the threshold instead of lowering it"
    )]
    ThresholdAboveMax { after_eviction: f64, max: f64 },
    #[error(
        "threshold_step_ms must be at least 1 (set threshold_step to 0 for a fixed threshold)"
    )]
    ZeroStepInterval,
    #[error("prior_cpu_ms must be a positive number of milliseconds, got {0}")]
    PriorCpu(f64),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_artifacts_and_valid() {
        let d = DesiccantConfig::default();
        assert_eq!(d.threshold_after_eviction, 0.60);
        assert_eq!(d.threshold_step, 0.05);
        assert_eq!(d.threshold_step_ms, 2_000);
        assert_eq!(d.threshold_max, 0.90);
        assert_eq!(d.validate(), Ok(()));
    }

    #[test]
    fn partial_json_keeps_the_other_defaults() {
        let cfg: DesiccantConfig =
            serde_json::from_str(r#"{"frozen_timeout_ms": 500, "threshold_max": 0.8}"#).unwrap();
        assert_eq!(
            cfg,
            DesiccantConfig {
                frozen_timeout_ms: 500,
                threshold_max: 0.8,
                ..DesiccantConfig::default()
            }
        );
        let back: DesiccantConfig =
            serde_json::from_str(&serde_json::to_string(&cfg).unwrap()).unwrap();
        assert_eq!(back, cfg);
    }

    #[test]
    fn validation_names_the_bad_field() {
        let d = DesiccantConfig::default();
        let bad = |cfg: DesiccantConfig| cfg.validate().unwrap_err();

        assert_eq!(
            bad(DesiccantConfig {
                threshold_max: 1.5,
                ..d
            }),
            DesiccantConfigError::NotAFraction {
                field: "threshold_max",
                value: 1.5
            }
        );
        assert!(matches!(
            bad(DesiccantConfig {
                threshold_step: f64::NAN,
                ..d
            }),
            DesiccantConfigError::NotAFraction {
                field: "threshold_step",
                ..
            }
        ));
        assert!(matches!(
            bad(DesiccantConfig {
                prior_retained_fraction: -0.1,
                ..d
            }),
            DesiccantConfigError::NotAFraction {
                field: "prior_retained_fraction",
                ..
            }
        ));
        assert_eq!(
            bad(DesiccantConfig {
                threshold_after_eviction: 0.95,
                ..d
            }),
            DesiccantConfigError::ThresholdAboveMax {
                after_eviction: 0.95,
                max: 0.90
            }
        );
        assert_eq!(
            bad(DesiccantConfig {
                threshold_step_ms: 0,
                ..d
            }),
            DesiccantConfigError::ZeroStepInterval
        );
        for cpu in [0.0, -1.0, f64::INFINITY, f64::NAN] {
            assert!(matches!(
                bad(DesiccantConfig {
                    prior_cpu_ms: cpu,
                    ..d
                }),
                DesiccantConfigError::PriorCpu(_)
            ));
        }
        // A fixed threshold is expressed with a zero step, and is valid.
        let fixed = DesiccantConfig {
            threshold_step: 0.0,
            threshold_after_eviction: 0.7,
            threshold_max: 0.7,
            ..d
        };
        assert_eq!(fixed.validate(), Ok(()));
    }
}
