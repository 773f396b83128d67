//! JSON bodies of the node API (`/icebox/v1/...`), shared by the daemon and the CLI.
//! docs/api/openapi.yaml is the contract these mirror.

use crate::instance::InstanceState;
use crate::memory::{ChargeMode, MemoryStats};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Health {
    pub status: String,
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
}
