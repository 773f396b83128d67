//! Traces: what the simulator replays. Every format loads into [`Trace`]: trace functions plus
//! invocation events in trace time (ms), sorted.

mod azure2019;
mod azure2021;
mod events;
mod window;

use anyhow::{bail, Result};
use std::path::PathBuf;

pub use window::{busiest_window, Window};

/// How a 2019 per-minute count becomes invocation times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Expansion {
    /// Uniformly at random inside the minute, seeded per (seed, function, minute): the thesis.
    Random,
    /// k × 60 / (n + 1) s for k = 1..n: Desiccant's artifact.
    Even,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceSpec {
    Azure2019(PathBuf),
    Azure2021(PathBuf),
    Events(PathBuf),
}

impl std::str::FromStr for TraceSpec {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        let Some((kind, path)) = s.split_once(':') else {
            bail!("'{s}': expected KIND:PATH with KIND azure2019, azure2021 or events");
        };
        let path = PathBuf::from(path);
        Ok(match kind {
            "azure2019" => TraceSpec::Azure2019(path),
            "azure2021" => TraceSpec::Azure2021(path),
            "events" => TraceSpec::Events(path),
            other => {
                bail!("unknown trace kind '{other}' (expected azure2019, azure2021 or events)")
            }
        })
    }
}

/// One invocation at trace time `time_ms` of trace function `func` (an index into
/// [`Trace::functions`]), with its own duration when the trace records one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Event {
    pub time_ms: i64,
    pub func: u32,
    pub duration_ms: Option<u32>,
}

#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub format: &'static str,
    /// In order of first appearance in the file.
    pub functions: Vec<String>,
    /// Average duration (ms) per function, from the trace, when known.
    pub durations_ms: Vec<Option<f64>>,
    /// Average allocated memory (MB) per function, from the trace, when known.
    pub memory_mb: Vec<Option<f64>>,
    /// Sorted by (time, function).
    pub events: Vec<Event>,
}

impl Trace {
    /// Loads a whole trace; 2019 counts are expanded only inside `limit` (trace ms), if given.
    pub fn load(
        spec: &TraceSpec,
        expansion: Expansion,
        seed: u64,
        limit: Option<Window>,
    ) -> Result<Trace> {
        let mut t = match spec {
            TraceSpec::Azure2019(dir) => azure2019::load(dir, expansion, seed, limit)?,
            TraceSpec::Azure2021(file) => azure2021::load(file)?,
            TraceSpec::Events(file) => events::load(file)?,
        };
        if let Some(w) = limit {
            t.events.retain(|e| w.contains(e.time_ms));
        }
        t.events.sort_unstable();
        Ok(t)
    }

    /// Per-minute invocation totals, for `--busiest` (first minute, counts).
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "minutes counted from the trace's first minute are not negative, and few"
    )]
    pub fn minute_totals(&self) -> (i64, Vec<u64>) {
        let Some(first) = self.events.first() else {
            return (0, Vec::new());
        };
        let m0 = first.time_ms.div_euclid(60_000);
        let last = self
            .events
            .last()
            .map_or(m0, |e| e.time_ms.div_euclid(60_000));
        let mut counts = vec![0u64; (last - m0 + 1) as usize];
        for e in &self.events {
            counts[(e.time_ms.div_euclid(60_000) - m0) as usize] += 1;
        }
        (m0, counts)
    }

    /// Appends `times - 1` copies of the events, each shifted by the span of the original,
    /// for speed measurements on a large synthetic trace.
    pub fn repeat(&mut self, times: u32, span_ms: i64) {
        let n = self.events.len();
        self.events.reserve(n * times.saturating_sub(1) as usize);
        for k in 1..i64::from(times) {
            for i in 0..n {
                let mut e = self.events[i];
                e.time_ms += k * span_ms;
                self.events.push(e);
            }
        }
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "indices and counts of a simulated cluster (functions, instances, nodes, queued calls) stay far below 2^32"
    )]
    pub fn intern(
        &mut self,
        name: &str,
        index: &mut std::collections::HashMap<String, u32>,
    ) -> u32 {
        if let Some(&i) = index.get(name) {
            return i;
        }
        let i = self.functions.len() as u32;
        self.functions.push(name.to_string());
        self.durations_ms.push(None);
        self.memory_mb.push(None);
        index.insert(name.to_string(), i);
        i
    }
}

