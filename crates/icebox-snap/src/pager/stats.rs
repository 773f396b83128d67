//! What a pager did, for events and views (`Sandbox::restore_stats`).

use crate::PAGE_SIZE;

/// Who installs pages (for the statistics).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum By {
    Fault,
    Loader,
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct PagerStats {
    pub mode: String,
    /// Faults resolved (by a copy from the images or a zero page).
    pub faults: u64,
    /// Pages copied to resolve faults (a fault may bring neighbours along).
    pub fault_pages: u64,
    /// Faults resolved with the zero page (pages not in the image: never read).
    pub zero_pages: u64,
    /// Pages the loader installed ahead of the task (FaaSnap, REAP).
    pub loader_pages: u64,
    /// Pages in the loading set.
    pub loadset_pages: u64,
    /// Bytes copied out of the snapshot's files, and how many of them from loadset.img.
    pub bytes_read: u64,
    pub bytes_from_loadset: u64,
    /// Non-cooperative events: madvise(DONTNEED…), munmap, mremap, fork.
    pub removes: u64,
    pub unmaps: u64,
    pub remaps: u64,
    pub forks: u64,
    /// Address spaces served (restored tasks and forked children), and gone since.
    pub spaces: u64,
    pub spaces_gone: u64,
    /// Reading the images' records and checking, before the restore, the loading set and the
    /// pages CRIU installs itself, in ms.
    #[serde(default)]
    pub checked_ms: f64,
    /// From the end of criu's restore to the loader's last page, in ms.
    pub loader_ms: Option<f64>,
    /// Image pages not installed yet (never touched, never prefetched).
    pub pending_pages: u64,
    /// Pages recorded so far (record mode).
    pub recorded: Option<u64>,
    pub error: Option<String>,
}

impl PagerStats {
    pub(super) fn count_copy(&mut self, by: By, bytes: u64, from_loadset: bool) {
        match by {
            By::Fault => self.fault_pages += bytes / PAGE_SIZE,
            By::Loader => self.loader_pages += bytes / PAGE_SIZE,
        }
        self.bytes_read += bytes;
        if from_loadset {
            self.bytes_from_loadset += bytes;
        }
    }
}
