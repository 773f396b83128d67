//! Memory of icebox instances: accounting (USS/PSS/RSS/swap summed over every process of an
//! instance, from the kernel's smaps counters) and the mechanisms that reclaim it, such as
//! paging out the unmodified file pages of a frozen instance (Desiccant's library unmapping),
//! and FaaSMem's offloading of anonymous pages by segment (puckets) into swap.

mod accounting;
mod candidates;
mod mappings;
mod offload_pool;
mod pagemap;
mod pageout;
mod pageset;
mod pucket;
mod recache;
mod smaps;
#[cfg(test)]
mod testchild;
#[cfg(test)]
mod testswap;

pub use accounting::measure_pids;
pub use candidates::{candidate_mappings, pageout_candidates};
pub use mappings::{file_mappings, mapped_files, parse_mapped_files, parse_smaps, FileMapping};
pub use offload_pool::{
    memory_pressure, pages_swapped_in, OffloadPool, PoolSpec, PoolStats, PressureLine, Psi,
};
pub use pagemap::{anon_pages, anon_pages_in, AnonPages};
pub use pageout::{pageout, PageoutReport};
pub use pageset::{PageSet, PAGE_SIZE};
pub use pucket::{Observation, OffloadReport, Puckets, SegmentBytes};
pub use recache::{evicted_runs, exclusive_file_pages, recache, EvictedPages};
pub use smaps::{parse_smaps_rollup, smaps_rollup};
