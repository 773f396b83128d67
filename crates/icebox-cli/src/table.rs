//! Aligned text tables and human formatting of sizes, durations and times.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

pub struct Table {
    headers: Vec<&'static str>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(columns: &[(&'static str, Align)]) -> Table {
        Table {
            headers: columns.iter().map(|(h, _)| *h).collect(),
            align: columns.iter().map(|(_, a)| *a).collect(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        debug_assert_eq!(
            row.len(),
            self.headers.len(),
            "row width must match the header"
        );
        self.rows.push(row);
    }

    /// Columns separated by two spaces; no trailing blanks, so output diffs cleanly.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let header: Vec<String> = self.headers.iter().map(|h| h.to_string()).collect();
        let mut out = String::new();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = widths[i] - cell.chars().count();
                match self.align[i] {
                    Align::Left => {
                        line.push_str(cell);
                        line.extend(std::iter::repeat_n(' ', pad));
                    }
                    Align::Right => {
                        line.extend(std::iter::repeat_n(' ', pad));
                        line.push_str(cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

use icebox_core::units::GIB;
use icebox_core::units::KIB;
use icebox_core::units::MIB;

/// Memory sizes in binary units: MiB for instance-sized figures, KiB below one MiB so small
/// values do not read as zero, GiB for budgets.
pub fn size(bytes: u64) -> String {
    if bytes == 0 {
        "0".to_string()
    } else if bytes < MIB {
        format!("{} KiB", bytes.div_ceil(KIB))
    } else if bytes < GIB {
        format!("{:.1} MiB", bytes as f64 / MIB as f64)
    } else {
        format!("{:.2} GiB", bytes as f64 / GIB as f64)
    }
}

/// Compact durations: `850ms`, `2.5s`, `42s`, `3m05s`, `2h10m`, `3d04h`.
pub fn duration_ms(ms: u64) -> String {
    let s = ms / 1000;
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 10_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600)
    }
}

/// `duration_ms(now - then) + " ago"`, or `-` for a time in the future or unknown.
pub fn ago(then_ms: u64, now_ms: u64) -> String {
    if then_ms == 0 || then_ms > now_ms {
        "-".to_string()
    } else {
        format!("{} ago", duration_ms(now_ms - then_ms))
    }
}

/// `YYYY-MM-DD HH:MM:SS` in UTC.
#[expect(
    clippy::cast_possible_wrap,
    reason = "civil-from-days arithmetic (Howard Hinnant): days since 1970 and calendar fields are small and non-negative"
)]
pub fn utc_time(ms: u64) -> String {
    let secs = ms / 1000;
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let t = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        t / 3600,
        (t % 3600) / 60,
        t % 60
    )
}

/// `YYYY-MM-DD HH:MM:SS.mmm` in UTC, for event streams where sub-second order matters.
pub fn utc_time_ms(ms: u64) -> String {
    format!("{}.{:03}", utc_time(ms), ms % 1000)
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "civil-from-days arithmetic (Howard Hinnant): days since 1970 and calendar fields are small and non-negative"
)]
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

pub use icebox_core::now_ms;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(size(0), "0");
        assert_eq!(size(1), "1 KiB");
        assert_eq!(size(512 * KIB), "512 KiB");
        assert_eq!(size(MIB), "1.0 MiB");
        assert_eq!(size(9_732_096), "9.3 MiB");
        assert_eq!(size(2 * GIB), "2.00 GiB");
    }

    #[test]
    fn durations() {
        assert_eq!(duration_ms(0), "0ms");
        assert_eq!(duration_ms(850), "850ms");
        assert_eq!(duration_ms(2_500), "2.5s");
        assert_eq!(duration_ms(42_000), "42s");
        assert_eq!(duration_ms(185_000), "3m05s");
        assert_eq!(duration_ms(7_800_000), "2h10m");
        assert_eq!(duration_ms(3 * 86_400_000 + 4 * 3_600_000), "3d04h");
        assert_eq!(ago(1_000, 61_000), "1m00s ago");
        assert_eq!(ago(5_000, 1_000), "-");
    }

    #[test]
    fn utc_times() {
        assert_eq!(utc_time(0), "1970-01-01 00:00:00");
        assert_eq!(utc_time_ms(1_718_000_000_123), "2024-06-10 06:13:20.123");
        // 2000-02-29 (a leap day in a century leap year) at noon.
        assert_eq!(utc_time(951_825_600_000), "2000-02-29 12:00:00");
    }

    #[test]
    fn tables_align_and_trim() {
        let mut t = Table::new(&[
            ("ID", Align::Left),
            ("USS", Align::Right),
            ("STATE", Align::Left),
        ]);
        t.push(vec!["i-1".into(), "9.3 MiB".into(), "frozen".into()]);
        t.push(vec!["i-22222".into(), "512 KiB".into(), "idle".into()]);
        assert_eq!(
            t.render(),
            "ID           USS  STATE\n\
             i-1      9.3 MiB  frozen\n\
             i-22222  512 KiB  idle\n"
        );
    }
}
