//! Forwards a shared-VM backend's partition events into the metrics (metrics/partitions.rs)
//! and the event bus, for as long as the backend lives.

use super::partitions::record;
use super::Metrics;
use crate::events::EventBus;
use icebox_vm::SharedBackend;
use std::sync::{Arc, Weak};
use tokio::sync::broadcast::error::RecvError;

/// Forward `backend`'s partition events until it is gone.
pub fn spawn_forwarder(
    backend: &Arc<SharedBackend>,
    bus: Arc<EventBus>,
    metrics: Arc<Metrics>,
) -> tokio::task::JoinHandle<()> {
    let mut rx = backend.subscribe();
    let backend: Weak<SharedBackend> = Arc::downgrade(backend);
    tokio::spawn(async move {
        loop {
            let event = match rx.recv().await {
                Ok(e) => e,
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!("missed {n} vm-shared partition events (metrics undercount)");
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            let Some(backend) = backend.upgrade() else {
                return;
            };
            record(&event, &bus, &metrics.partitions);
            let (plugged, releasing) = backend.plugged();
            metrics
                .partitions
                .plugged_bytes
                .set(i64::try_from(plugged).unwrap_or(i64::MAX));
            metrics
                .partitions
                .releasing_bytes
                .set(i64::try_from(releasing).unwrap_or(i64::MAX));
        }
    })
}
