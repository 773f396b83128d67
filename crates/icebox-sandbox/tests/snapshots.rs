//! Snapshots of real crun instances with real CRIU: Python and Node.js actions with state set
//! in `/init`, restored in every mode. They need root, crun, cgroups and the CRIU build
//! (scripts/setup.sh provides all of them) and fail without them.

use icebox_core::units::MIB;
use icebox_sandbox::cgroup::CgroupRoot;
use icebox_sandbox::process::{IsolationMode, ProcessBackend};
use icebox_sandbox::{InstanceSpec, RestoreMode, Runtimes, Sandbox, SandboxBackend};
use icebox_snap::criu::Criu;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const PYTHON_ACTION: &str = r#"
import hashlib, mmap, os, socket, subprocess
BLOB = bytes(range(256)) * 40000
DIGEST = hashlib.sha256(BLOB).hexdigest()
MAPPED = mmap.mmap(-1, 4 << 20, flags=mmap.MAP_PRIVATE)
MAPPED.write(b"\x5a" * (4 << 20))
COUNT = [0]

def forked_digest():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, hashlib.sha256(BLOB).hexdigest().encode())
        os._exit(0)
    os.close(w)
    got = os.read(r, 64).decode()
    os.close(r)
    os.waitpid(pid, 0)
    return got == DIGEST

def freed():
    half = 2 << 20
    MAPPED.madvise(mmap.MADV_DONTNEED, 0, half)
    zeroed = MAPPED[:half].count(0) == half and MAPPED[half:].count(0x5A) == half
    MAPPED[:half] = b"\x33" * half
    return zeroed and MAPPED[:half].count(0x33) == half

def loopback():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    server.accept()[0].sendall(b"x")
    return client.recv(1) == b"x"

def main(args):
    COUNT[0] += 1
    print("run", COUNT[0])
    out = {"count": COUNT[0], "ok": hashlib.sha256(BLOB).hexdigest() == DIGEST,
           "loopback": loopback()}
    if args.get("fork"):
        out["child"] = subprocess.run(["/usr/bin/python3", "-c", "print(6*7)"],
                                      capture_output=True, text=True).stdout.strip()
        out["forked_ok"] = forked_digest()
    if args.get("free"):
        out["freed_ok"] = freed()
    return out
"#;

const NODE_ACTION: &str = r#"
const crypto = require('crypto');
const blob = Buffer.alloc(8 << 20, 7);
const digest = crypto.createHash('sha256').update(blob).digest('hex');
let count = 0;
function main(args) {
  count += 1;
  const out = { count, ok: crypto.createHash('sha256').update(blob).digest('hex') === digest };
  if (args.fork) {
    out.child = require('child_process').execFileSync('/usr/bin/node', ['-e', 'console.log(6*7)']).toString().trim();
  }
  return out;
}
"#;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Node {
    backend: ProcessBackend,
    runtimes: Runtimes,
    tag: String,
    _state: tempfile::TempDir,
}

fn node() -> Node {
    assert_eq!(
        rustix::process::geteuid().as_raw(),
        0,
        "snapshot tests need root"
    );
    let state = tempfile::tempdir().unwrap();
    let tag = format!("snaptest{}x{}", std::process::id(), rand_suffix());
    let mut backend = ProcessBackend::new(state.path(), &tag, IsolationMode::Crun)
        .expect("crun isolation (root, crun, cgroups) is required");
    let criu = Criu::discover(None, Some(&repo())).expect("run scripts/criu/build.sh");
    backend.enable_snapshots(criu).unwrap();
    let runtimes = Runtimes::load(&repo().join("runtimes")).unwrap();
    Node {
        backend,
        runtimes,
        tag,
        _state: state,
    }
}

