//! The command line.

use crate::profile::Mapping;
use crate::sim::{KeepAliveSpec, Technique};
use crate::trace::{Expansion, TraceSpec};
use crate::units::{parse_duration_ms, parse_size_bytes};
use clap::Parser;
use icebox_policy::placement::PlacementPolicy;
use icebox_policy::{EvictOrder, SharingMode};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NodeBudget {
    All,
    Idle,
}

/// Where an activation's duration comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DurationSource {
    /// The mapped profile's warm_ms (per sharing mode): the thesis' model.
    Profile,
    /// The trace's own: per event (azure2021, events files with duration_ms), else the
    /// function's average (azure2019 durations.csv), else the profile's.
    Trace,
}

#[derive(Debug, Parser)]
#[command(
    name = "icebox-sim",
    version,
    about = "Event-driven cluster simulator: replays an Azure Functions trace through icebox-policy's keep-alive, sharing and Desiccant decisions",
    long_about = "Event-driven cluster simulator: replays an Azure Functions trace through \
icebox-policy's keep-alive, sharing and Desiccant decisions.\n\n\
Comma lists for --node-memory, --sharing, --technique and --keepalive run every combination \
and add a comparison (cold starts vs cluster memory, and the memory each series needs for the \
first series' cold starts). Results go to stdout; --out DIR adds summary.json, timeline.csv \
and PNG plots."
)]
pub struct Args {
    /// Trace to replay: azure2019:DIR (per-minute counts in invocations.csv; durations.csv and
    /// memory.csv beside it are used when present), azure2021:FILE (app,func,end_timestamp,
    /// duration in seconds), or events:FILE (CSV with header time_ms,function[,duration_ms]).
    #[arg(long, value_name = "KIND:PATH")]
    pub trace: TraceSpec,

    /// How azure2019 per-minute counts become invocation times: uniformly at random inside the
    /// minute (seeded by --seed, function and minute) or evenly spaced.
    #[arg(long, value_enum, default_value = "random")]
    pub expansion: Expansion,

    /// Seed of the random expansion and of the random function mapping.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Replay only trace minutes [START, END), e.g. 663:673 (minute m of the 2019 trace covers
    /// seconds [60 m, 60 m + 60)).
    #[arg(long, value_name = "START:END", conflicts_with = "busiest")]
    pub window: Option<String>,

    /// Replay only the busiest window of this length (aligned to minutes), e.g. 10m.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    pub busiest: Option<u64>,

    /// Also replay this much trace before the window without counting it, so the cluster does
    /// not start empty (e.g. 5m). Needs --window or --busiest.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms, default_value = "0")]
    pub warmup: u64,

    /// Replay the (windowed) trace N times back to back: a large synthetic trace for speed
    /// measurements.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: u32,

    /// Profiles JSON (version 1: per function cold_start_ms, warm_ms, sharing.{process,shared,
    /// isolate}.{base_mb,increment_mb[,cold_start_ms,warm_ms]}, optional idle_mb.{none,
    /// desiccant}, cpu and limit_mb: the declared memory limit placement checks against free
    /// memory, as iceboxd does). Without it every trace function is its own profile built from the
    /// trace (memory.csv, durations) and the --default-* flags, with no sharing increment.
    #[arg(long, value_name = "FILE")]
    pub profiles: Option<PathBuf>,

    /// How trace functions map onto profile functions.
    #[arg(long, value_enum, default_value = "random")]
    pub mapping: Mapping,

    /// Where an activation's duration comes from.
    #[arg(long, value_enum, default_value = "profile")]
    pub durations: DurationSource,

    /// Cold start of trace-built profiles (no --profiles).
    #[arg(long, value_name = "MS", default_value_t = 500.0)]
    pub cold_start_ms: f64,

    /// Instance memory of trace-built profiles when the trace has none for a function.
    #[arg(long, value_name = "MB", default_value_t = 256.0)]
    pub default_memory_mb: f64,

    /// Duration of trace-built profiles when the trace has none for a function.
    #[arg(long, value_name = "MS", default_value_t = 100.0)]
    pub default_duration_ms: f64,

    /// Nodes in the cluster.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub nodes: u32,

    /// Memory per node, e.g. 16GiB, 512MiB, 8GB (a bare number is MiB); a comma list sweeps.
    #[arg(long, value_name = "SIZE[,SIZE...]", value_delimiter = ',', value_parser = parse_size_bytes, default_value = "32GiB")]
    pub node_memory: Vec<u64>,

    /// Cores per node; an activation takes its profile's cpu (default 1). 0 = unlimited, as
    /// in the thesis.
    #[arg(long, value_name = "C", default_value_t = 0)]
    pub node_cores: u32,

