//! Process snapshots: CRIU dumps of an instance's process tree after `/init`, restored into
//! new sandboxes, with FaaSnap's ideas applied to the images (docs/snapshots.md): the pages
//! the first invocation touches are recorded in access order, in groups of 1024; a loading set
//! (those pages minus zero pages, regions merged) is laid out in group order in one file, and
//! a pager serving the restored process's faults over userfaultfd prefetches it concurrently.
pub mod checksum;
pub mod compact;
pub mod criu;
pub mod fingerprint;
pub mod image;
pub mod loadset;
pub mod loadset_file;
pub mod mounts;
pub mod netns;
pub mod pager;
pub mod private;

/// Page size of every supported host (x86-64, and arm64 with 4 KiB pages).
pub const PAGE_SIZE: u64 = icebox_core::units::PAGE;
