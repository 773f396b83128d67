//! `--offload-pool none|swap|zram:SIZE`.

use icebox_core::units::MIB;
use std::fmt;
use std::str::FromStr;

/// Where offloaded pages go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PoolSpec {
    /// No pool: nothing is offloaded.
    #[default]
    None,
    /// The operator's own swap, whatever /proc/swaps lists.
    Swap,
    /// A zram device icebox creates (and removes) with this disk size.
    Zram { bytes: u64 },
}

impl FromStr for PoolSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        match s {
            "none" => return Ok(PoolSpec::None),
            "swap" => return Ok(PoolSpec::Swap),
            _ => {}
        }
        let Some(size) = s.strip_prefix("zram:") else {
            return Err(format!(
                "unknown offload pool '{s}' (expected none, swap or zram:SIZE)"
            ));
        };
        // The same size syntax as the daemon's other size flags (2GiB, 512MiB, 1G = 10^9).
        let bytes = size
            .trim()
            .parse::<bytesize::ByteSize>()
            .map_err(|e| {
                format!("invalid zram size '{size}': {e} (examples: zram:2GiB, zram:512MiB)")
            })?
            .as_u64();
        if bytes < MIN_ZRAM_BYTES {
            return Err(format!(
                "zram size '{size}' is too small (at least 1MiB: mkswap needs room for its header)"
            ));
        }
        Ok(PoolSpec::Zram { bytes })
    }
}

/// mkswap refuses devices of fewer than 10 pages; 1 MiB keeps the error message simple.
const MIN_ZRAM_BYTES: u64 = MIB;

impl fmt::Display for PoolSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolSpec::None => f.write_str("none"),
            PoolSpec::Swap => f.write_str("swap"),
            PoolSpec::Zram { bytes } => write!(f, "zram:{bytes}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!("none".parse::<PoolSpec>(), Ok(PoolSpec::None));
        assert_eq!(" swap ".parse::<PoolSpec>(), Ok(PoolSpec::Swap));
        assert_eq!(
            "zram:2GiB".parse::<PoolSpec>(),
            Ok(PoolSpec::Zram { bytes: 2 << 30 })
        );
        assert_eq!(
            "zram:512MiB".parse::<PoolSpec>(),
            Ok(PoolSpec::Zram { bytes: 512 << 20 })
        );
        assert_eq!(
            "zram:1G".parse::<PoolSpec>(),
            Ok(PoolSpec::Zram {
                bytes: 1_000_000_000
            })
        );
        assert_eq!(
            "zram:67108864".parse::<PoolSpec>(),
            Ok(PoolSpec::Zram { bytes: 64 << 20 })
        );
    }

    #[test]
    fn rejects_with_a_helpful_message() {
        assert_eq!(
            "x".parse::<PoolSpec>().unwrap_err(),
            "unknown offload pool 'x' (expected none, swap or zram:SIZE)"
        );
        assert!("zram".parse::<PoolSpec>().is_err());
        let err = "zram:lots".parse::<PoolSpec>().unwrap_err();
        assert!(err.starts_with("invalid zram size 'lots'"), "{err}");
        let err = "zram:4KiB".parse::<PoolSpec>().unwrap_err();
        assert!(err.contains("too small"), "{err}");
    }

    #[test]
    fn display_round_trips() {
        for spec in [
            PoolSpec::None,
            PoolSpec::Swap,
            PoolSpec::Zram { bytes: 64 << 20 },
        ] {
            assert_eq!(spec.to_string().parse::<PoolSpec>(), Ok(spec));
        }
    }
}
