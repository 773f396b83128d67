//! `--offload-pool none|swap|zram:SIZE|swapfile:PATH:SIZE|zram:SIZE+swapfile:PATH:SIZE`.

use icebox_core::units::MIB;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// Where offloaded pages go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PoolSpec {
    /// No pool: nothing is offloaded.
    #[default]
    None,
    /// The operator's own swap, whatever /proc/swaps lists.
    Swap,
    /// A zram device icebox creates (and removes) with this disk size.
    Zram { bytes: u64 },
    /// A swap file icebox creates (and removes) at `path`, with the kernel's zswap in front
    /// of it where the kernel has zswap: offloaded pages leave the node's RAM.
    SwapFile { path: PathBuf, bytes: u64 },
    /// Both tiers: the zram device first, the swap file once it is full.
    Tiered {
        zram_bytes: u64,
        path: PathBuf,
        file_bytes: u64,
    },
}

impl PoolSpec {
    /// The zram tier's size, if it has one.
    pub fn zram_bytes(&self) -> Option<u64> {
        match self {
            PoolSpec::Zram { bytes } => Some(*bytes),
            PoolSpec::Tiered { zram_bytes, .. } => Some(*zram_bytes),
            _ => None,
        }
    }

    /// The swap file tier, if it has one.
    pub fn swap_file(&self) -> Option<(&std::path::Path, u64)> {
        match self {
            PoolSpec::SwapFile { path, bytes } => Some((path, *bytes)),
            PoolSpec::Tiered {
                path, file_bytes, ..
            } => Some((path, *file_bytes)),
            _ => None,
        }
    }
}

fn parse_size(size: &str, what: &str, example: &str) -> Result<u64, String> {
    // The same size syntax as the daemon's other size flags (2GiB, 512MiB, 1G = 10^9).
    let bytes = size
        .trim()
        .parse::<bytesize::ByteSize>()
        .map_err(|e| format!("invalid {what} size '{size}': {e} (example: {example})"))?
        .as_u64();
    if bytes < MIN_ZRAM_BYTES {
        return Err(format!(
            "{what} size '{size}' is too small (at least 1MiB: mkswap needs room for its header)"
        ));
    }
    Ok(bytes)
}

/// `swapfile:PATH:SIZE` (PATH absolute; the size after the last colon).
fn parse_swap_file(s: &str) -> Result<(PathBuf, u64), String> {
    let rest = s
        .strip_prefix("swapfile:")
        .ok_or_else(|| format!("expected swapfile:PATH:SIZE, got '{s}'"))?;
    let (path, size) = rest.rsplit_once(':').ok_or_else(|| {
        format!("'{s}' has no size: swapfile:PATH:SIZE, e.g. swapfile:/var/lib/icebox/swap:4GiB")
    })?;
    let path = PathBuf::from(path);
    if !path.is_absolute() {
        return Err(format!(
            "the swap file path '{}' must be absolute",
            path.display()
        ));
    }
    Ok((
        path,
        parse_size(size, "swap file", "swapfile:/var/lib/icebox/swap:4GiB")?,
    ))
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
        if s.starts_with("swapfile:") {
            let (path, bytes) = parse_swap_file(s)?;
            return Ok(PoolSpec::SwapFile { path, bytes });
        }
        let Some(rest) = s.strip_prefix("zram:") else {
            return Err(format!(
                "unknown offload pool '{s}' (expected none, swap, zram:SIZE, swapfile:PATH:SIZE or zram:SIZE+swapfile:PATH:SIZE)"
            ));
        };
        let (size, file) = match rest.split_once('+') {
            Some((size, file)) => (size, Some(parse_swap_file(file.trim())?)),
            None => (rest, None),
        };
        let bytes = parse_size(size, "zram", "zram:2GiB, zram:512MiB")?;
        Ok(match file {
            None => PoolSpec::Zram { bytes },
            Some((path, file_bytes)) => PoolSpec::Tiered {
                zram_bytes: bytes,
                path,
                file_bytes,
            },
        })
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
            PoolSpec::SwapFile { path, bytes } => write!(f, "swapfile:{}:{bytes}", path.display()),
            PoolSpec::Tiered {
                zram_bytes,
                path,
                file_bytes,
            } => write!(
                f,
                "zram:{zram_bytes}+swapfile:{}:{file_bytes}",
                path.display()
            ),
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
        assert_eq!(
            "swapfile:/var/lib/icebox/swap:4GiB".parse::<PoolSpec>(),
            Ok(PoolSpec::SwapFile {
                path: "/var/lib/icebox/swap".into(),
                bytes: 4 << 30
            })
        );
        assert_eq!(
            "zram:512MiB+swapfile:/var/swap:2GiB".parse::<PoolSpec>(),
            Ok(PoolSpec::Tiered {
                zram_bytes: 512 << 20,
                path: "/var/swap".into(),
                file_bytes: 2 << 30
            })
        );
    }

    #[test]
    fn rejects_with_a_helpful_message() {
        assert_eq!(
            "x".parse::<PoolSpec>().unwrap_err(),
            "unknown offload pool 'x' (expected none, swap, zram:SIZE, swapfile:PATH:SIZE or zram:SIZE+swapfile:PATH:SIZE)"
        );
        let err = "swapfile:relative/swap:1GiB"
            .parse::<PoolSpec>()
            .unwrap_err();
        assert!(err.contains("must be absolute"), "{err}");
        let err = "swapfile:/var/swap".parse::<PoolSpec>().unwrap_err();
        assert!(err.contains("has no size"), "{err}");
        let err = "swapfile:/var/swap:lots".parse::<PoolSpec>().unwrap_err();
        assert!(err.contains("invalid swap file size 'lots'"), "{err}");
        let err = "zram:1GiB+swapfile:/s:1KiB"
            .parse::<PoolSpec>()
            .unwrap_err();
        assert!(err.contains("too small"), "{err}");
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
            PoolSpec::SwapFile {
                path: "/var/lib/icebox/swap".into(),
                bytes: 1 << 30,
            },
            PoolSpec::Tiered {
                zram_bytes: 64 << 20,
                path: "/srv/a:b/swap".into(),
                file_bytes: 1 << 30,
            },
        ] {
            assert_eq!(spec.to_string().parse::<PoolSpec>(), Ok(spec));
        }
    }
}
