//! Desiccant as a pool component (docs/desiccant.md): frozen instances of managed runtimes are
//! reclaimed of their frozen garbage on the node's idle CPU, when the pure policy in
//! icebox_policy::desiccant says so; eager mode (a full GC after every activation) is a
//! start-up setting of the runtime, vanilla does neither.
//!
//! Hooks: `instance_env` (eager GC), `on_created` (the instance's reclaim mode), `tick`
//! (plan and start reclaims), `on_evict` (forget its profile; a budget eviction raises the
//! threshold), `view` (mode and what a reclaim would free now).

mod books;
mod plan;
mod reclaim;

use super::component::Component;
use super::extensions::Extensions;
use super::instance::{Instance, Origin, Slot};
use super::{EvictReason, Pool};
use async_trait::async_trait;
use books::ReclaimBooks;
use icebox_core::api::InstanceView;
use icebox_core::{ActionSpec, ChargeMode};
use icebox_policy::{DesiccantConfig, EvictionReason, LibraryPageout, Millis, ReclaimMode};
use std::sync::Arc;

/// Desiccant's settings and books (node-wide).
pub struct Desiccant {
    /// Node default; an action's `icebox.reclaim` annotation overrides it.
    node_mode: ReclaimMode,
    cfg: DesiccantConfig,
    charge: ChargeMode,
    /// CPU cores reclaims may use when idle.
    cores: usize,
    library_pageout: LibraryPageout,
    books: ReclaimBooks,
}

/// An instance's reclaim mode (its per-instance state).
pub struct Reclaim {
    pub mode: ReclaimMode,
}

/// The reclaim mode of an instance (vanilla when Desiccant is not registered).
pub fn mode_of_instance(instance: &Instance) -> ReclaimMode {
    instance
        .ext::<Reclaim>()
        .map_or(ReclaimMode::Vanilla, |r| r.mode)
}

/// Whether the policy reclaims this instance: Desiccant mode, and the action's technique
/// choice still has reclaim (it may have been turned off since the instance started).
pub fn reclaims(pool: &Pool, instance: &Instance) -> bool {
    mode_of_instance(instance) == ReclaimMode::Desiccant
        && pool.allows(&instance.action, icebox_policy::Technique::Reclaim)
}

impl Desiccant {
    pub fn new(
        node_mode: ReclaimMode,
        cfg: DesiccantConfig,
        charge: ChargeMode,
        cores: usize,
        library_pageout: LibraryPageout,
    ) -> Desiccant {
        Desiccant {
            books: ReclaimBooks::new(&cfg),
            node_mode,
            cfg,
            charge,
            cores,
            library_pageout,
        }
    }

    /// The node's mode (what a stem cell starts with).
    pub fn node_mode(&self) -> ReclaimMode {
        self.node_mode
    }

    /// The action's `icebox.reclaim` annotation, else the node's mode.
    pub fn mode_of(&self, action: &ActionSpec) -> ReclaimMode {
        action
            .annotation("icebox.reclaim")
            .and_then(|v| v.as_str())
            .and_then(|s| s.parse().ok())
            .unwrap_or(self.node_mode)
    }
}

#[async_trait]
impl Component for Desiccant {
    fn name(&self) -> &'static str {
        "desiccant"
    }

    fn technique(&self) -> Option<icebox_policy::Technique> {
        Some(icebox_policy::Technique::Reclaim)
    }

    /// Eager mode's full GC after every activation is a start-up setting of the runtime.
    fn instance_env(
        &self,
        _pool: &Pool,
        _kind: &str,
        action: Option<&ActionSpec>,
    ) -> Vec<(String, String)> {
        let mode = action.map_or(self.node_mode, |a| self.mode_of(a));
        if mode == ReclaimMode::Eager {
            vec![("ICEBOX_EAGER_GC".to_string(), "1".to_string())]
        } else {
            Vec::new()
        }
    }

    fn on_created(&self, action: &ActionSpec, _origin: &Origin, ext: &mut Extensions) {
        ext.insert(Reclaim {
            mode: self.mode_of(action),
        });
    }

    fn on_evict(&self, pool: &Pool, instance: &Instance, reason: EvictReason) {
        let budget_eviction = reason == EvictReason::Policy(EvictionReason::MemoryBudget);
        self.books
            .forget(&instance.id, budget_eviction.then(|| pool.clock.now_ms()));
    }

    fn tick(&self, pool: &Arc<Pool>, now: Millis) -> Option<Millis> {
        self.plan_reclaims(pool, now)
    }

    fn view(&self, pool: &Pool, slot: &Slot, view: &mut InstanceView) {
        view.reclaimable = self.reclaimable_of(pool, slot);
        view.reclaim_mode = mode_of_instance(&slot.instance).as_str().to_string();
    }
}
