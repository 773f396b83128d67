//! The node's swap-in count (/proc/vmstat `pswpin`): the refault signal TMO falls back on where
//! PSI is not compiled in.

use std::io;

/// Pages swapped in since boot.
pub fn pages_swapped_in() -> io::Result<u64> {
    parse_pswpin(&std::fs::read_to_string("/proc/vmstat")?).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "/proc/vmstat has no pswpin line",
        )
    })
}

fn parse_pswpin(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("pswpin "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_pswpin_among_the_counters() {
        assert_eq!(parse_pswpin("pgpgin 10\npswpin 42\npswpout 7\n"), Some(42));
        assert_eq!(parse_pswpin("pgpgin 10\n"), None);
    }

    #[test]
    fn reads_this_machine() {
        pages_swapped_in().expect("/proc/vmstat has pswpin");
    }
}
