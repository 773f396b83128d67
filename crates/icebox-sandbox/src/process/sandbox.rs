//! One running instance of the process backend.

use super::crun::Crun;
use super::pidfd;
use crate::cgroup::Cgroup;
use crate::client::RuntimeClient;
use crate::logs::LogCollector;
use crate::ExitLatch;
use crate::{ExitCause, InstanceSpec, Sandbox};
use async_trait::async_trait;
use icebox_core::MemoryStats;
use rustix::process::{kill_process_group, Pid, Signal};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use tokio::io::AsyncRead;

pub(super) enum Isolation {
    Crun {
        cgroup: Cgroup,
        crun: Crun,
    },
    /// Restored from a snapshot (by criu, into a cgroup like crun's; crun knows nothing of it).
    Restored {
        cgroup: Cgroup,
    },
    /// Unprivileged fallback: the runtime leads its own process group.
    ProcessGroup {
        pgid: i32,
    },
}

pub(super) enum ExitWatch {
    Pidfd(OwnedFd),
}

pub struct ProcessSandbox {
    id: String,
    dir: PathBuf,
    client: RuntimeClient,
    logs: Arc<LogCollector>,
    main_pid: u32,
    isolation: Isolation,
    exit: ExitLatch,
    destroyed: AtomicBool,
    /// What it was started as (a snapshot records it, a restore must match it).
    spec: OnceLock<InstanceSpec>,
    restored: OnceLock<super::restored::Restored>,
    /// The instance's own uid, given back once its processes are gone.
    uid: std::sync::Mutex<Option<super::uids::UidLease>>,
}

impl ProcessSandbox {
    pub(super) fn new(
        id: String,
        dir: PathBuf,
        client: RuntimeClient,
        logs: Arc<LogCollector>,
        main_pid: u32,
        isolation: Isolation,
    ) -> Arc<ProcessSandbox> {
        if let Isolation::ProcessGroup { pgid } = &isolation {
            // Lets a restarted daemon find (and kill) this group if we crash.
            let _ = std::fs::write(dir.join("pgid"), pgid.to_string());
        }
        Arc::new(ProcessSandbox {
            id,
            dir,
            client,
            logs,
            main_pid,
            isolation,
            exit: ExitLatch::default(),
            destroyed: AtomicBool::new(false),
            spec: OnceLock::new(),
            restored: OnceLock::new(),
            uid: std::sync::Mutex::new(None),
        })
    }

    pub(super) fn main_pid(&self) -> u32 {
        self.main_pid
    }

    pub(super) fn isolation(&self) -> &Isolation {
        &self.isolation
    }

    pub(super) fn spec(&self) -> Option<&InstanceSpec> {
        self.spec.get()
    }

    pub(super) fn set_spec(&self, spec: InstanceSpec) {
        let _ = self.spec.set(spec);
    }

    pub(super) fn set_uid(&self, lease: super::uids::UidLease) {
        *self.uid.lock().unwrap() = Some(lease);
    }

    /// The uid its processes run as, when it has one of its own (crun).
    pub fn uid(&self) -> Option<u32> {
        self.uid.lock().unwrap().as_ref().map(|l| l.uid())
    }

    pub(super) fn restored(&self) -> Option<&super::restored::Restored> {
        self.restored.get()
    }

    pub(super) fn set_restored(&self, restored: super::restored::Restored) {
        let _ = self.restored.set(restored);
    }

    /// The instance's cgroup, when it has one.
    fn cgroup(&self) -> Option<&Cgroup> {
        match &self.isolation {
            Isolation::Crun { cgroup, .. } | Isolation::Restored { cgroup } => Some(cgroup),
            Isolation::ProcessGroup { .. } => None,
        }
    }

    fn spawn_log_pumps<O, E>(self: &Arc<Self>, stdout: O, stderr: E)
    where
        O: AsyncRead + Unpin + Send + 'static,
        E: AsyncRead + Unpin + Send + 'static,
    {
        let logs = self.logs.clone();
        tokio::spawn(async move { logs.pump(stdout, 0).await });
        let logs = self.logs.clone();
        tokio::spawn(async move { logs.pump(stderr, 1).await });
    }

    pub(super) fn watch<O, E>(self: &Arc<Self>, stdout: O, stderr: E, exit: ExitWatch)
    where
        O: AsyncRead + Unpin + Send + 'static,
        E: AsyncRead + Unpin + Send + 'static,
    {
        self.spawn_log_pumps(stdout, stderr);
        let me = Arc::downgrade(self);
        let ExitWatch::Pidfd(fd) = exit;
        tokio::spawn(async move {
            pidfd::wait_exit(fd).await;
            if let Some(me) = me.upgrade() {
                me.mark_exited();
            }
        });
    }

