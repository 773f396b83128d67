//! The instance pool: routes invocations to warm instances or cold-starts new ones within the
//! node's limits, keeps idle instances alive (freezing them after the pause grace) and evicts
//! them as the keep-alive policy decides. Decisions come from icebox-policy; this module only
//! keeps the books and acts through the sandbox backend. The memory techniques are components
//! (component.rs, registered in techniques.rs) that the pool calls at each lifecycle hook;
//! docs/architecture.md ("Inside the pool") has the hook order.
//!
//! The books are split by what they guard, each with its own private lock:
//! [`slots::Slots`] (instances and their states), [`admission::Queue`] (lock-free) and each
//! component's own. Lock order: each of these locks is taken only inside its own type's
//! methods, which never call into another part of the pool, so no two pool locks are ever
//! held together, and hooks are called with none held. Under them only leaf locks are taken
//! (`Instance::measured`, to read a charge). `Instance::frozen` (async) is taken before a pool
//! lock (freeze, reclaim, control requests) and never while one is held.

mod admission;
pub mod backends;
pub mod choice;
mod cold;
pub mod component;
mod control;
pub mod desiccant;
mod env;
mod error;
pub mod extensions;
mod host_budget;
mod hybrid;
mod instance;
mod manager;
pub mod offload;
mod pool_state;
mod prewarm;
pub mod sharing;
mod slots;
pub mod snapshots;
mod techniques;
mod view;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_burst;
#[cfg(test)]
mod tests_freeze;
#[cfg(test)]
mod tests_gate;
#[cfg(test)]
mod tests_hybrid;
#[cfg(test)]
mod tests_manager_wake;
#[cfg(test)]
mod tests_snapshots;
#[cfg(test)]
mod tests_techniques;

pub use admission::Ticket;
pub use choice::{Observed, TechniquesMode};
pub use component::{Component, Components};
pub use control::ControlError;
pub use error::{AcquireError, AdmitError, InitError, StartError};
pub use instance::Instance;
pub use offload::OffloadConfig;
pub(crate) use pool_state::PoolState;

use crate::events::EventBus;
use crate::metrics::{Metrics, ReasonLabel};
use admission::Queue;
use icebox_core::ActionSpec;
use icebox_core::{ChargeMode, EventKind};
use icebox_policy::{Clock, EvictionReason, KeepAlivePolicy};
use instance::Slot;
use slots::Slots;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
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
    pub library_pageout: icebox_policy::LibraryPageout,
    pub offload: OffloadConfig,
    /// The offload pool, opened (its device exists from here on).
    pub offload_pool: Arc<PoolState>,
    pub snapshots: snapshots::SnapshotConfig,
    /// The hybrid histogram keep-alive (`--keep-alive-policy hybrid`); None: the fixed TTL.
    pub hybrid: Option<icebox_policy::HybridConfig>,
    /// The node's budget of buffered activation output (logs and responses).
    pub output_budget: Arc<icebox_sandbox::OutputBudget>,
    /// `--techniques`: each technique's own flags (default) or chosen per action (auto).
    pub techniques: TechniquesMode,
}

/// An instance handed to one activation. Give it back with [`Lease::release`]; a lease
/// dropped without that (a cancelled or panicking activation) evicts its instance, whose state
/// is unknown, and frees its place at once.
pub struct Lease {
    pool: Arc<Pool>,
    pub instance: Arc<Instance>,
    pub cold: bool,
    /// /init duration on a cold start.
    pub init_ms: Option<u64>,
    /// It serves an invocation (a pre-warm's lease does not): the components see its start
    /// and end.
    activation: bool,
    given_back: bool,
}

