//! Which frozen instances to reclaim now (Desiccant §4.3 and §4.5), and how many reclaims the
//! node's idle CPU can run at once.

use super::config::DesiccantConfig;
use super::profile::{Estimate, ProfileStore};
use super::threshold::ReclaimThreshold;
use crate::clock::Millis;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeSet;

#[cfg(test)]
mod tests;

/// An idle instance the daemon offers for reclaim. Offer only instances of actions whose
/// resolved mode is `desiccant`; ids are unique (a repeated id is planned at most once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    pub id: String,
    /// `namespace/name` of the action, for the action-level profile fallback.
    pub action: String,
    /// Its charge now, in the measure of `Profile::memory_before`.
    pub memory: u64,
    /// When it was frozen; `None` while it is not (running, in its pause grace, or thawed for
    /// a reclaim in progress). Re-freezing after a reclaim must not move this forward.
    pub frozen_since: Option<Millis>,
    /// Reclaimed after its last activation ended: its garbage is already gone, and only a new
    /// activation makes more.
    pub reclaimed_since_last_run: bool,
}

impl Candidate {
    pub fn frozen_for(&self, now: Millis) -> Option<Millis> {
        self.frozen_since.map(|t| now.saturating_sub(t))
    }

    /// Frozen for at least the timeout and holding garbage that no reclaim has seen yet.
    pub fn eligible(&self, cfg: &DesiccantConfig, now: Millis) -> bool {
        !self.reclaimed_since_last_run
            && self
                .frozen_for(now)
                .is_some_and(|frozen| frozen >= cfg.frozen_timeout_ms)
    }
}

/// A candidate with what reclaiming it is expected to achieve.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked<'a> {
    pub candidate: &'a Candidate,
    pub estimate: Estimate,
    pub reclaimable: u64,
    /// Expected bytes released per CPU millisecond.
    pub throughput: f64,
}

/// Eligible candidates expected to release something, highest reclaim throughput first; equal
/// throughputs go to the smallest id, so the order never depends on the input's.
pub fn rank<'a>(
    cfg: &DesiccantConfig,
    store: &ProfileStore,
    candidates: &'a [Candidate],
    now: Millis,
) -> Vec<Ranked<'a>> {
    let mut ranked: Vec<Ranked<'a>> = candidates
        .iter()
        .filter(|c| c.eligible(cfg, now))
        .filter_map(|c| {
            let estimate = store
                .estimate(&c.id, &c.action)
                .unwrap_or_else(|| Estimate::prior(cfg));
            let reclaimable = estimate.reclaimable_bytes(c.memory);
            // Thawing an instance to free nothing only burns CPU.
            (reclaimable > 0).then(|| Ranked {
                candidate: c,
                estimate,
                reclaimable,
                throughput: estimate.throughput(c.memory),
            })
        })
        .collect();
    ranked.sort_unstable_by(by_rank);
    let mut seen = BTreeSet::new();
    ranked.retain(|r| seen.insert(r.candidate.id.as_str()));
    ranked
}

/// Total order: throughput descending, then id; the remaining keys only separate entries of a
/// repeated id, so which of them is kept (the best ranked) is deterministic too.
fn by_rank(a: &Ranked<'_>, b: &Ranked<'_>) -> Ordering {
    b.throughput
        .total_cmp(&a.throughput)
        .then_with(|| a.candidate.id.cmp(&b.candidate.id))
        .then_with(|| a.candidate.action.cmp(&b.candidate.action))
        .then_with(|| b.candidate.memory.cmp(&a.candidate.memory))
}

/// The instances to reclaim now, in order: nothing unless the idle pool's `charged` memory is
/// above the threshold of `budget`; then the best-ranked candidates, no more than
/// `free_slots`, and no more than their estimated release needs to bring the pool back to the
/// threshold (Desiccant goes inactive there, §4.2). Reclaims already running are not in
/// `charged` yet; the caller bounds them through `free_slots`.
#[allow(clippy::too_many_arguments)] // the daemon's and simulator's state, passed as it is
pub fn plan(
    cfg: &DesiccantConfig,
    threshold: &ReclaimThreshold,
    store: &ProfileStore,
    candidates: &[Candidate],
    charged: u64,
    budget: u64,
    now: Millis,
    free_slots: usize,
) -> Vec<String> {
    if free_slots == 0 || !threshold.should_reclaim(charged, budget, now) {
        return Vec::new();
    }
    let mut excess = charged as f64 - threshold.current(now) * budget as f64;
    let mut chosen = Vec::new();
    for r in rank(cfg, store, candidates, now) {
        if chosen.len() == free_slots || excess <= 0.0 {
            break;
        }
        excess -= r.reclaimable as f64;
        chosen.push(r.candidate.id.clone());
    }
    chosen
}

/// How many more reclaims may start: one per idle core, an invocation occupying a core and a
/// reclaim in progress another. Zero whenever invocations keep every core busy — reclaims run
/// on the node's idle CPU only, never in an activation's way.
pub fn reclaim_slots(
    cores: usize,
    running_invocations: usize,
    reclaims_in_progress: usize,
) -> usize {
    cores
        .saturating_sub(running_invocations)
        .saturating_sub(reclaims_in_progress)
}
