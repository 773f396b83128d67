//! Admission: whether an invocation runs now, waits for capacity or is refused is decided
//! once, synchronously, when it arrives ([`Pool::admit`]), so that a full queue answers 429
//! before the invocation gets an id, blocking or not. The [`Ticket`] then becomes a [`Lease`]
//! (thaw, cold start or wait in the queue) off the request path.

use super::slots::{Claim, ShuttingDown};
use super::{AcquireError, AdmitError, EvictReason, Instance, Lease, Pool, StartError};
use icebox_core::{ActionSpec, EventKind};
use icebox_policy::EvictionReason;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// Invocations waiting for capacity, and their wake-up.
pub(super) struct Queue {
    size: usize,
    waiting: AtomicUsize,
    capacity: Notify,
}

impl Queue {
    pub fn new(size: usize) -> Self {
        Queue {
            size,
            waiting: AtomicUsize::new(0),
            capacity: Notify::new(),
        }
    }

    fn enter(&self) -> bool {
        self.waiting
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
                (w < self.size).then_some(w + 1)
            })
            .is_ok()
    }

    fn leave(&self) {
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }

    /// Created before looking for capacity, so a wake-up in between is not lost.
    pub fn notified(&self) -> Notified<'_> {
        self.capacity.notified()
    }

    /// Capacity may have appeared (or the pool is shutting down): every waiter looks again.
    pub fn wake_all(&self) {
        self.capacity.notify_waiters();
    }
}

/// An admitted invocation. Dropped unused, it gives back what it holds.
pub struct Ticket {
    pool: Arc<Pool>,
    action: Arc<ActionSpec>,
    place: Option<Place>,
    /// An invocation's (a pre-warm's is not).
    activation: bool,
}

enum Place {
    /// A warm instance, already counted as running this invocation.
    Warm(Arc<Instance>),
    /// A place for a new instance; evict these first.
    Cold {
        reservation: StartReservation,
        evict: Vec<String>,
    },
    /// Holds one place of the queue; `joining`: waits for an instance of the action being
    /// started, which has room for it.
    Queued { joining: bool },
}

/// A place under max_instances held for an instance being started; dropped unfulfilled, the
/// place is given back.
pub(super) struct StartReservation {
    pool: Arc<Pool>,
    fqn: String,
    version: String,
    fulfilled: bool,
}

impl StartReservation {
    pub fn fulfilled(mut self) {
        self.fulfilled = true;
    }
}

impl Drop for StartReservation {
    fn drop(&mut self) {
        if !self.fulfilled {
            self.pool.slots.abandon_start(&self.fqn, &self.version);
            self.pool.queue.wake_all();
        }
    }
}

impl Pool {
    /// Decide now: a warm instance, a reserved place for a new one, a place in the queue, or
    /// a refusal.
    pub fn admit(self: &Arc<Self>, action: &Arc<ActionSpec>) -> Result<Ticket, AdmitError> {
        let place = match self
            .claim(action, false)
            .map_err(|ShuttingDown| AdmitError::ShuttingDown)?
        {
            Place::Queued { joining } => {
                if !self.queue.enter() {
                    if joining {
                        self.slots.stop_joining(action);
                    }
                    self.metrics.rejected.inc();
                    return Err(AdmitError::QueueFull);
                }
                self.metrics.queue_length.inc();
                Place::Queued { joining }
            }
            place => place,
        };
        Ok(Ticket {
            pool: self.clone(),
            action: action.clone(),
            place: Some(place),
            activation: true,
        })
    }

    /// A place for the invocation; `Place::Queued` when it must wait (not yet in the queue).
    fn claim(self: &Arc<Self>, action: &ActionSpec, joining: bool) -> Result<Place, ShuttingDown> {
        let per_action = self
            .backends
            .get(self.backends.isolation_of(action))
            .ok()
            .and_then(|b| b.instances_per_action());
        Ok(
            match self.slots.claim(
                action,
                self.capacity_of(action),
                &self.policy,
                per_action,
                joining,
            )? {
                Claim::Wait => Place::Queued { joining: false },
                Claim::Join => Place::Queued { joining: true },
                Claim::Warm(instance, idle_since) => {
                    if let Some(since) = idle_since {
                        let idle = self.clock.now_ms().saturating_sub(since);
                        for c in self.components.iter() {
                            c.on_reused(self, &instance, idle);
                        }
                    }
                    Place::Warm(instance)
                }
                Claim::Cold { evict } => Place::Cold {
                    reservation: StartReservation {
                        pool: self.clone(),
                        fqn: action.fqn(),
                        version: action.version.clone(),
                        fulfilled: false,
                    },
                    evict,
                },
            },
        )
    }

