//! How fast a semi-warm instance gives its memory up (§6.2): a share of its size per second
//! (large functions finish in bounded time) or a fixed amount per second (small functions go
//! faster than a percentage would take them).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

use icebox_core::units::GIB;
use icebox_core::units::KIB;
use icebox_core::units::MIB;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum SemiWarm {
    /// No semi-warm period: hot pages stay local until the instance is evicted.
    Off,
    /// Percent (0-100] of the instance's local memory at the start of semi-warm, per second.
    PercentPerSec(f64),
    /// Bytes per second.
    BytesPerSec(u64),
}

impl SemiWarm {
    /// The paper's example for large functions, 1%/s: a whole instance within 100 s.
    pub const DEFAULT: SemiWarm = SemiWarm::PercentPerSec(1.0);

    /// What this rate lets an instance of `size_at_start` bytes offload in `elapsed_ms`,
    /// before any cap.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
    )]
    pub fn allowance(self, size_at_start: u64, elapsed_ms: u64) -> u64 {
        match self {
            SemiWarm::Off => 0,
            // One division last keeps whole percentages of whole seconds exact. `as` saturates
            // (and maps NaN to 0), which is the right answer for absurd inputs.
            SemiWarm::PercentPerSec(pct) => {
                (size_at_start as f64 * pct * elapsed_ms as f64 / 100_000.0) as u64
            }
            SemiWarm::BytesPerSec(rate) => {
                u64::try_from(u128::from(rate) * u128::from(elapsed_ms) / 1000).unwrap_or(u64::MAX)
            }
        }
    }
}

impl Default for SemiWarm {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl fmt::Display for SemiWarm {
    /// Parses back to the same value: sizes use the largest binary unit that divides them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SemiWarm::Off => f.write_str("off"),
            SemiWarm::PercentPerSec(pct) => write!(f, "{pct}%/s"),
            SemiWarm::BytesPerSec(b) => match [(GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")]
                .into_iter()
                .find(|(unit, _)| b >= *unit && b % unit == 0)
            {
                Some((unit, name)) => write!(f, "{}{name}/s", b / unit),
                None => write!(f, "{b}B/s"),
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid semi-warm rate '{input}': {reason} (expected off, a percentage per second such as \
     1%/s, or a size per second such as 1MiB/s, 512KiB/s, 1MB/s)"
)]
pub struct ParseSemiWarmError {
    pub input: String,
    pub reason: String,
}

impl FromStr for SemiWarm {
    type Err = ParseSemiWarmError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let fail = |reason: &str| ParseSemiWarmError {
            input: s.to_string(),
            reason: reason.to_string(),
        };
        let t = s.trim();
        if t.eq_ignore_ascii_case("off") {
            return Ok(SemiWarm::Off);
        }
        let Some(amount) = t.strip_suffix("/s").map(str::trim_end) else {
            return Err(fail("a rate ends in /s"));
        };
        if let Some(pct) = amount.strip_suffix('%') {
            let pct: f64 = pct
                .trim()
                .parse()
                .map_err(|_| fail("the percentage is not a number"))?;
            if !(pct > 0.0 && pct <= 100.0) {
                return Err(fail("the percentage must be above 0 and at most 100"));
            }
            return Ok(SemiWarm::PercentPerSec(pct));
        }
        let bytes = amount
            .parse::<bytesize::ByteSize>()
            .map_err(|e| fail(&format!("not a size: {e}")))?
            .as_u64();
        if bytes == 0 {
            return Err(fail("a zero rate never offloads anything: use off"));
        }
        Ok(SemiWarm::BytesPerSec(bytes))
    }
}

impl TryFrom<String> for SemiWarm {
    type Error = ParseSemiWarmError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<SemiWarm> for String {
    fn from(rate: SemiWarm) -> String {
        rate.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> SemiWarm {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_the_flag_spellings() {
        assert_eq!(parse("off"), SemiWarm::Off);
        assert_eq!(parse("OFF"), SemiWarm::Off);
        assert_eq!(parse("1%/s"), SemiWarm::PercentPerSec(1.0));
        assert_eq!(parse(" 0.5 % /s "), SemiWarm::PercentPerSec(0.5));
        assert_eq!(parse("100%/s"), SemiWarm::PercentPerSec(100.0));
        assert_eq!(parse("1MiB/s"), SemiWarm::BytesPerSec(MIB));
        assert_eq!(parse("512KiB/s"), SemiWarm::BytesPerSec(512 * KIB));
        assert_eq!(parse("1MB/s"), SemiWarm::BytesPerSec(1_000_000));
        assert_eq!(parse("2 gib/s"), SemiWarm::BytesPerSec(2 * GIB));
        assert_eq!(parse("4096/s"), SemiWarm::BytesPerSec(4096));
        assert_eq!(SemiWarm::default(), SemiWarm::PercentPerSec(1.0));
    }

    #[test]
    fn bad_rates_say_what_is_expected() {
        for bad in [
            "", "1%", "1MiB", "fast/s", "0%/s", "-1%/s", "150%/s", "nan%/s", "0MiB/s", "1XB/s",
        ] {
            let err = bad.parse::<SemiWarm>().unwrap_err();
            assert_eq!(err.input, bad);
            assert!(err.to_string().contains("1%/s"), "{err}");
            assert!(err.to_string().contains("1MiB/s"), "{err}");
        }
        assert!("1%".parse::<SemiWarm>().unwrap_err().reason.contains("/s"));
        assert!("0B/s"
            .parse::<SemiWarm>()
            .unwrap_err()
            .reason
            .contains("off"));
    }

    #[test]
    fn display_parses_back_and_serde_uses_it() {
        for rate in [
            SemiWarm::Off,
            SemiWarm::PercentPerSec(1.0),
            SemiWarm::PercentPerSec(0.25),
            SemiWarm::BytesPerSec(MIB),
            SemiWarm::BytesPerSec(3 * GIB),
            SemiWarm::BytesPerSec(1_000_000),
            SemiWarm::BytesPerSec(1),
        ] {
            assert_eq!(parse(&rate.to_string()), rate, "{rate}");
            let json = serde_json::to_string(&rate).unwrap();
            assert_eq!(json, format!("\"{rate}\""));
            assert_eq!(serde_json::from_str::<SemiWarm>(&json).unwrap(), rate);
        }
        assert_eq!(SemiWarm::BytesPerSec(512 * KIB).to_string(), "512KiB/s");
        assert_eq!(SemiWarm::BytesPerSec(1_000_000).to_string(), "1000000B/s");
        assert!(serde_json::from_str::<SemiWarm>("\"1%\"").is_err());
    }

    #[test]
    fn allowance_follows_the_rate() {
        let size = 200 * MIB;
        assert_eq!(SemiWarm::Off.allowance(size, 1_000), 0);
        assert_eq!(SemiWarm::PercentPerSec(1.0).allowance(size, 1_000), 2 * MIB);
        assert_eq!(SemiWarm::PercentPerSec(1.0).allowance(size, 500), MIB);
        assert_eq!(SemiWarm::BytesPerSec(MIB).allowance(size, 2_000), 2 * MIB);
        assert_eq!(SemiWarm::BytesPerSec(MIB).allowance(size, 0), 0);
        assert_eq!(
            SemiWarm::BytesPerSec(u64::MAX).allowance(size, u64::MAX),
            u64::MAX
        );
    }
}