/// Whether an instance may serve again after an activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    Reusable,
    /// Must not serve again (timeout, crash, OOM): evict now.
    Broken(EvictReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictReason {
    /// The keep-alive policy: TTL, memory budget or max_instances.
    Policy(EvictionReason),
    /// The instance failed: a timeout, crash or OOM in an activation, a failed freeze, thaw
    /// or reclaim, or a lease dropped mid-activation.
    Error,
    /// Its action was updated or deleted.
    Stale,
    /// Its runtime exited while it was idle (killed, crashed on its own): removed at once
    /// rather than found dead by the next activation.
    Exited,
    /// An operator asked for it (DELETE /icebox/v1/instances/{id}).
    Requested,
    /// Its namespace's idle instances were over the namespace's keep-alive memory share.
    NamespaceShare,
    Shutdown,
}

impl EvictReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EvictReason::Policy(r) => r.as_str(),
            EvictReason::Error => "error",
            EvictReason::Stale => "stale",
            EvictReason::Exited => "exited",
            EvictReason::Requested => "requested",
            EvictReason::NamespaceShare => "namespace_share",
            EvictReason::Shutdown => "shutdown",
        }
    }
}

pub struct Pool {
    backends: backends::Backends,
    runtimes: icebox_sandbox::Runtimes,
    policy: KeepAlivePolicy,
    clock: Arc<dyn Clock>,
    cfg: PoolConfig,
    slots: Slots,
    queue: Queue,
    /// The techniques, in hook order (techniques.rs).
    components: Components,
    /// Which of them apply to each action (choice.rs).
    choices: choice::TechniqueChoices,
    /// Wakes the manager loop (an instance went idle, the pool changed).
    manager_wake: Notify,
    /// When (pool clock) the manager loop next wakes by itself; 0 while it runs a round, so
    /// every change then wakes it again.
    manager_wakes_at: AtomicU64,
    events: Arc<EventBus>,
    metrics: Arc<Metrics>,
}

impl Lease {
    fn new(
        pool: &Arc<Pool>,
        instance: Arc<Instance>,
        cold: bool,
        init_ms: Option<u64>,
        activation: bool,
    ) -> Lease {
        if activation {
            for c in pool.components.iter() {
                c.on_activation_start(pool, &instance.action);
            }
            if !cold {
                pool.observe(&instance.action, &instance.id, Observed::WarmStart);
            }
        }
        Lease {
            pool: pool.clone(),
            instance,
            cold,
            init_ms,
            activation,
            given_back: false,
        }
    }

    /// The activation is over (whatever became of the instance).
    fn end(&mut self) {
        self.given_back = true;
        if self.activation {
            for c in self.pool.components.iter() {
                c.on_activation_end(&self.pool, &self.instance.action);
            }
        }
    }

    /// Give the instance back after its activation.
    pub async fn release(mut self, health: Health) {
        self.end();
        let pool = self.pool.clone();
        match pool.put_back(&self.instance, health, true) {
            Some(reason) => pool.evict(&self.instance.id, reason).await,
            None => {
                let uss = self.instance.measured_memory().uss;
                if uss > 0 {
                    pool.observe(
                        &self.instance.action,
                        &self.instance.id,
                        Observed::IdleUss(uss),
                    );
                }
                for c in pool.components.iter() {
                    c.on_release(&pool, &self.instance);
                }
            }
        }
    }

    /// Give the instance back unused and evict it (it could not be made ready).
    async fn discard(mut self, reason: EvictReason) {
        self.end();
        self.pool.evict(&self.instance.id, reason).await;
    }

