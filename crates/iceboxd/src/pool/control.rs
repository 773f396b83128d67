//! Control requests to an instance's runtime outside an activation (heap statistics now;
//! Desiccant's reclaim later): a frozen instance is thawed only for the request and frozen
//! again, holding the instance's freeze lock so neither the manager nor an invocation can
//! interleave a freeze or thaw.

use super::Pool;
use icebox_sandbox::RuntimeError;
use std::time::Duration;

const CONTROL_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("no instance {0}")]
    NotFound(String),
    #[error("instance {0} is busy (running an activation or already being reclaimed)")]
    Busy(String),
    #[error("the runtime did not answer within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Runtime(#[from] RuntimeError),
    #[error("cannot thaw or refreeze the instance: {0}")]
    Freezer(#[from] std::io::Error),
    #[error("the runtime answered {status}: {body}")]
    Status { status: u16, body: String },
}

impl Pool {
    /// GET `path` on the instance's runtime and return its JSON.
    pub async fn runtime_get(
        &self,
        id: &str,
        path: &str,
    ) -> Result<serde_json::Value, ControlError> {
        let instance = self
            .instance(id)
            .ok_or_else(|| ControlError::NotFound(id.to_string()))?;
        let mut frozen = instance.frozen.lock().await;
        let was_frozen = *frozen;
        if was_frozen {
            instance.sandbox.thaw()?;
            *frozen = false;
        }
        let reply =
            tokio::time::timeout(CONTROL_TIMEOUT, instance.sandbox.client().get(path)).await;
        if was_frozen {
            instance.sandbox.freeze()?;
            *frozen = true;
        }
        let reply = reply.map_err(|_| ControlError::Timeout(CONTROL_TIMEOUT))??;
        match reply.json() {
            Some(v) if reply.status == 200 => Ok(v),
            _ => Err(ControlError::Status {
                status: reply.status,
                body: String::from_utf8_lossy(&reply.body).into_owned(),
            }),
        }
    }
}
