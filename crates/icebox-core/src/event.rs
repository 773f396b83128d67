//! Lifecycle events: every instance transition, with a timestamp and (where relevant) memory.
//! Metrics, the event stream, the bench harness and the policies all consume these.

use crate::memory::MemoryStats;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// Sandbox created, runtime process starting.
    Created,
    /// The runtime answers on its socket (FaaSMem's first time barrier: before /init).
    RuntimeReady,
    /// /init finished (FaaSMem's second barrier: before the first /run).
    InitDone,
    InitFailed,
    RunStart,
    RunEnd,
    Idle,
    Frozen,
    Thawed,
    /// Frozen garbage was reclaimed (Desiccant); detail: bytes freed, CPU time, variant.
    Reclaimed,
    /// Pages were offloaded to the pool (FaaSMem / TMO); detail: step, bytes, time taken.
    Offloaded,
    /// Offloaded pages came back (the instance touched them); detail: bytes.
    Refaulted,
    Evicted,
    /// A template instance was snapshotted (and is gone); detail: bytes and time.
    Snapshotted,
    /// The instance was restored from a snapshot instead of started; detail: restore mode,
    /// time and the pager's account.
    Restored,
    /// A restore failed: the instance starts normally instead; detail: why.
    RestoreFailed,
    /// The first invocation of a restored instance was recorded and the snapshot's loading
    /// set written (FaaSnap); detail: pages and regions.
    Recorded,
    /// vm-shared (Squeezy): the instance's partition was plugged into its action's VM before
    /// it started; detail: partition, bytes, the wait for memory, the plug's time.
    PartitionPlugged,
    /// vm-shared: the evicted instance's partition was unplugged and its memory is back with
    /// the host (or went with an ended VM); detail: timings, pages migrated, neighbours.
    PartitionReclaimed,
    /// vm-shared: the unplug did not finish within its timeout; the partition stays plugged
    /// and unusable until it does (`partition_recovered`).
    PartitionStuck,
    /// vm-shared: a stuck partition was unplugged at last and is usable again.
    PartitionRecovered,
    /// The techniques applied to an action changed (`--techniques auto`, or one failed for
    /// it); detail: the new set and each change with its reason. Instance: the one whose
    /// measurement or failure changed it, else empty.
    TechniquesChanged,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LifecycleEvent {
    /// Monotonic sequence number, the `since` cursor of the event stream.
    pub seq: u64,
    /// Wall-clock time, ms since the Unix epoch.
    pub time_ms: u64,
    pub instance: String,
    /// `namespace/name` of the action.
    pub action: String,
    pub kind: EventKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// Free-form detail: eviction reason, activation id, duration of a freeze…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}