    /// Starts an instance of the action with no invocation, to be kept idle (a pre-warm), when
    /// a place for a new one is free now; returns its id. An action that has a live instance,
    /// or no place now, gets none.
    pub(super) async fn start_idle(self: &Arc<Self>, action: &Arc<ActionSpec>) -> Option<String> {
        if self.slots.has_live_instance(action) {
            return None;
        }
        let place = match self.claim(action, false).ok()? {
            cold @ Place::Cold { .. } => cold,
            Place::Warm(instance) => {
                self.unclaim(&instance);
                return None;
            }
            Place::Queued { joining } => {
                if joining {
                    self.slots.stop_joining(action);
                }
                return None;
            }
        };
        let ticket = Ticket {
            pool: self.clone(),
            action: action.clone(),
            place: Some(place),
            activation: false,
        };
        let lease = ticket.lease(Duration::ZERO).await.ok()?;
        let id = lease.instance.id.clone();
        lease.park().await;
        Some(id)
    }

    fn leave_queue(&self) {
        self.queue.leave();
        self.metrics.queue_length.dec();
    }
}

impl Ticket {
    /// The instance for the activation; a queued ticket waits up to `wait_limit` for capacity.
    pub async fn lease(mut self, wait_limit: Duration) -> Result<Lease, AcquireError> {
        let pool = self.pool.clone();
        let deadline = Instant::now() + wait_limit;
        while let Some(Place::Queued { joining }) = self.place {
            let notified = pool.queue.notified();
            // The claim gave up any room held on a starting instance; until it has a place,
            // the ticket waits as what the claim says (dropping it on an error leaves the
            // queue, see Drop).
            self.place = Some(Place::Queued { joining: false });
            match pool
                .claim(&self.action, joining)
                .map_err(|ShuttingDown| AcquireError::ShuttingDown)?
            {
                Place::Queued { joining } => {
                    self.place = Some(Place::Queued { joining });
                    if tokio::time::timeout_at(deadline.into(), notified)
                        .await
                        .is_err()
                    {
                        return Err(AcquireError::QueueTimeout(wait_limit));
                    }
                }
                place => {
                    self.place = Some(place);
                    pool.leave_queue();
                }
            }
        }
        match self.place.take().expect("a ticket is leased once") {
            Place::Queued { .. } => unreachable!("left the queue above"),
            Place::Warm(instance) => {
                // Until it runs, the claim is given back if this future is dropped.
                let lease = Lease::new(&pool, instance.clone(), false, None, self.activation);
                match instance.ensure_thawed().await {
                    Ok(Some(took)) => {
                        pool.metrics.thaw_seconds.observe(took.as_secs_f64());
                        pool.events.emit(
                            &instance.id,
                            &instance.fqn,
                            EventKind::Thawed,
                            None,
                            Some(format!("{} us", took.as_micros())),
                        );
                    }
                    Ok(None) => {}
                    Err(source) => {
                        tracing::error!(instance = %instance.id, "thaw failed: {source}");
                        lease.discard(EvictReason::Error).await;
                        return Err(StartError::Thaw {
                            id: instance.id.clone(),
                            source,
                        }
                        .into());
                    }
                }
                pool.events
                    .emit(&instance.id, &instance.fqn, EventKind::RunStart, None, None);
                Ok(lease)
            }
            Place::Cold { reservation, evict } => {
                // Out of the books now and destroyed by a task of its own, so that a lease
                // dropped meanwhile leaves none behind; awaited, so the new instance does not
                // start before their memory is back.
                let doomed: Vec<_> = evict
                    .iter()
                    .filter_map(|id| pool.slots.remove(id))
                    .collect();
                let p = pool.clone();
                let reason = EvictReason::Policy(EvictionReason::InstanceLimit);
                let destroyed = tokio::spawn(async move {
                    futures::future::join_all(doomed.into_iter().map(|s| p.destroy(s, reason)))
                        .await
                });
                let _ = destroyed.await;
                pool.cold_start(&self.action, reservation, self.activation)
                    .await
            }
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        match self.place.take() {
            None => {}
            Some(Place::Queued { joining }) => {
                if joining {
                    self.pool.slots.stop_joining(&self.action);
                }
                self.pool.leave_queue();
            }
            // The reservation gives its place back as it drops.
            Some(Place::Cold {
                reservation: _,
                evict,
            }) => {
                for id in evict {
                    self.pool.evict_in_background(
                        &id,
                        EvictReason::Policy(EvictionReason::InstanceLimit),
                    );
                }
            }
            Some(Place::Warm(instance)) => self.pool.unclaim(&instance),
        }
    }
}
