//! PNG plots. Text is drawn with the DejaVu font compiled into the binary (the `dejavu`
//! crate), so plots need no system fonts.

use crate::compare::Series;
use crate::output::RunRecord;
use anyhow::{anyhow, Result};
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

const FONT: &str = "sans-serif";

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TTF shipped by the crate; failure would be a build problem.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("plotting: {e}")
}

/// Cold starts against cluster memory, one line per series (the thesis' Fig. 5.3).
pub fn cold_starts_vs_memory(path: &Path, series: &[Series]) -> Result<()> {
    register_font();
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, 0f64, 0f64);
    for p in pts {
        x0 = x0.min(p.memory_gib);
        x1 = x1.max(p.memory_gib);
        y1 = y1.max(p.cold_starts as f64);
    }
    if x0 > x1 {
        return Ok(());
    }
    let pad = ((x1 - x0) * 0.05).max(1.0);
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Cold starts vs cluster memory (hollow: saturated, >1% queued)",
            (FONT, 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((x0 - pad)..(x1 + pad), 0f64..(y1 * 1.08).max(1.0))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("cluster memory (GiB)")
        .y_desc("cold starts")
        .label_style((FONT, 14))
        .draw()
        .map_err(err)?;
    for (k, s) in series.iter().enumerate() {
        let color = Palette99::pick(k).to_rgba();
        let line: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|p| (p.memory_gib, p.cold_starts as f64))
            .collect();
        chart
            .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(s.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        // Hollow markers: saturated points (over 1 % of calls queued).
        chart
            .draw_series(s.points.iter().zip(line).map(|(p, xy)| {
                let style = if p.saturated {
                    color.stroke_width(2)
                } else {
                    color.filled()
                };
                Circle::new(xy, 5, style)
            }))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Cluster memory (solid) and active memory (thin) over simulated time, one colour per run.
pub fn timeline(path: &Path, runs: &[RunRecord]) -> Result<()> {
    register_font();
    let x1 = runs
        .iter()
        .flat_map(|r| r.timeline.last())
        .map(|row| row.second)
        .max()
        .unwrap_or(0) as f64;
    let y1 = runs
        .iter()
        .flat_map(|r| r.timeline.iter())
        .map(|row| row.memory_mib / 1024.0)
        .fold(0f64, f64::max);
    if x1 <= 0.0 {
        return Ok(());
    }
    let root = BitMapBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Cluster memory over time (thin: active)", (FONT, 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x1, 0f64..(y1 * 1.08).max(0.001))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("simulated seconds")
        .y_desc("memory (GiB)")
        .label_style((FONT, 14))
        .draw()
        .map_err(err)?;
    for (k, r) in runs.iter().enumerate() {
        let color = Palette99::pick(k).to_rgba();
        let mem = r
            .timeline
            .iter()
            .map(|row| (row.second as f64, row.memory_mib / 1024.0));
        let act = r
            .timeline
            .iter()
            .map(|row| (row.second as f64, row.active_mib / 1024.0));
        chart
            .draw_series(LineSeries::new(mem, color.stroke_width(2)))
            .map_err(err)?
            .label(r.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(LineSeries::new(act, color.stroke_width(1)))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}
