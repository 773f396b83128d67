//! Launching QEMU: its command line ([`config`]) and its process ([`process`]).

pub mod config;
pub mod process;

pub use config::{Balloon, MemoryBackend, NumaNodeConfig, VirtioMem, VmConfig, BASE_CMDLINE};
pub use process::{QemuProcess, VmMarker};
