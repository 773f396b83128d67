//! The techniques plug into the pool as components: each owns its state (node-wide in its own
//! struct, per instance in [`Extensions`]) and sees the instance lifecycle through the hooks
//! of [`Component`]. The pool calls every registered component at each hook, in registration
//! order (`techniques.rs`); the order of the hooks in an instance's life is written in
//! docs/architecture.md ("The pool and its components").
//!
//! Every hook has a default that does nothing, so a component implements only what it uses.
//! Hooks run outside every pool lock (mod.rs's lock order), so a component may call back
//! into the pool (evict, read the books) from any of them.

use super::backends::Isolation;
use super::extensions::Extensions;
use super::instance::{Instance, Origin, Slot};
use super::{EvictReason, Pool};
use async_trait::async_trait;
use icebox_core::api::InstanceView;
use icebox_core::ActionSpec;
use icebox_policy::{Millis, Technique};
use icebox_sandbox::{InstanceSpec, Sandbox, SandboxBackend};
use std::any::Any;
use std::sync::Arc;

/// A sandbox a component hands a cold start instead of a fresh one.
pub struct Provided {
    pub sandbox: Arc<dyn Sandbox>,
    pub origin: Origin,
    /// The provider's own state on the new instance.
    pub ext: Extensions,
}

#[async_trait]
pub trait Component: Any + Send + Sync {
    /// For logs and docs.
    fn name(&self) -> &'static str;

    /// The technique it is, when the per-action choice (choice.rs) may leave an action out
    /// of it; None: it always applies (the host budget, the keep-alive policy).
    fn technique(&self) -> Option<Technique> {
        None
    }

    /// The node started with these actions in its registry.
    async fn on_node_start(&self, _pool: &Arc<Pool>, _actions: &[Arc<ActionSpec>]) {}

    /// An action was created or updated (its instances of the old version are retired first).
    fn on_action_deployed(&self, _pool: &Arc<Pool>, _action: &Arc<ActionSpec>) {}

    /// An action was updated or deleted: what the component keeps of it goes.
    fn on_action_retired(&self, _pool: &Pool, _fqn: &str) {}

    /// Environment a new runtime of `kind` starts with (start-up settings of the technique);
    /// `action` None: a runtime started before any action is known (a stem cell), which gets
    /// the node's defaults and later serves only actions whose environment is the same.
    fn instance_env(
        &self,
        _pool: &Pool,
        _kind: &str,
        _action: Option<&ActionSpec>,
    ) -> Vec<(String, String)> {
        Vec::new()
    }

    /// A ready sandbox for a cold start instead of a fresh one (a snapshot restore, a stem
    /// cell). The first component that provides one wins; None lets the next one try.
    async fn provide(
        &self,
        _pool: &Arc<Pool>,
        _action: &Arc<ActionSpec>,
        _isolation: Isolation,
        _spec: &InstanceSpec,
    ) -> Option<Provided> {
        None
    }

    /// Just before a fresh sandbox starts (no component provided one).
    async fn before_start(
        &self,
        _pool: &Arc<Pool>,
        _isolation: Isolation,
        _backend: &Arc<dyn SandboxBackend>,
        _spec: &InstanceSpec,
    ) {
    }

    /// Attach the component's per-instance state; the instance is not shared yet.
    fn on_created(&self, _action: &ActionSpec, _origin: &Origin, _ext: &mut Extensions) {}

    /// The runtime answers on its socket, before /init (FaaSMem's first time barrier).
    async fn on_runtime_ready(&self, _pool: &Arc<Pool>, _instance: &Arc<Instance>) {}

    /// /init succeeded, before the first /run (the second barrier). A restored instance
    /// passes both barriers at once.
    async fn on_init_done(&self, _pool: &Arc<Pool>, _instance: &Arc<Instance>) {}

    /// An activation of `action` got its instance (warm or cold).
    fn on_activation_start(&self, _pool: &Pool, _action: &ActionSpec) {}

    /// That activation gave its instance back (whatever became of the instance).
    fn on_activation_end(&self, _pool: &Pool, _action: &ActionSpec) {}

    /// How long this instance, going idle now, is kept (from now), instead of the node's TTL;
    /// the first component with an answer decides. Called on every give-back, so it must not
    /// act; `on_release` may.
    fn keep_alive_ms(&self, _pool: &Pool, _instance: &Instance) -> Option<Millis> {
        None
    }

    /// A kept-alive instance was taken for a request after `idle_ms` of idleness.
    fn on_reused(&self, _pool: &Pool, _instance: &Instance, _idle_ms: Millis) {}

    /// An activation ended and the instance stays in the pool.
    fn on_release(&self, _pool: &Arc<Pool>, _instance: &Arc<Instance>) {}

    /// The instance left the books; its sandbox is destroyed next.
    fn on_evict(&self, _pool: &Pool, _instance: &Instance, _reason: EvictReason) {}

    /// Its sandbox is gone.
    fn on_destroyed(&self, _pool: &Pool, _instance: &Instance) {}

    /// From the manager loop, on every round; returns when it next has something to do (the
    /// loop also wakes on pool changes and its sample interval).
    fn tick(&self, _pool: &Arc<Pool>, _now: Millis) -> Option<Millis> {
        None
    }

    /// Fill in the component's part of an instance's API view.
    fn view(&self, _pool: &Pool, _slot: &Slot, _view: &mut InstanceView) {}

    /// Instances the component holds outside the pool's books (stem cells), for the API.
    fn extra_views(&self, _pool: &Pool) -> Vec<InstanceView> {
        Vec::new()
    }

    /// The daemon stops: before the pool's instances are destroyed.
    async fn on_shutdown(&self, _pool: &Pool) {}
}

/// The registered components, in hook order.
#[derive(Default)]
pub struct Components(Vec<Arc<dyn Component>>);

impl Components {
    pub fn new(list: Vec<Arc<dyn Component>>) -> Components {
        Components(list)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Component>> {
        self.0.iter()
    }

    /// The registered component of type `T` (for the node API's technique endpoints and for
    /// the few places one technique defers to another), None when it is not registered.
    pub fn get<T: Component>(&self) -> Option<&T> {
        self.0
            .iter()
            .find_map(|c| (c.as_ref() as &dyn Any).downcast_ref::<T>())
    }

    /// The components that may act on `action`: those the per-action choice leaves it in.
    pub fn for_action<'a>(
        &'a self,
        pool: &'a Pool,
        action: &'a ActionSpec,
    ) -> impl Iterator<Item = &'a Arc<dyn Component>> + 'a {
        self.0
            .iter()
            .filter(move |c| c.technique().is_none_or(|t| pool.allows(action, t)))
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|c| c.name()).collect()
    }
}
