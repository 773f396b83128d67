//! The `vm-shared` backend: Squeezy's N:1 model (docs/vm.md, "Squeezy on the `vm-shared`
//! backend"). One VM per action hosts up to N instances, each in a partition of guest memory
//! plugged when it starts and unplugged after it stopped; node 0 of every VM is the shared
//! partition (kernel, agent, the runtime's page cache). The baselines of the paper's
//! experiments are modes of the same backend ([`Mode`]).

mod budget;
mod common;
mod config;
mod exit;
mod host_memory;
mod layout;
mod report;
mod resize;
mod runtime;
mod sandbox;
mod slots;
mod vmhost;

pub use budget::BudgetError;
pub use common::{PartitionEvent, VmKey};
pub use config::{Mode, SharedConfig};
pub use layout::Layout;
pub use report::{PlugReport, ReclaimOutcome, ReclaimReport};
pub use sandbox::SharedSandbox;
pub use slots::Slot;
pub use vmhost::SharedVm;

use crate::accel::{self, Accel};
use crate::image::GuestImage;
use async_trait::async_trait;
use common::Common;
use icebox_sandbox_api::{InstanceSpec, MemoryBudget, Sandbox, SandboxBackend, SandboxError};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use vmhost::{VmEntry, VmTable};

pub struct SharedBackend {
    common: Arc<Common>,
    vms: Arc<VmTable>,
    reaper: JoinHandle<()>,
}

impl SharedBackend {
    /// Opens the guest image and settles the accelerator (a probe VM for `auto`/`kvm`).
    pub async fn new(cfg: SharedConfig) -> anyhow::Result<SharedBackend> {
        anyhow::ensure!(
            cfg.partitions >= 1,
            "a vm-shared VM needs at least one partition"
        );
        anyhow::ensure!(cfg.block_mib >= 2, "virtio-mem blocks are at least 2 MiB");
        let image = GuestImage::open(&cfg.image_dir)?;
        let accel = accel::resolve(cfg.accel, &cfg.qemu, &image).await?;
        let common = Arc::new(Common::new(cfg, image, accel));
        std::fs::create_dir_all(&common.dir)?;
        let vms = Arc::new(VmTable::default());
        let reaper = tokio::spawn(reap_idle(Arc::downgrade(&common), Arc::downgrade(&vms)));
        Ok(SharedBackend {
            common,
            vms,
            reaper,
        })
    }

    pub fn accel(&self) -> Accel {
        self.common.accel
    }

    pub fn config(&self) -> &SharedConfig {
        &self.common.cfg
    }

    /// Partition plugs and reclaims, VM boots and ends, as they happen.
    pub fn subscribe(&self) -> broadcast::Receiver<PartitionEvent> {
        self.common.events.subscribe()
    }

    /// Bytes plugged into partitions now and of those being released (with or without a
    /// limit).
    pub fn plugged(&self) -> (u64, u64) {
        self.common.budget.usage()
    }

    /// The VM of `action`, if one runs.
    pub fn vm_of(&self, action: &str) -> Option<Arc<SharedVm>> {
        self.vms
            .lock()
            .unwrap()
            .iter()
            .find(|(k, _)| k.action == action)
            .and_then(|(_, e)| e.vm.get().cloned())
    }

    fn key(&self, spec: &InstanceSpec) -> VmKey {
        VmKey {
            action: spec.action.clone(),
            kind: spec.runtime.kind.clone(),
            partition_bytes: self.common.cfg.partition_bytes(spec.memory_limit_bytes),
        }
    }

