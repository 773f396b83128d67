//! What every instance's runtime is started with, whether for an action or as a stem cell.

use super::Pool;
use icebox_core::ActionSpec;
use icebox_policy::ReclaimMode;

impl Pool {
    /// The API host (for actions that call back) and, in eager mode, a full GC after every
    /// activation (a start-up setting of the runtime).
    pub(super) fn instance_env(&self, mode: ReclaimMode) -> Vec<(String, String)> {
        let mut env = vec![("__OW_API_HOST".to_string(), self.cfg.api_host.clone())];
        if mode == ReclaimMode::Eager {
            env.push(("ICEBOX_EAGER_GC".to_string(), "1".to_string()));
        }
        env
    }
}

/// The action asked for the host network (`icebox.network: true`).
pub(super) fn wants_network(action: &ActionSpec) -> bool {
    action
        .annotation("icebox.network")
        .and_then(|v| v.as_bool())
        .unwrap_or(false)
}
