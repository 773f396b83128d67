//! Memory pressure stall information (/proc/pressure/memory), for backing off reclaim.

use std::io;

/// One line of a PSI file: the share of wall time (percent) some / all tasks stalled on
/// memory, averaged over 10 s, 60 s and 300 s, and the total stall time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PressureLine {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    pub total_us: u64,
}

/// `/proc/pressure/memory`: `some` = at least one task stalled, `full` = all non-idle tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Psi {
    pub some: PressureLine,
    pub full: PressureLine,
}

/// The node's memory pressure. Err when the kernel has no PSI (not built in, or booted with
/// `psi=0`): callers must then do without pressure feedback.
pub fn memory_pressure() -> io::Result<Psi> {
    let path = "/proc/pressure/memory";
    let text = std::fs::read_to_string(path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("{path}: {e} (kernel without PSI, or booted with psi=0)"),
        )
    })?;
    parse_psi(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{path}: unexpected format: {text:?}"),
        )
    })
}

pub(crate) fn parse_psi(text: &str) -> Option<Psi> {
    let mut some = None;
    let mut full = None;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let slot = match words.next() {
            Some("some") => &mut some,
            Some("full") => &mut full,
            _ => continue,
        };
        let mut parsed = PressureLine::default();
        let mut seen = 0;
        for word in words {
            let Some((key, value)) = word.split_once('=') else {
                continue;
            };
            match key {
                "avg10" => parsed.avg10 = value.parse().ok()?,
                "avg60" => parsed.avg60 = value.parse().ok()?,
                "avg300" => parsed.avg300 = value.parse().ok()?,
                "total" => parsed.total_us = value.parse().ok()?,
                _ => continue,
            }
            seen += 1;
        }
        if seen != 4 {
            return None;
        }
        *slot = Some(parsed);
    }
    // Kernels before 5.13 had no `full` line for the CPU file only; memory always has both.
    Some(Psi {
        some: some?,
        full: full?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_some_and_full() {
        let text = "some avg10=1.50 avg60=0.25 avg300=0.00 total=1235128\n\
                    full avg10=0.75 avg60=0.10 avg300=0.01 total=679437\n";
        let psi = parse_psi(text).unwrap();
        assert_eq!(
            psi.some,
            PressureLine {
                avg10: 1.5,
                avg60: 0.25,
                avg300: 0.0,
                total_us: 1235128
            }
        );
        assert_eq!(psi.full.avg10, 0.75);
        assert_eq!(psi.full.avg300, 0.01);
        assert_eq!(psi.full.total_us, 679437);
    }

    #[test]
    fn rejects_missing_lines_and_bad_numbers() {
        assert_eq!(parse_psi(""), None);
        assert_eq!(
            parse_psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=1\n"),
            None
        );
        assert_eq!(
            parse_psi(
                "some avg10=x avg60=0.00 avg300=0.00 total=1\nfull avg10=0 avg60=0 avg300=0 total=1\n"
            ),
            None
        );
    }

    #[test]
    fn reads_this_kernel() {
        match memory_pressure() {
            Ok(psi) => assert!(psi.some.total_us >= psi.full.total_us),
            Err(e) => eprintln!("skipping: no PSI here: {e}"),
        }
    }
}
