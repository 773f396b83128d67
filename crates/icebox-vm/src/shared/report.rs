//! What a scale-up and a scale-down of an N:1 VM measured, for logs, events and experiments.

use super::config::Mode;
use serde::{Deserialize, Serialize};

/// How an instance got its partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlugReport {
    pub vm: String,
    pub action: String,
    pub instance: String,
    pub mode: Mode,
    pub partition: u32,
    pub bytes: u64,
    /// Waiting for a free partition of the VM and for host budget (memory being released).
    pub waited_ms: f64,
    /// From the resize request until the guest had the memory online.
    pub plug_ms: f64,
    /// The VM was booted for this instance.
    pub booted_vm: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReclaimOutcome {
    /// The partition's memory is back with the host.
    Released,
    /// Not done within the resize timeout: the partition stays unusable until it is.
    TimedOut,
    /// QEMU ended first: the memory went with it.
    VmGone,
}

/// How an instance's partition was taken back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReclaimReport {
    pub vm: String,
    pub action: String,
    pub instance: String,
    pub mode: Mode,
    pub partition: u32,
    pub bytes: u64,
    pub outcome: ReclaimOutcome,
    /// The agent's `stop`: until the instance's cgroup was empty.
    pub stop_ms: f64,
    /// Squeezy: until the instance's node held none of its anonymous pages (they are freed
    /// shortly after its processes are gone).
    pub drain_ms: f64,
    /// From the resize request until the device (or balloon) reached its new size.
    pub unplug_ms: f64,
    /// Guest `pgmigrate_success` / `pgmigrate_fail` during the unplug (the guest-wide
    /// counters; unplugs of one VM take turns so they are this one's, plus any compaction).
    pub pages_migrated: u64,
    pub migrate_failures: u64,
    /// Squeezy: memory still in use on the instance's node after it exited (page cache of
    /// files only it read), which the unplug has to migrate.
    pub residue_bytes: Option<u64>,
    /// Other instances holding partitions of the VM when the unplug began.
    pub neighbours: usize,
}
