//! Parsing of the command line's durations and sizes, and a stable string hash for seeding.

use anyhow::{anyhow, bail, Result};

/// `90s`, `10m`, `2h`, `1500ms`, or a bare number of minutes (the trace's own unit).
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
)]
pub fn parse_duration_ms(s: &str) -> Result<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| anyhow!("'{s}' is not a duration (expected e.g. 30s, 10m, 2h, 500ms)"))?;
    let factor = match unit.trim() {
        "ms" => 1.0,
        "s" => 1_000.0,
        "" | "m" | "min" => 60_000.0,
        "h" => 3_600_000.0,
        other => bail!("'{s}': unknown duration unit '{other}' (use ms, s, m or h)"),
    };
    let ms = value * factor;
    if !ms.is_finite() || ms < 0.0 || ms > u64::MAX as f64 {
        bail!("'{s}' is out of range");
    }
    Ok(ms.round() as u64)
}

/// `64GiB`, `512 MiB`, `8GB` (decimal) ... ; a bare number is MiB.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
)]
pub fn parse_size_bytes(s: &str) -> Result<u64> {
    let t = s.trim();
    if let Ok(mib) = t.parse::<f64>() {
        if mib.is_finite() && mib >= 0.0 {
            return Ok((mib * 1024.0 * 1024.0).round() as u64);
        }
    }
    t.parse::<bytesize::ByteSize>()
        .map(|b| b.as_u64())
        .map_err(|e| anyhow!("'{s}' is not a memory size (expected e.g. 32GiB, 512MiB): {e}"))
}

/// FNV-1a from the placement code: stable across Rust versions and platforms, unlike
/// `DefaultHasher`, so a seed and a function name always give the same random stream.
pub use icebox_policy::placement::stable_hash;

pub const MIB: f64 = 1024.0 * 1024.0;

#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
)]
pub fn mib_to_bytes(mb: f64) -> u64 {
    (mb * MIB).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::units::{GIB, MIB};

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("10m").unwrap(), 600_000);
        assert_eq!(parse_duration_ms("10").unwrap(), 600_000);
        assert_eq!(parse_duration_ms("1.5s").unwrap(), 1_500);
        assert_eq!(parse_duration_ms("250ms").unwrap(), 250);
        assert_eq!(parse_duration_ms("4h").unwrap(), 14_400_000);
        assert!(parse_duration_ms("10 parsecs").is_err());
        assert!(parse_duration_ms("m").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size_bytes("1GiB").unwrap(), GIB);
        assert_eq!(parse_size_bytes("512").unwrap(), 512 * MIB);
        assert_eq!(parse_size_bytes("2 GB").unwrap(), 2_000_000_000);
        assert!(parse_size_bytes("lots").is_err());
    }
}
