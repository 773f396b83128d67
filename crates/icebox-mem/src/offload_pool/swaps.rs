//! /proc/swaps: the swap areas the kernel uses.

use icebox_core::proc_text::unescape_octal;
use std::io;

/// One line of /proc/swaps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SwapArea {
    pub path: String,
    /// `partition` or `file`.
    pub kind: String,
    pub size_bytes: u64,
    pub used_bytes: u64,
    pub priority: i32,
}

pub(crate) fn read_swaps() -> io::Result<Vec<SwapArea>> {
    Ok(parse_swaps(&std::fs::read_to_string("/proc/swaps")?))
}

/// Parses the table; malformed lines are skipped (the header, or a future format change
/// adding columns we do not know: then nothing is reported rather than something wrong).
pub(crate) fn parse_swaps(text: &str) -> Vec<SwapArea> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [path, kind, size, used, priority] = fields.as_slice() else {
                return None;
            };
            Some(SwapArea {
                path: unescape_octal(path),
                kind: kind.to_string(),
                size_bytes: size.parse::<u64>().ok()? * 1024,
                used_bytes: used.parse::<u64>().ok()? * 1024,
                priority: priority.parse().ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority
/dev/zram1                              partition\t65532\t\t1024\t\t32767
/var/swap\\040file                       file\t\t2097148\t\t0\t\t-2
";

    #[test]
    fn parses_areas_in_bytes_with_escaped_paths() {
        let areas = parse_swaps(SAMPLE);
        assert_eq!(
            areas,
            vec![
                SwapArea {
                    path: "/dev/zram1".into(),
                    kind: "partition".into(),
                    size_bytes: 65532 * 1024,
                    used_bytes: 1024 * 1024,
                    priority: 32767,
                },
                SwapArea {
                    path: "/var/swap file".into(),
                    kind: "file".into(),
                    size_bytes: 2097148 * 1024,
                    used_bytes: 0,
                    priority: -2,
                },
            ]
        );
    }

    #[test]
    fn header_only_and_garbage_give_nothing() {
        assert!(parse_swaps("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n").is_empty());
        assert!(parse_swaps("").is_empty());
        assert!(parse_swaps("header\n/dev/x partition lots 0 1\n").is_empty());
    }
}
