//! From the command line to what the engine replays: the windowed trace as simulated events,
//! and the profile of every trace function in each sharing mode.

use crate::cli::{Args, DurationSource};
use crate::profile::{map_functions, FunctionProfile, ProfileFile, Resolved};
use crate::sim::{SimEvent, PROFILE_DURATION};
use crate::trace::{busiest_window, Trace, Window};
use crate::units::mib_to_bytes;
use anyhow::{bail, Result};
use icebox_policy::{DesiccantConfig, MemoryProfile, SharingMode};
use serde::Serialize;

/// The replay, independent of the cluster and policy settings a sweep varies.
pub struct Workload {
    pub trace: Trace,
    pub events: Vec<SimEvent>,
    /// Trace ms of simulated time 0.
    pub origin_ms: i64,
    pub count_from_ms: u64,
    pub end_ms: u64,
    pub window: Option<Window>,
    pub func_class: Vec<u32>,
    pub profiles: Option<ProfileFile>,
    pub class_names: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkloadSummary {
    pub trace_format: &'static str,
    pub functions: usize,
    pub invocations_replayed: usize,
    pub window_start_minute: Option<f64>,
    pub window_end_minute: Option<f64>,
    pub warmup_s: f64,
    /// Trace minute at simulated time 0 (window start less the warm-up).
    pub origin_minute: f64,
    pub repeat: u32,
    pub profile_source: String,
    /// Trace functions mapped to each profile function.
    pub mapped: Vec<(String, usize)>,
}

impl Workload {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_possible_wrap,
        clippy::cast_sign_loss,
        reason = "indices and counts of a simulated cluster (functions, instances, nodes, queued calls) stay far below 2^32; times and spans measured from the trace's origin are not negative; float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number; a warm-up in ms, far below 2^63; u64 to usize is lossless on the 64-bit targets icebox builds for"
    )]
    pub fn load(a: &Args) -> Result<Workload> {
        if a.warmup > 0 && a.window.is_none() && a.busiest.is_none() {
            bail!("--warmup needs --window or --busiest");
        }
        if a.repeat == 0 {
            bail!("--repeat must be at least 1");
        }
        let warmup = a.warmup as i64;
        let explicit = a.window.as_deref().map(Window::parse_minutes).transpose()?;
        let limit = explicit.map(|w| Window {
            start_ms: w.start_ms - warmup,
            end_ms: w.end_ms,
        });
        let mut trace = Trace::load(&a.trace, a.expansion, a.seed, limit)?;
        let window = match (explicit, a.busiest) {
            (Some(w), _) => Some(w),
            (None, Some(len)) => {
                let (m0, counts) = trace.minute_totals();
                let minutes = (len as usize).div_ceil(60_000);
                let w = busiest_window(m0, &counts, minutes);
                if let Some(w) = w {
                    trace
                        .events
                        .retain(|e| e.time_ms >= w.start_ms - warmup && e.time_ms < w.end_ms);
                }
                w
            }
            (None, None) => None,
        };
        if trace.events.is_empty() {
            bail!(
                "the trace has no invocations{}",
                if window.is_some() {
                    " in the window"
                } else {
                    ""
                }
            );
        }
        let first = trace.events[0].time_ms;
        let last = trace.events[trace.events.len() - 1].time_ms;
        let (origin_ms, span_end) = match window {
            Some(w) => (w.start_ms - warmup, w.end_ms),
            None => (
                first.div_euclid(60_000) * 60_000,
                (last.div_euclid(60_000) + 1) * 60_000,
            ),
        };
        let span = span_end - origin_ms;
        trace.repeat(a.repeat, span);
        let end_ms = (span * i64::from(a.repeat)) as u64;

        let profiles = a.profiles.as_deref().map(ProfileFile::load).transpose()?;
        let (func_class, class_names) = match &profiles {
            Some(p) => (
                map_functions(&trace, p.functions.len(), a.mapping, a.seed),
                p.functions.keys().cloned().collect(),
            ),
            None => (
                (0..trace.functions.len() as u32).collect(),
                trace.functions.clone(),
            ),
        };
        let events = std::mem::take(&mut trace.events)
            .iter()
            .map(|e| SimEvent {
                t: (e.time_ms - origin_ms) as u64,
                func: e.func,
                dur: match a.durations {
                    DurationSource::Profile if profiles.is_some() => PROFILE_DURATION,
                    _ => e
                        .duration_ms
                        .or_else(|| trace.durations_ms[e.func as usize].map(|d| d.round() as u32))
                        .unwrap_or(PROFILE_DURATION),
                },
            })
            .collect();
        Ok(Workload {
            events,
            origin_ms,
            count_from_ms: warmup as u64,
            end_ms,
            window,
            func_class,
            class_names,
            profiles,
            trace,
        })
    }

    /// Every profile resolved for one sharing mode, indexed like `func_class` values.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
    )]
    pub fn classes(
        &self,
        a: &Args,
        mode: SharingMode,
        desiccant: &DesiccantConfig,
    ) -> Result<Vec<Resolved>> {
        match &self.profiles {
            Some(p) => p
                .functions
                .iter()
                .map(|(name, f): (&String, &FunctionProfile)| {
                    Resolved::resolve(name, f, mode, desiccant)
                })
                .collect(),
            None => Ok((0..self.trace.functions.len())
                .map(|f| Resolved {
                    memory: MemoryProfile {
                        base_bytes: mib_to_bytes(
                            self.trace.memory_mb[f].unwrap_or(a.default_memory_mb),
                        ),
                        increment_bytes: 0,
                        base_activations: 0,
                    },
                    cold_start_ms: a.cold_start_ms.max(0.0).round() as u64,
                    warm_ms: self.trace.durations_ms[f]
                        .unwrap_or(a.default_duration_ms)
                        .max(0.0)
                        .round() as u64,
                    retained: desiccant.prior_retained_fraction,
                    cpu: 1,
                    placement_need: None,
                })
                .collect()),
        }
    }

    pub fn summary(&self, a: &Args) -> WorkloadSummary {
        let mut mapped = vec![0usize; self.class_names.len()];
        for &c in &self.func_class {
            mapped[c as usize] += 1;
        }
        WorkloadSummary {
            trace_format: self.trace.format,
            functions: self.trace.functions.len(),
            invocations_replayed: self.events.len(),
            window_start_minute: self.window.map(|w| w.start_ms as f64 / 60_000.0),
            window_end_minute: self.window.map(|w| w.end_ms as f64 / 60_000.0),
            warmup_s: a.warmup as f64 / 1_000.0,
            origin_minute: self.origin_ms as f64 / 60_000.0,
            repeat: a.repeat,
            profile_source: self
                .profiles
                .as_ref()
                .map_or_else(|| "trace (no --profiles)".to_string(), |p| p.source.clone()),
            mapped: if self.profiles.is_some() {
                self.class_names.iter().cloned().zip(mapped).collect()
            } else {
                Vec::new()
            },
        }
    }
}
