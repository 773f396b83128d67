//! The registry under failure and misuse (issue 8): a full disk loses no activation record and
//! says so in health; a deleted icebox.db next to existing state is refused; out-of-range
//! limits are a 400; the database is private to the daemon's user.

use icebox_core::units::{KIB_USIZE, MIB};
use icebox_integration::{refused_start, wait_for, Auth, Daemon, StateDir};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const HELLO: &str = "def main(args):\n    return {'n': args.get('n')}\n";

fn health(d: &Daemon) -> Value {
    d.request("GET", "/icebox/v1/health", Auth::None, None)
        .expect(200)
        .json()
}

fn metric(d: &Daemon, name: &str) -> Option<f64> {
    let text = d
        .request("GET", "/metrics", Auth::None, None)
        .expect(200)
        .body;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// A small tmpfs mounted over a directory, unmounted on drop (also when the test panics).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        let status = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .expect("running mount");
        assert!(
            status.success(),
            "mounting a tmpfs on {} (needs root)",
            dir.display()
        );
        Tmpfs(dir.to_path_buf())
    }

    /// Writes zeros until the file system is full.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.0.join("filler");
        let mut f = std::fs::File::create(&path).expect("creating the filler");
        let chunk = vec![0u8; 64 * KIB_USIZE];
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("filling the tmpfs: {e}"),
            }
        }
        // Small writes may still fit in a last partial page.
        for _ in 0..4096 {
            if f.write(&[0u8; 512]).is_err() {
                break;
            }
        }
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Defect 6: with the state directory's disk full, invocations still answer, their records
/// are readable from memory, health says degraded and why; once there is room again, every
/// record goes into the registry (read back after a restart) and health is ok again.
#[test]
fn a_full_disk_loses_no_activation_record() {
    let state = StateDir::new();
    let disk = Tmpfs::mount(state.path(), "4m");
    let d = Daemon::start_on(&state, &["--prewarm", "none"]);
    d.deploy("hello", "python:3", HELLO, json!({"memory": 128}));
    d.invoke("hello", json!({"n": 0})).expect_success();
    assert_eq!(health(&d)["status"], "ok");

    let filler = disk.fill();
    let mut ids = Vec::new();
    for n in 1..=5 {
        let a = d.invoke("hello", json!({"n": n})).expect_success();
        ids.push(a.id().to_string());
    }
    let h = wait_for(
        "health to report the failed writes",
        Duration::from_secs(30),
        || {
            let h = health(&d);
            (h["status"] == "degraded").then_some(h)
        },
    );
    let reason = h["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("disk is full"), "{h}");
    assert!(metric(&d, "icebox_activations_unwritten").unwrap_or(0.0) >= 1.0);
    assert!(metric(&d, "icebox_registry_write_failures_total").unwrap_or(0.0) >= 1.0);
    for (n, id) in ids.iter().enumerate() {
        let record = d.activation(id);
        assert_eq!(record.result()["n"], n + 1, "{id} is served from memory");
    }
    // A deploy cannot be kept anywhere but the registry: it fails, visibly.
    let put = d.put_action(
        "other",
        &json!({"exec": {"kind": "python:3", "code": HELLO}}),
    );
    assert!(
        put.status >= 500,
        "PUT on a full disk: {} {}",
        put.status,
        put.body
    );
    assert!(put.error_message().contains("full"), "{}", put.body);

    std::fs::remove_file(filler).expect("removing the filler");
    wait_for("health to be ok again", Duration::from_secs(60), || {
        (health(&d)["status"] == "ok").then_some(())
    });
    assert_eq!(metric(&d, "icebox_activations_unwritten"), Some(0.0));
    d.stop();

    let again = Daemon::start_on(&state, &["--prewarm", "none"]);
    for (n, id) in ids.iter().enumerate() {
        let record = again.activation(id);
        assert_eq!(
            record.result()["n"],
            n + 1,
            "{id} was written to the registry"
        );
    }
    let listed = again.get_json("/api/v1/namespaces/_/activations?name=hello&limit=0");
    assert_eq!(listed.as_array().map(Vec::len), Some(6), "{listed}");
    again.stop();
    drop(disk);
}

/// Defect 7: a deleted icebox.db next to existing state is refused with a clear message;
/// --init-registry starts with an empty registry on purpose.
#[test]
fn a_deleted_registry_is_refused_unless_asked_for() {
    let state = StateDir::new();
    let d = Daemon::start_on(&state, &["--prewarm", "none"]);
    d.deploy("hello", "python:3", HELLO, json!({}));
    d.stop();

    std::fs::remove_file(state.path().join("icebox.db")).unwrap();
    let text = refused_start(state.path(), &[]);
    assert!(
        text.contains("icebox.db is missing") && text.contains("--init-registry"),
        "{text}"
    );
    assert!(
        !state.path().join("icebox.db").exists(),
        "a refused start creates no registry"
    );

    let d = Daemon::start_on(&state, &["--prewarm", "none", "--init-registry"]);
    d.get("/api/v1/namespaces/_/actions/hello").expect(404);
    d.stop();
    // The new registry is the state directory's own from now on.
    let d = Daemon::start_on(&state, &["--prewarm", "none"]);
    d.assert_healthy();
    d.stop();
}

/// Defect 10: limits.logs of 2^44 MB overflowed to 0 bytes; every limit is range-checked.
#[test]
fn out_of_range_limits_are_a_400() {
    let d = Daemon::start(&["--prewarm", "none"]);
    for (limits, message) in [
        (
            json!({"logs": 1u64 << 44}),
            "log size 17592186044416 MB exceeds allowed threshold of 10 MB",
        ),
        (
            json!({"logs": 11}),
            "log size 11 MB exceeds allowed threshold of 10 MB",
        ),
        (
            json!({"memory": 1}),
            "memory 1 MB below allowed threshold of 32 MB",
        ),
        (
            json!({"timeout": 99}),
            "duration 99 ms below allowed threshold of 100 ms",
        ),
        (
            json!({"concurrency": 501}),
            "concurrency 501 exceeds allowed threshold of 500",
        ),
    ] {
        let reply = d.put_action(
            "bad",
            &json!({"exec": {"kind": "python:3", "code": HELLO}, "limits": limits}),
        );
        assert_eq!(reply.status, 400, "{limits}: {}", reply.body);
        assert!(
            reply.error_message().contains(message),
            "{limits}: {}",
            reply.body
        );
    }
    d.get("/api/v1/namespaces/_/actions/bad").expect(404);
    d.deploy(
        "edge",
        "python:3",
        HELLO,
        json!({"logs": 0, "memory": 32, "concurrency": 500}),
    );
    d.stop();
}

/// Defect 11 (part): action code and parameters are not readable by other local users.
#[test]
fn the_registry_files_are_private() {
    let d = Daemon::start(&["--prewarm", "none"]);
    d.deploy("hello", "python:3", HELLO, json!({}));
    for file in ["icebox.db", "icebox.db-wal", "icebox.db-shm", "registry-id"] {
        let path = d.state().path().join(file);
        let mode = std::fs::metadata(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file} has mode {:o}", mode & 0o777);
    }
    d.stop();
}

/// Issue 18: random bytes in the last page of icebox.db went unnoticed: the daemon started
/// healthy, answered 200 and lost the records. A damaged registry is refused at start, with
/// the file named and what to do.
#[test]
fn a_damaged_registry_is_refused_at_start() {
    use std::io::{Read, Seek, SeekFrom, Write};
    let state = StateDir::new();
    let d = Daemon::start_on(&state, &["--prewarm", "none"]);
    d.deploy("hello", "python:3", HELLO, json!({}));
    for n in 0..10 {
        d.invoke("hello", json!({"n": n})).expect_success();
    }
    d.stop();

    let db = state.path().join("icebox.db");
    let len = std::fs::metadata(&db).unwrap().len();
    let mut garbage = vec![0u8; 4096];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut garbage))
        .expect("reading /dev/urandom");
    let mut f = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
    f.seek(SeekFrom::Start(len - 4096)).unwrap();
    f.write_all(&garbage).unwrap();
    drop(f);

    let text = refused_start(state.path(), &[]);
    assert!(
        text.contains(&format!("{} is damaged", db.display()))
            && text.contains("quick_check")
            && text.contains("--init-registry"),
        "{text}"
    );
}

