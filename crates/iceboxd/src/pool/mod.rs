//! The instance pool: routes invocations to warm instances or cold-starts new ones within the
//! node's limits, keeps idle instances alive (freezing them after the pause grace) and evicts
//! them as the keep-alive policy decides. Decisions come from icebox-policy; this module only
//! keeps the books and acts through the sandbox backend.

mod admission;
mod cold;
mod control;
mod error;
mod desiccant;
mod reclaim;
mod instance;
mod manager;
mod prewarm;
mod view;

pub use admission::Ticket;
pub use control::ControlError;
pub use error::{AcquireError, AdmitError, InitError, StartError};
pub use instance::{Instance, Measured};
pub use prewarm::parse_prewarm;

use crate::events::EventBus;
use crate::metrics::{Metrics, ReasonLabel};
use icebox_core::{ActionSpec, ChargeMode, EventKind, InstanceState};
use icebox_policy::{Admission, Clock, EvictionReason, KeepAlivePolicy, Millis, PoolEntry};
use icebox_sandbox::SandboxBackend;
use admission::Place;
use instance::Slot;
use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

pub struct PoolConfig {
    pub charge: ChargeMode,
    pub queue_size: usize,
    pub pids_max: u64,
    pub tmp_bytes: u64,
    pub sample_interval: Duration,
    pub api_host: String,
    /// Prewarmed runtimes to keep ready: (kind, count).
    pub prewarm: Vec<(String, usize)>,
    /// Node default; an action's `icebox.reclaim` annotation overrides it.
    pub reclaim_mode: icebox_policy::ReclaimMode,
    pub desiccant: icebox_policy::DesiccantConfig,
    /// CPU cores reclaims may use when idle.
    pub cores: usize,
    pub library_pageout: crate::config::LibraryPageout,
}

/// An instance handed to one activation; give it back with [`Pool::release`].
pub struct Lease {
    pub instance: Arc<Instance>,
    pub cold: bool,
    /// /init duration on a cold start.
    pub init_ms: Option<u64>,
}

/// What happened to the instance during the activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Fine to reuse.
    Healthy,
    /// Must not serve again (timeout, crash, OOM): evict now.
    Broken(EvictReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictReason {
    Policy(EvictionReason),
    /// Timeout, crash, OOM or a stale version.
    Error,
    Stale,
    Shutdown,
}

impl EvictReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EvictReason::Policy(r) => r.as_str(),
            EvictReason::Error => "error",
            EvictReason::Stale => "stale",
            EvictReason::Shutdown => "shutdown",
        }
    }
}

struct Inner {
    slots: HashMap<String, Slot>,
    /// Instances being created (they hold a place under max_instances).
    starting: usize,
    shutting_down: bool,
}

pub struct Pool {
    backend: Arc<dyn SandboxBackend>,
    runtimes: icebox_sandbox::Runtimes,
    policy: KeepAlivePolicy,
    clock: Arc<dyn Clock>,
    cfg: PoolConfig,
    inner: Mutex<Inner>,
    /// Wakes the manager loop (an instance went idle, the pool changed).
    manager_wake: Notify,
    /// Wakes queued invocations (capacity may have appeared).
    capacity: Notify,
    waiting: AtomicUsize,
    prewarmed: prewarm::PrewarmState,
    desiccant: Mutex<desiccant::DesiccantState>,
    events: Arc<EventBus>,
    metrics: Arc<Metrics>,
}

impl Pool {
    pub fn new(
        backend: Arc<dyn SandboxBackend>,
        runtimes: icebox_sandbox::Runtimes,
        policy: KeepAlivePolicy,
        clock: Arc<dyn Clock>,
        cfg: PoolConfig,
        events: Arc<EventBus>,
        metrics: Arc<Metrics>,
    ) -> Arc<Pool> {
        metrics.pool_budget.set(policy.config().budget_bytes as i64);
        let desiccant_cfg = cfg.desiccant;
        Arc::new(Pool {
            backend,
            runtimes,
            policy,
            clock,
            cfg,
            inner: Mutex::new(Inner { slots: HashMap::new(), starting: 0, shutting_down: false }),
            manager_wake: Notify::new(),
            capacity: Notify::new(),
            waiting: AtomicUsize::new(0),
            prewarmed: Default::default(),
            desiccant: Mutex::new(desiccant::DesiccantState::new(&desiccant_cfg)),
            events,
            metrics,
        })
    }

