//! A running QEMU: spawned in its own process group, watched for exit, killed through a
//! pidfd (never a recycled pid), and recorded in its directory so a restarted daemon can find
//! it ([`VmMarker`]).

use serde::{Deserialize, Serialize};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The file in a VM's directory that names its QEMU process.
pub const MARKER_FILE: &str = "vm.json";

/// What identifies our QEMU process after a daemon restart: its pid, its start time (a
/// recycled pid has another) and its directory, which its command line names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmMarker {
    pub pid: u32,
    /// Field 22 of /proc/PID/stat (clock ticks since boot).
    pub start_ticks: u64,
    pub dir: PathBuf,
}

impl VmMarker {
    pub fn read(dir: &Path) -> Option<VmMarker> {
        serde_json::from_slice(&std::fs::read(dir.join(MARKER_FILE)).ok()?).ok()
    }

    /// Whether the process it names is still this VM's QEMU.
    pub fn is_alive_and_ours(&self) -> bool {
        if proc_start_ticks(self.pid) != Some(self.start_ticks) {
            return false;
        }
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", self.pid)).unwrap_or_default();
        let needle = self.dir.as_os_str().as_encoded_bytes();
        cmdline.windows(needle.len()).any(|w| w == needle)
    }
}

fn proc_start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command: state(3) ppid … starttime is field 22.
    stat[stat.rfind(')')? + 2..]
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

pub struct QemuProcess {
    pid: u32,
    pidfd: OwnedFd,
    status: watch::Receiver<Option<ExitStatus>>,
}

impl QemuProcess {
    /// Start `qemu` with `args`; its stdout/stderr go to `log`. Writes the marker into `dir`.
    pub fn spawn(
        qemu: &str,
        args: &[String],
        dir: &Path,
        log: &Path,
    ) -> std::io::Result<Arc<QemuProcess>> {
        let log_file = std::fs::File::create(log)?;
        let mut child = tokio::process::Command::new(qemu)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            // Its own group: a signal to the daemon's group (Ctrl-C) does not reach the VMs;
            // the daemon ends them itself.
            .process_group(0)
            .kill_on_drop(false)
            .spawn()?;
        let pid = child.id().expect("a just-spawned child has a pid");
        let pidfd = pidfd_open(pid)?;
        let marker = VmMarker {
            pid,
            start_ticks: proc_start_ticks(pid).unwrap_or(0),
            dir: dir.to_path_buf(),
        };
        std::fs::write(
            dir.join(MARKER_FILE),
            serde_json::to_vec(&marker).expect("serializable"),
        )?;
        let (tx, rx) = watch::channel(None);
        tokio::spawn(async move {
            let status = child.wait().await.ok();
            let _ = tx
                .send(status.or_else(|| Some(std::os::unix::process::ExitStatusExt::from_raw(0))));
        });
        Ok(Arc::new(QemuProcess {
            pid,
            pidfd,
            status: rx,
        }))
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn exit_status(&self) -> Option<ExitStatus> {
        *self.status.borrow()
    }

    pub async fn exited(&self) -> ExitStatus {
        let mut rx = self.status.clone();
        let status = rx
            .wait_for(|s| s.is_some())
            .await
            .map(|s| s.expect("checked"));
        status.unwrap_or_else(|_| std::os::unix::process::ExitStatusExt::from_raw(0))
    }

    /// SIGKILL through the pidfd: a no-op once QEMU is gone, whatever now has its pid.
    pub fn kill(&self) {
        let _ = rustix::process::pidfd_send_signal(&self.pidfd, rustix::process::Signal::KILL);
    }

    /// Kill and wait (bounded) until it has exited.
    pub async fn kill_and_wait(&self, wait: Duration) -> bool {
        self.kill();
        tokio::time::timeout(wait, self.exited()).await.is_ok()
    }
}

fn pidfd_open(pid: u32) -> std::io::Result<OwnedFd> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| std::io::Error::from(rustix::io::Errno::SRCH))?;
    Ok(rustix::process::pidfd_open(
        pid,
        rustix::process::PidfdFlags::empty(),
    )?)
}
