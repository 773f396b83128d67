//! VM snapshots end to end: a real Python instance in a real guest under QEMU, snapshotted
//! after `/init` and restored in every mode. Fails, not skips, without the guest image.

mod common;

use common::*;
use icebox_core::units::MIB;
use icebox_core::RestoreMode;
use icebox_sandbox_api::{Sandbox, SandboxBackend, Snapshots};
use icebox_vm::snapshot::{loadset_file, meta};
use icebox_vm::{VmBackend, VmSandbox};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Module state made at `/init`: a random token and 8 MiB of pseudo-random bytes, so a
/// restored instance proves it has the template's memory, not a fresh start.
const PY_STATEFUL: &str = r#"
import hashlib, os
TOKEN = os.urandom(8).hex()
DATA = hashlib.shake_256(TOKEN.encode()).digest(8 << 20)
RUNS = 0

def main(args):
    global RUNS
    RUNS += 1
    return {"token": TOKEN, "runs": RUNS, "digest": hashlib.sha256(DATA).hexdigest(),
            "echo": args.get("x")}
"#;

fn vm(sandbox: &Arc<dyn Sandbox>) -> &VmSandbox {
    sandbox.as_any().downcast_ref::<VmSandbox>().unwrap()
}

/// A snapshot of a Python instance after `/init` and one `/run`; returns what that run said.
async fn snapshot_python(backend: &VmBackend, id: &str, dir: &Path) -> Value {
    let template = backend.start(spec(id, "python:3", 128)).await.unwrap();
    init(&template, PY_STATEFUL).await;
    let (status, body) = run(&template, json!({"x": 0})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["runs"], 1);
    template.client().close_idle();
    let ram = vm(&template).snapshot_source().unwrap().ram_file.clone();
    assert!(ram.exists());
    let info = backend.snapshot(&template, dir).await.unwrap();
    assert_eq!(info.backend, "vm");
    assert!(info.memory_bytes > 8 * MIB, "{info:?}");
    // The template is gone with its RAM file.
    assert!(template.exit_cause().is_some());
    assert!(!ram.exists());
    for f in [meta::META_FILE, meta::MEMORY_FILE, meta::STATE_FILE] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    body
}

async fn restore(backend: &VmBackend, id: &str, dir: &Path, mode: RestoreMode) -> Arc<dyn Sandbox> {
    backend
        .restore(spec(id, "python:3", 128), dir, mode)
        .await
        .unwrap_or_else(|e| panic!("{mode:?} restore: {e}"))
}

/// The restored instance answers with the template's state, one run further.
async fn assert_continues(sandbox: &Arc<dyn Sandbox>, template: &Value, runs: u64) {
    let (status, body) = run(sandbox, json!({"x": runs})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["token"], template["token"]);
    assert_eq!(body["digest"], template["digest"]);
    assert_eq!(body["runs"], runs);
    assert_eq!(body["echo"], runs);
}

