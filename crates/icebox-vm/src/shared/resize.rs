//! Giving an N:1 VM's partition memory and taking it back, per mode: a virtio-mem device per
//! partition (Squeezy), one virtio-mem device for the VM (vanilla) or the balloon. Callers
//! serialise what must not overlap (see `SharedVm::turn`).

use super::config::Mode;
use super::layout::Layout;
use crate::qmp::{Qmp, QmpError};
use icebox_guest::AgentClient;
use serde_json::json;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const POLL: Duration = Duration::from_millis(5);

#[derive(Debug, thiserror::Error)]
pub enum ResizeError {
    #[error("{what} did not finish within {timeout:?} ({state})")]
    Timeout {
        what: String,
        timeout: Duration,
        state: String,
    },
    #[error("{0}")]
    Qmp(#[from] QmpError),
    #[error("guest agent: {0}")]
    Agent(#[from] icebox_guest::AgentError),
}

pub struct Resizer {
    pub layout: Layout,
    /// Single-target modes: bytes handed out to partitions (the device's or balloon's target
    /// beyond boot memory).
    target: Mutex<u64>,
    /// Node 0's memory at boot (vanilla virtio-mem grows node 0).
    node0_boot_bytes: u64,
}

impl Resizer {
    pub fn new(layout: Layout, node0_boot_bytes: u64) -> Resizer {
        Resizer {
            layout,
            target: Mutex::new(0),
            node0_boot_bytes,
        }
    }

    /// After boot: the balloon takes everything no partition holds.
    pub async fn prepare(&self, qmp: &Qmp, timeout: Duration) -> Result<(), ResizeError> {
        if self.layout.mode == Mode::Balloon {
            let target = self.layout.balloon_target_bytes(0);
            qmp.balloon(target).await?;
            self.wait_balloon("the initial balloon inflation", qmp, target, false, timeout)
                .await?;
        }
        Ok(())
    }

    /// Give partition `p` `bytes` of memory and wait until the guest has it online.
    #[expect(
        clippy::cast_possible_wrap,
        reason = "these sizes and offsets stay below 2^63"
    )]
    pub async fn plug(
        &self,
        qmp: &Qmp,
        agent: &AgentClient,
        p: u32,
        bytes: u64,
        timeout: Duration,
    ) -> Result<(), ResizeError> {
        let deadline = Deadline::after(timeout);
        match self.layout.mode {
            Mode::Squeezy => {
                let path = self.layout.device_path(p);
                qmp.qom_set(&path, "requested-size", json!(bytes)).await?;
                self.wait_device(
                    &format!("plugging partition {p}"),
                    qmp,
                    &path,
                    bytes,
                    deadline,
                )
                .await?;
                self.wait_online(agent, Some(p), bytes, deadline).await
            }
            Mode::VirtioMem => {
                let target = self.add_target(bytes as i64);
                let path = self.layout.device_path(p);
                qmp.qom_set(&path, "requested-size", json!(target)).await?;
                self.wait_device(
                    &format!("plugging partition {p}"),
                    qmp,
                    &path,
                    target,
                    deadline,
                )
                .await?;
                self.wait_online(agent, None, self.node0_boot_bytes + target, deadline)
                    .await
            }
            Mode::Balloon => {
                let target = self
                    .layout
                    .balloon_target_bytes(self.add_target(bytes as i64));
                qmp.balloon(target).await?;
                self.wait_balloon(
                    &format!("deflating for partition {p}"),
                    qmp,
                    target,
                    true,
                    timeout,
                )
                .await
            }
        }
    }

