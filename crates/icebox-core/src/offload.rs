//! What FaaSMem-style offloading shows of an instance and of the node's offload pool
//! (`/icebox/v1/instances`, `/icebox/v1/memory`).

use serde::{Deserialize, Serialize};

/// Local (resident) bytes of an instance's anonymous memory per FaaSMem segment, as of the
/// last scan. `hot` is the hot pool: pages icebox offloaded that the instance touched again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentView {
    pub runtime: u64,
    pub init: u64,
    pub execution: u64,
    pub hot: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OffloadView {
    /// `none`, `tmo` or `faasmem`.
    pub mode: String,
    /// What the instance costs in local memory: USS plus the RAM its swapped pages take in a
    /// compressed (zram) pool. This is what the keep-alive budget charges under `uss`.
    pub local_bytes: u64,
    /// The instance's swapped bytes (kernel counter, whoever moved them).
    pub offloaded_bytes: u64,
    /// Bytes icebox paged out of this instance so far, and bytes of those that came back.
    pub moved_bytes: u64,
    pub refaulted_bytes: u64,
    /// Segments (faasmem mode, once the barriers were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<SegmentView>,
    /// The init segment's request window, once it closed.
    pub request_window: Option<u32>,
    /// In the semi-warm period right now (offloading its remaining pages gradually).
    pub semiwarm: bool,
    /// Its pages compressed too poorly in the (compressed-RAM) pool: offloading stopped.
    #[serde(default)]
    pub incompressible: bool,
}

/// The node's offload pool (kernel swap: icebox's own zram device or the operator's swap).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PoolView {
    /// `none`, `swap` or `zram`.
    pub kind: String,
    pub device: Option<String>,
    pub capacity_bytes: u64,
    /// Bytes of swapped data it holds.
    pub stored_bytes: u64,
    /// RAM the pool itself takes (zram's mem_used_total; 0 for a disk): offloading into
    /// compressed RAM is not free, and this is counted as local memory.
    pub memory_bytes: u64,
    pub compression_ratio: f64,
    /// Why the pool is unusable right now (offloading stopped), if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
