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
    /// The process backend: `crun` (namespaces + cgroups), or `none` when running
    /// unprivileged.
    pub isolation: String,
    /// `v1`, `v2` or `none`.
    pub cgroup: String,
    pub instances: usize,
    /// The isolation an action gets unless its `icebox.isolation` annotation says otherwise:
    /// process, vm or vm-shared.
    #[serde(default)]
    pub default_isolation: String,
    /// Every isolation and its backend here, or why this node has none.
    #[serde(default)]
    pub isolations: Vec<IsolationView>,
    /// The registry's files against their byte budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<RegistryUsage>,
    /// Zip and jar action code on disk (one file per distinct archive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<CodeUsage>,
}

/// The code store: decoded archives, each stored once however many actions use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeUsage {
    pub files: u64,
    pub bytes: u64,
    /// The largest action code accepted, decoded (`--max-code-size`).
    pub max_code_size: u64,
}

/// The registry's files (database and WAL) against `--registry-max-bytes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryUsage {
    pub bytes: u64,
    pub max_bytes: u64,
    /// Records whose logs were dropped to stay within the budget, since the daemon started.
    pub logs_dropped: u64,
    /// Records deleted to stay within the budget, since the daemon started.
    pub records_dropped: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IsolationView {
    /// process, vm or vm-shared.
    pub isolation: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// Whether this backend takes and restores snapshots here.
    #[serde(default)]
    pub snapshots: bool,
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
    /// The sandbox backend it runs in: crun, none, vm or vm-shared.
    #[serde(default)]
    pub isolation: String,
    /// How its memory came from a snapshot, when it was restored from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored: Option<crate::RestoreMode>,
    /// The restore's account: pages served on fault, prefetched, zero-filled, bytes read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_stats: Option<serde_json::Value>,
    /// Which techniques apply to the instance's action, and why (docs/techniques.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub techniques: Option<TechniquesView>,
}

/// The techniques chosen for an action (`--techniques`, annotation `icebox.techniques`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TechniquesView {
    /// Who chose: `default` (each technique's own flags), `auto` (measured) or `annotation`.
    pub mode: String,
    /// The techniques on, in order reclaim, offload, snapshot, stemcell, sharing.
    pub on: Vec<String>,
    /// Every technique's reason (machine-readable, e.g. `little_garbage`, `not_available`).
    pub reasons: std::collections::BTreeMap<String, String>,
    /// Techniques that failed for the action, and why (off until it is updated).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub failed: std::collections::BTreeMap<String, String>,
}

/// One action's snapshot (GET /icebox/v1/snapshots, docs/snapshots.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotView {
    /// `namespace/name`.
    pub action: String,
    pub version: String,
    /// process, vm.
    pub isolation: String,
    /// building, ready or failed.
    pub state: String,
    /// Why it failed (state failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it was taken, ms since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_ms: Option<u64>,
    /// Where its files are (state ready): the backend's snapshot directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<crate::SnapshotInfo>,
    /// FaaSnap's loading set, once the first invocation of a restored instance was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loading_set: Option<crate::LoadingSetInfo>,
    /// The instance whose first activation is being recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<String>,
    /// Instances restored from it.
    pub restores: u64,
    /// Restores that failed (the instance then started normally).
    pub fallbacks: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_restore: Option<RestoreView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestoreView {
    pub instance: String,
    pub mode: crate::RestoreMode,
    /// From the restore's start until the proxy accepted and was reseeded.
    pub ms: u64,
    /// Wall clock, ms since the Unix epoch.
    pub at_ms: u64,
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
