//! Process snapshots (docs/snapshots.md) against the real daemon, CRIU and runtimes: an action
//! with `icebox.snapshot` is snapshotted in the background, its next cold starts are restores
//! (the first recorded, the next prefetched with the loading set), restored siblings do not
//! share random state, and a damaged or foreign snapshot falls back to a normal start, says
//! so and is rebuilt. Snapshot files are the daemon user's alone, and a snapshot that keeps
//! failing is rebuilt when asked.

use icebox_integration::{wait_for, Activation, Auth, Daemon, StateDir, AUTH};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Module state set by init, and a random number per activation.
const PY_RANDOM: &str = r#"
import os
import random
COUNT = sum(range(1000))

def main(args):
    return {"count": COUNT, "random": random.random(),
            "api_host": os.environ.get("__OW_API_HOST")}
"#;

const NODE_RANDOM: &str = r#"
const COUNT = Array.from({ length: 1000 }, (_, i) => i).reduce((a, b) => a + b, 0);
function main() { return { count: COUNT, random: Math.random() }; }
"#;

/// 24 MiB of pseudo-random bytes made by init, and their hash: every activation says whether
/// its memory is still what init made.
const PY_MEMORY: &str = r#"
import hashlib
import random
DATA = bytearray(random.Random(7).randbytes(24 << 20))
DIGEST = hashlib.sha256(DATA).hexdigest()

def main(args):
    return {"intact": hashlib.sha256(DATA).hexdigest() == DIGEST}
"#;

fn deploy_snapshotted(d: &Daemon, name: &str, kind: &str, code: &str, extra: &[(&str, Value)]) {
    let mut annotations = vec![json!({"key": "icebox.snapshot", "value": true})];
    annotations.extend(extra.iter().map(|(k, v)| json!({"key": k, "value": v})));
    let body = json!({"exec": {"kind": kind, "code": code}, "annotations": annotations});
    d.request(
        "PUT",
        &format!("{}?overwrite=true", icebox_integration::action_path(name)),
        Auth::Key(AUTH),
        Some(&serde_json::to_vec(&body).unwrap()),
    )
    .expect(200);
}

fn snapshot_of(d: &Daemon, name: &str) -> Option<Value> {
    d.get_json("/icebox/v1/snapshots")
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["action"] == format!("guest/{name}"))
        .cloned()
}

fn wait_ready(d: &Daemon, name: &str) -> Value {
    wait_for("the snapshot to be ready", Duration::from_secs(60), || {
        snapshot_of(d, name).filter(|s| s["state"] == "ready")
    })
}

/// Evicts every idle instance of the action, so the next invocation is a cold start.
fn evict_all(d: &Daemon, name: &str) {
    for i in d.instances() {
        if i["action"] == format!("guest/{name}") {
            let id = i["id"].as_str().unwrap();
            d.request(
                "DELETE",
                &format!("/icebox/v1/instances/{id}"),
                Auth::Key(AUTH),
                None,
            )
            .expect(200);
        }
    }
}

fn cold(d: &Daemon, name: &str) -> Activation {
    evict_all(d, name);
    let a = d.invoke(name, json!({})).expect_success();
    assert_eq!(a.start_kind(), "cold", "{a:?}");
    a
}

