//! VM snapshot restores per mode without the daemon (FaaSnap's Fig. 7 "read-list" shape): a
//! Python instance whose `/init` fills `--mib` MiB of memory is snapshotted; its first restore
//! records the loading set with a `/run` that reads every page of it; then, per round and mode,
//! the snapshot's files are dropped from the page cache (filled for `cached`), the VM restored
//! and the same `/run` timed. Reports medians of the restore, the run, and the restored QEMU's
//! major faults and disk reads.
//!
//! cargo run --release -p icebox-vm --example vm_restore -- [--runs 3] [--mib 64]

use icebox_core::units::{MIB, MIB_USIZE};
use icebox_core::RestoreMode;
use icebox_sandbox::{InstanceSpec, Runtimes, Sandbox, SandboxBackend, Snapshots};
use icebox_vm::snapshot::memfile;
use icebox_vm::{AccelChoice, GuestImage, VmBackend, VmBackendConfig};
use serde_json::json;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

const CODE: &str = "import os\nDATA = os.urandom(int(os.environ.get('MIB', '64')) << 20)\ndef main(args):\n    return {'pages': len(DATA[::4096])}\n";

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn spec(repo: &Path, id: &str, mib: u64) -> InstanceSpec {
    let runtimes = Runtimes::load(&repo.join("runtimes")).unwrap();
    InstanceSpec {
        id: id.to_string(),
        action: "measure/restore".into(),
        runtime: runtimes.resolve("python:3").unwrap().clone(),
        memory_limit_bytes: (mib + 128) * MIB,
        pids_max: 512,
        tmp_bytes: 16 * MIB,
        concurrency: 1,
        network: false,
        env: vec![("MIB".into(), mib.to_string())],
    }
}

async fn post(s: &Arc<dyn Sandbox>, path: &str, body: serde_json::Value) -> f64 {
    let t = Instant::now();
    let r = s.client().post_json(path, &body).await.unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    t.elapsed().as_secs_f64() * 1000.0
}

/// Major faults and bytes read from disk by a process since it started.
fn paging(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let majflt = stat
        .rfind(')')
        .and_then(|i| stat[i + 2..].split_whitespace().nth(9)?.parse().ok())
        .unwrap_or(f64::NAN);
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    let read = io
        .lines()
        .find_map(|l| l.strip_prefix("read_bytes:")?.trim().parse::<f64>().ok())
        .unwrap_or(f64::NAN);
    (majflt, read / MIB as f64)
}

fn files(dir: &Path) -> Vec<File> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| File::open(e.path()).unwrap())
        .collect()
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
    let (runs, mib) = (opt("--runs", 3), opt("--mib", 64));
    let repo: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut cfg = VmBackendConfig::new(state.path(), &GuestImage::default_dir(&repo));
    cfg.accel = AccelChoice::Auto;
    let backend = VmBackend::new(cfg).await.unwrap();
    let dir = state.path().join("snap");
    std::fs::create_dir(&dir).unwrap();

    let template = backend.start(spec(&repo, "tpl", mib)).await.unwrap();
    let init = json!({"value": {"name": "r", "main": "main", "code": CODE, "binary": false}});
    post(&template, "/init", init).await;
    template.client().close_idle();
    let info = backend.snapshot(&template, &dir).await.unwrap();
    eprintln!("snapshot: {info:?}");
    for f in files(&dir) {
        memfile::drop_cache(&f).unwrap();
    }
    let rec = backend
        .restore(spec(&repo, "rec", mib), &dir, RestoreMode::Record)
        .await
        .unwrap();
    post(&rec, "/run", json!({"value": {}})).await;
    let set = backend.finish_record(&rec, &dir).await.unwrap();
    rec.destroy().await;
    eprintln!("loading set: {set:?}");

    let modes = ["lazy", "eager", "reap", "faasnap", "cached"];
    let mut samples: Vec<Vec<(f64, f64, f64, f64)>> = vec![Vec::new(); modes.len()];
    for round in 0..runs {
        for (i, name) in modes.iter().enumerate() {
            let mode: RestoreMode = if *name == "cached" {
                RestoreMode::Lazy
            } else {
                name.parse().unwrap()
            };
            for f in files(&dir) {
                if *name == "cached" {
                    let len = f.metadata().unwrap().len();
                    let mut buf = vec![0u8; MIB_USIZE];
                    memfile::read_into_cache(&f, 0, len, &mut buf, &|| false).unwrap();
                } else {
                    memfile::drop_cache(&f).unwrap();
                }
            }
            let t = Instant::now();
            let s = backend
                .restore(spec(&repo, &format!("r{round}{name}"), mib), &dir, mode)
                .await
                .unwrap();
            let restore = t.elapsed().as_secs_f64() * 1000.0;
            let run = post(&s, "/run", json!({"value": {}})).await;
            let (majflt, read) = paging(s.pids()[0]);
            s.destroy().await;
            samples[i].push((restore, run, majflt, read));
            eprintln!("round {round} {name}: restore {restore:.0} ms, run {run:.0} ms, {majflt} major faults, {read:.0} MiB read");
        }
    }
    for (name, v) in modes.iter().zip(samples) {
        let col = |f: fn(&(f64, f64, f64, f64)) -> f64| median(v.iter().map(f).collect());
        println!(
            "{}",
            json!({"mode": name, "mib": mib, "runs": runs,
                "restore_ms": col(|x| x.0), "run_ms": col(|x| x.1), "total_ms": col(|x| x.0 + x.1),
                "qemu_major_faults": col(|x| x.2), "qemu_read_mib": col(|x| x.3)})
        );
    }
}
