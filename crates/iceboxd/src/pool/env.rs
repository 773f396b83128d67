//! What every instance's runtime is started with, whether for an action or as a stem cell.

use super::Pool;
use icebox_core::ActionSpec;

impl Pool {
    /// The API host (for actions that call back), then what each component sets for a runtime
    /// of `kind` for this action (`None`: for a stem cell, the node's defaults).
    pub(super) fn instance_env(
        &self,
        kind: &str,
        action: Option<&ActionSpec>,
    ) -> Vec<(String, String)> {
        let mut env = vec![("__OW_API_HOST".to_string(), self.cfg.api_host.clone())];
        for c in self.components.iter() {
            // A stem cell (no action) gets every technique's start-up settings.
            if action.is_some_and(|a| c.technique().is_some_and(|t| !self.allows(a, t))) {
                continue;
            }
            env.extend(c.instance_env(self, kind, action));
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