fn restore_mode(a: &Activation) -> Option<&str> {
    a.annotation("icebox.restore").and_then(Value::as_str)
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn snapshot_files(state: &StateDir, suffix: &str) -> Vec<PathBuf> {
    files(&state.path().join("snapshots"))
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect()
}

#[test]
fn a_snapshotted_action_is_restored_recorded_then_prefetched_and_siblings_differ() {
    let d = Daemon::start(&["--prewarm", "none"]);
    deploy_snapshotted(&d, "rnd", "python:3", PY_RANDOM, &[]);
    let ready = wait_ready(&d, "rnd");
    assert_eq!(ready["isolation"], "process");
    assert!(
        ready["snapshot"]["memory_bytes"].as_u64().unwrap() > 0,
        "{ready}"
    );

    let recorded = cold(&d, "rnd");
    assert_eq!(restore_mode(&recorded), Some("record"), "{recorded:?}");
    assert_eq!(recorded.result()["count"], 499_500);
    wait_for("the loading set", Duration::from_secs(30), || {
        snapshot_of(&d, "rnd").filter(|s| s.get("loading_set").is_some())
    });
    let first = cold(&d, "rnd");
    let second = cold(&d, "rnd");
    for a in [&first, &second] {
        assert_eq!(restore_mode(a), Some("faasnap"), "{a:?}");
        assert_eq!(
            a.result()["count"],
            499_500,
            "init state survives the restore"
        );
    }
    assert_ne!(
        first.result()["random"],
        second.result()["random"],
        "restored siblings must not share the random generator's state"
    );
    let snap = snapshot_of(&d, "rnd").unwrap();
    assert_eq!(
        (snap["restores"].as_u64(), snap["fallbacks"].as_u64()),
        (Some(3), Some(0))
    );
    let kinds: Vec<String> = d
        .events()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    for kind in ["snapshotted", "restored", "recorded"] {
        assert!(
            kinds.iter().any(|k| k == kind),
            "no {kind} event: {kinds:?}"
        );
    }
    // A restored instance shows how it came.
    let view = d
        .instances()
        .into_iter()
        .find(|i| i["id"] == second.instance())
        .unwrap();
    assert_eq!(
        (view["isolation"].as_str(), view["restored"].as_str()),
        (Some("crun"), Some("faasnap"))
    );
}

#[test]
fn restored_node_siblings_do_not_share_math_random() {
    let d = Daemon::start(&["--prewarm", "none"]);
    deploy_snapshotted(
        &d,
        "rnd",
        "nodejs:20",
        NODE_RANDOM,
        &[("icebox.snapshot_restore", json!("eager"))],
    );
    wait_ready(&d, "rnd");
    let a = cold(&d, "rnd");
    let b = cold(&d, "rnd");
    assert_eq!(
        (restore_mode(&a), restore_mode(&b)),
        (Some("eager"), Some("eager"))
    );
    assert_eq!(a.result()["count"], 499_500);
    assert_ne!(a.result()["random"], b.result()["random"]);
}

#[test]
fn a_damaged_snapshot_falls_back_to_a_normal_start_and_says_so() {
    let d = Daemon::start(&["--prewarm", "none"]);
    deploy_snapshotted(&d, "rnd", "python:3", PY_RANDOM, &[]);
    wait_ready(&d, "rnd");
    let pages = snapshot_files(d.state(), ".img")
        .into_iter()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("pages-")
        })
        .collect::<Vec<_>>();
    assert!(!pages.is_empty(), "the snapshot has page images");
    for p in &pages {
        let len = std::fs::metadata(p).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
    }
    let a = cold(&d, "rnd");
    assert_eq!(restore_mode(&a), None, "started normally: {a:?}");
    assert_eq!(a.result()["count"], 499_500);
    let failed = restore_failed(&d);
    assert!(
        failed["detail"]
            .as_str()
            .unwrap()
            .contains("starting normally"),
        "{failed}"
    );
    // A first failure is rebuilt at once; the count of fallbacks stays.
    let snap = wait_ready(&d, "rnd");
    assert_eq!(snap["fallbacks"].as_u64(), Some(1), "{snap}");
    assert!(d.log_text().contains("restore from the snapshot failed"));
}

fn restore_failed(d: &Daemon) -> Value {
    d.events()
        .into_iter()
        .find(|e| e["kind"] == "restore_failed")
        .expect("a restore_failed event")
}

/// Overwrites 4 KiB in the middle of a file with garbage, its size unchanged.
#[expect(
    clippy::cast_possible_truncation,
    reason = "test bytes: only the low bits are wanted"
)]
fn scribble(path: &Path) {
    use std::os::unix::fs::FileExt;
    let len = std::fs::metadata(path).unwrap().len();
    assert!(len >= 8192, "{} is too small to damage", path.display());
    let at = (len / 2) & !4095;
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 13) as u8).collect();
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .write_all_at(&garbage, at)
        .unwrap();
}

