//! What a restored instance keeps of its restore: the snapshot it came from, the loader or
//! recorder still running beside it, and the figures `Sandbox::restore_stats` reports.

use super::loader::Loader;
use super::meta::SnapshotMeta;
use super::record::Recorder;
use icebox_core::RestoreMode;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::OnceLock;

/// Milliseconds spent in each step of a restore.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Steps {
    /// Snapshot checks, loading set, loader or recorder started.
    pub prepare: f64,
    /// Of `prepare`: checking the RAM image's checksums (near 0 when it passed before and
    /// was not written since).
    pub verify: f64,
    /// QEMU started and the device state loaded.
    pub incoming: f64,
    /// Waiting for the loader before `cont` (eager, REAP).
    pub prefetch_wait: f64,
    /// `cont` until the agent answered a new session's hello.
    pub resume: f64,
    /// Clock, streams, forwarder, until the proxy answered through it.
    pub attach: f64,
    pub total: f64,
}

pub struct Restored {
    pub mode: RestoreMode,
    pub dir: PathBuf,
    pub meta: SnapshotMeta,
    pub loader: Option<Loader>,
    pub recorder: Option<Recorder>,
    /// Pages of the loading set (REAP, FaaSnap) or with data (eager) the loader was given.
    pub prefetch_pages: u64,
    pub ready: OnceLock<Ready>,
}

/// Figures taken when the restored instance became ready.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Ready {
    pub ms: Steps,
    /// Pages of the memory file in the host page cache.
    pub resident_pages: u64,
    /// QEMU's resident set (guest pages it touched, its own memory, TCG's code cache).
    pub qemu_rss_pages: u64,
    /// What the loader had read.
    pub loader_bytes: u64,
}

impl crate::backend::RestoredVm for Restored {
    fn stats(&self) -> Value {
        let loader = self.loader.as_ref().map(|l| {
            let (report, done) = l.progress();
            json!({
                "bytes": report.bytes,
                "ranges": report.ranges,
                "ms": report.ms,
                "done": done,
                "error": report.error,
            })
        });
        json!({
            "mode": self.mode,
            "snapshot": self.meta.id,
            "prefetch_pages": self.prefetch_pages,
            "loader": loader,
            "recorded_pages": self.recorder.as_ref().map(|r| r.recorded()),
            "ready": self.ready.get(),
        })
    }

    /// The instance is going: its loader and recorder stop.
    fn stop(&self) {
        if let Some(l) = &self.loader {
            l.stop();
        }
        if let Some(r) = &self.recorder {
            r.cancel();
        }
    }
}
