//! VMs a previous run of the daemon left behind: found through the marker each VM's directory
//! holds, killed only if the process is still that QEMU (same pid, start time and a command
//! line naming the directory).

use crate::qemu::VmMarker;
use rustix::process::{kill_process, Pid, Signal};
use std::path::Path;
use std::time::Duration;

/// Kill the QEMU recorded in `dir`, if it is still ours, and wait until it is gone.
pub async fn kill_recorded(dir: &Path) {
    let Some(marker) = VmMarker::read(dir) else {
        return;
    };
    if !marker.is_alive_and_ours() {
        return;
    }
    // A process just verified to be this VM's QEMU.
    if let Some(pid) = Pid::from_raw(marker.pid.cast_signed()) {
        let _ = kill_process(pid, Signal::KILL);
    }
    for _ in 0..500 {
        if !marker.is_alive_and_ours() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tracing::error!(
        pid = marker.pid,
        "an orphaned QEMU did not die after SIGKILL"
    );
}

pub async fn cleanup(instances_dir: &Path) -> anyhow::Result<usize> {
    let mut cleaned = 0;
    for entry in std::fs::read_dir(instances_dir)?.flatten() {
        let dir = entry.path();
        if !dir.is_dir() {
            continue;
        }
        kill_recorded(&dir).await;
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            tracing::warn!(dir = %dir.display(), "cannot remove an orphaned VM's directory: {e}");
        }
        cleaned += 1;
    }
    Ok(cleaned)
}
