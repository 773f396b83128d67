//! Plain event lists: CSV with header `time_ms,function[,duration_ms]` (what the bench's
//! sim-validate recipe writes after replaying a window on a live node).

use super::{at_line, csv_reader, header, next_row, DurationMeans, Event, Trace};
use anyhow::Result;
use std::collections::HashMap;
use std::path::Path;

#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "float to integer `as` saturates and maps NaN to 0; trace times in ms are far inside i64; float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
)]
pub fn load(path: &Path) -> Result<Trace> {
    let mut r = csv_reader(path)?;
    let h = header(path, &mut r)?;
    let col = |n: &str| h.iter().position(|c| c == n);
    let (Some(tc), Some(fc)) = (col("time_ms"), col("function")) else {
        return Err(at_line(
            path,
            1,
            "expected header time_ms,function[,duration_ms]",
        ));
    };
    let dc = col("duration_ms");
    let mut trace = Trace {
        format: "events",
        ..Trace::default()
    };
    let mut index = HashMap::new();
    let mut durations = DurationMeans::default();
    let mut rec = csv::StringRecord::new();
    while let Some(line) = next_row(path, &mut r, &mut rec, h.len())? {
        let time: f64 = rec[tc]
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite())
            .ok_or_else(|| {
                at_line(
                    path,
                    line,
                    format!("time_ms '{}' is not a number", &rec[tc]),
                )
            })?;
        if rec[fc].is_empty() {
            return Err(at_line(path, line, "empty function"));
        }
        let duration = match dc.map(|c| &rec[c]).filter(|v| !v.is_empty()) {
            None => None,
            Some(v) => Some(
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| {
                        at_line(
                            path,
                            line,
                            format!("duration_ms '{v}' is not a non-negative number"),
                        )
                    })?,
            ),
        };
        let func = trace.intern(&rec[fc], &mut index);
        if let Some(d) = duration {
            durations.add(func, d);
        }
        trace.events.push(Event {
            time_ms: time.round() as i64,
            func,
            duration_ms: duration.map(|d| d.round().min(f64::from(u32::MAX)) as u32),
        });
    }
    trace.durations_ms = durations.means(trace.functions.len());
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_times_functions_and_optional_durations() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ev.csv");
        std::fs::write(
            &p,
            "time_ms,function,duration_ms\n0,a,12.4\n5.6,b,\n9,a,20\n",
        )
        .unwrap();
        let t = load(&p).unwrap();
        assert_eq!(t.functions, ["a", "b"]);
        assert_eq!(
            t.events[1],
            Event {
                time_ms: 6,
                func: 1,
                duration_ms: None
            }
        );
        assert_eq!(t.durations_ms, [Some(16.2), None]);
        std::fs::write(&p, "time_ms,function\n0,a\n").unwrap();
        assert_eq!(load(&p).unwrap().events[0].duration_ms, None);
    }

    #[test]
    fn malformed_rows_name_the_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ev.csv");
        for (text, want) in [
            (
                "time_ms,function\n0,a\nsoon,b\n",
                "ev.csv:3: time_ms 'soon'",
            ),
            (
                "time_ms,function,duration_ms\n0,a,-1\n",
                "ev.csv:2: duration_ms '-1'",
            ),
            ("time_ms,function\n0,\n", "ev.csv:2: empty function"),
            ("t,f\n", "ev.csv:1: expected header"),
            ("time_ms,function\n0,a,1\n", "ev.csv:2: 3 fields"),
        ] {
            std::fs::write(&p, text).unwrap();
            let err = load(&p).unwrap_err().to_string();
            assert!(err.contains(want), "{err} lacks {want}");
        }
        let err = load(&d.path().join("missing.csv")).unwrap_err().to_string();
        assert!(err.contains("missing.csv: cannot open"), "{err}");
    }
}
