//! QEMU microVM backends for icebox (docs/vm.md). `vm` runs one instance per VM; the pieces
//! it is built from are public so N:1 VMs and VM snapshots reuse them:
//!
//! - [`GuestImage`]: the kernel, initramfs and root image scripts/guest/build.sh writes.
//! - [`accel`]: KVM only where a probe VM boots with it, else TCG.
//! - [`qemu`]: the command-line builder ([`VmConfig`]) and the process ([`QemuProcess`]).
//! - [`qmp`]: QEMU's machine protocol, async and blocking.
//! - [`Vm`]: one booted VM with its agent session and QMP connections.
//! - [`VmBackend`] / [`VmSandbox`]: the `vm` sandbox backend.
//! - [`snapshot`]: its snapshots, restored as FaaSnap does (and its baselines).
//! - [`shared`]: the `vm-shared` backend (Squeezy's N:1 VMs, [`SharedBackend`]).

pub mod accel;
pub mod backend;
mod fnv;
pub mod image;
pub mod qemu;
pub mod qmp;
pub mod shared;
pub mod snapshot;
pub mod vm;

pub use accel::{Accel, AccelChoice};
pub use backend::{VmBackend, VmBackendConfig, VmSandbox};
pub use image::GuestImage;
pub use qemu::{QemuProcess, VmConfig};
pub use qmp::{Qmp, QmpSync};
pub use shared::{SharedBackend, SharedConfig, SharedSandbox};
pub use vm::{IncomingVm, Vm, VmPaths};