    /// Which node runs each activation, through the daemon's placement code
    /// (icebox_policy::placement): warm-home (a node with an idle instance of the function,
    /// else OpenWhisk's home-node hash with a co-prime step, checked against free memory),
    /// hash (OpenWhisk's hash alone, blind to warm instances) or round-robin.
    #[arg(long, value_name = "POLICY", default_value = "warm-home")]
    pub placement: PlacementPolicy,

    /// What --node-memory caps: all (every instance: a machine's memory) or idle (idle
    /// instances only, as iceboxd's --pool-memory: busy ones are not charged, and a release
    /// over the budget evicts the least recently used idle ones).
    #[arg(long, value_enum, default_value = "all")]
    pub node_budget: NodeBudget,

    /// Keep-alive of idle instances: ttl:DURATION (icebox-policy KeepAlivePolicy), hybrid
    /// (the hybrid histogram policy of Shahrad et al.) or infinite (until memory pressure
    /// evicts them, the thesis' model); a comma list sweeps.
    #[arg(
        long,
        value_name = "POLICY[,POLICY...]",
        value_delimiter = ',',
        default_value = "ttl:10m"
    )]
    pub keepalive: Vec<KeepAliveSpec>,

    /// Which idle instance memory pressure evicts first: lru, or frequency (the function
    /// invoked least often so far, as the thesis' simulator does).
    #[arg(long, value_name = "ORDER", default_value = "lru")]
    pub evict: EvictOrder,

    /// Runtime sharing: process (one activation per instance), shared (Photons: one heap) or
    /// isolate (one isolate per activation); a comma list sweeps.
    #[arg(
        long,
        value_name = "MODE[,MODE...]",
        value_delimiter = ',',
        default_value = "process"
    )]
    pub sharing: Vec<SharingMode>,

    /// Activations one instance runs at once in shared and isolate modes.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub concurrency: u32,

    /// Idle-memory technique: none, or desiccant (idle instances frozen past Desiccant's
    /// timeout shrink to their retained share while the node is above Desiccant's activation
    /// threshold, and before anything is evicted); a comma list sweeps.
    #[arg(
        long,
        value_name = "T[,T...]",
        value_delimiter = ',',
        default_value = "none"
    )]
    pub technique: Vec<Technique>,

    /// Desiccant configuration JSON (icebox-policy DesiccantConfig; missing fields keep their
    /// defaults).
    #[arg(long, value_name = "FILE")]
    pub desiccant_config: Option<PathBuf>,

    /// Hybrid keep-alive configuration JSON (icebox-policy HybridConfig; missing fields keep
    /// their defaults: 1-min bins over 4 h, 5th/99th percentiles, 10 % margins).
    #[arg(long, value_name = "FILE")]
    pub hybrid_config: Option<PathBuf>,

    /// Write summary.json, timeline.csv and PNG plots here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// With --out: skip the PNG plots.
    #[arg(long)]
    pub no_plots: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use icebox_core::units::GIB;

    #[test]
    fn the_command_is_consistent_and_parses_lists() {
        Args::command().debug_assert();
        let a = Args::try_parse_from([
            "icebox-sim",
            "--trace",
            "azure2019:x",
            "--node-memory",
            "1GiB,2GiB",
            "--sharing",
            "shared,isolate",
            "--keepalive",
            "ttl:5m,infinite",
            "--technique",
            "none,desiccant",
            "--busiest",
            "10m",
        ])
        .unwrap();
        assert_eq!(a.node_memory, [GIB, 2 * GIB]);
        assert_eq!(a.sharing, [SharingMode::Shared, SharingMode::Isolate]);
        assert_eq!(
            a.keepalive,
            [KeepAliveSpec::Ttl(300_000), KeepAliveSpec::Infinite]
        );
        assert_eq!(a.busiest, Some(600_000));
        let err = Args::try_parse_from([
            "icebox-sim",
            "--trace",
            "azure2019:x",
            "--sharing",
            "threads",
        ])
        .unwrap_err();
        assert!(err.to_string().contains("threads"));
        let a = Args::try_parse_from(["icebox-sim", "--trace", "azure2019:x"]).unwrap();
        assert_eq!(a.placement, PlacementPolicy::WarmHome);
        // The simulator's former own policies are gone: naming one says what exists.
        let err = Args::try_parse_from([
            "icebox-sim",
            "--trace",
            "azure2019:x",
            "--placement",
            "least-loaded",
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("least-loaded") && err.contains("warm-home, hash or round-robin"),
            "{err}"
        );
    }
}