/// Issue 18: an action printing 10 MiB and returning 4 MiB grew the registry by 148 MiB in 10
/// activations; retention was by count only. With `--registry-max-bytes` the files (database
/// and WAL) come back within the budget, the oldest records' logs going first, and health
/// and metrics say so.
#[test]
fn the_registry_stays_within_its_byte_budget() {
    const BUDGET: u64 = 24 * MIB;
    // About 2.5 MiB of record each: 2 MiB of logs (in lines below the 16 KiB line bound)
    // and a 512 KiB result.
    const LOUD: &str = "def main(args):\n    for i in range(256):\n        print('l' * 8192)\n    return {'n': args['n'], 'r': 'r' * 524288}\n";
    let d = Daemon::start(&["--prewarm", "none", "--registry-max-bytes", "24MiB"]);
    d.deploy("loud", "python:3", LOUD, json!({"memory": 256}));
    let ids: Vec<String> = (0..20)
        .map(|n| {
            let a = d.invoke("loud", json!({"n": n})).expect_success();
            assert_eq!(
                a.logs().len(),
                256,
                "the action's logs are whole when it ends"
            );
            a.id().to_string()
        })
        .collect();
    let files = || -> u64 {
        ["icebox.db", "icebox.db-wal"]
            .iter()
            .filter_map(|f| std::fs::metadata(d.state().path().join(f)).ok())
            .map(|m| m.len())
            .sum()
    };
    // The WAL is truncated once no reader holds a snapshot: wait for it, within a bound.
    wait_for(
        "the registry files to be within their budget",
        Duration::from_secs(60),
        || (files() <= BUDGET).then_some(()),
    );
    let usage = health(&d)["registry"].clone();
    assert_eq!(usage["max_bytes"], BUDGET, "{usage}");
    assert!(usage["bytes"].as_u64().unwrap() <= BUDGET, "{usage}");
    assert!(usage["logs_dropped"].as_u64().unwrap() > 0, "{usage}");
    assert_eq!(metric(&d, "icebox_registry_max_bytes"), Some(BUDGET as f64));
    assert!(metric(&d, "icebox_registry_logs_dropped_total").unwrap_or(0.0) > 0.0);

    let newest = d.activation(ids.last().unwrap());
    assert_eq!(newest.logs().len(), 256, "the newest record keeps its logs");
    assert_eq!(newest.result()["n"], 19);
    // The oldest lost its logs first, and its whole record only after every record's logs.
    let oldest = d.get(&format!("/api/v1/namespaces/_/activations/{}", ids[0]));
    if oldest.status == 200 {
        let logs = oldest.json()["logs"].clone();
        assert_eq!(logs.as_array().map(Vec::len), Some(1), "{logs}");
        assert!(
            logs[0]
                .as_str()
                .unwrap_or_default()
                .contains("--registry-max-bytes"),
            "{logs}"
        );
    } else {
        assert_eq!(oldest.status, 404, "{}", oldest.body);
        assert!(metric(&d, "icebox_registry_records_dropped_total").unwrap_or(0.0) > 0.0);
    }
    d.stop();
}
