//! Pure policy decisions for icebox: which idle instances to freeze, evict, reuse, or offload.
//!
//! Nothing here does I/O, spawns threads or reads the system clock: time is passed in as
//! [`Millis`] from an injected [`Clock`]. The daemon and the cluster simulator link the same
//! code, so every decision is deterministic — ties are broken by instance id, never by the
//! order of the input slice.

// This crate makes no syscall of its own: forbidding unsafe keeps all unsafe code in the
// crates that talk to the kernel, where each block is reviewed with its SAFETY comment.
#![forbid(unsafe_code)]

pub mod clock;
pub mod desiccant;
pub mod faasmem;
pub mod keepalive;
pub mod placement;
pub mod pool;
pub mod sharing;
pub mod technique_choice;

#[cfg(test)]
mod testutil;

pub use clock::{Clock, ManualClock, Millis, MonotonicClock};
pub use desiccant::{
    plan, rank, reclaim_slots, Candidate, DesiccantConfig, DesiccantConfigError, Estimate,
    EstimateSource, LibraryPageout, ParseLibraryPageoutError, ParseReclaimModeError, Profile,
    ProfileStore, Ranked, ReclaimMode, ReclaimThreshold, Retained, MIN_RECLAIM_CPU_MS,
};
pub use faasmem::{
    semiwarm_tick, FaasmemConfig, FaasmemConfigError, InstanceOffload, OffloadMode, OffloadPhase,
    OffloadStep, ParseOffloadModeError, ParseSemiWarmError, Pressure, RequestWindow, ReuseHistory,
    SemiWarm, SemiWarmInstance, TmoConfig, TmoConfigError, TmoController,
};
pub use keepalive::{
    Admission, ConfigError, EvictOrder, EvictionReason, HybridConfig, HybridPolicy, IdleHistogram,
    KeepAliveConfig, KeepAlivePolicy, ParseEvictOrderError, Windows,
};
pub use placement::{
    Candidate as PlacementCandidate, NodeView, ParsePlacementPolicyError, PlacementPolicy,
    PlacementReason,
};
pub use pool::{lru_order, total_charge, PoolEntry};
pub use sharing::{
    join_busy, join_busy_by, Busy, MemoryProfile, ParseSharingModeError, SharingMode,
};
pub use technique_choice::{
    Choice as TechniqueChoice, Measurements as TechniqueMeasurements, Reason as TechniqueReason,
    Technique, TechniqueSet, UnknownTechnique,
};
