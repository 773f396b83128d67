//! As PID 1 the agent inherits every orphan of the guest and must reap it, without taking the
//! exit status of the runtimes it started itself. So all reaping happens here: one
//! `waitpid(-1)` loop on SIGCHLD; a pid registered with [`Children::spawn`] gets its status
//! delivered, any other pid is an orphan and is just reaped. Spawning and reaping take the
//! same lock, so a child cannot be reaped before its pid is known, nor taken from under std's
//! own wait when an exec fails.

use rustix::process::{wait, WaitOptions};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::oneshot;

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

#[derive(Clone, Default)]
pub struct Children {
    waiting: Arc<Mutex<HashMap<u32, oneshot::Sender<Status>>>>,
}

impl Children {
    /// Spawn with the pid registered before the reaper can see it exit: the table's lock is
    /// held from fork until the pid is in it, and the reaper looks pids up under that lock.
    pub fn spawn(
        &self,
        cmd: &mut std::process::Command,
    ) -> std::io::Result<(std::process::Child, oneshot::Receiver<Status>)> {
        let mut waiting = self.lock();
        let child = cmd.spawn()?;
        let (tx, rx) = oneshot::channel();
        waiting.insert(child.id(), tx);
        Ok((child, rx))
    }

    pub fn start_reaping(&self) {
        let me = self.clone();
        let mut sigchld = signal(SignalKind::child()).expect("SIGCHLD handler");
        tokio::spawn(async move {
            loop {
                me.reap_all();
                sigchld.recv().await;
            }
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, oneshot::Sender<Status>>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn reap_all(&self) {
        loop {
            let mut waiting = self.lock();
            let Ok(Some((pid, raw))) = wait(WaitOptions::NOHANG) else {
                return;
            };
            let status = if raw.exited() {
                Status {
                    code: raw.exit_status(),
                    signal: None,
                }
            } else {
                Status {
                    code: None,
                    signal: raw.terminating_signal(),
                }
            };
            if let Some(tx) = waiting.remove(&pid.as_raw_nonzero().get().cast_unsigned()) {
                let _ = tx.send(status);
            }
        }
    }
}
