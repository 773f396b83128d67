//! Admission: whether an invocation runs now, waits for capacity or is refused is decided
//! once, synchronously, when it arrives ([`Pool::admit`]), so that a full queue answers 429
//! before the invocation gets an id, blocking or not. The [`Ticket`] then becomes a lease
//! (thaw, cold start or wait in the queue) off the request path.

use super::{AcquireError, AdmitError, EvictReason, Instance, Lease, Pool};
use icebox_core::{ActionSpec, EventKind};
use icebox_policy::EvictionReason;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An admitted invocation. Dropped unused, it gives back what it holds.
pub struct Ticket {
    pool: Arc<Pool>,
    action: Arc<ActionSpec>,
    place: Option<Place>,
}

pub(super) enum Place {
    /// A warm instance, already counted as running this invocation.
    Warm(Arc<Instance>),
    /// A place under max_instances is reserved; evict these first.
    Cold { evict: Vec<String> },
    /// Waiting for capacity (holds one place of the queue).
    Queued,
}

impl Pool {
    /// Decide now: a warm instance, a reserved place for a new one, a place in the queue, or
    /// a refusal.
    pub fn admit(self: &Arc<Self>, action: &Arc<ActionSpec>) -> Result<Ticket, AdmitError> {
        let place = match self.try_place(action) {
            Ok(Some(place)) => place,
            Ok(None) => {
                let size = self.cfg.queue_size;
                if self.waiting.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| (w < size).then_some(w + 1)).is_err() {
                    self.metrics.rejected.inc();
                    return Err(AdmitError::QueueFull);
                }
                self.metrics.queue_length.inc();
                Place::Queued
            }
            Err(AcquireError::ShuttingDown) => return Err(AdmitError::ShuttingDown),
            Err(e) => unreachable!("try_place only refuses for shutdown: {e}"),
        };
        Ok(Ticket { pool: self.clone(), action: action.clone(), place: Some(place) })
    }

    fn leave_queue(&self) {
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        self.metrics.queue_length.dec();
    }
}

impl Ticket {
    /// The instance for the activation; a queued ticket waits up to `wait_limit` for capacity.
    pub async fn lease(mut self, wait_limit: Duration) -> Result<Lease, AcquireError> {
        let pool = self.pool.clone();
        let deadline = Instant::now() + wait_limit;
        while let Some(Place::Queued) = self.place {
            let notified = pool.capacity.notified();
            match pool.try_place(&self.action) {
                Ok(Some(place)) => {
                    self.place = Some(place);
                    pool.leave_queue();
                }
                // Dropping the ticket leaves the queue.
                Err(e) => return Err(e),
                Ok(None) => {
                    if tokio::time::timeout_at(deadline.into(), notified).await.is_err() {
                        return Err(AcquireError::QueueTimeout(wait_limit));
                    }
                }
            }
        }
        match self.place.take().expect("a ticket is leased once") {
            Place::Queued => unreachable!("left the queue above"),
            Place::Warm(instance) => {
                match instance.ensure_thawed().await {
                    Ok(Some(took)) => {
                        pool.metrics.thaw_seconds.observe(took.as_secs_f64());
                        pool.events.emit(&instance.id, &instance.fqn, EventKind::Thawed, None, Some(format!("{} us", took.as_micros())));
                    }
                    Ok(None) => {}
                    Err(source) => {
                        tracing::error!(instance = %instance.id, "thaw failed: {source}");
                        pool.evict(&instance.id, EvictReason::Error).await;
                        return Err(super::StartError::Thaw { id: instance.id.clone(), source }.into());
                    }
                }
                pool.events.emit(&instance.id, &instance.fqn, EventKind::RunStart, None, None);
                Ok(Lease { instance, cold: false, init_ms: None })
            }
            Place::Cold { evict } => {
                for id in evict {
                    pool.evict(&id, EvictReason::Policy(EvictionReason::InstanceLimit)).await;
                }
                pool.cold_start(&self.action).await
            }
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        match self.place.take() {
            None => {}
            Some(Place::Queued) => self.pool.leave_queue(),
            Some(Place::Cold { evict }) => self.pool.unreserve_start(evict),
            Some(Place::Warm(instance)) => self.pool.unclaim(&instance),
        }
    }
}