    /// A pre-warmed instance, never run, joins the keep-alive pool as idle.
    async fn park(mut self) {
        self.end();
        let pool = self.pool.clone();
        if let Some(reason) = pool.put_back(&self.instance, Health::Reusable, false) {
            pool.evict(&self.instance.id, reason).await;
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.given_back {
            self.end();
            tracing::warn!(instance = %self.instance.id, "an activation ended without giving its instance back: evicting it");
            self.pool
                .evict_in_background(&self.instance.id, EvictReason::Error);
        }
    }
}

impl Pool {
    pub fn new(
        backends: backends::Backends,
        runtimes: icebox_sandbox::Runtimes,
        policy: KeepAlivePolicy,
        clock: Arc<dyn Clock>,
        cfg: PoolConfig,
        events: Arc<EventBus>,
        metrics: Arc<Metrics>,
    ) -> Arc<Pool> {
        metrics
            .pool_budget
            .set(i64::try_from(policy.config().budget_bytes).unwrap_or(i64::MAX));
        let components = techniques::register(&cfg, &backends);
        let available = techniques::available(&cfg, &backends);
        tracing::debug!(components = ?components.names(), %available, mode = %cfg.techniques, "pool components");
        let choices = choice::TechniqueChoices::new(cfg.techniques, available);
        Arc::new(Pool {
            backends,
            runtimes,
            policy,
            clock,
            slots: Slots::new(cfg.charge),
            queue: Queue::new(cfg.queue_size),
            components,
            choices,
            cfg,
            manager_wake: Notify::new(),
            manager_wakes_at: AtomicU64::new(0),
            events,
            metrics,
        })
    }

    pub fn backends(&self) -> &backends::Backends {
        &self.backends
    }

    pub fn runtimes(&self) -> &icebox_sandbox::Runtimes {
        &self.runtimes
    }

    /// The registered component of type `T` (a technique's own API: reclaim now, build a
    /// snapshot…); None when the node runs without it.
    pub fn component<T: Component>(&self) -> Option<&T> {
        self.components.get::<T>()
    }

    /// The node started with these actions: the components take over (stem cells, the
    /// snapshots an earlier run left).
    pub async fn start_components(self: &Arc<Self>, actions: &[Arc<ActionSpec>]) {
        for c in self.components.iter() {
            c.on_node_start(self, actions).await;
        }
    }

    /// An action was created or updated (after [`Self::retire_action`] of its old version).
    pub fn action_deployed(self: &Arc<Self>, action: &Arc<ActionSpec>) {
        for c in self.components.for_action(self, action) {
            c.on_action_deployed(self, action);
        }
    }

    /// The books of giving an instance back; Some: it must be evicted now.
    fn put_back(&self, instance: &Instance, health: Health, ran: bool) -> Option<EvictReason> {
        let id = &instance.id;
        let keep_alive = self
            .components
            .iter()
            .find_map(|c| c.keep_alive_ms(self, instance));
        let evict = self
            .slots
            .put_back(id, health, ran, self.clock.now_ms(), keep_alive);
        if ran {
            self.events
                .emit(id, &instance.fqn, EventKind::RunEnd, None, None);
        }
        if evict.is_none() {
            if ran {
                self.events
                    .emit(id, &instance.fqn, EventKind::Idle, None, None);
            }
            // Waking the manager for nothing costs a task switch (often a thread's) per
            // activation; it wakes by itself at its planned time.
            let planned = self.manager_wakes_at.load(Ordering::SeqCst);
            if self
                .slots
                .due_before(id, &self.policy, self.clock.now_ms(), planned)
            {
                self.manager_wake.notify_one();
            }
            self.queue.wake_all();
        }
        evict
    }

    /// A warm instance was claimed for a ticket that was dropped before it ran.
    fn unclaim(self: &Arc<Self>, instance: &Arc<Instance>) {
        if let Some(reason) = self.put_back(instance, Health::Reusable, false) {
            self.evict_in_background(&instance.id, reason);
        }
    }

    /// Remove an instance and destroy its sandbox.
    pub async fn evict(&self, id: &str, reason: EvictReason) {
        if let Some(slot) = self.slots.remove(id) {
            self.destroy(slot, reason).await;
        }
    }

    /// Watches an instance's runtime for the rest of its life: if it exits while the instance
    /// is kept alive, the instance goes now. (A busy instance's death is the activation's to
    /// report; a frozen one under the v1 freezer only dies once thawed.)
    fn watch_exit(self: &Arc<Self>, instance: &Arc<Instance>) {
        let pool = Arc::downgrade(self);
        let instance = instance.clone();
        tokio::spawn(async move {
            instance.sandbox.exited().await;
            let Some(pool) = pool.upgrade() else { return };
            if let Some(slot) = pool.slots.remove_kept_alive(&instance.id) {
                tracing::warn!(instance = %instance.id, action = %instance.fqn, "the runtime of an idle instance exited");
                pool.destroy(slot, EvictReason::Exited).await;
            }
        });
    }

