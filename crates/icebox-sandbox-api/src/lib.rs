//! The sandbox interface: what the daemon sees of an instance, whatever runs it. A sandbox is
//! "something that runs one action proxy and exposes its UNIX socket": [`SandboxBackend`]
//! starts one from an [`InstanceSpec`], [`Sandbox`] is the running instance (its
//! [`RuntimeClient`], its [`LogCollector`], its [`ExitLatch`]), [`Snapshots`] takes and
//! restores them. Backends live in their own crates (`icebox-sandbox`: crun + cgroups + CRIU;
//! `icebox-vm`: QEMU) and depend on this one only, so a VM backend does not link crun's.

pub mod client;
mod error;
mod exit_latch;
pub mod logs;
pub mod manifest;
pub mod output_budget;
mod sandbox;

pub use client::{RuntimeClient, RuntimeError, RuntimeReply, MAX_RESPONSE_BYTES};
pub use error::{Cause, SandboxError};
pub use exit_latch::ExitLatch;
pub use icebox_core::{LoadingSetInfo, RestoreMode, SnapshotInfo};
pub use logs::{LogCollector, SENTINEL};
pub use manifest::{RuntimeManifest, Runtimes};
pub use output_budget::{Charge, OutputBudget};
pub use sandbox::{
    ExitCause, InstanceSpec, MemoryBudget, Sandbox, SandboxBackend, Snapshots, RESTORE_ENV,
    SNAPSHOT_META_FILE,
};
