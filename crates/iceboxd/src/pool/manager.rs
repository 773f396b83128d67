//! The memory manager loop: freezes instances after the pause grace, evicts by keep-alive
//! expiry and memory budget, and measures instance memory. It sleeps until the policy's next
//! deadline, the next sample, or a wake-up from the pool.

use super::{EvictReason, Pool};
use crate::metrics::{MemoryLabels, StateLabel};
use icebox_core::{EventKind, InstanceState, MemoryStats};
use icebox_policy::Millis;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Frozen instances change memory only through outside reclaim: sample them less often.
const FROZEN_SAMPLE_EVERY: u64 = 10;

impl Pool {
    pub async fn run_manager(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let interval = self.cfg.sample_interval;
        let mut next_sample = Instant::now();
        let mut round = 0u64;
        loop {
            if *shutdown.borrow() {
                return;
            }
            self.manager_wakes_at.store(0, Ordering::SeqCst);
            let now = self.clock.now_ms();
            let (froze_any, deadline) = self.keep_alive_round(now).await;
            if froze_any {
                // Their measured memory is now what they are charged: re-check the budget.
                continue;
            }
            let components_wake = self
                .components
                .iter()
                .filter_map(|c| c.tick(&self, now))
                .min();
            if Instant::now() >= next_sample {
                self.sample(round).await;
                round += 1;
                next_sample = Instant::now() + interval;
            }
            let mut sleep_for = next_sample.saturating_duration_since(Instant::now());
            if let Some(d) = deadline.into_iter().chain(components_wake).min() {
                sleep_for =
                    sleep_for.min(Duration::from_millis(d.saturating_sub(self.clock.now_ms())));
            }
            // A give-back that reads this before the store wakes the loop anyway (it read
            // 0); one that reads it after compares with the real plan.
            self.manager_wakes_at.store(
                self.clock
                    .now_ms()
                    .saturating_add(u64::try_from(sleep_for.as_millis()).unwrap_or(u64::MAX)),
                Ordering::SeqCst,
            );
            tokio::select! {
                _ = tokio::time::sleep(sleep_for) => {}
                _ = self.manager_wake.notified() => {}
                _ = shutdown.changed() => {}
            }
        }
    }

    /// Evict and freeze what the keep-alive policy says is due at `now`; returns whether
    /// anything was frozen and when the policy next has something to do.
    pub(super) async fn keep_alive_round(&self, now: Millis) -> (bool, Option<Millis>) {
        let plan = self.slots.keep_alive_plan(&self.policy, now);
        for (id, reason) in plan.evictions {
            // Only if nothing took it since the plan was made.
            if let Some(slot) = self.slots.remove_kept_alive(&id) {
                self.destroy(slot, EvictReason::Policy(reason)).await;
            }
        }
        let froze_any = !plan.freezes.is_empty();
        for id in plan.freezes {
            self.freeze(&id).await;
        }
        (froze_any, plan.deadline)
    }

    async fn freeze(&self, id: &str) {
        let Some(instance) = self.slots.instance(id) else {
            return;
        };
        let took = {
            let mut frozen = instance.frozen.lock().await;
            if !self.slots.mark_frozen(id, self.clock.now_ms()) {
                return;
            }
            let t = Instant::now();
            if let Err(e) = instance.sandbox.freeze() {
                drop(frozen);
                // Evicted, or its runtime exited, while the freeze waited for its tasks to
                // stop: its cgroup went with it. A normal race, not a fault of the node.
                if self.slots.instance(id).is_none() || instance.sandbox.exit_cause().is_some() {
                    tracing::debug!(instance = %id, "not frozen, already gone: {e}");
                } else {
                    tracing::error!(instance = %id, "freeze failed: {e}");
                }
                self.evict(id, EvictReason::Error).await;
                return;
            }
            *frozen = true;
            t.elapsed()
        };
        self.metrics.freeze_seconds.observe(took.as_secs_f64());
        let inst = instance.clone();
        let memory = tokio::task::spawn_blocking(move || inst.measure())
            .await
            .unwrap_or_default();
        self.events.emit(
            id,
            &instance.fqn,
            EventKind::Frozen,
            Some(memory),
            Some(format!("{} us", took.as_micros())),
        );
    }

    /// Measure every instance (frozen ones every FROZEN_SAMPLE_EVERY rounds) and refresh gauges.
    async fn sample(&self, round: u64) {
        let targets: Vec<_> = self
            .slots
            .snapshot()
            .into_iter()
            .filter(|s| {
                s.state != InstanceState::Frozen
                    || round.is_multiple_of(FROZEN_SAMPLE_EVERY)
                    || s.instance.last_measured().at_ms == 0
            })
            .map(|s| s.instance)
            .collect();
        let _ = tokio::task::spawn_blocking(move || {
            for inst in targets {
                inst.measure();
            }
        })
        .await;
        self.refresh_gauges();
    }

    pub fn refresh_gauges(&self) {
        let mut by_state: HashMap<InstanceState, (i64, MemoryStats)> = HashMap::new();
        let mut charged = 0u64;
        for slot in &self.slots.snapshot() {
            let e = by_state.entry(slot.state).or_default();
            e.0 += 1;
            e.1.add(&slot.instance.measured_memory());
            if slot.state.is_kept_alive() {
                charged += self.slots.charge_of(slot);
            }
        }
        for state in InstanceState::ALL {
            let (count, mem) = by_state.get(&state).copied().unwrap_or_default();
            let label = state.as_str().to_string();
            self.metrics
                .instances
                .get_or_create(&StateLabel {
                    state: label.clone(),
                })
                .set(count);
            for (measure, v) in [
                ("uss", mem.uss),
                ("pss", mem.pss),
                ("rss", mem.rss),
                ("swap", mem.swap),
            ] {
                self.metrics
                    .memory_bytes
                    .get_or_create(&MemoryLabels {
                        state: label.clone(),
                        measure: measure.to_string(),
                    })
                    .set(i64::try_from(v).unwrap_or(i64::MAX));
            }
        }
        self.metrics
            .pool_charged
            .set(i64::try_from(charged).unwrap_or(i64::MAX));
    }
}