    async fn start_in(&self, spec: &InstanceSpec) -> Result<Arc<SharedSandbox>, SandboxError> {
        let key = self.key(spec);
        let entry = {
            let mut vms = self.vms.lock().unwrap();
            let entry = vms.entry(key.clone()).or_default().clone();
            entry.starting.fetch_add(1, Ordering::SeqCst);
            entry
        };
        let _starting = Starting(&entry);
        let mut booted = false;
        let vm = entry
            .vm
            .get_or_try_init(|| {
                booted = true;
                SharedVm::boot(&self.common, &self.vms, key.clone(), spec)
            })
            .await?
            .clone();
        // Booting is not waiting for memory: the bound starts once there is a VM.
        let deadline = Instant::now() + self.common.cfg.budget_timeout;
        SharedSandbox::start(&vm, spec, deadline, booted).await
    }
}

/// A start under way on a VM entry; an entry whose VM never booted goes with its last one.
struct Starting<'a>(&'a Arc<VmEntry>);

impl Drop for Starting<'_> {
    fn drop(&mut self) {
        self.0.starting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Shuts down VMs that have been empty for `idle_vm_timeout`, and forgets entries whose
/// boot failed.
async fn reap_idle(common: Weak<Common>, vms: Weak<VmTable>) {
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (Some(common), Some(vms)) = (common.upgrade(), vms.upgrade()) else {
            return;
        };
        let idle: Vec<Arc<SharedVm>> = {
            let mut vms = vms.lock().unwrap();
            let timeout = common.cfg.idle_vm_timeout;
            let mut idle = Vec::new();
            vms.retain(|_, e| {
                if e.starting.load(Ordering::SeqCst) > 0 {
                    return true;
                }
                match e.vm.get() {
                    None => false,
                    Some(vm) if vm.idle_for(timeout) => {
                        idle.push(vm.clone());
                        false
                    }
                    Some(_) => true,
                }
            });
            idle
        };
        for vm in idle {
            vm.shutdown(&format!("empty for {:?}", common.cfg.idle_vm_timeout))
                .await;
        }
    }
}

impl Drop for SharedBackend {
    /// Nobody can reach the VMs of a backend that is gone (a failed test, a daemon that did
    /// not call `shutdown`): their QEMUs go with it. The table also breaks the cycle between
    /// the VMs and what they share.
    fn drop(&mut self) {
        self.reaper.abort();
        let vms: Vec<_> = self.vms.lock().unwrap().drain().collect();
        for (_, entry) in vms {
            if let Some(vm) = entry.vm.get() {
                vm.vm().qemu.kill();
                let _ = std::fs::remove_dir_all(vm.dir());
            }
        }
    }
}

#[async_trait]
impl SandboxBackend for SharedBackend {
    fn name(&self) -> &'static str {
        "vm-shared"
    }

    /// The host has no cgroup per VM (the guest has cgroup v2 inside).
    fn cgroup_version(&self) -> &'static str {
        "none"
    }

    async fn start(&self, spec: InstanceSpec) -> Result<Arc<dyn Sandbox>, SandboxError> {
        if spec.network {
            return Err(SandboxError::Unsupported(
                "the vm-shared backend gives instances no network (the action asks for it)".into(),
            ));
        }
        Ok(self.start_in(&spec).await?)
    }

    async fn cleanup_orphans(&self) -> anyhow::Result<usize> {
        crate::backend::orphans::cleanup(&self.common.dir).await
    }

    /// Waits (bounded) for unplugs in flight, then ends every VM.
    async fn shutdown(&self) {
        let vms: Vec<Arc<SharedVm>> = {
            let mut table = self.vms.lock().unwrap();
            table
                .drain()
                .filter_map(|(_, e)| e.vm.get().cloned())
                .collect()
        };
        for vm in &vms {
            vm.settle(self.common.cfg.resize_timeout).await;
        }
        for vm in vms {
            vm.shutdown("the backend is shutting down").await;
        }
    }

    fn memory_budget(&self) -> Option<MemoryBudget> {
        self.common.budget.snapshot()
    }

    fn instance_charge(&self, spec: &InstanceSpec) -> u64 {
        self.common.cfg.partition_bytes(spec.memory_limit_bytes)
    }

    fn instances_per_action(&self) -> Option<usize> {
        Some(self.common.cfg.partitions as usize)
    }
}
