//! Azure Functions Invocation Trace 2021 (Zhang et al., SOSP '21): `app,func,end_timestamp,
//! duration`, one row per invocation, in seconds; it started at end_timestamp - duration.

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
    let path = if path.is_dir() {
        path.join("invocations.csv")
    } else {
        path.to_path_buf()
    };
    let path = path.as_path();
    let mut r = csv_reader(path)?;
    let h = header(path, &mut r)?;
    let col = |n: &str| h.iter().position(|c| c == n);
    let (Some(fc), Some(ec), Some(dc)) = (col("func"), col("end_timestamp"), col("duration"))
    else {
        return Err(at_line(
            path,
            1,
            "not a 2021 trace: needs columns app,func,end_timestamp,duration",
        ));
    };
    let mut trace = Trace {
        format: "azure2021",
        ..Trace::default()
    };
    let mut index = HashMap::new();
    let mut durations = DurationMeans::default();
    let mut rec = csv::StringRecord::new();
    while let Some(line) = next_row(path, &mut r, &mut rec, h.len())? {
        if rec[fc].is_empty() {
            return Err(at_line(path, line, "empty func"));
        }
        let num = |c: usize, what: &str| -> Result<f64> {
            rec[c]
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| at_line(path, line, format!("{what} '{}' is not a number", &rec[c])))
        };
        let end = num(ec, "end_timestamp")?;
        let dur = num(dc, "duration")?;
        if dur < 0.0 {
            return Err(at_line(path, line, format!("negative duration {dur}")));
        }
        let func = trace.intern(&rec[fc], &mut index);
        durations.add(func, dur * 1_000.0);
        trace.events.push(Event {
            time_ms: ((end - dur) * 1_000.0).round() as i64,
            func,
            duration_ms: Some((dur * 1_000.0).round().min(f64::from(u32::MAX)) as u32),
        });
    }
    trace.durations_ms = durations.means(trace.functions.len());
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_start_at_end_minus_duration() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("inv.csv");
        std::fs::write(
            &p,
            "app,func,end_timestamp,duration\na,f,10.5,0.5\na,g,3.0,1.0\na,f,20.0,1.5\n",
        )
        .unwrap();
        let t = load(&p).unwrap();
        assert_eq!(t.functions, ["f", "g"]);
        let starts: Vec<i64> = t.events.iter().map(|e| e.time_ms).collect();
        assert_eq!(starts, [10_000, 2_000, 18_500]);
        assert_eq!(t.events[2].duration_ms, Some(1_500));
        assert_eq!(t.durations_ms, [Some(1_000.0), Some(1_000.0)]);
    }

    #[test]
    fn malformed_rows_name_the_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("inv.csv");
        for (text, want) in [
            (
                "app,func,end_timestamp,duration\na,f,1,0.1\na,f,x,0.1\n",
                "inv.csv:3: end_timestamp 'x'",
            ),
            (
                "app,func,end_timestamp,duration\na,f,1,-0.1\n",
                "inv.csv:2: negative duration",
            ),
            (
                "app,func,end_timestamp,duration\na,f,1\n",
                "inv.csv:2: 3 fields",
            ),
            ("app,fn,end,duration\n", "inv.csv:1: not a 2021 trace"),
        ] {
            std::fs::write(&p, text).unwrap();
            let err = load(&p).unwrap_err().to_string();
            assert!(err.contains(want), "{err} lacks {want}");
        }
    }
}
