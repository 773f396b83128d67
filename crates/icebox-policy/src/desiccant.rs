//! Desiccant (EuroSys '24): reclaim the frozen garbage of idle managed-runtime instances, only
//! under memory pressure, only on idle CPU, most profitable instance first.
//!
//! The daemon (or simulator) keeps one [`ReclaimThreshold`] and one [`ProfileStore`] per node,
//! tells the threshold about every eviction, records a [`Profile`] after every reclaim, forgets
//! an instance's profiles when it goes away, and periodically asks [`plan`] which frozen
//! [`Candidate`]s to reclaim, passing [`reclaim_slots`] as the number it may start.

mod config;
mod mode;
mod pageout;
mod plan;
mod profile;
mod threshold;

pub use config::{DesiccantConfig, DesiccantConfigError};
pub use mode::{ParseReclaimModeError, ReclaimMode};
pub use pageout::{LibraryPageout, ParseLibraryPageoutError};
pub use plan::{plan, rank, reclaim_slots, Candidate, Ranked};
pub use profile::{Estimate, EstimateSource, Profile, ProfileStore, Retained, MIN_RECLAIM_CPU_MS};
pub use threshold::ReclaimThreshold;
