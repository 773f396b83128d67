//! Instance sandboxes. The invoker sees only [`SandboxBackend`] and [`Sandbox`]; the process
//! backend implements them with crun + cgroups today, and a VM backend (one instance per
//! microVM, or N:1 VMs with one memory partition per instance) fits the same interface later:
//! a sandbox is "something that runs one action proxy and exposes its UNIX socket".

pub mod cgroup;
pub mod client;
mod error;
mod exit_latch;
pub mod logs;
pub mod manifest;
pub mod output_budget;
pub mod process;
mod sandbox;

pub use client::{RuntimeClient, RuntimeError, RuntimeReply};
pub use error::Cause;
pub use exit_latch::ExitLatch;
pub use icebox_core::{LoadingSetInfo, RestoreMode, SnapshotInfo};
pub use logs::{LogCollector, SENTINEL};
pub use manifest::{RuntimeManifest, Runtimes};
pub use output_budget::{Charge, OutputBudget};
pub use sandbox::{
    ExitCause, InstanceSpec, MemoryBudget, Sandbox, SandboxBackend, SandboxError, Snapshots,
    RESTORE_ENV,
};
