//! Memory of icebox instances: accounting (USS/PSS/RSS/swap summed over every process of an
//! instance, from the kernel's smaps counters) and, later, the mechanisms that reclaim it.

mod accounting;
mod smaps;

pub use accounting::measure_pids;
pub use smaps::{parse_smaps_rollup, smaps_rollup};
