//! Does giving every VM a shared RAM file on /dev/shm (so any instance can be snapshotted)
//! slow normal VMs? Python instances with anonymous RAM and with the RAM file, interleaved:
//! start → ready, /init, first /run, warm /run, a /run that touches fresh memory (guest page
//! faults that reach the host as first touches of RAM), host memory. Medians of `--runs`.
//!
//! Variants run in turn, the order reversed every other round. `--ram-dirs` adds variants
//! with the RAM file in other directories (a tmpfs mounted with `huge=within_size`, say).
//!
//! cargo run --release -p icebox-vm --example vm_ram -- [--runs 5] [--warm 20] [--touch-mib 64]
//!     [--ram-dirs DIR,DIR]

use icebox_core::units::MIB;
use icebox_sandbox::{InstanceSpec, Runtimes, Sandbox, SandboxBackend};
use icebox_vm::{AccelChoice, GuestImage, VmBackend, VmBackendConfig};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

const CODE: &str = "def main(args):\n    n = args.get('mib', 0) << 20\n    b = bytearray(n)\n    for i in range(0, n, 4096):\n        b[i] = 1\n    return {'ok': True}\n";

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn spec(repo: &Path, id: &str) -> InstanceSpec {
    let runtimes = Runtimes::load(&repo.join("runtimes")).unwrap();
    InstanceSpec {
        id: id.to_string(),
        action: "measure/ram".into(),
        runtime: runtimes.resolve("python:3").unwrap().clone(),
        memory_limit_bytes: 256 * MIB,
        pids_max: 512,
        tmp_bytes: 16 * MIB,
        concurrency: 1,
        network: false,
        env: Vec::new(),
    }
}

async fn timed(s: &Arc<dyn Sandbox>, path: &str, body: serde_json::Value) -> f64 {
    let t = Instant::now();
    let r = s.client().post_json(path, &body).await.unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    t.elapsed().as_secs_f64() * 1000.0
}

#[derive(Default)]
struct Samples {
    start: Vec<f64>,
    init: Vec<f64>,
    first_run: Vec<f64>,
    warm: Vec<f64>,
    touch: Vec<f64>,
    uss_mib: Vec<f64>,
    /// Of QEMU's memory, in transparent huge pages (AnonHugePages + ShmemPmdMapped + FilePmdMapped).
    huge_mib: Vec<f64>,
}

fn huge_mib(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let kib: u64 = text
        .lines()
        .filter(|l| {
            l.starts_with("AnonHugePages:")
                || l.starts_with("ShmemPmdMapped:")
                || l.starts_with("FilePmdMapped:")
        })
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    kib as f64 / 1024.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str, default: u64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1)?.parse().ok())
            .unwrap_or(default)
    };
    let (runs, warm_n, touch) = (opt("--runs", 5), opt("--warm", 20), opt("--touch-mib", 64));
    let repo: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap();
    let image_dir = GuestImage::default_dir(&repo);
    let extra: Vec<PathBuf> = args
        .iter()
        .position(|a| a == "--ram-dirs")
        .and_then(|i| args.get(i + 1))
        .map(|v| v.split(',').map(PathBuf::from).collect())
        .unwrap_or_default();
    let mut ram_dirs: Vec<(String, Option<PathBuf>)> = vec![
        ("anonymous".into(), None),
        ("/dev/shm".into(), Some(PathBuf::from("/dev/shm"))),
    ];
    ram_dirs.extend(
        extra
            .into_iter()
            .map(|d| (d.display().to_string(), Some(d))),
    );
    let mut variants = Vec::new();
    for (label, ram_dir) in ram_dirs {
        let state = tempfile::tempdir().unwrap();
        let mut cfg = VmBackendConfig::new(state.path(), &image_dir);
        cfg.accel = AccelChoice::Auto;
        cfg.ram_dir = ram_dir;
        let backend = VmBackend::new(cfg).await.unwrap();
        variants.push((label, backend, state, Samples::default()));
    }
    for i in 0..runs {
        // ABBA: neither variant always runs first.
        variants.reverse();
        for (label, backend, _, s) in variants.iter_mut() {
            let t = Instant::now();
            let sb = backend
                .start(spec(&repo, &format!("ram{i}")))
                .await
                .unwrap();
            s.start.push(t.elapsed().as_secs_f64() * 1000.0);
            let init =
                json!({"value": {"name": "m", "main": "main", "code": CODE, "binary": false}});
            s.init.push(timed(&sb, "/init", init).await);
            s.first_run
                .push(timed(&sb, "/run", json!({"value": {}})).await);
            let mut warm = Vec::new();
            for _ in 0..warm_n {
                warm.push(timed(&sb, "/run", json!({"value": {}})).await);
            }
            s.warm.push(median(warm));
            s.touch
                .push(timed(&sb, "/run", json!({"value": {"mib": touch}})).await);
            s.uss_mib.push(sb.memory().uss as f64 / MIB as f64);
            s.huge_mib.push(huge_mib(sb.pids()[0]));
            sb.destroy().await;
            eprintln!("run {i} {label} done");
        }
    }
    for (label, backend, _, s) in &variants {
        println!(
            "{}",
            json!({
                "ram": label, "accel": backend.accel().name(), "runs": runs,
                "start_to_ready_ms": median(s.start.clone()),
                "init_ms": median(s.init.clone()),
                "first_run_ms": median(s.first_run.clone()),
                "warm_run_ms": median(s.warm.clone()),
                "touch_run_ms": median(s.touch.clone()),
                "touch_mib": touch,
                "host_uss_mib": median(s.uss_mib.clone()),
                "host_huge_page_mib": median(s.huge_mib.clone()),
            })
        );
    }
}
