//! Which frozen instances to reclaim, and when: the pure policy in icebox_policy::desiccant
//! decides from the pool's books.

use super::books::Load;
use super::{mode_of_instance, reclaims, Desiccant};
use crate::pool::instance::Slot;
use crate::pool::Pool;
use icebox_core::{ChargeMode, InstanceState, MemoryStats};
use icebox_policy::{Candidate, Estimate, Millis, ReclaimMode};
use std::sync::Arc;

impl Desiccant {
    /// The memory measure reclaims are judged in: what the budget charges, or USS when the
    /// budget charges declared limits (which no reclaim changes).
    pub(super) fn reclaim_measure(&self, m: &MemoryStats) -> u64 {
        match self.charge {
            ChargeMode::Pss => m.pss,
            _ => m.uss,
        }
    }

    /// Start the reclaims the policy wants now; returns when the answer could next change.
    pub(super) fn plan_reclaims(&self, pool: &Arc<Pool>, now: Millis) -> Option<Millis> {
        let cfg = &self.cfg;
        let books = pool.slots.snapshot();
        let candidates: Vec<Candidate> = books
            .iter()
            .filter(|s| {
                reclaims(pool, &s.instance)
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
                .map(|s| pool.slots.charge_of(s))
                .sum(),
            budget: pool.policy.config().budget_bytes,
            running: books.iter().map(|s| s.in_flight as usize).sum(),
            cores: self.cores,
        };
        let (ids, threshold_change) = self.books.plan(cfg, &load, &candidates, now);
        for id in ids {
            self.start_reclaim(pool, &id, "reclaim");
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
    pub(super) fn reclaimable_of(&self, _pool: &Pool, s: &Slot) -> Option<u64> {
        if !s.state.is_kept_alive() || mode_of_instance(&s.instance) == ReclaimMode::Vanilla {
            return None;
        }
        if s.reclaimed_since_last_run {
            return Some(0);
        }
        let estimate = self
            .books
            .estimate(&s.instance.id, &s.instance.fqn)
            .unwrap_or_else(|| Estimate::prior(&self.cfg));
        Some(estimate.reclaimable_bytes(self.reclaim_measure(&s.instance.measured_memory())))
    }
}