#[test]
fn garbage_in_the_loading_set_is_detected_and_the_snapshot_rebuilt() {
    let d = Daemon::start(&["--prewarm", "none"]);
    deploy_snapshotted(&d, "mem", "python:3", PY_MEMORY, &[]);
    wait_ready(&d, "mem");
    let recorded = cold(&d, "mem");
    assert_eq!(restore_mode(&recorded), Some("record"), "{recorded:?}");
    assert_eq!(recorded.result()["intact"], true);
    wait_for("the loading set", Duration::from_secs(30), || {
        snapshot_of(&d, "mem").filter(|s| s.get("loading_set").is_some())
    });
    let loadsets = snapshot_files(d.state(), "loadset.img");
    assert_eq!(loadsets.len(), 1, "{loadsets:?}");
    scribble(&loadsets[0]);

    let a = cold(&d, "mem");
    assert_eq!(
        restore_mode(&a),
        None,
        "a damaged snapshot is not restored: {a:?}"
    );
    assert_eq!(a.result()["intact"], true, "{a:?}");
    let failed = restore_failed(&d);
    let detail = failed["detail"].as_str().unwrap();
    assert!(
        detail.contains("loadset.img") && detail.contains("checksum"),
        "{failed}"
    );
    // Rebuilt, and restored again.
    let snap = wait_ready(&d, "mem");
    assert_eq!(snap["fallbacks"].as_u64(), Some(1), "{snap}");
    let again = cold(&d, "mem");
    assert_eq!(restore_mode(&again), Some("record"), "{again:?}");
    assert_eq!(again.result()["intact"], true);
}

/// The snapshot's largest CRIU page image: most likely the action's data.
fn largest_page_image(d: &Daemon) -> std::path::PathBuf {
    snapshot_files(d.state(), ".img")
        .into_iter()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("pages-")
        })
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .expect("the snapshot has page images")
}

#[test]
fn garbage_in_a_page_image_is_detected_before_an_eager_restore() {
    let d = Daemon::start(&["--prewarm", "none"]);
    deploy_snapshotted(
        &d,
        "mem",
        "python:3",
        PY_MEMORY,
        &[("icebox.snapshot_restore", json!("eager"))],
    );
    wait_ready(&d, "mem");
    let largest = largest_page_image(&d);
    scribble(&largest);
    let a = cold(&d, "mem");
    assert_eq!(restore_mode(&a), None, "{a:?}");
    assert_eq!(a.result()["intact"], true, "{a:?}");
    let failed = restore_failed(&d);
    assert!(
        failed["detail"].as_str().unwrap().contains("checksum"),
        "{failed}"
    );
}

#[test]
fn garbage_in_a_lazily_served_page_never_reaches_the_action_and_the_snapshot_goes() {
    let d = Daemon::start(&["--prewarm", "none"]);
    deploy_snapshotted(&d, "mem", "python:3", PY_MEMORY, &[]);
    let built = wait_ready(&d, "mem");
    let largest = largest_page_image(&d);
    // Most likely a page of the action's data, which the pager serves only when the
    // activation touches it (after the restore); the restore itself may meet it too.
    scribble(&largest);
    evict_all(&d, "mem");
    let a = d.invoke("mem", json!({}));
    if a.succeeded() {
        assert_eq!(
            a.result()["intact"],
            true,
            "damaged memory was installed: {a:?}"
        );
        assert_eq!(restore_mode(&a), None, "{a:?}");
    }
    let failed = restore_failed(&d);
    assert!(
        failed["detail"].as_str().unwrap().contains("checksum"),
        "{failed}"
    );
    eprintln!("the activation that met the damage: {a:?}");
    // The damaged snapshot is gone: the next cold start is a normal one, and takes a new one.
    let normal = cold(&d, "mem");
    assert_eq!(restore_mode(&normal), None, "{normal:?}");
    assert_eq!(normal.result()["intact"], true, "{normal:?}");
    let rebuilt = wait_for("a new snapshot", Duration::from_secs(60), || {
        snapshot_of(&d, "mem")
            .filter(|s| s["state"] == "ready" && s["created_ms"] != built["created_ms"])
    });
    assert!(rebuilt["snapshot"]["memory_bytes"].as_u64().unwrap() > 0);
    let again = cold(&d, "mem");
    assert_eq!(again.result()["intact"], true, "{again:?}");
}

#[test]
fn snapshot_files_are_readable_by_the_daemon_user_only() {
    use std::os::unix::fs::MetadataExt;
    let d = Daemon::start(&["--prewarm", "none"]);
    deploy_snapshotted(&d, "rnd", "python:3", PY_RANDOM, &[]);
    wait_ready(&d, "rnd");
    cold(&d, "rnd");
    wait_for("the loading set", Duration::from_secs(30), || {
        snapshot_of(&d, "rnd").filter(|s| s.get("loading_set").is_some())
    });
    let me = rustix::process::geteuid().as_raw();
    let root = d.state().path().join("snapshots");
    let mut dirs = vec![root.clone()];
    let mut seen = 0;
    while let Some(dir) = dirs.pop() {
        let meta = std::fs::symlink_metadata(&dir).unwrap();
        assert_eq!(
            (meta.mode() & 0o777, meta.uid()),
            (0o700, me),
            "{}",
            dir.display()
        );
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                dirs.push(e.path());
            } else {
                seen += 1;
                assert_eq!(
                    (meta.mode() & 0o777, meta.uid()),
                    (0o600, me),
                    "{}",
                    e.path().display()
                );
            }
        }
    }
    assert!(
        snapshot_files(d.state(), "loadset.img").len() == 1 && seen > 10,
        "{seen} files"
    );
}

