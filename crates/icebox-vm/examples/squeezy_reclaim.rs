//! Squeezy's Fig. 5 without the daemon: how long taking one instance's memory back from an
//! N:1 VM takes, per memory mode (squeezy, vanilla virtio-mem, balloon), partition size and
//! VM fullness. Per (mode, size) one backend with `--partitions` partitions; per fullness
//! level k (0..partitions-1 live neighbours) and repetition: the target instance and the k
//! neighbours grow their memory in turns, 16 MiB at a time, to `--fill` of their partitions
//! (so that, unbound, their pages interleave in guest memory as concurrent functions' do);
//! then the target is destroyed and its partition's reclaim report is one JSON line on
//! stdout (`--out` appends to a file too). Neighbours stay, holding their memory.
//!
//! cargo run --release -p icebox-vm --example squeezy_reclaim -- --sizes 512,2048

use clap::Parser;
use icebox_core::units::MIB;
use icebox_sandbox::{InstanceSpec, Runtimes, Sandbox, SandboxBackend};
use icebox_vm::shared::{Mode, ReclaimReport};
use icebox_vm::{AccelChoice, GuestImage, SharedBackend, SharedConfig, SharedSandbox};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    /// Memory modes, comma-separated.
    #[arg(
        long,
        default_value = "squeezy,virtio-mem,balloon",
        value_delimiter = ','
    )]
    modes: Vec<Mode>,
    /// Partition sizes in MiB, comma-separated.
    #[arg(long, default_value = "512,2048", value_delimiter = ',')]
    sizes: Vec<u64>,
    /// Partitions per VM: fullness levels are 1..=partitions instances of it in use.
    #[arg(long, default_value_t = 4)]
    partitions: u32,
    /// Share of its partition each instance writes (the rest is the runtime's headroom).
    #[arg(long, default_value_t = 0.8)]
    fill: f64,
    #[arg(long, default_value_t = 1)]
    repetitions: u32,
    /// Guest zeroing of allocated pages (init_on_alloc) for every mode: on or off (default:
    /// each mode's: off for squeezy only).
    #[arg(long)]
    guest_zeroing: Option<OnOff>,
    /// virtio-mem block size in MiB (default: the backend's).
    #[arg(long)]
    block_mib: Option<u64>,
    #[arg(long, default_value = "auto")]
    accel: AccelChoice,
    /// Guest image (default: the checkout's .tools/guest).
    #[arg(long)]
    image: Option<PathBuf>,
    /// State directory for the VMs (default: a temporary one).
    #[arg(long)]
    state: Option<PathBuf>,
    /// Also append every report line to this file.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OnOff {
    On,
    Off,
}

const MEMHOG: &str = include_str!("../../../functions/python/memhog.py");
const CHUNK_MIB: u64 = 16;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn spec(id: &str, partition_mib: u64) -> InstanceSpec {
    let runtimes = Runtimes::load(&repo().join("runtimes")).expect("the checkout's runtimes");
    InstanceSpec {
        id: id.to_string(),
        action: "fig5/memhog".into(),
        runtime: runtimes.resolve("python:3").unwrap().clone(),
        memory_limit_bytes: partition_mib * MIB,
        pids_max: 512,
        tmp_bytes: 16 * MIB,
        concurrency: 1,
        network: false,
        env: Vec::new(),
    }
}

