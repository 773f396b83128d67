//! An action must not reach the host's disk or the daemon's memory through what the sandbox
//! gives it: the proxy socket's directory (`/run/icebox`) and its stdout/stderr pipes.

use icebox_integration::Daemon;
use serde_json::json;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use icebox_core::units::MIB;

/// Writes up to `mib` MiB into a file under `dir` and reports how far it got, and why it
/// stopped if it did.
const PY_FILL: &str = r#"
import errno, os

def main(args):
    chunk = b"x" * (1024 * 1024)
    written, stopped_by = 0, None
    try:
        with open(os.path.join(args["dir"], "fill"), "wb", buffering=0) as f:
            for _ in range(args["mib"]):
                written += f.write(chunk)
    except OSError as e:
        stopped_by = errno.errorcode.get(e.errno, str(e.errno))
    return {"written": written, "stopped_by": stopped_by}
"#;

/// Prints `mib` MiB to stdout without a single newline.
const PY_NO_NEWLINE: &str = r#"
import sys

def main(args):
    chunk = "x" * (1024 * 1024)
    for _ in range(args["mib"]):
        sys.stdout.write(chunk)
    sys.stdout.flush()
    return {"printed": args["mib"]}
"#;

/// Bytes of disk the files under `dir` occupy.
fn disk_usage(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => disk_usage(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

fn vm_rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("daemon status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kb * 1024
}

#[test]
fn an_action_cannot_fill_the_host_disk_through_its_socket_dir() {
    let d = Daemon::start(&[]);
    d.deploy("filler", "python:3", PY_FILL, json!({"memory": 128}));
    let before = disk_usage(d.state().path());

    let tried = 32;
    let run = d
        .invoke("filler", json!({"dir": "/run/icebox", "mib": tried}))
        .expect_success();
    let written = run.result()["written"].as_u64().expect("written");
    assert!(
        written < MIB,
        "the action wrote {written} bytes of {tried} MiB into /run/icebox ({})",
        run.result()
    );
    let stopped_by = run.result()["stopped_by"].as_str().unwrap_or_default();
    assert!(
        ["ENOSPC", "EROFS", "EACCES", "EPERM"].contains(&stopped_by),
        "the write must fail: {}",
        run.result()
    );
    let grown = disk_usage(d.state().path()).saturating_sub(before);
    assert!(
        grown < 4 * MIB,
        "the state dir grew by {grown} bytes while the action wrote {written}"
    );

    // The instance still serves activations after its socket dir filled up.
    d.invoke("filler", json!({"dir": "/tmp", "mib": 1}))
        .expect_success();
    d.stop();
}

#[test]
fn output_without_newlines_does_not_grow_the_daemon() {
    let d = Daemon::start(&[]);
    d.deploy("printer", "python:3", PY_NO_NEWLINE, json!({"memory": 128}));
    // The instance, its pumps and the daemon's pools exist before the baseline is taken.
    d.invoke("printer", json!({"mib": 1})).expect_success();
    let before = vm_rss_bytes(d.pid());

    let printed = 256;
    let run = d
        .invoke("printer", json!({"mib": printed}))
        .expect_success();
    assert_eq!(run.result()["printed"], printed);
    let grown = vm_rss_bytes(d.pid()).saturating_sub(before);
    assert!(
        grown < 64 * MIB,
        "{printed} MiB of output without a newline grew the daemon's RSS by {} MiB",
        grown / MIB
    );
    let logs = run.logs();
    assert!(
        logs.iter().any(|l| l.contains("Logs were truncated")),
        "a cut line says so: {:?}",
        logs.iter().map(|l| l.len()).collect::<Vec<_>>()
    );
    assert!(
        logs.iter().map(|l| l.len() as u64).sum::<u64>() < MIB,
        "the kept logs are capped"
    );

    // The sentinel at the end of that line ended the activation: the next one is served
    // normally, with its own (short) logs.
    let next = d.invoke("printer", json!({"mib": 0})).expect_success();
    assert!(next.logs().len() <= 1, "{:?}", next.logs());
    d.assert_healthy();
    d.stop();
}

/// The repository's runtimes seen through a bind mount in a temp dir, with a world-writable
/// tmpfs mounted below it (as a host may have under /etc or /usr); both unmounted on drop.
struct RuntimesWithWritableSubmount {
    root: tempfile::TempDir,
}

impl RuntimesWithWritableSubmount {
    /// `sub` is a directory of the python runtime the proxy never reads.
    const SUB: &'static str = "python/tests";

    fn new() -> Self {
        let root = tempfile::Builder::new()
            .prefix("icebox-it-runtimes-")
            .tempdir()
            .expect("temp dir");
        let me = RuntimesWithWritableSubmount { root };
        std::fs::create_dir(me.runtimes()).expect("mount point");
        mount(&[
            "--bind",
            &icebox_integration::paths::runtimes_dir().to_string_lossy(),
            &me.runtimes().to_string_lossy(),
        ]);
        mount(&[
            "-t",
            "tmpfs",
            "-o",
            "size=1m,mode=1777",
            "tmpfs",
            &me.runtimes().join(Self::SUB).to_string_lossy(),
        ]);
        me
    }

    fn runtimes(&self) -> std::path::PathBuf {
        self.root.path().join("runtimes")
    }
}

impl Drop for RuntimesWithWritableSubmount {
    fn drop(&mut self) {
        for dir in [self.runtimes().join(Self::SUB), self.runtimes()] {
            let _ = std::process::Command::new("umount").arg(&dir).status();
        }
    }
}

fn mount(args: &[&str]) {
    let status = std::process::Command::new("mount")
        .args(args)
        .status()
        .expect("running mount");
    assert!(status.success(), "mount {args:?}: {status}");
}

#[test]
fn writable_mounts_below_the_read_only_binds_are_read_only_inside() {
    let runtimes = RuntimesWithWritableSubmount::new();
    let d = Daemon::start_with_runtimes(&runtimes.runtimes(), &[]);
    d.deploy("filler", "python:3", PY_FILL, json!({"memory": 128}));
    let dir = format!(
        "/opt/icebox/runtime/{}",
        RuntimesWithWritableSubmount::SUB.trim_start_matches("python/")
    );
    let run = d
        .invoke("filler", json!({"dir": dir, "mib": 1}))
        .expect_success();
    assert_eq!(
        run.result(),
        &json!({"written": 0, "stopped_by": "EROFS"}),
        "{dir} is a writable host mount below the runtime directory"
    );
    d.stop();
}
