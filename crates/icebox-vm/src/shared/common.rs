//! What every N:1 VM of a backend shares: its configuration, the host budget and the stream of
//! partition events. (The table of VMs is vmhost.rs's `VmTable`.)

use super::budget::{Budget, BudgetError};
use super::config::SharedConfig;
use super::report::{PlugReport, ReclaimReport};
use super::slots::BudgetChange;
use crate::accel::Accel;
use crate::image::GuestImage;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tokio::sync::broadcast;

/// The instances of one VM: same action, same runtime, same partition size.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VmKey {
    pub action: String,
    pub kind: String,
    pub partition_bytes: u64,
}

/// What N:1 VMs report as they grow and shrink (`SharedBackend::subscribe`).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum PartitionEvent {
    VmBooted {
        vm: String,
        action: String,
        boot_ms: f64,
    },
    Plugged(PlugReport),
    Reclaimed(ReclaimReport),
    /// A partition whose unplug had timed out is unplugged now and usable again.
    Recovered {
        vm: String,
        partition: u32,
        instance: String,
        stuck_ms: f64,
    },
    VmEnded {
        vm: String,
        action: String,
        reason: String,
    },
}

pub struct Common {
    pub cfg: SharedConfig,
    pub image: GuestImage,
    pub accel: Accel,
    /// `<state>/vm-shared`.
    pub dir: PathBuf,
    pub budget: Budget,
    pub events: broadcast::Sender<PartitionEvent>,
    next_vm: AtomicU64,
}

impl Common {
    pub fn new(cfg: SharedConfig, image: GuestImage, accel: Accel) -> Common {
        Common {
            dir: cfg.state_dir.join("vm-shared"),
            budget: Budget::new(cfg.memory_limit),
            cfg,
            image,
            accel,
            events: broadcast::channel(1024).0,
            next_vm: AtomicU64::new(1),
        }
    }

    /// A directory name no VM of this backend has used (short: QEMU binds sockets in it).
    pub fn new_vm_id(&self) -> String {
        loop {
            let id = format!("s{}", self.next_vm.fetch_add(1, Ordering::Relaxed));
            if !self.dir.join(&id).exists() {
                return id;
            }
        }
    }

    pub fn emit(&self, event: PartitionEvent) {
        let _ = self.events.send(event);
    }

    pub async fn reserve(&self, bytes: u64, deadline: Instant) -> Result<(), BudgetError> {
        self.budget.reserve(bytes, deadline).await?;
        self.log_budget("reserved", bytes);
        Ok(())
    }

    pub fn apply(&self, change: BudgetChange) {
        match change {
            BudgetChange::None => return,
            BudgetChange::BeginRelease(b) => self.budget.begin_release(b),
            BudgetChange::Stalled(b) => self.budget.release_stalled(b),
            BudgetChange::GiveBack {
                bytes,
                was_releasing,
            } => self.budget.give_back(bytes, was_releasing),
        }
        let (what, bytes) = match change {
            BudgetChange::BeginRelease(b) => ("releasing", b),
            BudgetChange::Stalled(b) => ("stalled", b),
            BudgetChange::GiveBack { bytes, .. } => ("given back", bytes),
            BudgetChange::None => unreachable!(),
        };
        self.log_budget(what, bytes);
    }

    /// One line per change of the plugged total: experiments integrate it over time.
    fn log_budget(&self, what: &str, bytes: u64) {
        let (in_use, releasing) = self.budget.usage();
        tracing::info!(
            target: "icebox_vm::shared::budget",
            change = what,
            bytes,
            in_use,
            releasing,
            limit = self.budget.limit().unwrap_or(0),
            "vm-shared memory"
        );
    }
}
