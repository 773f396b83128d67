//! Measures cold starts from process snapshots: restore + first `/run`, per runtime and
//! function, in every restore mode, with the snapshot's files in the page cache (warm) and
//! dropped from it (cold: posix_fadvise(DONTNEED) on each file, not the machine's caches),
//! against a normal start (+ /init) and a bare `java -version`, all in one run. Needs root,
//! crun and the CRIU build (scripts/setup.sh).
//!
//!     cargo run --release -p icebox-sandbox --example snapshot_restore -- [REPS] [OUT.jsonl] [ONLY]
//!
//! Prints medians as a markdown table; OUT.jsonl (optional) gets every sample; ONLY limits the
//! run to functions whose name contains it.

use base64::Engine;
use icebox_core::units::MIB;
use icebox_sandbox::process::{IsolationMode, ProcessBackend};
use icebox_sandbox::{InstanceSpec, RestoreMode, Runtimes, Sandbox, SandboxBackend};
use icebox_snap::criu::Criu;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

const PY_HELLO: &str =
    "def main(args):\n    return {'greeting': 'hello ' + args.get('name', 'world')}\n";
/// FaaSnap's case: /init leaves 80 MiB the function never reads again and 32 MiB it reads,
/// in an order unrelated to addresses, on every /run.
const PY_BIG: &str = r#"
import random
COLD = [bytes([i % 251]) * 4096 for i in range(20000)]
HOT = [bytes([i % 253]) * 4096 + i.to_bytes(8, 'little') for i in range(8000)]
ORDER = list(range(len(HOT)))
random.Random(7).shuffle(ORDER)
def main(args):
    total = 0
    for i in ORDER:
        total += HOT[i][100]
    return {'blocks': len(HOT), 'sum': total}
"#;
const NODE_HELLO: &str =
    "function main(args) { return { greeting: 'hello ' + (args.name || 'world') }; }\n";
/// ~32 MiB of buffers made in /init, all read by every /run.
const NODE_BIG: &str = r#"
const blocks = [];
for (let i = 0; i < 8000; i++) blocks.push(Buffer.alloc(4096, i % 251));
function main(args) { let s = 0; for (const b of blocks) s += b[100] + b[4000]; return { blocks: blocks.length, sum: s }; }
"#;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Function {
    name: &'static str,
    kind: &'static str,
    init: Value,
    /// Snapshot after one /run (annotation `icebox.snapshot: "warm"`), not right after /init.
    warm: bool,
}

fn functions() -> Vec<Function> {
    let source = |code: &str| json!({"name": "bench", "main": "main", "code": code, "binary": false, "env": {}});
    let jar = std::fs::read(repo().join("examples/java/target/icebox-examples.jar"))
        .expect("build the Java examples (scripts/setup.sh)");
    let jar = base64::engine::general_purpose::STANDARD.encode(jar);
    let f = |name, kind, init, warm| Function {
        name,
        kind,
        init,
        warm,
    };
    let java = json!({"name": "bench", "main": "Hello", "code": jar, "binary": true, "env": {}});
    vec![
        f("python-hello", "python:3", source(PY_HELLO), false),
        f("python-32of112mb", "python:3", source(PY_BIG), false),
        f("node-hello", "nodejs:20", source(NODE_HELLO), false),
        f("node-32mb", "nodejs:20", source(NODE_BIG), false),
        f("java-hello", "java:17", java.clone(), false),
        f("java-hello-warm-snapshot", "java:17", java, true),
    ]
}

fn spec(runtimes: &Runtimes, id: &str, kind: &str) -> InstanceSpec {
    InstanceSpec {
        id: id.into(),
        action: "bench/snap".into(),
        runtime: runtimes.resolve(kind).unwrap().clone(),
        memory_limit_bytes: 256 * MIB,
        pids_max: 256,
        tmp_bytes: 16 * MIB,
        concurrency: 1,
        network: false,
        env: Vec::new(),
    }
}