    /// Take partition `p`'s `bytes` back and wait until the host has them.
    #[expect(
        clippy::cast_possible_wrap,
        reason = "these sizes and offsets stay below 2^63"
    )]
    pub async fn unplug(
        &self,
        qmp: &Qmp,
        p: u32,
        bytes: u64,
        timeout: Duration,
    ) -> Result<(), ResizeError> {
        let deadline = Deadline::after(timeout);
        let what = format!("unplugging partition {p}");
        match self.layout.mode {
            Mode::Squeezy => {
                let path = self.layout.device_path(p);
                qmp.qom_set(&path, "requested-size", json!(0)).await?;
                self.wait_device(&what, qmp, &path, 0, deadline).await
            }
            Mode::VirtioMem => {
                let target = self.add_target(-(bytes as i64));
                let path = self.layout.device_path(p);
                qmp.qom_set(&path, "requested-size", json!(target)).await?;
                self.wait_device(&what, qmp, &path, target, deadline).await
            }
            Mode::Balloon => {
                let target = self
                    .layout
                    .balloon_target_bytes(self.add_target(-(bytes as i64)));
                qmp.balloon(target).await?;
                self.wait_balloon(&what, qmp, target, false, timeout).await
            }
        }
    }

    /// Whether a stuck unplug of partition `p` has completed since.
    pub async fn unplugged(&self, qmp: &Qmp, p: u32) -> Result<bool, ResizeError> {
        let target = *self.target.lock().unwrap();
        Ok(match self.layout.mode {
            Mode::Squeezy => device_size(qmp, &self.layout.device_path(p)).await? == 0,
            Mode::VirtioMem => device_size(qmp, &self.layout.device_path(p)).await? <= target,
            Mode::Balloon => qmp.query_balloon().await? <= self.layout.balloon_target_bytes(target),
        })
    }

    fn add_target(&self, delta: i64) -> u64 {
        let mut t = self.target.lock().unwrap();
        *t =
            u64::try_from(i64::try_from(*t).unwrap_or(i64::MAX).saturating_add(delta)).unwrap_or(0);
        *t
    }

    async fn wait_device(
        &self,
        what: &str,
        qmp: &Qmp,
        path: &str,
        size: u64,
        deadline: Deadline,
    ) -> Result<(), ResizeError> {
        loop {
            let now = device_size(qmp, path).await?;
            if now == size {
                return Ok(());
            }
            if deadline.passed() {
                return Err(deadline.error(what, format!("{path} has {now} bytes of {size}")));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// virtio-mem reports a block plugged before the guest has added and onlined all of its
    /// memory: a bound instance must not start on a node that has none yet.
    async fn wait_online(
        &self,
        agent: &AgentClient,
        node: Option<u32>,
        bytes: u64,
        deadline: Deadline,
    ) -> Result<(), ResizeError> {
        let node = node.unwrap_or(0);
        // Online memory is what was plugged minus pages the kernel keeps for itself.
        let enough = bytes - bytes / 64;
        loop {
            let stats = agent.stats().await?;
            let total = stats
                .nodes
                .get(&node)
                .and_then(|n| n.get("MemTotal"))
                .copied()
                .unwrap_or(0);
            if total >= enough {
                return Ok(());
            }
            if deadline.passed() {
                return Err(deadline.error(
                    "onlining plugged memory",
                    format!("node {node} has {total} bytes, {bytes} plugged"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_balloon(
        &self,
        what: &str,
        qmp: &Qmp,
        target: u64,
        grow: bool,
        timeout: Duration,
    ) -> Result<(), ResizeError> {
        let deadline = Deadline::after(timeout);
        loop {
            let actual = qmp.query_balloon().await?;
            if (grow && actual >= target) || (!grow && actual <= target) {
                return Ok(());
            }
            if deadline.passed() {
                return Err(deadline.error(
                    what,
                    format!("the guest has {actual} bytes, target {target}"),
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// When a resize must be done, and the timeout it came from (for the error).
#[derive(Clone, Copy)]
struct Deadline {
    at: Instant,
    of: Duration,
}

impl Deadline {
    fn after(of: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + of,
            of,
        }
    }

    fn passed(&self) -> bool {
        Instant::now() >= self.at
    }

    fn error(&self, what: &str, state: String) -> ResizeError {
        ResizeError::Timeout {
            what: what.to_string(),
            timeout: self.of,
            state,
        }
    }
}

async fn device_size(qmp: &Qmp, path: &str) -> Result<u64, QmpError> {
    Ok(qmp.qom_get(path, "size").await?.as_u64().unwrap_or(0))
}
