//! FaaSMem (ASPLOS '24): offload a kept-alive instance's memory to a pool (here: swap) by
//! segment, then its hot pages too once a reuse is unlikely; and TMO, the paper's baseline.
//!
//! The model. An instance's anonymous memory is split at two barriers into the runtime, init
//! and execution segments (the mechanism, icebox-mem's Puckets, records and offloads them).
//! Without accessed bits, hotness is learnt by offloading and watching: a page that comes back
//! is hot. [`InstanceOffload`] drives one instance: after its first request the runtime segment
//! is offloaded (§5.1) and a probe sample of the init segment is; after each request the probes
//! still swapped are counted, and when their decline flattens ([`RequestWindow`], §5.2) the
//! init groups whose probe stayed swapped are offloaded whole. Then, at most every
//! `rollback_interval_ms` and a request window apart, the hot pool is probed the same way
//! (§5.3). When an idle instance has waited longer than the p99 of its action's reuse intervals
//! ([`ReuseHistory`], §6.1) it turns semi-warm: [`semiwarm_tick`] offloads it gradually, the
//! node's bandwidth shared uniformly (§6.2), until its next request. [`TmoController`] instead
//! reclaims 0.05% every 6 s through the kernel's LRU, backing off on [`Pressure`].
//! Everything here is pure: the daemon passes counts and [`Millis`](crate::Millis) in.

mod config;
mod instance;
mod mode;
mod rate;
mod reuse;
mod semiwarm;
mod tmo;
mod window;

#[cfg(test)]
mod tests;

pub use config::{FaasmemConfig, FaasmemConfigError, TmoConfig, TmoConfigError};
pub use instance::{InstanceOffload, OffloadPhase, OffloadStep};
pub use mode::{OffloadMode, ParseOffloadModeError};
pub use rate::{ParseSemiWarmError, SemiWarm};
pub use reuse::ReuseHistory;
pub use semiwarm::{semiwarm_tick, SemiWarmInstance};
pub use tmo::{Pressure, TmoController};
pub use window::RequestWindow;