fn rand_suffix() -> u32 {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Node {
    fn spec(&self, id: &str, kind: &str) -> InstanceSpec {
        InstanceSpec {
            id: id.into(),
            action: "test/snap".into(),
            runtime: self.runtimes.resolve(kind).unwrap().clone(),
            memory_limit_bytes: 256 * MIB,
            pids_max: 64,
            tmp_bytes: 16 * MIB,
            concurrency: 1,
            network: false,
            env: Vec::new(),
        }
    }

    /// Starts an instance, sends /init, and snapshots it into `dir`.
    async fn template(&self, kind: &str, code: &str, dir: &Path) {
        let sandbox = self
            .backend
            .start(self.spec("template", kind))
            .await
            .unwrap();
        let init = json!({"value": {"name": "snap", "main": "main", "code": code, "binary": false, "env": {}}});
        let reply = sandbox.client().post_json("/init", &init).await.unwrap();
        assert_eq!(reply.status, 200, "{:?}", reply.json());
        let snaps = self.backend.snapshots().expect("snapshots are on");
        let info = snaps.snapshot(&sandbox, dir).await.unwrap();
        assert_eq!(info.backend, "crun");
        assert!(info.memory_bytes > MIB, "{info:?}");
        assert!(sandbox.exit_cause().is_some() || sandbox.pids().is_empty());
        self.assert_gone("template");
    }

    async fn restore(
        &self,
        id: &str,
        kind: &str,
        dir: &Path,
        mode: RestoreMode,
    ) -> Arc<dyn Sandbox> {
        let snaps = self.backend.snapshots().unwrap();
        snaps
            .restore(self.spec(id, kind), dir, mode)
            .await
            .unwrap_or_else(|e| panic!("restore {mode:?}: {e}"))
    }

    fn cgroup_paths(&self, id: &str) -> Vec<PathBuf> {
        let root = CgroupRoot::detect().unwrap().unwrap();
        root.open(&format!("icebox-{}/{id}", self.tag)).paths()
    }

    /// Nothing of instance `id` is left: no cgroup (so no process), no instance directory.
    fn assert_gone(&self, id: &str) {
        for path in self.cgroup_paths(id) {
            assert!(!path.exists(), "cgroup {} left behind", path.display());
        }
        let dir = self._state.path().join("instances").join(id);
        assert!(!dir.exists(), "{} left behind", dir.display());
    }

    async fn shutdown(self) {
        self.backend.shutdown().await;
    }
}

impl Drop for Node {
    /// Also after a failed assertion: every process and cgroup of this node goes.
    fn drop(&mut self) {
        let root = CgroupRoot::detect().unwrap().unwrap();
        if let Err(e) = root.open(&format!("icebox-{}", self.tag)).remove() {
            eprintln!("cleanup of icebox-{} failed: {e}", self.tag);
        }
    }
}

async fn run(sandbox: &Arc<dyn Sandbox>, args: Value) -> Value {
    let reply = tokio::time::timeout(
        Duration::from_secs(60),
        sandbox.client().post_json("/run", &json!({"value": args})),
    )
    .await
    .expect("/run answered")
    .unwrap();
    assert_eq!(
        reply.status,
        200,
        "{:?}",
        String::from_utf8_lossy(&reply.body)
    );
    reply.json().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_snapshot_restores_in_every_mode() {
    let node = node();
    let snap = tempfile::tempdir().unwrap();
    node.template("python:3", PYTHON_ACTION, snap.path()).await;

    // Eager, CRIU's lazy-pages daemon, and a recorded first run.
    for (n, mode) in [RestoreMode::Eager, RestoreMode::Lazy, RestoreMode::Record]
        .into_iter()
        .enumerate()
    {
        let id = format!("r{n}");
        let sandbox = node.restore(&id, "python:3", snap.path(), mode).await;
        let marks = sandbox.logs().marks();
        let out = run(&sandbox, json!({"fork": true, "free": true})).await;
        assert_eq!(
            out["count"], 1,
            "{mode:?}: the init state is there, no run before"
        );
        assert_eq!(out["ok"], true, "{mode:?}: {out}");
        assert_eq!(
            out["loopback"], true,
            "{mode:?}: 127.0.0.1 works as before: {out}"
        );
        assert_eq!(out["child"], "42", "{mode:?}: {out}");
        assert_eq!(out["forked_ok"], true, "{mode:?}: {out}");
        assert_eq!(out["freed_ok"], true, "{mode:?}: {out}");
        let logs = sandbox
            .logs()
            .take_after(marks, Duration::from_secs(2))
            .await;
        assert!(
            logs.iter().any(|l| l.contains("run 1")),
            "{mode:?}: output reaches the new pipes: {logs:?}"
        );
        let stats = sandbox.restore_stats().unwrap();
        assert_eq!(stats["mode"], mode.as_str());
        if mode == RestoreMode::Record {
            let set = node
                .backend
                .snapshots()
                .unwrap()
                .finish_record(&sandbox, snap.path())
                .await
                .unwrap();
            assert!(set.working_set_pages > 100, "{set:?}");
            assert!(set.loading_set_pages > 0 && set.regions > 0, "{set:?}");
            assert!(stats["pager"]["faults"].as_u64().unwrap() > 100, "{stats}");
        }
        sandbox.destroy().await;
        node.assert_gone(&id);
    }

    // With the loading set: FaaSnap and REAP, and two restores from one snapshot at once.
    for mode in [RestoreMode::Faasnap, RestoreMode::Reap] {
        let a = node.restore("a", "python:3", snap.path(), mode).await;
        let b = node.restore("b", "python:3", snap.path(), mode).await;
        assert_eq!(run(&a, json!({})).await["count"], 1);
        let out = run(&a, json!({"fork": true, "free": true})).await;
        assert_eq!(out["count"], 2, "{mode:?}: {out}");
        assert_eq!(out["ok"], true);
        assert_eq!(out["forked_ok"], true, "{mode:?}: {out}");
        assert_eq!(out["freed_ok"], true, "{mode:?}: {out}");
        let out = run(&b, json!({})).await;
        assert_eq!(out["count"], 1, "{mode:?}: restores are independent");
        assert_eq!(out["ok"], true);
        let stats = a.restore_stats().unwrap();
        assert!(
            stats["pager"]["loadset_pages"].as_u64().unwrap() > 0,
            "{stats}"
        );
        a.destroy().await;
        b.destroy().await;
        node.assert_gone("a");
        node.assert_gone("b");
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_snapshot_restores_and_spawns_children() {
    let node = node();
    let snap = tempfile::tempdir().unwrap();
    node.template("nodejs:20", NODE_ACTION, snap.path()).await;
    for (n, mode) in [RestoreMode::Eager, RestoreMode::Lazy, RestoreMode::Record]
        .into_iter()
        .enumerate()
    {
        let id = format!("n{n}");
        let sandbox = node.restore(&id, "nodejs:20", snap.path(), mode).await;
        let out = run(&sandbox, json!({"fork": true})).await;
        assert_eq!(out["count"], 1, "{mode:?}: {out}");
        assert_eq!(out["ok"], true, "{mode:?}: {out}");
        assert_eq!(out["child"], "42", "{mode:?}: {out}");
        if mode == RestoreMode::Record {
            node.backend
                .snapshots()
                .unwrap()
                .finish_record(&sandbox, snap.path())
                .await
                .unwrap();
        }
        sandbox.destroy().await;
        node.assert_gone(&id);
    }
    for mode in [RestoreMode::Faasnap, RestoreMode::Reap] {
        let sandbox = node.restore("f", "nodejs:20", snap.path(), mode).await;
        let out = run(&sandbox, json!({"fork": true})).await;
        assert_eq!(
            (out["count"].clone(), out["ok"].clone()),
            (json!(1), json!(true)),
            "{mode:?}: {out}"
        );
        sandbox.destroy().await;
        node.assert_gone("f");
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_or_foreign_snapshot_is_refused() {
    let node = node();
    let snap = tempfile::tempdir().unwrap();
    node.template("python:3", PYTHON_ACTION, snap.path()).await;
    let snaps = node.backend.snapshots().unwrap();
    let refused = |e: icebox_sandbox::SandboxError| e.to_string();

    // No loading set recorded yet.
    let err = refused(
        snaps
            .restore(
                node.spec("x", "python:3"),
                snap.path(),
                RestoreMode::Faasnap,
            )
            .await
            .err()
            .unwrap(),
    );
    assert!(err.contains("loading set"), "{err}");
    node.assert_gone("x");

    // Another shape of instance (memory limit).
    let mut spec = node.spec("x", "python:3");
    spec.memory_limit_bytes = 512 * MIB;
    let err = refused(
        snaps
            .restore(spec, snap.path(), RestoreMode::Eager)
            .await
            .err()
            .unwrap(),
    );
    assert!(err.contains("started differently"), "{err}");

    // A truncated pages image.
    let images = snap.path().join("criu");
    let pages = std::fs::read_dir(&images)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("pages-")
        })
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let len = std::fs::metadata(&pages).unwrap().len();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&pages)
        .unwrap();
    file.set_len(len - 4096).unwrap();
    let err = refused(
        snaps
            .restore(node.spec("x", "python:3"), snap.path(), RestoreMode::Eager)
            .await
            .err()
            .unwrap(),
    );
    assert!(err.contains("bytes"), "{err}");
    node.assert_gone("x");
    file.set_len(len).unwrap();

    // A missing image and a corrupt snapshot.json.
    std::fs::rename(images.join("pstree.img"), images.join("pstree.old")).unwrap();
    let err = refused(
        snaps
            .restore(node.spec("x", "python:3"), snap.path(), RestoreMode::Record)
            .await
            .err()
            .unwrap(),
    );
    assert!(err.contains("pstree.img"), "{err}");
    std::fs::write(snap.path().join("snapshot.json"), b"{").unwrap();
    let err = refused(
        snaps
            .restore(node.spec("x", "python:3"), snap.path(), RestoreMode::Eager)
            .await
            .err()
            .unwrap(),
    );
    assert!(err.contains("snapshot.json"), "{err}");
    node.assert_gone("x");
    node.shutdown().await;
}