/// Per-function mean of the durations the trace's calls carry.
#[derive(Default)]
pub(crate) struct DurationMeans(Vec<(f64, u64)>);

impl DurationMeans {
    pub(crate) fn add(&mut self, func: u32, ms: f64) {
        let i = func as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, (0.0, 0));
        }
        self.0[i].0 += ms;
        self.0[i].1 += 1;
    }

    /// One entry per function, `None` for those no call gave a duration.
    pub(crate) fn means(mut self, functions: usize) -> Vec<Option<f64>> {
        self.0.resize(functions, (0.0, 0));
        self.0
            .iter()
            .map(|&(sum, n)| (n > 0).then(|| sum / n as f64))
            .collect()
    }
}

/// `path:line: message`, the shape of every input error.
pub(crate) fn at_line(
    path: &std::path::Path,
    line: u64,
    msg: impl std::fmt::Display,
) -> anyhow::Error {
    anyhow::anyhow!("{}:{line}: {msg}", path.display())
}

pub(crate) fn csv_reader(path: &std::path::Path) -> Result<csv::Reader<std::fs::File>> {
    let file = std::fs::File::open(path)
        .map_err(|e| anyhow::anyhow!("{}: cannot open: {e}", path.display()))?;
    Ok(csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(file))
}

/// The next record with its 1-based line number, or `None` at the end; CSV syntax errors
/// name the line.
pub(crate) fn next_record(
    path: &std::path::Path,
    reader: &mut csv::Reader<std::fs::File>,
    rec: &mut csv::StringRecord,
) -> Result<Option<u64>> {
    match reader.read_record(rec) {
        Ok(false) => Ok(None),
        Ok(true) => Ok(Some(rec.position().map_or(0, |p| p.line()))),
        Err(e) => {
            let line = e.position().map_or(0, |p| p.line());
            Err(at_line(path, line, e))
        }
    }
}

/// The next non-blank record with its line number, or `None` at the end; a record whose
/// field count differs from the header's is an error naming the line.
pub(crate) fn next_row(
    path: &std::path::Path,
    reader: &mut csv::Reader<std::fs::File>,
    rec: &mut csv::StringRecord,
    width: usize,
) -> Result<Option<u64>> {
    while let Some(line) = next_record(path, reader, rec)? {
        if is_blank(rec) {
            continue;
        }
        if rec.len() != width {
            return Err(at_line(
                path,
                line,
                format!("{} fields, the header has {width}", rec.len()),
            ));
        }
        return Ok(Some(line));
    }
    Ok(None)
}

pub(crate) fn header(
    path: &std::path::Path,
    reader: &mut csv::Reader<std::fs::File>,
) -> Result<Vec<String>> {
    let h = reader.headers().map_err(|e| at_line(path, 1, e))?;
    Ok(h.iter().map(|s| s.trim().to_string()).collect())
}

pub(crate) fn is_blank(rec: &csv::StringRecord) -> bool {
    rec.iter().all(|f| f.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parses_kind_and_path() {
        assert_eq!(
            "azure2019:../shared/traces/x".parse::<TraceSpec>().unwrap(),
            TraceSpec::Azure2019("../shared/traces/x".into())
        );
        assert!("csv:foo"
            .parse::<TraceSpec>()
            .unwrap_err()
            .to_string()
            .contains("unknown trace kind"));
        assert!("foo".parse::<TraceSpec>().is_err());
    }

    #[test]
    fn repeat_shifts_copies_by_the_span() {
        let mut t = Trace {
            events: vec![
                Event {
                    time_ms: 0,
                    func: 0,
                    duration_ms: None,
                },
                Event {
                    time_ms: 500,
                    func: 1,
                    duration_ms: Some(3),
                },
            ],
            ..Trace::default()
        };
        t.repeat(3, 1_000);
        let times: Vec<i64> = t.events.iter().map(|e| e.time_ms).collect();
        assert_eq!(times, [0, 500, 1_000, 1_500, 2_000, 2_500]);
        assert_eq!(t.events[3].duration_ms, Some(3));
    }
}
