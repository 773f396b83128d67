//! What a sandbox restored from a snapshot holds besides its processes: the pager serving its
//! memory (or CRIU's own lazy-pages daemon, for the `lazy` baseline), and how the restore went.

use crate::sandbox::RestoreMode;
use icebox_snap::pager::Pager;
use std::path::PathBuf;
use std::sync::Mutex;

pub struct Restored {
    pub mode: RestoreMode,
    /// The snapshot directory it came from.
    pub snapshot: PathBuf,
    /// From the start of the restore to the proxy accepting, in ms.
    pub restore_ms: f64,
    /// criu restore alone, in ms.
    pub criu_ms: f64,
    pub pager: Option<Pager>,
    pub lazy_daemon: Mutex<Option<tokio::process::Child>>,
}

impl Restored {
    /// Stops whatever serves the memory. Only after the tasks are dead: a task that outlives
    /// its pager reads zeros where its memory was.
    pub fn stop(&self) {
        if let Some(pager) = &self.pager {
            pager.stop();
        }
        if let Some(mut child) = self.lazy_daemon.lock().unwrap().take() {
            let _ = child.start_kill();
            // Reaped in the background: it has nothing left to serve.
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
        }
    }

    pub fn stats(&self) -> serde_json::Value {
        let mut out = serde_json::json!({
            "mode": self.mode.as_str(),
            "restore_ms": self.restore_ms,
            "criu_ms": self.criu_ms,
            "snapshot": self.snapshot,
        });
        if let Some(pager) = &self.pager {
            out["pager"] = serde_json::to_value(pager.stats()).unwrap_or_default();
        }
        out
    }
}
