//! Starting iceboxd where it must refuse to start.

use crate::daemon::AUTH;
use crate::paths;
use rustix::process::{kill_process, Pid, Signal};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs iceboxd on the state directory `state` expecting it to refuse to start; returns what
/// it printed. Panics if it keeps running.
pub fn refused_start(state: &Path, extra: &[&str]) -> String {
    refused_start_with_auth(state, AUTH, extra)
}

/// [`refused_start`] with another API key.
pub fn refused_start_with_auth(state: &Path, auth: &str, extra: &[&str]) -> String {
    let out = Command::new(paths::binary("iceboxd"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--auth",
            auth,
            "--prewarm",
            "none",
        ])
        .arg("--state-dir")
        .arg(state)
        .arg("--runtimes-dir")
        .arg(paths::runtimes_dir())
        .args(extra)
        .env_remove("ICEBOX_INIT_REGISTRY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting iceboxd");
    let pid = out.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut child = out;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let output = child.wait_with_output().unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            assert!(
                !status.success(),
                "iceboxd started where it must refuse:\n{text}"
            );
            return text;
        }
        if Instant::now() > deadline {
            // Our own child, not yet reaped.
            if let Some(pid) = Pid::from_raw(pid.cast_signed()) {
                let _ = kill_process(pid, Signal::KILL);
            }
            let _ = child.wait();
            panic!("iceboxd kept running where it must refuse to start");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
