//! icebox-sim: event-driven cluster simulator over icebox-policy. See README.md.

// This crate makes no syscall of its own: forbidding unsafe keeps all unsafe code in the
// crates that talk to the kernel, where each block is reviewed with its SAFETY comment.
#![forbid(unsafe_code)]

mod cli;
mod compare;
mod output;
mod plot;
mod profile;
mod setup;
mod sim;
mod trace;
mod units;

use anyhow::{Context, Result};
use clap::Parser;
use cli::{Args, NodeBudget};
use compare::{equal_cold_starts, Point, Series};
use icebox_core::units::GIB;
use icebox_policy::{DesiccantConfig, HybridConfig};
use output::{RunRecord, Summary};
use setup::Workload;
use sim::{Sim, SimConfig};
use std::io::Write;
use std::path::Path;

/// Runs whose timelines go into timeline.png; more would be unreadable.
const MAX_TIMELINE_PLOTS: usize = 12;

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    let de = &mut serde_json::Deserializer::from_str(&text);
    serde_path_to_error::deserialize(de)
        .map_err(|e| anyhow::anyhow!("{}: at {}: {}", path.display(), e.path(), e.inner()))
}

fn run(a: &Args) -> Result<()> {
    let desiccant: DesiccantConfig = a
        .desiccant_config
        .as_deref()
        .map(read_json)
        .transpose()?
        .unwrap_or_default();
    desiccant
        .validate()
        .map_err(|e| anyhow::anyhow!("desiccant config: {e}"))?;
    let hybrid: HybridConfig = a
        .hybrid_config
        .as_deref()
        .map(read_json)
        .transpose()?
        .unwrap_or_default();
    if a.nodes == 0 {
        anyhow::bail!("--nodes must be at least 1");
    }
    let load_start = std::time::Instant::now();
    let w = Workload::load(a)?;
    let ws = w.summary(a);
    eprintln!(
        "icebox-sim: {} events of {} functions loaded in {:.2}s",
        w.events.len(),
        ws.functions,
        load_start.elapsed().as_secs_f64()
    );
    let mut runs = Vec::new();
    let mut series: Vec<Series> = Vec::new();
    for &sharing in &a.sharing {
        let classes = w.classes(a, sharing, &desiccant)?;
        for &technique in &a.technique {
            for &keepalive in &a.keepalive {
                let label = format!("{sharing} {technique} {keepalive}");
                let mut points = Vec::new();
                for &node_memory in &a.node_memory {
                    let cfg = SimConfig {
                        budget_idle_only: a.node_budget == NodeBudget::Idle,
                        nodes: a.nodes,
                        node_memory,
                        node_cores: a.node_cores,
                        placement: a.placement,
                        keepalive,
                        evict: a.evict,
                        sharing,
                        concurrency: a.concurrency,
                        technique,
                        desiccant,
                        hybrid,
                        count_from_ms: w.count_from_ms,
                        end_ms: w.end_ms,
                        timeline: a.out.is_some(),
                    };
                    let out =
                        Sim::new(&cfg, &classes, &w.func_class, &w.trace.functions).run(&w.events);
                    let cluster = cfg.cluster_memory() as f64 / GIB as f64;
                    eprintln!(
                        "  {:<40} cold starts {:>8}  {:.2} M events/s",
                        cfg.label(),
                        out.metrics.cold_starts,
                        out.metrics.events_per_s / 1e6
                    );
                    let m = &out.metrics;
                    points.push(Point {
                        memory_gib: cluster,
                        cold_starts: m.cold_starts,
                        saturated: (m.queued + m.still_queued_at_end) * 100 > m.invocations,
                    });
                    runs.push(RunRecord {
                        label: cfg.label(),
                        config: cfg,
                        cluster_memory_gib: cluster,
                        metrics: out.metrics,
                        node_memory_at_end_gib: out
                            .node_used
                            .iter()
                            .map(|&b| b as f64 / GIB as f64)
                            .collect(),
                        timeline: out.timeline,
                    });
                }
                points.sort_by(|x, y| x.memory_gib.total_cmp(&y.memory_gib));
                series.push(Series { label, points });
            }
        }
    }
    let eq = if series.len() > 1 && a.node_memory.len() > 1 {
        equal_cold_starts(&series)
    } else {
        Vec::new()
    };
    let mut stdout = std::io::stdout().lock();
    output::print_table(&mut stdout, &runs)?;
    output::print_nodes(&mut stdout, &runs)?;
    output::print_equal(&mut stdout, &eq)?;
    let events: u64 = runs.iter().map(|r| r.metrics.events).sum();
    let wall: f64 = runs.iter().map(|r| r.metrics.wall_s).sum();
    let rate = if wall > 0.0 {
        events as f64 / wall
    } else {
        0.0
    };
    writeln!(
        stdout,
        "\n{events} events in {wall:.3} s of simulation: {:.2} M events/s",
        rate / 1e6
    )?;
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let summary = Summary {
            tool: "icebox-sim",
            version: env!("CARGO_PKG_VERSION"),
            command: std::env::args().collect(),
            workload: &ws,
            runs: &runs,
            equal_cold_starts: &eq,
            events_per_s: rate,
        };
        output::write_summary(dir, &summary)?;
        output::write_timeline(dir, &runs)?;
        if !a.no_plots {
            if a.node_memory.len() > 1 {
                plot::cold_starts_vs_memory(&dir.join("cold_starts_vs_memory.png"), &series)?;
            }
            let shown = &runs[..runs.len().min(MAX_TIMELINE_PLOTS)];
            plot::timeline(&dir.join("timeline.png"), shown)?;
        }
        writeln!(stdout, "results in {}", dir.display())?;
    }
    Ok(())
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("icebox-sim: error: {e:#}");
        std::process::exit(1);
    }
}