async fn post(s: &Arc<dyn Sandbox>, path: &str, body: serde_json::Value) -> anyhow::Result<()> {
    let r = s.client().post_json(path, &body).await?;
    anyhow::ensure!(
        r.status == 200,
        "{path}: {} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    Ok(())
}

async fn hold(s: &Arc<dyn Sandbox>, mib: u64) -> anyhow::Result<()> {
    let deadline = std::time::SystemTime::now() + Duration::from_secs(600);
    let ms = deadline.duration_since(std::time::UNIX_EPOCH)?.as_millis();
    post(
        s,
        "/run",
        json!({"value": {"hold_mib": mib, "chunk_mib": CHUNK_MIB}, "activation_id": "fig5",
               "deadline": ms.to_string()}),
    )
    .await
}

async fn start(
    backend: &SharedBackend,
    id: &str,
    partition_mib: u64,
) -> anyhow::Result<Arc<dyn Sandbox>> {
    let s = backend.start(spec(id, partition_mib)).await?;
    post(
        &s,
        "/init",
        json!({"value": {"name": "memhog", "main": "main", "code": MEMHOG, "binary": false}}),
    )
    .await?;
    Ok(s)
}

fn shared(s: &Arc<dyn Sandbox>) -> &SharedSandbox {
    s.as_any().downcast_ref::<SharedSandbox>().unwrap()
}

/// Grows every instance to `mib` in turns, a chunk each per round.
async fn fill_in_turns(instances: &[Arc<dyn Sandbox>], mib: u64) -> anyhow::Result<()> {
    for s in instances {
        hold(s, 0).await?;
    }
    let mut held = 0;
    while held < mib {
        held = (held + CHUNK_MIB).min(mib);
        for s in instances {
            hold(s, held).await?;
        }
    }
    Ok(())
}

#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number; neighbour VMs of one experiment: a handful"
)]
async fn measure(
    args: &Args,
    mode: Mode,
    size_mib: u64,
    image: &Path,
    state: &Path,
    sink: &mut dyn FnMut(serde_json::Value),
) -> anyhow::Result<()> {
    let mut cfg = SharedConfig::new(state, image);
    cfg.accel = args.accel;
    cfg.mode = mode;
    cfg.partitions = args.partitions;
    cfg.guest_zeroing = args.guest_zeroing.map(|z| z == OnOff::On);
    if let Some(b) = args.block_mib {
        cfg.block_mib = b;
    }
    cfg.resize_timeout = Duration::from_secs(600);
    cfg.idle_vm_timeout = Duration::from_secs(3600);
    let backend = SharedBackend::new(cfg).await?;
    let fill_mib = ((size_mib as f64 * args.fill) as u64).max(CHUNK_MIB);
    let mut neighbours: Vec<Arc<dyn Sandbox>> = Vec::new();
    let result = async {
        for live in 0..args.partitions {
            while (neighbours.len() as u32) < live {
                let id = format!("fig5-n{}", neighbours.len());
                neighbours.push(start(&backend, &id, size_mib).await?);
            }
            for rep in 0..args.repetitions {
                let id = format!("fig5-t{live}-{rep}");
                let target = start(&backend, &id, size_mib).await?;
                let mut all = vec![target.clone()];
                all.extend(neighbours.iter().cloned());
                let filled = Instant::now();
                fill_in_turns(&all, fill_mib).await?;
                let fill_s = filled.elapsed().as_secs_f64();
                let began = Instant::now();
                target.destroy().await;
                let report: ReclaimReport = shared(&target)
                    .reclaimed()
                    .await
                    .ok_or_else(|| anyhow::anyhow!("no reclaim report for {id}"))?;
                let total_ms = began.elapsed().as_secs_f64() * 1000.0;
                sink(json!({
                    "mode": mode, "size_mib": size_mib, "partitions": args.partitions,
                    "live_neighbours": live, "fullness": f64::from(live + 1) / f64::from(args.partitions),
                    "repetition": rep, "fill_mib": fill_mib, "fill_s": fill_s,
                    "destroy_ms": total_ms, "block_mib": backend.config().block_mib,
                    "guest_zeroing": args.guest_zeroing.map(|z| z == OnOff::On).unwrap_or(mode.default_guest_zeroing()), "accel": format!("{:?}", backend.accel()),
                    "report": report,
                }));
            }
        }
        anyhow::Ok(())
    }
    .await;
    for n in neighbours {
        n.destroy().await;
    }
    backend.shutdown().await;
    result
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let image = args
        .image
        .clone()
        .unwrap_or_else(|| GuestImage::default_dir(&repo()));
    let tmp = tempfile::tempdir()?;
    let state = args
        .state
        .clone()
        .unwrap_or_else(|| tmp.path().to_path_buf());
    let mut out = match &args.out {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)?,
        ),
        None => None,
    };
    let mut sink = |line: serde_json::Value| {
        println!("{line}");
        if let Some(f) = out.as_mut() {
            let _ = writeln!(f, "{line}");
        }
    };
    for &mode in &args.modes {
        for &size in &args.sizes {
            eprintln!("squeezy_reclaim: {mode}, {size} MiB partitions");
            if let Err(e) = measure(&args, mode, size, &image, &state, &mut sink).await {
                // One failed configuration is reported and the others still run.
                sink(json!({"mode": mode, "size_mib": size, "error": format!("{e:#}")}));
            }
        }
    }
    Ok(())
}
