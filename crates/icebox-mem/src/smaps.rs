//! `/proc/PID/smaps_rollup`: the kernel's sum of every mapping's smaps counters for a process.
//! Reading it costs one pass over the page tables but no per-mapping text, which keeps
//! periodic accounting of many instances cheap.

use icebox_core::MemoryStats;
use std::io;

/// Memory of one process. `cgroup` is left 0: it belongs to the instance, not the process.
///
/// A process that exited (or is a zombie) fails with `NotFound` or `ESRCH`.
pub fn smaps_rollup(pid: u32) -> io::Result<MemoryStats> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))?;
    parse_smaps_rollup(&text)
}

/// Parses the text of `/proc/PID/smaps_rollup`: USS = Private_Clean + Private_Dirty, and Pss,
/// Rss, Swap, converted from kB to bytes. Counters are summed, so the full per-mapping
/// `/proc/PID/smaps` gives the same totals.
pub fn parse_smaps_rollup(text: &str) -> io::Result<MemoryStats> {
    let mut stats = MemoryStats::default();
    for line in text.lines() {
        // Mapping header lines ("5637...-7ffe... ---p ... [rollup]") contain ':' too, but
        // their text before it never equals one of the counter names below.
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let field = match key {
            "Rss" => &mut stats.rss,
            "Pss" => &mut stats.pss,
            "Private_Clean" | "Private_Dirty" => &mut stats.uss,
            "Swap" => &mut stats.swap,
            _ => continue,
        };
        *field += parse_kb(value).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("smaps: bad value in line {line:?}"),
            )
        })?;
    }
    Ok(stats)
}

/// `"   1780 kB"` → 1780 × 1024.
pub(crate) fn parse_kb(value: &str) -> Option<u64> {
    let number = value.trim().strip_suffix("kB")?.trim_end();
    number.parse::<u64>().ok()?.checked_mul(1024)
}

/// Whether a read error means the process is gone (exited, or a zombie without memory).
pub(crate) fn is_gone(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::NotFound || err.raw_os_error() == Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLLUP: &str = "\
56371714a000-7ffe33662000 ---p 00000000 00:00 0                          [rollup]
Rss:                1780 kB
Pss:                 327 kB
Pss_Dirty:           112 kB
Pss_Anon:            112 kB
Pss_File:            215 kB
Pss_Shmem:             0 kB
Shared_Clean:       1628 kB
Shared_Dirty:          0 kB
Private_Clean:        40 kB
Private_Dirty:       112 kB
Referenced:         1780 kB
Anonymous:           112 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
Swap:                 16 kB
SwapPss:               8 kB
Locked:                0 kB
";

    #[test]
    fn parses_rollup_fields_into_bytes() {
        let s = parse_smaps_rollup(ROLLUP).unwrap();
        assert_eq!(
            s,
            MemoryStats {
                uss: 152 * 1024,
                pss: 327 * 1024,
                rss: 1780 * 1024,
                swap: 16 * 1024,
                cgroup: 0
            }
        );
    }

    #[test]
    fn full_smaps_sums_mappings() {
        let two = "\
00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/dbus-daemon
Rss:                   8 kB
Pss:                   4 kB
Private_Clean:         4 kB
Private_Dirty:         0 kB
Swap:                  0 kB
7ffe33640000-7ffe33662000 rw-p 00000000 00:00 0    [stack]
Rss:                  12 kB
Pss:                  12 kB
Private_Clean:         0 kB
Private_Dirty:        12 kB
Swap:                  4 kB
";
        let s = parse_smaps_rollup(two).unwrap();
        assert_eq!(
            (s.uss, s.pss, s.rss, s.swap),
            (16 * 1024, 16 * 1024, 20 * 1024, 4 * 1024)
        );
    }

    #[test]
    fn empty_text_is_zero_and_garbage_is_an_error() {
        assert_eq!(parse_smaps_rollup("").unwrap(), MemoryStats::default());
        let err = parse_smaps_rollup("Rss: lots kB\n").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(
            parse_smaps_rollup("Pss: 12\n").is_err(),
            "a value without its unit is rejected"
        );
    }

    #[test]
    fn missing_process_is_gone() {
        // PIDs never exceed 2^22 (PID_MAX_LIMIT), so this one cannot exist.
        let err = smaps_rollup(i32::MAX as u32).unwrap_err();
        assert!(is_gone(&err), "{err}");
    }
}