    pub fn backend(&self) -> &Arc<dyn SandboxBackend> {
        &self.backend
    }

    pub fn runtimes(&self) -> &icebox_sandbox::Runtimes {
        &self.runtimes
    }

    fn charge_of(&self, slot: &Slot) -> u64 {
        let measured = slot.instance.last_measured();
        self.cfg.charge.charge(&measured.memory, slot.instance.action.limits.memory_bytes())
    }

    /// The keep-alive pool (idle and frozen, not stale) as the policy sees it.
    fn pool_entries(&self, inner: &Inner) -> Vec<PoolEntry> {
        inner
            .slots
            .values()
            .filter(|s| s.state.is_kept_alive())
            .map(|s| PoolEntry {
                id: s.instance.id.clone(),
                action: s.instance.fqn.clone(),
                idle_since: s.idle_since,
                charged: self.charge_of(s),
                frozen: s.state == InstanceState::Frozen,
            })
            .collect()
    }

    /// One attempt under the lock: a warm instance, a reserved place for a new one, or None
    /// (queue).
    fn try_place(&self, action: &Arc<ActionSpec>) -> Result<Option<Place>, AcquireError> {
        let mut inner = self.inner.lock().unwrap();
        if inner.shutting_down {
            return Err(AcquireError::ShuttingDown);
        }
        let fqn = action.fqn();
        let concurrency = action.limits.concurrency;
        // A running instance with spare intra-instance concurrency first (no thaw needed).
        let busy_with_room = inner
            .slots
            .values()
            .filter(|s| s.instance.fqn == fqn && !s.stale && s.instance.action.version == action.version)
            .filter(|s| s.state == InstanceState::Running && s.in_flight < concurrency)
            .min_by_key(|s| (s.in_flight, s.instance.id.clone()))
            .map(|s| s.instance.id.clone());
        let chosen = busy_with_room.or_else(|| {
            let candidates: Vec<PoolEntry> = self
                .pool_entries(&inner)
                .into_iter()
                .filter(|e| e.action == fqn)
                .filter(|e| {
                    let s = &inner.slots[&e.id];
                    !s.stale && s.instance.action.version == action.version
                })
                .collect();
            // An instance being reclaimed would make this invocation wait for the reclaim:
            // take another one when there is one.
            let free: Vec<PoolEntry> = candidates.iter().filter(|e| !inner.slots[&e.id].reclaiming).cloned().collect();
            let candidates = if free.is_empty() { candidates } else { free };
            self.policy.choose_warm(&candidates).map(|e| e.id.clone())
        });
        if let Some(id) = chosen {
            let slot = inner.slots.get_mut(&id).expect("chosen from the map");
            slot.state = InstanceState::Running;
            slot.in_flight += 1;
            slot.frozen_since = None;
            slot.reclaimed_since_last_run = false;
            return Ok(Some(Place::Warm(slot.instance.clone())));
        }
        let pool = self.pool_entries(&inner);
        let running = inner.slots.len() - pool.len() + inner.starting;
        match self.policy.admit_new_instance(&pool, running) {
            Admission::Queue => Ok(None),
            Admission::Start { evict } => {
                for id in &evict {
                    // Taken out of the keep-alive pool now so nobody else picks it.
                    if let Some(slot) = inner.slots.get_mut(id) {
                        slot.stale = true;
                        slot.state = InstanceState::Evicted;
                    }
                }
                inner.starting += 1;
                Ok(Some(Place::Cold { evict }))
            }
        }
    }

    /// Give an instance back after an activation.
    pub async fn release(&self, lease: Lease, outcome: Outcome) {
        let instance = lease.instance.clone();
        if let Some(reason) = self.put_back(&instance, outcome, true) {
            self.evict(&instance.id, reason).await;
        }
    }

