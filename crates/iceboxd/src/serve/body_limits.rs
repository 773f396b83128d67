//! Limits on request bodies, which the API's gate (api/gate.rs) and handlers apply.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

pub struct BodyLimits {
    /// Largest body of any request (OpenWhisk's 50 MB request limit), applied by the gate.
    pub max_body: usize,
    /// Largest invocation body (OpenWhisk's payload limit), applied by the invoke handler.
    pub max_payload: usize,
    /// Largest action code, decoded, applied by the action PUT handler.
    pub max_code_size: u64,
    /// Time to send the whole body.
    pub timeout: Duration,
    /// Bytes of request bodies held in memory across all connections, one permit a byte.
    pub budget: Arc<Semaphore>,
}

impl BodyLimits {
    pub fn new(
        max_body: usize,
        max_payload: usize,
        max_code_size: u64,
        timeout: Duration,
        budget_bytes: u64,
    ) -> BodyLimits {
        // One body of the largest size must always fit, or it would wait for room forever.
        let budget = usize::try_from(budget_bytes)
            .unwrap_or(usize::MAX)
            .clamp(max_body.max(1), Semaphore::MAX_PERMITS);
        BodyLimits {
            max_body,
            max_payload,
            max_code_size,
            timeout,
            budget: Arc::new(Semaphore::new(budget)),
        }
    }
}
