//! The cluster simulation: configuration, state, event loop, metrics.

mod config;
mod engine;
mod metrics;
mod state;
#[cfg(test)]
mod tests;

pub use config::{KeepAliveSpec, SimConfig, Technique};
#[cfg(test)]
use engine::RunOutput;
pub use engine::{Sim, SimEvent, PROFILE_DURATION};
pub use metrics::{Metrics, TimelineRow};
