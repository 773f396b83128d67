//! Desiccant's books: reclaim profiles, the reclaim threshold and the reclaims running.

use icebox_policy::{
    plan, reclaim_slots, Candidate, DesiccantConfig, Estimate, Millis, Profile, ProfileStore,
    ReclaimThreshold,
};
use std::sync::Mutex;

/// Reclaim profiles, the reclaim threshold and the reclaims running, under their own lock
/// (never held with another pool lock, see mod.rs).
pub(super) struct ReclaimBooks {
    state: Mutex<Books>,
}

struct Books {
    threshold: ReclaimThreshold,
    store: ProfileStore,
    /// Reclaims running now (each uses one core).
    in_progress: usize,
}

/// How loaded the node is, as the reclaim planner needs it.
pub(super) struct Load {
    /// Charged memory of the keep-alive pool, and its budget.
    pub charged: u64,
    pub budget: u64,
    /// Activations running now, and the node's cores.
    pub running: usize,
    pub cores: usize,
}

impl ReclaimBooks {
    pub fn new(cfg: &DesiccantConfig) -> Self {
        ReclaimBooks {
            state: Mutex::new(Books {
                threshold: ReclaimThreshold::new(cfg),
                store: ProfileStore::new(),
                in_progress: 0,
            }),
        }
    }

    /// An instance is gone; `budget_eviction_at`: the memory budget evicted it then.
    pub fn forget(&self, id: &str, budget_eviction_at: Option<Millis>) {
        let mut b = self.state.lock().unwrap();
        b.store.forget_instance(id);
        if let Some(now) = budget_eviction_at {
            b.threshold.on_eviction(now);
        }
    }

    pub fn begin(&self) {
        self.state.lock().unwrap().in_progress += 1;
    }

    pub fn end(&self) {
        self.state.lock().unwrap().in_progress -= 1;
    }

    /// Which candidates to reclaim now, and when the threshold next changes by itself.
    pub fn plan(
        &self,
        cfg: &DesiccantConfig,
        load: &Load,
        candidates: &[Candidate],
        now: Millis,
    ) -> (Vec<String>, Option<Millis>) {
        let b = self.state.lock().unwrap();
        let slots = reclaim_slots(load.cores, load.running, b.in_progress);
        (
            plan(
                cfg,
                &b.threshold,
                &b.store,
                candidates,
                load.charged,
                load.budget,
                now,
                slots,
            ),
            b.threshold.next_change(now),
        )
    }

    /// Returns whether the profile was usable.
    pub fn record(&self, id: &str, fqn: &str, profile: Profile) -> bool {
        self.state.lock().unwrap().store.record(id, fqn, profile)
    }

    pub fn estimate(&self, id: &str, fqn: &str) -> Option<Estimate> {
        self.state.lock().unwrap().store.estimate(id, fqn)
    }
}