    /// The books of giving an instance back; Some: it must be evicted now.
    fn put_back(&self, instance: &Instance, outcome: Outcome, ran: bool) -> Option<EvictReason> {
        let id = &instance.id;
        let evict = {
            let mut inner = self.inner.lock().unwrap();
            let now = self.clock.now_ms();
            match inner.slots.get_mut(id) {
                None => None,
                Some(slot) => {
                    slot.in_flight = slot.in_flight.saturating_sub(1);
                    if ran {
                        slot.invocations += 1;
                    }
                    match outcome {
                        Outcome::Broken(reason) => Some(reason),
                        Outcome::Healthy if slot.stale && slot.in_flight == 0 => Some(EvictReason::Stale),
                        Outcome::Healthy => {
                            if slot.in_flight == 0 && slot.state == InstanceState::Running {
                                slot.state = InstanceState::Idle;
                                slot.idle_since = now;
                            }
                            None
                        }
                    }
                }
            }
        };
        if ran {
            self.events.emit(id, &instance.fqn, EventKind::RunEnd, None, None);
        }
        if evict.is_none() {
            if ran {
                self.events.emit(id, &instance.fqn, EventKind::Idle, None, None);
            }
            self.manager_wake.notify_one();
            self.capacity.notify_waiters();
        }
        evict
    }

    /// A warm instance was claimed for a ticket that was dropped before it ran.
    fn unclaim(self: &Arc<Self>, instance: &Arc<Instance>) {
        if let Some(reason) = self.put_back(instance, Outcome::Healthy, false) {
            self.evict_later(instance.id.clone(), reason);
        }
    }

    /// A reserved place for a new instance is not used after all.
    fn unreserve_start(self: &Arc<Self>, evict: Vec<String>) {
        self.inner.lock().unwrap().starting -= 1;
        for id in evict {
            self.evict_later(id, EvictReason::Policy(EvictionReason::InstanceLimit));
        }
        self.capacity.notify_waiters();
    }

    /// Evict from a synchronous context (a drop): the sandbox is destroyed in the background.
    fn evict_later(self: &Arc<Self>, id: String, reason: EvictReason) {
        let pool = self.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move { pool.evict(&id, reason).await });
            }
            Err(_) => tracing::error!(instance = %id, "no runtime to evict the instance on"),
        }
    }

    /// Remove an instance and destroy its sandbox.
    pub async fn evict(&self, id: &str, reason: EvictReason) {
        let slot = self.inner.lock().unwrap().slots.remove(id);
        let Some(slot) = slot else { return };
        let instance = slot.instance;
        {
            let mut d = self.desiccant.lock().unwrap();
            d.store.forget_instance(&instance.id);
            if reason == EvictReason::Policy(EvictionReason::MemoryBudget) {
                d.threshold.on_eviction(self.clock.now_ms());
            }
        }
        let memory = instance.measured_memory();
        instance.sandbox.destroy().await;
        self.metrics.evictions.get_or_create(&ReasonLabel { reason: reason.as_str().to_string() }).inc();
        self.events.emit(&instance.id, &instance.fqn, EventKind::Evicted, Some(memory), Some(reason.as_str().to_string()));
        tracing::info!(instance = %instance.id, action = %instance.fqn, reason = reason.as_str(), "instance evicted");
        self.capacity.notify_waiters();
        self.manager_wake.notify_one();
    }

    /// The action changed or was deleted: idle instances go now, busy ones when they finish.
    pub async fn retire_action(&self, fqn: &str) {
        let idle: Vec<String> = {
            let mut inner = self.inner.lock().unwrap();
            let mut idle = Vec::new();
            for slot in inner.slots.values_mut().filter(|s| s.instance.fqn == fqn) {
                slot.stale = true;
                if slot.state.is_kept_alive() {
                    idle.push(slot.instance.id.clone());
                }
            }
            idle
        };
        for id in idle {
            self.evict(&id, EvictReason::Stale).await;
        }
    }

    /// Destroy every instance (daemon shutdown).
    pub async fn shutdown(&self) {
        let ids: Vec<String> = {
            let mut inner = self.inner.lock().unwrap();
            inner.shutting_down = true;
            inner.slots.keys().cloned().collect()
        };
        self.capacity.notify_waiters();
        self.drain_stem_cells().await;
        futures::future::join_all(ids.iter().map(|id| self.evict(id, EvictReason::Shutdown))).await;
        self.backend.shutdown().await;
    }

    pub fn now(&self) -> Millis {
        self.clock.now_ms()
    }
}

