//! Azure Functions Trace 2019 (Shahrad et al., ATC '20): per-minute invocation counts per
//! function (`HashOwner,HashApp,HashFunction,Trigger,<minute>...`; minute column m covers
//! trace time [60 m, 60 m + 60) s), plus optional per-function durations (`Average`, ms) and
//! allocated memory (`AverageAllocatedMb`, keyed by HashFunction in the samples, by HashApp in
//! the full dataset).

use super::{at_line, csv_reader, header, next_row, Event, Expansion, Trace, Window};
use crate::units::stable_hash;
use anyhow::{anyhow, Result};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Times (trace ms) of `count` invocations in `minute`, ascending. Random draws depend only on
/// (seed, function, minute), so a minute expands the same whatever window or row order.
#[expect(
    clippy::cast_sign_loss,
    reason = "a hash input: the bits are what matter"
)]
pub fn expand_minute(
    minute: i64,
    count: u32,
    expansion: Expansion,
    seed: u64,
    function: &str,
) -> Vec<i64> {
    let start = minute * 60_000;
    match expansion {
        Expansion::Even => (1..=i64::from(count))
            .map(|k| start + k * 60_000 / (i64::from(count) + 1))
            .collect(),
        Expansion::Random => {
            let mix = seed
                ^ stable_hash(function).rotate_left(17)
                ^ (minute as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut rng = Pcg64::seed_from_u64(mix);
            let mut v: Vec<i64> = (0..count)
                .map(|_| start + rng.gen_range(0..60_000))
                .collect();
            v.sort_unstable();
            v
        }
    }
}

/// The one file in `dir` named `exact`, or else starting with `prefix`.
fn find(dir: &Path, exact: &str, prefix: &str) -> Result<Option<PathBuf>> {
    let p = dir.join(exact);
    if p.is_file() {
        return Ok(Some(p));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| anyhow!("{}: cannot list: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    found.sort();
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => Err(anyhow!(
            "{}: several {prefix}* files; pass a directory holding one day",
            dir.display()
        )),
    }
}

pub fn load(path: &Path, expansion: Expansion, seed: u64, limit: Option<Window>) -> Result<Trace> {
    let (dir, invocations) = if path.is_file() {
        (
            path.parent().unwrap_or(Path::new(".")).to_path_buf(),
            path.to_path_buf(),
        )
    } else {
        let inv = find(path, "invocations.csv", "invocations_per_function")?.ok_or_else(|| {
            anyhow!(
                "{}: no invocations.csv (or invocations_per_function_md.anon.d*.csv)",
                path.display()
            )
        })?;
        (path.to_path_buf(), inv)
    };
    let mut trace = Trace {
        format: "azure2019",
        ..Trace::default()
    };
    let apps = read_invocations(&invocations, expansion, seed, limit, &mut trace)?;
    if let Some(d) = find(&dir, "durations.csv", "function_durations_percentiles")? {
        read_durations(&d, &mut trace)?;
    }
    if let Some(m) = find(&dir, "memory.csv", "app_memory_percentiles")? {
        read_memory(&m, &apps, &mut trace)?;
    }
    Ok(trace)
}

/// Returns each function's app, for memory files keyed by app.
fn read_invocations(
    path: &Path,
    expansion: Expansion,
    seed: u64,
    limit: Option<Window>,
    trace: &mut Trace,
) -> Result<Vec<String>> {
    let mut r = csv_reader(path)?;
    let h = header(path, &mut r)?;
    let col = |name: &str| h.iter().position(|c| c == name);
    let func_col = col("HashFunction").ok_or_else(|| {
        at_line(
            path,
            1,
            "not a 2019 invocations file: no HashFunction column",
        )
    })?;
    let app_col = col("HashApp");
    let minutes: Vec<(usize, i64)> = h
        .iter()
        .enumerate()
        .filter_map(|(i, name)| name.parse::<i64>().ok().map(|m| (i, m)))
        .filter(|&(_, m)| {
            limit.is_none_or(|w| m * 60_000 < w.end_ms && m * 60_000 + 60_000 > w.start_ms)
        })
        .collect();
    if !h.iter().any(|n| n.parse::<i64>().is_ok()) {
        return Err(at_line(
            path,
            1,
            "not a 2019 invocations file: no minute columns",
        ));
    }
    let mut index = HashMap::new();
    let mut first_line: HashMap<String, u64> = HashMap::new();
    let mut apps = Vec::new();
    let mut rec = csv::StringRecord::new();
    while let Some(line) = next_row(path, &mut r, &mut rec, h.len())? {
        let name = &rec[func_col];
        if name.is_empty() {
            return Err(at_line(path, line, "empty HashFunction"));
        }
        if let Some(first) = first_line.insert(name.to_string(), line) {
            return Err(at_line(
                path,
                line,
                format!("function {name} already listed on line {first}"),
            ));
        }
        let func = trace.intern(name, &mut index);
        apps.push(app_col.map_or_else(String::new, |c| rec[c].to_string()));
        for &(c, minute) in &minutes {
            let count: u32 = rec[c].parse().map_err(|_| {
                at_line(
                    path,
                    line,
                    format!(
                        "count '{}' in minute column {minute} is not a non-negative integer",
                        &rec[c]
                    ),
                )
            })?;
            for time_ms in expand_minute(minute, count, expansion, seed, name) {
                trace.events.push(Event {
                    time_ms,
                    func,
                    duration_ms: None,
                });
            }
        }
    }
    Ok(apps)
}

fn number(path: &Path, line: u64, field: &str, v: &str) -> Result<f64> {
    v.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| {
            at_line(
                path,
                line,
                format!("{field} '{v}' is not a non-negative number"),
            )
        })
}

fn read_durations(path: &Path, trace: &mut Trace) -> Result<()> {
    let mut r = csv_reader(path)?;
    let h = header(path, &mut r)?;
    let (Some(fc), Some(ac)) = (
        h.iter().position(|c| c == "HashFunction"),
        h.iter().position(|c| c == "Average"),
    ) else {
        return Err(at_line(
            path,
            1,
            "not a 2019 durations file: needs HashFunction and Average",
        ));
    };
    let index: HashMap<&str, usize> = trace
        .functions
        .iter()
        .enumerate()
        .map(|(i, f)| (f.as_str(), i))
        .collect();
    let mut out = vec![None; trace.functions.len()];
    let mut rec = csv::StringRecord::new();
    while let Some(line) = next_row(path, &mut r, &mut rec, h.len())? {
        let avg = number(path, line, "Average", &rec[ac])?;
        if let Some(&i) = index.get(&rec[fc]) {
            out[i] = Some(avg);
        }
    }
    trace.durations_ms = out;
    Ok(())
}

fn read_memory(path: &Path, apps: &[String], trace: &mut Trace) -> Result<()> {
    let mut r = csv_reader(path)?;
    let h = header(path, &mut r)?;
    let mc = h.iter().position(|c| c == "AverageAllocatedMb");
    let fc = h.iter().position(|c| c == "HashFunction");
    let ac = h.iter().position(|c| c == "HashApp");
    let (Some(mc), Some(key)) = (mc, fc.or(ac)) else {
        return Err(at_line(
            path,
            1,
            "not a 2019 memory file: needs AverageAllocatedMb and HashFunction or HashApp",
        ));
    };
    let by_function = fc.is_some();
    let mut mem: HashMap<String, f64> = HashMap::new();
    let mut rec = csv::StringRecord::new();
    while let Some(line) = next_row(path, &mut r, &mut rec, h.len())? {
        let mb = number(path, line, "AverageAllocatedMb", &rec[mc])?;
        mem.insert(rec[key].to_string(), mb);
    }
    trace.memory_mb = trace
        .functions
        .iter()
        .zip(apps)
        .map(|(f, a)| mem.get(if by_function { f } else { a }).copied())
        .collect();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn even_expansion_spaces_invocations_inside_the_minute() {
        assert_eq!(
            expand_minute(2, 3, Expansion::Even, 0, "f"),
            [135_000, 150_000, 165_000]
        );
        assert!(expand_minute(2, 0, Expansion::Even, 0, "f").is_empty());
    }

    #[test]
    fn random_expansion_is_deterministic_per_seed_function_and_minute() {
        let a = expand_minute(5, 50, Expansion::Random, 7, "f");
        assert_eq!(a, expand_minute(5, 50, Expansion::Random, 7, "f"));
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        assert!(a.iter().all(|&t| (300_000..360_000).contains(&t)));
        assert_ne!(a, expand_minute(5, 50, Expansion::Random, 8, "f"));
        assert_ne!(a, expand_minute(5, 50, Expansion::Random, 7, "g"));
        let shifted: Vec<i64> = expand_minute(6, 50, Expansion::Random, 7, "f")
            .iter()
            .map(|t| t - 60_000)
            .collect();
        assert_ne!(a, shifted);
    }

    fn write(dir: &Path, name: &str, text: &str) {
        fs::write(dir.join(name), text).unwrap();
    }

    #[test]
    fn loads_counts_durations_and_memory_inside_the_limit() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "invocations.csv", "HashOwner,HashApp,HashFunction,Trigger,10,11,12\no,a1,f1,http,1,2,0\n\no,a2,f2,timer,0,0,3\n");
        write(
            d.path(),
            "durations.csv",
            "HashOwner,HashApp,HashFunction,Average,Count\no,a1,f1,120,3\no,a9,zz,5,1\n",
        );
        write(
            d.path(),
            "memory.csv",
            "HashFunction,HashOwner,HashApp,SampleCount,AverageAllocatedMb\nf2,o,a2,4,99.5\n",
        );
        let limit = Window {
            start_ms: 11 * 60_000,
            end_ms: 13 * 60_000,
        };
        let t = load(d.path(), Expansion::Even, 0, Some(limit)).unwrap();
        assert_eq!(t.functions, ["f1", "f2"]);
        assert_eq!(t.events.len(), 5);
        assert_eq!(t.durations_ms, [Some(120.0), None]);
        assert_eq!(t.memory_mb, [None, Some(99.5)]);
        let whole = load(&d.path().join("invocations.csv"), Expansion::Even, 0, None).unwrap();
        assert_eq!(whole.events.len(), 6);
    }

    #[test]
    fn malformed_lines_are_errors_naming_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        let cases = [
            (
                "HashOwner,HashApp,HashFunction,Trigger,1,2\no,a,f,http,1,x\n",
                ":2: count 'x' in minute column 2",
            ),
            (
                "HashOwner,HashApp,HashFunction,Trigger,1,2\no,a,f,http,1,2\no,a,g,http,1\n",
                ":3: 5 fields, the header has 6",
            ),
            (
                "HashOwner,HashApp,HashFunction,Trigger,1\no,a,f,http,-1\n",
                ":2: count '-1'",
            ),
            (
                "HashOwner,HashApp,HashFunction,Trigger,1\no,a,f,http,1\no,a,f,http,1\n",
                ":3: function f already listed on line 2",
            ),
            (
                "HashOwner,HashApp,HashFunction,Trigger,1\no,a,,http,1\n",
                ":2: empty HashFunction",
            ),
            (
                "HashOwner,HashApp,Trigger,1\no,a,http,1\n",
                ":1: not a 2019 invocations file",
            ),
        ];
        for (text, want) in cases {
            write(d.path(), "invocations.csv", text);
            let err = load(d.path(), Expansion::Even, 0, None)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("invocations.csv") && err.contains(want),
                "{err} lacks {want}"
            );
        }
        write(
            d.path(),
            "invocations.csv",
            "HashOwner,HashApp,HashFunction,Trigger,1\no,a,f,http,1\n",
        );
        write(
            d.path(),
            "durations.csv",
            "HashOwner,HashApp,HashFunction,Average\no,a,f,-3\n",
        );
        let err = load(d.path(), Expansion::Even, 0, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("durations.csv:2: Average '-3'"), "{err}");
    }
}
