//! Snapshot data shared by the sandbox backends, the daemon and its API (docs/snapshots.md).

use serde::{Deserialize, Serialize};

/// How a restored instance gets the snapshot's memory (FaaSnap §4 and its baselines; see
/// docs/snapshots.md). The same names for process (CRIU) and VM (QEMU) snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestoreMode {
    /// All memory loaded before the instance runs (CRIU's default restore; for a VM, its whole
    /// RAM file read into the page cache before it resumes).
    Eager,
    /// Pages on demand only: CRIU's own lazy-pages daemon; a VM mapping its RAM file
    /// privately. The baseline FaaSnap is measured against.
    Lazy,
    /// Pages on demand while the order of the first invocation's accesses is recorded, in
    /// groups of 1024 pages (FaaSnap's record phase). Ends with [`Snapshots::finish_record`].
    Record,
    /// REAP: the recorded working set loaded in full before the instance resumes, the rest on
    /// demand.
    Reap,
    /// FaaSnap: the loading set (recorded working set minus zero pages) prefetched in group
    /// order concurrently with the running instance; zero pages never read from disk.
    Faasnap,
}

impl RestoreMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RestoreMode::Eager => "eager",
            RestoreMode::Lazy => "lazy",
            RestoreMode::Record => "record",
            RestoreMode::Reap => "reap",
            RestoreMode::Faasnap => "faasnap",
        }
    }

    /// Whether this mode needs a recorded loading set in the snapshot.
    pub fn needs_loading_set(self) -> bool {
        matches!(self, RestoreMode::Reap | RestoreMode::Faasnap)
    }
}

impl std::str::FromStr for RestoreMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "eager" => Ok(RestoreMode::Eager),
            "lazy" => Ok(RestoreMode::Lazy),
            "record" => Ok(RestoreMode::Record),
            "reap" => Ok(RestoreMode::Reap),
            "faasnap" => Ok(RestoreMode::Faasnap),
            other => Err(format!(
                "unknown restore mode '{other}' (expected eager, lazy, record, reap or faasnap)"
            )),
        }
    }
}

/// What taking a snapshot produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotInfo {
    /// Backend that wrote it (`crun`, `vm`): a snapshot is only restored by its own backend.
    pub backend: String,
    /// Bytes of memory image written (sparse files count their data only).
    pub memory_bytes: u64,
    pub took_ms: u64,
}

/// What recording the first invocation produced (FaaSnap's loading set).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadingSetInfo {
    /// Pages touched during the recorded invocation (the working set).
    pub working_set_pages: u64,
    /// Working-set pages that are zero: never read from disk, so not in the loading set.
    pub zero_pages: u64,
    /// Pages in the loading set after merging regions closer than the merge gap.
    pub loading_set_pages: u64,
    pub regions: u64,
    pub groups: u64,
}