    /// Evict from a synchronous context (a drop): out of the books now, the sandbox is
    /// destroyed in the background.
    fn evict_in_background(self: &Arc<Self>, id: &str, reason: EvictReason) {
        let Some(slot) = self.slots.remove(id) else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                let pool = self.clone();
                rt.spawn(async move { pool.destroy(slot, reason).await });
            }
            Err(_) => tracing::error!(instance = %id, "no runtime left to destroy the instance on"),
        }
    }

    /// Destroy the sandbox of an instance already out of the books.
    async fn destroy(&self, slot: Slot, reason: EvictReason) {
        let instance = slot.instance;
        for c in self.components.iter() {
            c.on_evict(self, &instance, reason);
        }
        // Its place is free from now on.
        self.queue.wake_all();
        self.manager_wake.notify_one();
        let memory = instance.measured_memory();
        instance.sandbox.destroy().await;
        for c in self.components.iter() {
            c.on_destroyed(self, &instance);
        }
        self.metrics
            .evictions
            .get_or_create(&ReasonLabel {
                reason: reason.as_str().to_string(),
            })
            .inc();
        self.events.emit(
            &instance.id,
            &instance.fqn,
            EventKind::Evicted,
            Some(memory),
            Some(reason.as_str().to_string()),
        );
        tracing::info!(instance = %instance.id, action = %instance.fqn, reason = reason.as_str(), "instance evicted");
    }

    /// Evict an idle or frozen instance now (an operator's or benchmark's request). Returns
    /// false when there is no such instance or it is busy.
    pub async fn evict_idle(&self, id: &str) -> bool {
        self.evict_idle_for(id, EvictReason::Requested).await
    }

    /// Evict an idle or frozen instance now, saying why. False when there is no such
    /// instance or it is busy.
    pub async fn evict_idle_for(&self, id: &str, reason: EvictReason) -> bool {
        match self.slots.remove_kept_alive(id) {
            Some(slot) => {
                self.destroy(slot, reason).await;
                true
            }
            None => false,
        }
    }

    /// The node's budget of buffered activation output.
    pub fn output_budget(&self) -> &Arc<icebox_sandbox::OutputBudget> {
        &self.cfg.output_budget
    }

    /// Whether an instance of this id is in the pool (busy or not).
    pub fn has_instance(&self, id: &str) -> bool {
        self.slots.snapshot().iter().any(|s| s.instance.id == id)
    }

    /// The action changed or was deleted: idle instances go now, busy ones when they finish.
    pub async fn retire_action(&self, fqn: &str) {
        self.forget_choice(fqn);
        for c in self.components.iter() {
            c.on_action_retired(self, fqn);
        }
        for id in self.slots.retire(fqn) {
            self.evict(&id, EvictReason::Stale).await;
        }
    }

    /// Destroy every instance (daemon shutdown). Queued invocations fail; a cold start in
    /// flight destroys its instance when it finishes, and is waited for.
    pub async fn shutdown(&self) {
        let ids = self.slots.shut_down();
        self.queue.wake_all();
        for c in self.components.iter() {
            c.on_shutdown(self).await;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let changed = self.queue.notified();
            if self.slots.starting() == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline.into(), changed)
                .await
                .is_err()
            {
                tracing::warn!("instances still starting at shutdown");
                break;
            }
        }
        futures::future::join_all(ids.iter().map(|id| self.evict(id, EvictReason::Shutdown))).await;
        futures::future::join_all(self.backends.all().into_iter().map(|b| b.shutdown())).await;
        // After the instances: swapoff then has (almost) nothing to bring back.
        self.cfg.offload_pool.close();
    }
}