/// Makes the next restore fail (snapshot.json names another runtime build).
fn foreign_build(d: &Daemon) {
    let metas = snapshot_files(d.state(), "snapshot.json");
    assert_eq!(metas.len(), 1, "{metas:?}");
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&metas[0]).unwrap()).unwrap();
    let fingerprint = meta
        .get_mut("runtime_fingerprint")
        .expect("snapshot.json records the runtime build");
    *fingerprint = json!("another build");
    std::fs::write(&metas[0], serde_json::to_vec(&meta).unwrap()).unwrap();
}

#[test]
fn a_snapshot_that_keeps_failing_is_rebuilt_when_asked() {
    let d = Daemon::start(&["--prewarm", "none"]);
    deploy_snapshotted(&d, "rnd", "python:3", PY_RANDOM, &[]);
    wait_ready(&d, "rnd");
    // Two restore failures in a row: the second leaves it failed, backing off.
    foreign_build(&d);
    assert_eq!(restore_mode(&cold(&d, "rnd")), None);
    wait_ready(&d, "rnd");
    foreign_build(&d);
    assert_eq!(restore_mode(&cold(&d, "rnd")), None);
    let snap = snapshot_of(&d, "rnd").unwrap();
    assert_eq!(
        (snap["state"].as_str(), snap["fallbacks"].as_u64()),
        (Some("failed"), Some(2)),
        "{snap}"
    );

    let reply = d
        .request("POST", "/icebox/v1/snapshots/_/rnd", Auth::Key(AUTH), None)
        .expect(202)
        .json();
    assert_eq!(reply[0]["state"], "building", "{reply}");
    wait_ready(&d, "rnd");
    let a = cold(&d, "rnd");
    assert_eq!(restore_mode(&a), Some("record"), "{a:?}");
}

#[test]
fn a_snapshot_of_another_runtime_build_is_never_restored() {
    let d = Daemon::start(&["--prewarm", "none"]);
    deploy_snapshotted(&d, "rnd", "python:3", PY_RANDOM, &[]);
    wait_ready(&d, "rnd");
    foreign_build(&d);
    let a = cold(&d, "rnd");
    assert_eq!(restore_mode(&a), None, "{a:?}");
    let failed = restore_failed(&d);
    assert!(
        failed["detail"].as_str().unwrap().contains("runtime"),
        "{failed}"
    );
}

#[test]
fn snapshots_survive_a_restart_and_go_with_their_action() {
    let state = StateDir::new();
    let first = Daemon::start_on(&state, &["--prewarm", "none"]);
    deploy_snapshotted(&first, "rnd", "python:3", PY_RANDOM, &[]);
    wait_ready(&first, "rnd");
    first.stop();

    let second = Daemon::start_on(&state, &["--prewarm", "none"]);
    assert_eq!(snapshot_of(&second, "rnd").unwrap()["state"], "ready");
    let a = cold(&second, "rnd");
    assert_eq!(restore_mode(&a), Some("record"), "{a:?}");
    // The snapshot was taken under the first daemon's address; the restored runtime has the
    // second's (it arrives with /icebox/restored).
    assert_eq!(a.result()["api_host"], second.base_url(), "{a:?}");
    // Updating the action discards the old version's snapshot.
    deploy_snapshotted(
        &second,
        "rnd",
        "python:3",
        &format!("{PY_RANDOM}\n# v2\n"),
        &[],
    );
    let v2 = wait_ready(&second, "rnd");
    assert_eq!(v2["version"], "0.0.2");
    assert_eq!(snapshot_files(second.state(), "snapshot.json").len(), 1);
    second
        .request(
            "DELETE",
            "/icebox/v1/snapshots/_/rnd",
            Auth::Key(AUTH),
            None,
        )
        .expect(200);
    assert!(snapshot_of(&second, "rnd").is_none());
    assert!(snapshot_files(second.state(), "snapshot.json").is_empty());
}
