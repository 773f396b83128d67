//! Measures the `vm` backend against the process backend (docs/vm.md, "Measured"):
//! boot to the agent's hello, cold start (VM boot → runtime ready → /init → first /run) for
//! Python and Node.js, warm /run latency through the host socket forwarder, idle memory from
//! the host (QEMU's USS/PSS/RSS) and from the guest. Medians of `--runs` runs.
//!
//! cargo run --release -p icebox-vm --example measure -- [--runs 5] [--warm 50]

use icebox_core::units::MIB;
use icebox_sandbox::process::{IsolationMode, ProcessBackend};
use icebox_sandbox::{InstanceSpec, Runtimes, Sandbox, SandboxBackend};
use icebox_vm::{AccelChoice, GuestImage, Vm, VmBackend, VmBackendConfig, VmConfig, VmPaths};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CODE: &[(&str, &str)] = &[
    ("python:3", "def main(args):\n    return {'ok': True}\n"),
    ("nodejs:20", "function main(args) { return {ok: true}; }\n"),
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn spec(repo: &Path, id: &str, kind: &str) -> InstanceSpec {
    let runtimes = Runtimes::load(&repo.join("runtimes")).unwrap();
    InstanceSpec {
        id: id.to_string(),
        action: "measure/x".into(),
        runtime: runtimes.resolve(kind).unwrap().clone(),
        memory_limit_bytes: 256 * MIB,
        pids_max: 512,
        tmp_bytes: 16 * MIB,
        concurrency: 1,
        network: false,
        env: Vec::new(),
    }
}

async fn call(s: &Arc<dyn Sandbox>, path: &str, body: serde_json::Value) {
    let r = s.client().post_json(path, &body).await.unwrap();
    assert_eq!(
        r.status,
        200,
        "{path}: {}",
        String::from_utf8_lossy(&r.body)
    );
}

struct Cold {
    start: f64,
    init: f64,
    first_run: f64,
    total: f64,
}

async fn cold_start(
    backend: &dyn SandboxBackend,
    s: InstanceSpec,
    code: &str,
) -> (Arc<dyn Sandbox>, Cold) {
    let t0 = Instant::now();
    let sb = backend.start(s).await.unwrap();
    let t1 = Instant::now();
    call(
        &sb,
        "/init",
        json!({"value": {"name": "m", "main": "main", "code": code, "binary": false}}),
    )
    .await;
    let t2 = Instant::now();
    call(&sb, "/run", json!({"value": {}})).await;
    let t3 = Instant::now();
    (
        sb,
        Cold {
            start: ms(t1 - t0),
            init: ms(t2 - t1),
            first_run: ms(t3 - t2),
            total: ms(t3 - t0),
        },
    )
}

async fn warm(sb: &Arc<dyn Sandbox>, n: usize) -> f64 {
    let mut v = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        call(sb, "/run", json!({"value": {}})).await;
        v.push(ms(t.elapsed()));
    }
    median(v)
}

fn mib(b: u64) -> f64 {
    b as f64 / MIB as f64
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1)?.parse().ok())
            .unwrap_or(default)
    };
    let (runs, warm_n) = (opt("--runs", 5), opt("--warm", 50));
    let repo: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap();
    let image_dir = GuestImage::default_dir(&repo);
    let state = tempfile::tempdir().unwrap();
    let mut cfg = VmBackendConfig::new(state.path(), &image_dir);
    cfg.accel = AccelChoice::Auto;
    let t = Instant::now();
    let vm_backend = VmBackend::new(cfg).await.unwrap();
    println!(
        "accelerator: {} (probe {:.0} ms)",
        vm_backend.accel().name(),
        ms(t.elapsed())
    );
    let image = vm_backend.image().clone();
    println!(
        "image: {} MiB rootfs, {:.1} s build (manifest)",
        image.manifest["bytes"]["rootfs.erofs"]
            .as_u64()
            .unwrap_or(0)
            / MIB,
        image.manifest["build_seconds"].as_f64().unwrap_or(0.0)
    );

    let mut boots = Vec::new();
    let mut guest_free = Vec::new();
    for i in 0..runs {
        let dir = state.path().join(format!("boot{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let t = Instant::now();
        let vm = Vm::boot(
            "qemu-system-x86_64",
            VmConfig::new("measure", vm_backend.accel(), 256 + 160, &image),
            VmPaths::new(&dir),
            Duration::from_secs(120),
        )
        .await
        .unwrap();
        boots.push(ms(t.elapsed()));
        let stats = vm.agent.stats().await.unwrap();
        guest_free.push(mib(
            stats.meminfo["MemTotal"] - stats.meminfo["MemAvailable"]
        ));
        vm.shutdown(Duration::from_secs(2)).await;
    }
    println!(
        "boot to agent hello: median {:.0} ms; guest memory in use after boot {:.1} MiB (MemTotal - MemAvailable)",
        median(boots),
        median(guest_free)
    );

    let proc_state = tempfile::tempdir().unwrap();
    let process = ProcessBackend::new(proc_state.path(), "measure", IsolationMode::Auto).unwrap();
    let mut results = Vec::new();
    for (kind, code) in CODE {
        for (label, backend) in [
            ("vm", &vm_backend as &dyn SandboxBackend),
            (process.name(), &process as &dyn SandboxBackend),
        ] {
            let mut colds = Vec::new();
            let mut warms = Vec::new();
            let mut mem = Vec::new();
            let mut guest = Vec::new();
            for i in 0..runs {
                let id = format!("{}-{label}-{i}", kind.replace(':', ""));
                let (sb, cold) = cold_start(backend, spec(&repo, &id, kind), code).await;
                warms.push(warm(&sb, warm_n).await);
                tokio::time::sleep(Duration::from_secs(2)).await;
                let m = sb.memory();
                mem.push((mib(m.uss), mib(m.pss), mib(m.rss)));
                if let Some(vm) = sb.as_any().downcast_ref::<icebox_vm::VmSandbox>() {
                    let (stats, mine) = vm.guest_stats().await.unwrap();
                    let mine = mine.unwrap();
                    guest.push((
                        mib(stats.meminfo["MemTotal"] - stats.meminfo["MemAvailable"]),
                        mib(mine.uss),
                        mib(mine.memory_current),
                    ));
                }
                sb.destroy().await;
                colds.push(cold);
            }
            let line = json!({
                "runtime": kind, "backend": label, "runs": runs,
                "cold_ms": {
                    "start_to_ready": median(colds.iter().map(|c| c.start).collect()),
                    "init": median(colds.iter().map(|c| c.init).collect()),
                    "first_run": median(colds.iter().map(|c| c.first_run).collect()),
                    "total": median(colds.iter().map(|c| c.total).collect()),
                },
                "warm_run_ms_median": median(warms),
                "idle_host_mib": {
                    "uss": median(mem.iter().map(|m| m.0).collect()),
                    "pss": median(mem.iter().map(|m| m.1).collect()),
                    "rss": median(mem.iter().map(|m| m.2).collect()),
                },
                "idle_guest_mib": if guest.is_empty() { serde_json::Value::Null } else { json!({
                    "guest_in_use": median(guest.iter().map(|g| g.0).collect()),
                    "instance_uss": median(guest.iter().map(|g| g.1).collect()),
                    "instance_cgroup": median(guest.iter().map(|g| g.2).collect()),
                })},
            });
            println!("{line}");
            results.push(line);
        }
    }
}
