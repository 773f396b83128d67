//! What a run leaves behind: the stdout table, summary.json and timeline.csv.

use crate::compare::EqualColdStarts;
use crate::setup::WorkloadSummary;
use crate::sim::{Metrics, SimConfig, TimelineRow};
use anyhow::{Context, Result};
use serde::Serialize;
use std::io::Write;
use std::path::Path;

#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub label: String,
    pub config: SimConfig,
    pub cluster_memory_gib: f64,
    pub metrics: Metrics,
    pub node_memory_at_end_gib: Vec<f64>,
    #[serde(skip)]
    pub timeline: Vec<TimelineRow>,
}

#[derive(Debug, Serialize)]
pub struct Summary<'a> {
    pub tool: &'static str,
    pub version: &'static str,
    pub command: Vec<String>,
    pub workload: &'a WorkloadSummary,
    pub runs: &'a [RunRecord],
    pub equal_cold_starts: &'a [EqualColdStarts],
    /// Events (arrivals and timers) per wall second over all runs together.
    pub events_per_s: f64,
}

pub fn print_table(out: &mut impl Write, runs: &[RunRecord]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<34} {:>9} {:>10} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>11}",
        "run",
        "cluster",
        "invocs",
        "cold",
        "cold%",
        "avg_mem",
        "peak_mem",
        "active",
        "GiB*s",
        "p50_ms",
        "p99_ms",
        "queued",
        "rejected",
        "events/s"
    )?;
    for r in runs {
        let m = &r.metrics;
        writeln!(
            out,
            "{:<34} {:>8.0}G {:>10} {:>8} {:>6.2}% {:>8.2}G {:>8.2}G {:>8.2}G {:>9.0} {:>9.1} {:>8.1} {:>8} {:>8} {:>10.2}M",
            r.label,
            r.cluster_memory_gib,
            m.invocations,
            m.cold_starts,
            100.0 * m.cold_start_fraction,
            m.avg_memory_gib,
            m.peak_memory_gib,
            m.avg_active_gib,
            m.memory_gib_s,
            m.latency_ms_p50,
            m.latency_ms_p99,
            m.queued,
            m.rejected,
            m.events_per_s / 1e6
        )?;
    }
    Ok(())
}

/// Where placement sent the work, per run and node (multi-node runs only).
pub fn print_nodes(out: &mut impl Write, runs: &[RunRecord]) -> std::io::Result<()> {
    if runs.iter().all(|r| r.metrics.per_node.len() < 2) {
        return Ok(());
    }
    writeln!(
        out,
        "\nper node ({} placement)",
        runs.first().map_or("", |r| r.config.placement.as_str())
    )?;
    writeln!(
        out,
        "{:<34} {:>6} {:>10} {:>8} {:>7} {:>9} {:>9}",
        "run", "node", "invocs", "cold", "cold%", "avg_mem", "GiB*s"
    )?;
    for r in runs {
        for n in &r.metrics.per_node {
            let cold = if n.invocations == 0 {
                0.0
            } else {
                100.0 * n.cold_starts as f64 / n.invocations as f64
            };
            writeln!(
                out,
                "{:<34} {:>6} {:>10} {:>8} {:>6.2}% {:>8.2}G {:>9.0}",
                r.label,
                n.node,
                n.invocations,
                n.cold_starts,
                cold,
                n.avg_memory_gib,
                n.memory_gib_s
            )?;
        }
    }
    Ok(())
}

pub fn print_equal(out: &mut impl Write, eq: &[EqualColdStarts]) -> std::io::Result<()> {
    if eq.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nmemory for equal cold starts (reference: {})",
        eq[0].reference
    )?;
    writeln!(
        out,
        "{:<28} {:>12} {:>12} {:>14} {:>8}",
        "series", "ref_memory", "cold_starts", "memory_needed", "saving"
    )?;
    for e in eq {
        let (m, s) = match (e.memory_gib, e.saving) {
            (Some(m), Some(s)) => (format!("{m:.1}G"), format!("{:.1}%", 100.0 * s)),
            _ if e.saturated => ("saturated".to_string(), "-".to_string()),
            _ => ("out of range".to_string(), "-".to_string()),
        };
        writeln!(
            out,
            "{:<28} {:>11.1}G {:>12} {:>14} {:>8}",
            e.series, e.reference_memory_gib, e.cold_starts, m, s
        )?;
    }
    Ok(())
}

pub fn write_summary(dir: &Path, summary: &Summary) -> Result<()> {
    let path = dir.join("summary.json");
    let text = serde_json::to_string_pretty(summary)?;
    std::fs::write(&path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// One row per run and simulated second.
pub fn write_timeline(dir: &Path, runs: &[RunRecord]) -> Result<()> {
    let path = dir.join("timeline.csv");
    let mut w =
        csv::Writer::from_path(&path).with_context(|| format!("writing {}", path.display()))?;
    w.write_record([
        "run",
        "second",
        "memory_mib",
        "active_mib",
        "instances",
        "busy_instances",
        "queued",
    ])?;
    for r in runs {
        for row in &r.timeline {
            w.write_record([
                r.label.clone(),
                row.second.to_string(),
                format!("{:.1}", row.memory_mib),
                format!("{:.1}", row.active_mib),
                row.instances.to_string(),
                row.busy_instances.to_string(),
                row.queued.to_string(),
            ])?;
        }
    }
    w.flush()?;
    Ok(())
}