/// Drops the snapshot's files from the page cache (only them).
fn drop_cache(dir: &Path) {
    for entry in walk(dir) {
        if let Ok(file) = std::fs::File::open(&entry) {
            let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed);
        }
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

async fn run(sandbox: &Arc<dyn Sandbox>) -> Value {
    let reply = sandbox
        .client()
        .post_json("/run", &json!({"value": {}}))
        .await
        .unwrap();
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    reply.json().unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(7);
    let out = args
        .get(2)
        .filter(|p| !p.is_empty())
        .map(|p| std::fs::File::create(p).unwrap());
    let only = args.get(3).cloned().unwrap_or_default();
    let state = tempfile::tempdir().unwrap();
    let tag = format!("snapbench{}", std::process::id());
    let mut backend = ProcessBackend::new(state.path(), &tag, IsolationMode::Crun).unwrap();
    let criu = Criu::discover(None, Some(&repo())).unwrap();
    let kdat = criu
        .path
        .parent()
        .map(|_| PathBuf::from("/dev/shm/icebox-criu/criu.kdat"));
    backend.enable_snapshots(criu).unwrap();
    let runtimes = Runtimes::load(&repo().join("runtimes")).unwrap();
    let snaps = backend.snapshots().unwrap();
    let mut results = Results {
        samples: BTreeMap::new(),
        out,
    };
    let mut n = 0;
    let mut next_id = || {
        n += 1;
        format!("i{n}")
    };

    for f in functions()
        .into_iter()
        .filter(|f| f.name.contains(only.as_str()))
    {
        let dir = tempfile::tempdir_in(state.path()).unwrap();
        // The template, and a normal cold start as the baseline (start + /init + /run).
        for rep in 0..=reps {
            let t0 = Instant::now();
            let sandbox = backend
                .start(spec(&runtimes, &next_id(), f.kind))
                .await
                .unwrap();
            let reply = sandbox
                .client()
                .post_json("/init", &json!({"value": f.init}))
                .await
                .unwrap();
            assert_eq!(
                reply.status,
                200,
                "{}",
                String::from_utf8_lossy(&reply.body)
            );
            let t1 = Instant::now();
            if rep == reps {
                if f.warm {
                    run(&sandbox).await;
                }
                snaps.snapshot(&sandbox, dir.path()).await.unwrap();
                break;
            }
            run(&sandbox).await;
            let t2 = Instant::now();
            sandbox.destroy().await;
            results.add(
                f.name,
                "start+init",
                "-",
                ms(t1 - t0),
                ms(t2 - t1),
                Value::Null,
            );
        }
        // Record once, then measure.
        let sandbox = snaps
            .restore(
                spec(&runtimes, &next_id(), f.kind),
                dir.path(),
                RestoreMode::Record,
            )
            .await
            .unwrap();
        run(&sandbox).await;
        let set = snaps.finish_record(&sandbox, dir.path()).await.unwrap();
        sandbox.destroy().await;
        eprintln!("{}: loading set {set:?}", f.name);
        let modes = [
            RestoreMode::Eager,
            RestoreMode::Lazy,
            RestoreMode::Record,
            RestoreMode::Reap,
            RestoreMode::Faasnap,
        ];
        for _ in 0..reps {
            for mode in modes {
                for cache in ["cold", "warm"] {
                    if cache == "cold" {
                        drop_cache(dir.path());
                    }
                    let t0 = Instant::now();
                    let sandbox = snaps
                        .restore(spec(&runtimes, &next_id(), f.kind), dir.path(), mode)
                        .await
                        .unwrap();
                    let t1 = Instant::now();
                    run(&sandbox).await;
                    let t2 = Instant::now();
                    let stats = sandbox.restore_stats().unwrap_or_default();
                    sandbox.destroy().await;
                    results.add(
                        f.name,
                        mode.as_str(),
                        cache,
                        ms(t1 - t0),
                        ms(t2 - t1),
                        stats,
                    );
                }
            }
            // criu probing the kernel on every run (no kdat cache), for the before/after.
            if let Some(kdat) = &kdat {
                let _ = std::fs::remove_file(kdat);
                let t0 = Instant::now();
                let sandbox = snaps
                    .restore(
                        spec(&runtimes, &next_id(), f.kind),
                        dir.path(),
                        RestoreMode::Eager,
                    )
                    .await
                    .unwrap();
                let t1 = Instant::now();
                run(&sandbox).await;
                let t2 = Instant::now();
                let _ = std::fs::remove_file(kdat);
                sandbox.destroy().await;
                results.add(
                    f.name,
                    "eager-no-kdat-cache",
                    "warm",
                    ms(t1 - t0),
                    ms(t2 - t1),
                    Value::Null,
                );
            }
        }
    }
    let mut java = Vec::new();
    for _ in 0..reps {
        let t0 = Instant::now();
        let status = std::process::Command::new("/usr/bin/java")
            .arg("-version")
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        java.push(ms(t0.elapsed()));
    }
    backend.shutdown().await;

    println!("| function | mode | page cache | restore ms | first /run ms | total ms |");
    println!("| --- | --- | --- | ---: | ---: | ---: |");
    for ((f, mode, cache), v) in &results.samples {
        println!(
            "| {f} | {mode} | {cache} | {:.1} | {:.1} | {:.1} |",
            median(v.iter().map(|s| s.0).collect()),
            median(v.iter().map(|s| s.1).collect()),
            median(v.iter().map(|s| s.2).collect())
        );
    }
    println!(
        "\n`java -version`: median {:.1} ms over {reps} runs",
        median(java)
    );
}

/// (function, mode, page cache) → (restore, first run, total) in ms.
type Samples = BTreeMap<(String, String, String), Vec<(f64, f64, f64)>>;

struct Results {
    samples: Samples,
    out: Option<std::fs::File>,
}

impl Results {
    fn add(
        &mut self,
        f: &str,
        mode: &str,
        cache: &str,
        restore: f64,
        first_run: f64,
        extra: Value,
    ) {
        let key = (f.to_string(), mode.to_string(), cache.to_string());
        self.samples
            .entry(key)
            .or_default()
            .push((restore, first_run, restore + first_run));
        if let Some(out) = self.out.as_mut() {
            use std::io::Write;
            let line = json!({"function": f, "mode": mode, "cache": cache, "restore_ms": restore,
                              "first_run_ms": first_run, "stats": extra});
            writeln!(out, "{line}").unwrap();
        }
    }
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
