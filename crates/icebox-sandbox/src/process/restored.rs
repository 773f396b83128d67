//! What a sandbox restored from a snapshot holds besides its processes: the pager serving its
//! memory (or CRIU's own lazy-pages daemon, for the `lazy` baseline), and how the restore went.

use crate::RestoreMode;
use icebox_snap::pager::Pager;
use std::path::PathBuf;
use std::sync::Mutex;
use tokio::sync::oneshot;

pub struct Restored {
    pub mode: RestoreMode,
    /// The snapshot directory it came from.
    pub snapshot: PathBuf,
    /// From the start of the restore to the proxy accepting, in ms.
    pub restore_ms: f64,
    /// criu restore alone, in ms.
    pub criu_ms: f64,
    pub pager: Option<Pager>,
    /// Ends CRIU's lazy-pages daemon (lazy mode), if it has not ended by itself.
    pub lazy_daemon: Mutex<Option<oneshot::Sender<()>>>,
}

/// Reaps CRIU's lazy-pages daemon when it exits by itself (it does once every page is in), or
/// kills it when the returned sender fires or drops.
pub fn watch_lazy_daemon(mut child: tokio::process::Child) -> oneshot::Sender<()> {
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        tokio::select! {
            _ = child.wait() => {}
            _ = stopped => {
                let _ = child.kill().await;
            }
        }
    });
    stop
}

impl Restored {
    /// Stops whatever serves the memory. Only after the tasks are dead: a task that outlives
    /// its pager reads zeros where its memory was.
    pub fn stop(&self) {
        if let Some(pager) = &self.pager {
            pager.stop();
        }
        if let Some(stop) = self.lazy_daemon.lock().unwrap().take() {
            let _ = stop.send(());
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
