//! A window of trace time, and the busiest one of a given length.

use anyhow::{bail, Result};

/// Half-open [start_ms, end_ms) of trace time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Window {
    pub start_ms: i64,
    pub end_ms: i64,
}

impl Window {
    pub fn contains(&self, t: i64) -> bool {
        t >= self.start_ms && t < self.end_ms
    }

    /// `START:END` in trace minutes (the 2019 trace's minute columns).
    #[expect(
        clippy::cast_possible_truncation,
        reason = "float to integer `as` saturates and maps NaN to 0; trace times in ms are far inside i64"
    )]
    pub fn parse_minutes(s: &str) -> Result<Window> {
        let Some((a, b)) = s.split_once(':') else {
            bail!("'{s}': expected START:END in minutes, e.g. 663:673");
        };
        let parse = |x: &str| -> Result<f64> {
            x.trim()
                .parse::<f64>()
                .map_err(|_| anyhow::anyhow!("'{s}': '{x}' is not a number of minutes"))
        };
        let (a, b) = (parse(a)?, parse(b)?);
        if b <= a {
            bail!("'{s}': the window is empty (END must be after START)");
        }
        Ok(Window {
            start_ms: (a * 60_000.0).round() as i64,
            end_ms: (b * 60_000.0).round() as i64,
        })
    }
}

/// The `len_min`-minute window (aligned to minutes) with the most invocations; the earliest on
/// ties. `counts[i]` is the number of invocations in minute `first_minute + i`.
#[expect(clippy::cast_possible_wrap, reason = "minutes of a trace, few")]
pub fn busiest_window(first_minute: i64, counts: &[u64], len_min: usize) -> Option<Window> {
    if counts.is_empty() || len_min == 0 {
        return None;
    }
    let len = len_min.min(counts.len());
    let mut sum: u64 = counts[..len].iter().sum();
    let (mut best, mut best_at) = (sum, 0usize);
    for i in len..counts.len() {
        sum = sum + counts[i] - counts[i - len];
        if sum > best {
            best = sum;
            best_at = i + 1 - len;
        }
    }
    let start = (first_minute + best_at as i64) * 60_000;
    Some(Window {
        start_ms: start,
        end_ms: start + len_min as i64 * 60_000,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_minutes() {
        let w = Window::parse_minutes("663:673").unwrap();
        assert_eq!((w.start_ms, w.end_ms), (39_780_000, 40_380_000));
        assert!(w.contains(39_780_000) && !w.contains(40_380_000));
        assert!(Window::parse_minutes("5:5").is_err());
        assert!(Window::parse_minutes("5").is_err());
        assert!(Window::parse_minutes("a:6")
            .unwrap_err()
            .to_string()
            .contains("'a'"));
    }

    #[test]
    fn busiest_is_the_largest_sliding_sum_earliest_first() {
        let counts = [1, 5, 5, 1, 9, 1, 5, 5];
        let w = busiest_window(100, &counts, 2).unwrap();
        assert_eq!(w.start_ms, 101 * 60_000);
        let w = busiest_window(100, &counts, 3).unwrap();
        assert_eq!(w.start_ms, 102 * 60_000); // 5+1+9 = 15 beats 11, 11, 15 later
        assert_eq!(w.end_ms - w.start_ms, 180_000);
        assert_eq!(busiest_window(0, &[], 3), None);
        // Longer than the trace: the whole trace.
        assert_eq!(busiest_window(7, &[1, 2], 10).unwrap().start_ms, 7 * 60_000);
    }
}
