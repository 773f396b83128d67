//! Byte units and the page size, defined once for every crate.

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;
/// The base page size: icebox runs on x86-64 and arm64 with 4 KiB pages, and the page-level
/// mechanisms (pagemap, process_madvise, snapshots) assume it.
pub const PAGE: u64 = 4096;

/// [`KIB`] as a `usize`, for buffer lengths and capacities (a `u64` would need a cast there).
pub const KIB_USIZE: usize = 1 << 10;
/// [`MIB`] as a `usize`, for buffer lengths and capacities.
pub const MIB_USIZE: usize = 1 << 20;