/// No QEMU, VM directory or RAM file of this state directory is left.
fn assert_nothing_left(state: &Path, backend: &VmBackend) {
    assert!(processes_mentioning(state).is_empty());
    assert_eq!(
        std::fs::read_dir(state.join("vm-instances"))
            .unwrap()
            .count(),
        0
    );
    assert!(backend.ram_files().is_empty(), "{:?}", backend.ram_files());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_snapshot_restores_in_every_mode_with_its_init_state() {
    let state = tempfile::tempdir().unwrap();
    let backend = backend(state.path()).await;
    let dir = state.path().join("snap");
    std::fs::create_dir(&dir).unwrap();
    let template = snapshot_python(&backend, "tpl", &dir).await;

    // Two lazy restores of one snapshot, side by side, each with its own memory.
    let (a, b) = tokio::join!(
        restore(&backend, "lazy-a", &dir, RestoreMode::Lazy),
        restore(&backend, "lazy-b", &dir, RestoreMode::Lazy)
    );
    assert_continues(&a, &template, 2).await;
    assert_continues(&a, &template, 3).await;
    assert_continues(&b, &template, 2).await;
    assert_ne!(vm(&a).vm().qemu.pid(), vm(&b).vm().qemu.pid());
    assert_eq!(vm(&a).guest_id(), "tpl");
    assert_eq!(a.restore_stats().unwrap()["mode"], "lazy");
    a.destroy().await;
    b.destroy().await;

    let eager = restore(&backend, "eager", &dir, RestoreMode::Eager).await;
    let stats = eager.restore_stats().unwrap();
    eprintln!("eager: {stats}");
    let data_pages = stats["prefetch_pages"].as_u64().unwrap();
    assert!(data_pages > 2048, "{stats}");
    assert_eq!(stats["loader"]["done"], true, "{stats}");
    assert_eq!(stats["loader"]["bytes"], data_pages * 4096, "{stats}");
    assert_continues(&eager, &template, 2).await;
    eager.destroy().await;

    // The first restore records; its loading set is what REAP and FaaSnap read.
    assert!(backend
        .restore(spec("early", "python:3", 128), &dir, RestoreMode::Faasnap)
        .await
        .is_err());
    let rec = restore(&backend, "rec", &dir, RestoreMode::Record).await;
    assert_continues(&rec, &template, 2).await;
    eprintln!("record: {}", rec.restore_stats().unwrap());
    let info = backend.finish_record(&rec, &dir).await.unwrap();
    eprintln!("loading set: {info:?}");
    assert!(info.working_set_pages > 1024, "{info:?}");
    // Regions merge across up to 32 pages of holes, so the set may hold a few zero pages.
    let memory_pages = std::fs::metadata(dir.join(meta::MEMORY_FILE))
        .unwrap()
        .len()
        / 4096;
    assert!(info.zero_pages < info.working_set_pages, "{info:?}");
    assert!(
        info.loading_set_pages > 0 && info.loading_set_pages < memory_pages,
        "{info:?}"
    );
    assert!(info.regions > 0 && info.groups > 1, "{info:?}");
    assert!(dir.join(loadset_file::LOADSET_FILE).is_file());
    assert!(
        backend.finish_record(&rec, &dir).await.is_err(),
        "finished once"
    );
    // The recorded instance goes on serving.
    assert_continues(&rec, &template, 3).await;
    rec.destroy().await;

    for (id, mode) in [("reap", RestoreMode::Reap), ("fsnap", RestoreMode::Faasnap)] {
        let s = restore(&backend, id, &dir, mode).await;
        assert_continues(&s, &template, 2).await;
        let stats = s.restore_stats().unwrap();
        eprintln!("{id}: {stats}");
        assert_eq!(stats["mode"], mode.as_str());
        assert_eq!(stats["prefetch_pages"], info.loading_set_pages, "{stats}");
        if mode == RestoreMode::Reap {
            assert_eq!(stats["loader"]["done"], true, "{stats}");
            assert_eq!(
                stats["loader"]["bytes"],
                info.loading_set_pages * 4096,
                "{stats}"
            );
        }
        assert!(backend.finish_record(&s, &dir).await.is_err());
        s.destroy().await;
    }
    assert_nothing_left(state.path(), &backend);
}

/// Copies a snapshot directory (its memory file stays sparse enough for a test).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::cast_possible_truncation,
    reason = "test bytes: only the low bits are wanted"
)]
async fn a_damaged_or_foreign_snapshot_is_refused_and_leaves_nothing() {
    let state = tempfile::tempdir().unwrap();
    let backend = backend(state.path()).await;
    let dir = state.path().join("snap");
    std::fs::create_dir(&dir).unwrap();
    snapshot_python(&backend, "tpl2", &dir).await;

    let refused =
        |why: &'static str, id: &'static str, kind: &'static str, mib: u64, d: PathBuf| {
            let backend = &backend;
            async move {
                let e = backend
                    .restore(spec(id, kind, mib), &d, RestoreMode::Lazy)
                    .await
                    .err()
                    .unwrap_or_else(|| panic!("{why}: restored"));
                e.to_string()
            }
        };
    // Another runtime, another memory size: not the VM the snapshot was taken of.
    let e = refused("runtime", "r1", "nodejs:20", 128, dir.clone()).await;
    assert!(e.contains("runtime is python"), "{e}");
    let e = refused("memory", "r2", "python:3", 256, dir.clone()).await;
    assert!(e.contains("VM memory"), "{e}");

    let damaged = |name: &str, f: &dyn Fn(&Path)| {
        let d = state.path().join(name);
        copy_dir(&dir, &d);
        f(&d);
        d
    };
    let other_image = damaged("image", &|d| {
        let path = d.join(meta::META_FILE);
        let mut m: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        m["fingerprint"]["image"]["rootfs.erofs"] = json!("0000");
        std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();
    });
    let e = refused("image", "r3", "python:3", 128, other_image).await;
    assert!(e.contains("another guest image"), "{e}");
    let truncated = damaged("trunc", &|d| {
        let f = std::fs::File::options()
            .write(true)
            .open(d.join(meta::MEMORY_FILE))
            .unwrap();
        f.set_len(f.metadata().unwrap().len() / 2).unwrap();
    });
    let e = refused("truncated memory", "r4", "python:3", 128, truncated).await;
    assert!(e.contains("memory image"), "{e}");
    let bad_state = damaged("state", &|d| {
        let path = d.join(meta::STATE_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
    });
    let e = refused("damaged state", "r5", "python:3", 128, bad_state).await;
    assert!(e.contains("damaged"), "{e}");
    // Garbage written into the RAM image, its size unchanged: into a chunk with data, and
    // into a hole. QEMU would map either into the guest without a word.
    let scribble = |d: &Path, data: bool| {
        use std::os::unix::fs::FileExt;
        let m: Value =
            serde_json::from_slice(&std::fs::read(d.join(meta::META_FILE)).unwrap()).unwrap();
        let sums = m["memory"]["crc32"]
            .as_object()
            .expect("chunk sums")
            .clone();
        let chunks = (m["memory"]["bytes"].as_u64().unwrap() >> 16) as usize;
        let chunk = if data {
            let keys: Vec<&String> = sums.keys().collect();
            keys[keys.len() / 2].parse::<u64>().unwrap()
        } else {
            (chunks / 2..chunks)
                .find(|c| !sums.contains_key(&c.to_string()))
                .expect("a hole") as u64
        };
        let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 13) as u8).collect();
        std::fs::File::options()
            .write(true)
            .open(d.join(meta::MEMORY_FILE))
            .unwrap()
            .write_all_at(&garbage, (chunk << 16) + 4096)
            .unwrap();
    };
    let in_data = damaged("scribbled", &|d| scribble(d, true));
    let e = refused("garbage in data", "r9", "python:3", 128, in_data).await;
    assert!(e.contains("fail their checksum"), "{e}");
    let in_hole = damaged("hole", &|d| scribble(d, false));
    let e = refused("garbage in a hole", "r10", "python:3", 128, in_hole).await;
    assert!(e.contains("fail their checksum"), "{e}");
    let bad_json = damaged("json", &|d| {
        std::fs::write(d.join(meta::META_FILE), b"{").unwrap()
    });
    refused("bad json", "r6", "python:3", 128, bad_json).await;
    let missing = damaged("missing", &|d| {
        std::fs::remove_file(d.join(meta::STATE_FILE)).unwrap()
    });
    refused("missing state", "r7", "python:3", 128, missing).await;
    let e = backend
        .restore(spec("r8", "python:3", 128), &dir, RestoreMode::Reap)
        .await
        .err()
        .expect("REAP without a loading set");
    assert!(e.to_string().contains("no loading set"), "{e}");

    // The intact snapshot still restores, and nothing of the refusals is left.
    let ok = restore(&backend, "ok", &dir, RestoreMode::Lazy).await;
    let (status, _) = run(&ok, json!({})).await;
    assert_eq!(status, 200);
    ok.destroy().await;
    assert_nothing_left(state.path(), &backend);
}
