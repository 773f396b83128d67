//! How an instance of a shared VM ended. The instance owns it; its VM holds it weakly, to
//! report the runtime's exit (an agent event) or its own end to whoever waits on the
//! instance. Neither needs the other's type for that.

use icebox_sandbox_api::{ExitCause, ExitLatch};
use std::sync::{Arc, OnceLock};

pub struct InstanceExit {
    instance: String,
    latch: ExitLatch,
    reason: OnceLock<String>,
}

impl InstanceExit {
    pub fn new(instance: String) -> Arc<InstanceExit> {
        Arc::new(InstanceExit {
            instance,
            latch: ExitLatch::default(),
            reason: OnceLock::new(),
        })
    }

    /// The first cause and reason win.
    pub fn mark(&self, cause: ExitCause, reason: String) {
        self.latch.set_then(cause, || {
            tracing::debug!(instance = %self.instance, "{reason}");
            let _ = self.reason.set(reason);
        });
    }

    pub fn reason(&self) -> Option<&str> {
        self.reason.get().map(String::as_str)
    }

    pub fn cause(&self) -> Option<ExitCause> {
        self.latch.get()
    }

    pub async fn wait(&self) {
        self.latch.wait().await
    }
}
