//! Desiccant in the pool: which frozen instances to reclaim, when, decided by the pure policy
//! in icebox_policy::desiccant from the pool's books.

use super::instance::Slot;
use super::Pool;
use icebox_core::{ActionSpec, ChargeMode, InstanceState, MemoryStats};
use icebox_policy::{plan, reclaim_slots, Candidate, DesiccantConfig, Estimate, Millis, ProfileStore, ReclaimMode, ReclaimThreshold};
use std::sync::Arc;

pub(super) struct DesiccantState {
    pub threshold: ReclaimThreshold,
    pub store: ProfileStore,
    /// Reclaims running now (each uses one core).
    pub in_progress: usize,
}

impl DesiccantState {
    pub fn new(cfg: &DesiccantConfig) -> Self {
        DesiccantState { threshold: ReclaimThreshold::new(cfg), store: ProfileStore::new(), in_progress: 0 }
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
        let (candidates, charged, running) = {
            let inner = self.inner.lock().unwrap();
            let candidates: Vec<Candidate> = inner
                .slots
                .values()
                .filter(|s| s.instance.mode == ReclaimMode::Desiccant && s.state == InstanceState::Frozen && !s.reclaiming && !s.stale)
                .map(|s| self.candidate(s))
                .collect();
            let charged = inner.slots.values().filter(|s| s.state.is_kept_alive()).map(|s| self.charge_of(s)).sum::<u64>();
            let running = inner.slots.values().map(|s| s.in_flight as usize).sum::<usize>();
            (candidates, charged, running)
        };
        let budget = self.policy.config().budget_bytes;
        let ids = {
            let d = self.desiccant.lock().unwrap();
            let slots = reclaim_slots(self.cfg.cores, running, d.in_progress);
            plan(cfg, &d.threshold, &d.store, &candidates, charged, budget, now, slots)
        };
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
        let threshold_change = self.desiccant.lock().unwrap().threshold.next_change(now);
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
        let d = self.desiccant.lock().unwrap();
        let estimate = d
            .store
            .estimate(&s.instance.id, &s.instance.fqn)
            .unwrap_or_else(|| Estimate::prior(&self.cfg.desiccant));
        Some(estimate.reclaimable_bytes(self.reclaim_measure(&s.instance.measured_memory())))
    }
}
