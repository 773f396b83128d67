//! JSON bodies of the node API (`/icebox/v1/...`), shared by the daemon and the CLI.
//! docs/api/openapi.yaml is the contract these mirror.

use crate::instance::InstanceState;
use crate::memory::{ChargeMode, MemoryStats};
use crate::offload::{OffloadView, PoolView};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Health {
    /// `ok`, or `degraded` when the node serves but something needs an operator (`reason`).
    /// Degraded is still HTTP 200: a liveness probe that restarted the daemon would lose the
    /// activation records it holds in memory.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub version: String,
    pub uptime_s: u64,
    /// `crun` (namespaces + cgroups), or `none` when running unprivileged.
    pub isolation: String,
    /// `v1`, `v2` or `none`.
    pub cgroup: String,
    pub instances: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstanceView {
    pub id: String,
    pub action: String,
    pub kind: String,
    pub state: InstanceState,
    pub pids: Vec<u32>,
    pub age_ms: u64,
    pub idle_ms: Option<u64>,
    pub invocations: u64,
    pub in_flight: u32,
    pub memory_limit: u64,
    pub memory: MemoryStats,
    /// What this instance costs the keep-alive budget right now (0 unless idle or frozen).
    pub charged: u64,
    /// When `memory` was measured, ms since the Unix epoch.
    pub measured_at_ms: u64,
    /// Memory a reclaim is estimated to free now (Desiccant; idle and frozen instances only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaimable: Option<u64>,
    /// The instance's reclaim mode: vanilla, eager or desiccant.
    #[serde(default)]
    pub reclaim_mode: String,
    /// Local and offloaded memory (FaaSMem / TMO).
    #[serde(default)]
    pub offload: OffloadView,
    /// How the instance runs concurrent activations: process, shared or isolate.
    #[serde(default)]
    pub sharing_mode: String,
    /// The runtime's own account of its isolates or contexts (the `sharing` object of its
    /// /icebox/stats, docs/runtime-protocol.md), as of the end of its last activation; absent
    /// in process mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharing: Option<serde_json::Value>,
}

/// What one reclaim of an instance did (POST /icebox/v1/instances/{id}/reclaim).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReclaimReport {
    pub instance: String,
    pub action: String,
    /// Measured by the daemon over all the instance's processes.
    pub uss_before: u64,
    pub uss_after: u64,
    pub freed: u64,
    /// Heap bytes in use right after the runtime's collection.
    pub live_bytes: Option<u64>,
    /// CPU time the runtime spent reclaiming, as it reports it.
    pub cpu_ms: Option<f64>,
    pub wall_ms: f64,
    /// Bytes of library pages advised out with process_madvise(MADV_PAGEOUT).
    pub pageout_bytes: u64,
    /// The runtime variant used; `none` when the runtime has no reclaim extension.
    pub variant: String,
    /// The runtime's own report, as it sent it.
    #[serde(default)]
    pub runtime: serde_json::Value,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StateMemory {
    pub instances: usize,
    pub memory: MemoryStats,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryView {
    pub budget: u64,
    pub charge_mode: ChargeMode,
    /// Sum of what idle and frozen instances are charged.
    pub charged: u64,
    pub by_state: BTreeMap<String, StateMemory>,
    pub total: MemoryStats,
    pub max_instances: usize,
    /// Local memory of all instances: USS plus their share of the offload pool's RAM.
    #[serde(default)]
    pub local: u64,
    #[serde(default)]
    pub pool: PoolView,
}