    pub(super) fn watch_child<O, E>(
        self: &Arc<Self>,
        stdout: O,
        stderr: E,
        mut child: tokio::process::Child,
    ) where
        O: AsyncRead + Unpin + Send + 'static,
        E: AsyncRead + Unpin + Send + 'static,
    {
        self.spawn_log_pumps(stdout, stderr);
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            let _ = child.wait().await;
            if let Some(me) = me.upgrade() {
                me.mark_exited();
            }
        });
    }

    fn mark_exited(&self) {
        let cause = match self.cgroup() {
            Some(cgroup) if cgroup.oom_kills() > 0 => ExitCause::OutOfMemory,
            Some(cgroup) if cgroup.pids_max_events() > 0 => ExitCause::PidsLimit,
            _ => ExitCause::Exited,
        };
        self.exit.set(cause);
    }

    /// Signals the process group this sandbox created.
    fn signal_group(&self, signal: Signal) -> std::io::Result<()> {
        if let Isolation::ProcessGroup { pgid } = &self.isolation {
            let pgid = Pid::from_raw(*pgid).ok_or_else(|| {
                std::io::Error::other(format!("process group {pgid} is not a process group id"))
            })?;
            kill_process_group(pgid, signal)?;
        }
        Ok(())
    }
}

#[async_trait]
impl Sandbox for ProcessSandbox {
    fn id(&self) -> &str {
        &self.id
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn client(&self) -> &RuntimeClient {
        &self.client
    }

    fn logs(&self) -> &Arc<LogCollector> {
        &self.logs
    }

    fn pids(&self) -> Vec<u32> {
        match (&self.isolation, self.cgroup()) {
            (Isolation::ProcessGroup { pgid }, _) => process_group_members(*pgid),
            (_, Some(cgroup)) => cgroup.pids(),
            (_, None) => Vec::new(),
        }
    }

    fn memory(&self) -> MemoryStats {
        let mut stats = icebox_mem::measure_pids(&self.pids());
        if let Some(cgroup) = self.cgroup() {
            stats.cgroup = cgroup.memory_usage().unwrap_or(0);
        }
        stats
    }

    fn freeze(&self) -> std::io::Result<()> {
        match self.cgroup() {
            Some(cgroup) => cgroup.freeze(),
            None => self.signal_group(Signal::STOP),
        }
    }

    fn thaw(&self) -> std::io::Result<()> {
        match self.cgroup() {
            Some(cgroup) => cgroup.thaw(),
            None => self.signal_group(Signal::CONT),
        }
    }

    fn reclaim_memory(&self, bytes: u64) -> std::io::Result<u64> {
        match self.cgroup() {
            Some(cgroup) => cgroup.reclaim_memory(bytes),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "memory reclaim needs the instance's cgroup (running without cgroups)",
            )),
        }
    }

    async fn exited(&self) {
        self.exit.wait().await
    }

    fn exit_cause(&self) -> Option<ExitCause> {
        self.exit.get()
    }

    fn oom_kills(&self) -> u64 {
        self.cgroup().map_or(0, Cgroup::oom_kills)
    }

    async fn destroy(&self) {
        if self.destroyed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.client.close_idle();
        match &self.isolation {
            Isolation::Crun { cgroup, crun } => {
                if let Err(e) = cgroup.remove() {
                    tracing::warn!(instance = %self.id, "cannot remove cgroup: {e}");
                }
                crun_delete(crun, &self.id).await;
            }
            Isolation::Restored { cgroup } => {
                if let Err(e) = cgroup.remove() {
                    tracing::warn!(instance = %self.id, "cannot remove cgroup: {e}");
                }
            }
            Isolation::ProcessGroup { .. } => {
                let _ = self.signal_group(Signal::KILL);
                // A stopped group must be continued for the SIGKILL to be delivered promptly.
                let _ = self.signal_group(Signal::CONT);
            }
        }
        // The pager goes after the processes: a task left without it would read zeros.
        if let Some(restored) = self.restored.get() {
            restored.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        // After the cgroup's removal: the lease keeps the uid if processes are left.
        drop(self.uid.lock().unwrap().take());
        tracing::debug!(instance = %self.id, pid = self.main_pid, "sandbox destroyed");
    }

    fn restore_stats(&self) -> Option<serde_json::Value> {
        self.restored.get().map(|r| r.stats())
    }
}

/// Remove crun's record of a container whose processes are already gone.
pub(super) async fn crun_delete(crun: &Crun, id: &str) {
    let status = crun
        .command(&["delete", "--force", id], Vec::new())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .await;
    if !matches!(status, Ok(s) if s.success()) {
        // crun forgets nothing else of ours: its state is this directory.
        let _ = std::fs::remove_dir_all(crun.state_of(id));
    }
}

/// PIDs whose process group is `pgid` (a scan of /proc: only used without cgroups).
fn process_group_members(pgid: i32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    // Fields after the parenthesised command: state ppid pgrp …
                    let rest = &s[s.rfind(')')? + 2..];
                    rest.split_whitespace().nth(2)?.parse::<i32>().ok()
                })
                == Some(pgid)
        })
        .collect()
}
