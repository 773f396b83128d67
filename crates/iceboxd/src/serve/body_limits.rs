//! Limits on request bodies, which the API's gate (api/gate.rs) applies to every request.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

pub struct BodyLimits {
    /// Largest body accepted (OpenWhisk's payload limit).
    pub max_payload: usize,
    /// Time to send the whole body.
    pub timeout: Duration,
    /// Bytes of request bodies held in memory across all connections, one permit a byte.
    pub budget: Arc<Semaphore>,
}

impl BodyLimits {
    pub fn new(max_payload: usize, timeout: Duration, budget_bytes: u64) -> BodyLimits {
        let budget = usize::try_from(budget_bytes)
            .unwrap_or(usize::MAX)
            .clamp(max_payload.max(1), Semaphore::MAX_PERMITS);
        BodyLimits {
            max_payload,
            timeout,
            budget: Arc::new(Semaphore::new(budget)),
        }
    }
}
