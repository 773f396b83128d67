//! Desiccant in the pool: which frozen instances to reclaim, when, decided by the pure policy
//! in icebox_policy::desiccant from the pool's books.

use super::instance::Slot;
use super::Pool;
use icebox_core::{ActionSpec, ChargeMode, InstanceState, MemoryStats};
use icebox_policy::{
    plan, reclaim_slots, Candidate, DesiccantConfig, Estimate, Millis, Profile, ProfileStore,
    ReclaimMode, ReclaimThreshold,
};
use std::sync::{Arc, Mutex};

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
struct Load {
    /// Charged memory of the keep-alive pool, and its budget.
    charged: u64,
    budget: u64,
    /// Activations running now, and the node's cores.
    running: usize,
    cores: usize,
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
    fn plan(
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

    fn estimate(&self, id: &str, fqn: &str) -> Option<Estimate> {
        self.state.lock().unwrap().store.estimate(id, fqn)
    }
}

impl Pool {
    /// The action's `icebox.reclaim` annotation, else the node's mode.
    pub fn mode_of(&self, action: &ActionSpec) -> ReclaimMode {
        action
            .annotation("icebox.reclaim")
            .and_then(|v| v.as_str())
            .and_then(|s| s.parse().ok())
            .unwrap_or(self.cfg.reclaim_mode)
    }

    /// The memory measure reclaims are judged in: what the budget charges, or USS when the
    /// budget charges declared limits (which no reclaim changes).
    pub(super) fn reclaim_measure(&self, m: &MemoryStats) -> u64 {
        match self.cfg.charge {
            ChargeMode::Pss => m.pss,
            _ => m.uss,
        }
    }

    /// Start the reclaims the policy wants now; returns when the answer could next change.
    pub(super) fn plan_reclaims(self: &Arc<Self>, now: Millis) -> Option<Millis> {
        let cfg = &self.cfg.desiccant;
        let books = self.slots.snapshot();
        let candidates: Vec<Candidate> = books
            .iter()
            .filter(|s| {
                s.instance.mode == ReclaimMode::Desiccant
                    && s.state == InstanceState::Frozen
                    && !s.reclaiming
                    && !s.stale
            })
            .map(|s| self.candidate(s))
            .collect();
        let load = Load {
            charged: books
                .iter()
                .filter(|s| s.state.is_kept_alive())
                .map(|s| self.slots.charge_of(s))
                .sum(),
            budget: self.policy.config().budget_bytes,
            running: books.iter().map(|s| s.in_flight as usize).sum(),
            cores: self.cfg.cores,
        };
        let (ids, threshold_change) = self.reclaim_books.plan(cfg, &load, &candidates, now);
        for id in ids {
            if let Some(instance) = self.begin_reclaim(&id) {
                let pool = self.clone();
                tokio::spawn(async move {
                    if let Err(e) = pool.run_reclaim(instance, None).await {
                        tracing::warn!(instance = %id, "reclaim failed: {e}");
                    }
                });
            }
        }
        // Wake when the threshold next rises or a frozen instance becomes a candidate.
        let next_eligible = candidates
            .iter()
            .filter(|c| !c.eligible(cfg, now))
            .filter_map(|c| c.frozen_since.map(|f| f + cfg.frozen_timeout_ms))
            .filter(|t| *t > now)
            .min();
        threshold_change.into_iter().chain(next_eligible).min()
    }

    fn candidate(&self, s: &Slot) -> Candidate {
        Candidate {
            id: s.instance.id.clone(),
            action: s.instance.fqn.clone(),
            memory: self.reclaim_measure(&s.instance.measured_memory()),
            frozen_since: s.frozen_since,
            reclaimed_since_last_run: s.reclaimed_since_last_run,
        }
    }

    /// What a reclaim of this idle instance is expected to free now (for `icebox memory`).
    pub(super) fn reclaimable_of(&self, s: &Slot) -> Option<u64> {
        if !s.state.is_kept_alive() || s.instance.mode == ReclaimMode::Vanilla {
            return None;
        }
        if s.reclaimed_since_last_run {
            return Some(0);
        }
        let estimate = self
            .reclaim_books
            .estimate(&s.instance.id, &s.instance.fqn)
            .unwrap_or_else(|| Estimate::prior(&self.cfg.desiccant));
        Some(estimate.reclaimable_bytes(self.reclaim_measure(&s.instance.measured_memory())))
    }
}
