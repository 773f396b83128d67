//! FaaSMem's steps on one instance: the two time barriers, the segment-wise offloads after
//! each request (runtime after the first, init after its request window, periodic rollback of
//! the hot pool), and semi-warm: the gradual offload of what is left once an idle instance
//! has waited longer than the action's p99 reuse interval.

use super::background::at_low_priority;
use super::{Offload, OffloadBook};
use crate::metrics::offload::{BarrierLabel, StepLabel};
use crate::metrics::ReasonLabel;
use crate::pool::desiccant::{self, Desiccant};
use crate::pool::{Instance, Pool};
use icebox_core::{EventKind, InstanceState};
use icebox_mem::{OffloadReport, Puckets};
use icebox_policy::{semiwarm_tick, Millis, OffloadMode, OffloadStep, SemiWarm, SemiWarmInstance};
use std::sync::Arc;

/// Which barrier (FaaSMem's runtime-init and init-execution time barriers).
#[derive(Debug, Clone, Copy)]
pub(super) enum Barrier {
    Runtime,
    Init,
}

impl Barrier {
    fn as_str(self) -> &'static str {
        match self {
            Barrier::Runtime => "runtime",
            Barrier::Init => "init",
        }
    }
}

/// The instance's offload books, when the offload component attached them.
pub(super) fn book_of(instance: &Instance) -> Option<&OffloadBook> {
    instance.ext::<OffloadBook>()
}

/// A faasmem instance whose action still has offload in its technique choice (it may have
/// been turned off since the instance started).
fn is_faasmem(pool: &Pool, instance: &Instance) -> bool {
    book_of(instance).is_some_and(|b| b.mode == OffloadMode::Faasmem && !b.incompressible())
        && pool.allows(&instance.action, icebox_policy::Technique::Offload)
}

impl Offload {
    /// Records a time barrier of a faasmem instance (blocking: scans its page tables). A
    /// failure only turns offloading off for this instance.
    pub(super) async fn barrier(&self, pool: &Pool, instance: &Arc<Instance>, barrier: Barrier) {
        if !is_faasmem(pool, instance) {
            return;
        }
        let inst = instance.clone();
        let group_pages = self.cfg.group_pages;
        let took = tokio::task::spawn_blocking(move || {
            let pids = inst.sandbox.pids();
            let book = book_of(&inst).expect("checked above");
            let mut state = book.state.lock().unwrap();
            let result = match barrier {
                Barrier::Runtime => {
                    let mut puckets = Puckets::new(group_pages);
                    let r = puckets.barrier_runtime(&pids);
                    state.puckets = Some(puckets);
                    r
                }
                Barrier::Init => match state.puckets.as_mut() {
                    Some(p) => p.barrier_init(&pids),
                    None => return None,
                },
            };
            match result {
                Ok(took) => Some(took),
                Err(e) => {
                    tracing::warn!(instance = %inst.id, "FaaSMem {} barrier failed, no offloading for this instance: {e}", barrier.as_str());
                    state.puckets = None;
                    None
                }
            }
        })
        .await
        .ok()
        .flatten();
        if let Some(took) = took {
            pool.metrics
                .offload
                .barrier_seconds
                .get_or_create(&BarrierLabel {
                    barrier: barrier.as_str().into(),
                })
                .observe(took.as_secs_f64());
        }
    }

    /// An activation of a faasmem instance ended: observe what came back, then take the steps
    /// the policy wants now. Runs in the background, one step sequence per instance at a time.
    pub(super) fn after_request(&self, pool: &Arc<Pool>, instance: &Arc<Instance>) {
        if !is_faasmem(pool, instance) {
            return;
        }
        let pool = pool.clone();
        let instance = instance.clone();
        tokio::task::spawn_blocking(move || {
            if let Some(me) = pool.component::<Offload>() {
                at_low_priority(|| me.faasmem_after_request(&pool, &instance));
            }
        });
    }

    fn faasmem_after_request(&self, pool: &Pool, instance: &Instance) {
        let Some(book) = book_of(instance) else {
            return;
        };
        let mut state = book.state.lock().unwrap();
        // Steps queued behind the one that found the pages incompressible do nothing.
        if book.incompressible() {
            return;
        }
        let Some(puckets) = state.puckets.as_mut() else {
            return;
        };
        let observation = match puckets.observe() {
            Ok(o) => o,
            Err(e) => {
                tracing::debug!(instance = %instance.id, "cannot scan the instance: {e}");
                return;
            }
        };
        self.note_refaults(pool, instance, observation.refaulted_bytes);
        let now = pool.clock.now_ms();
        let cfg = &self.cfg.faasmem;
        let steps =
            state
                .policy
                .after_request(cfg, now, observation.untouched_probes, observation.probes);
        let mut segments = observation.segments;
        let mut stepped = false;
        for step in steps {
            let name = step.as_str();
            if let Err(reason) = self.offload_pool.room_for(1) {
                self.skip(pool, reason);
                break;
            }
            let puckets = state.puckets.as_mut().expect("checked above");
            let before = self.offload_pool.compression_sample();
            let result = match step {
                OffloadStep::Runtime => puckets.offload_runtime(),
                OffloadStep::ProbeInit => puckets.probe_init(),
                OffloadStep::InitCold => puckets.offload_init_cold(),
                OffloadStep::Rollback => puckets.rollback(),
                OffloadStep::RollbackCold => puckets.offload_rollback_cold(),
            };
            match result {
                Ok(report) => {
                    self.step_done(pool);
                    self.note_step(pool, instance, name, &report);
                }
                Err(e) => {
                    tracing::debug!(instance = %instance.id, step = name, "offload step failed: {e}");
                    break;
                }
            }
            stepped = true;
            if !self.judge_compression(pool, instance, book, before) {
                break;
            }
        }
        if stepped {
            // Show the segments as the steps left them (and count what came back meanwhile:
            // an observation hands its refaults over only once).
            if let Some(after) = state.puckets.as_mut().and_then(|p| p.observe().ok()) {
                self.note_refaults(pool, instance, after.refaulted_bytes);
                segments = after.segments;
            }
            // What it is charged changed now, not at the next sample.
            instance.measure();
        }
        book.show(&state, segments);
    }

    /// After a step into a compressed-RAM pool: false (and the instance's offloading stops)
    /// when its pages gained less than [`super::MIN_COMPRESSION_GAIN`]. Other instances'
    /// steps run one at a time per instance but may overlap this one, so the pool's totals
    /// can include theirs: a heuristic, judged only on steps of at least 1 MiB.
    fn judge_compression(
        &self,
        pool: &Pool,
        instance: &Instance,
        book: &OffloadBook,
        before: Option<(u64, u64)>,
    ) -> bool {
        let (Some((stored0, compr0)), Some((stored1, compr1))) =
            (before, self.offload_pool.compression_sample())
        else {
            return true;
        };
        let (stored, compressed) = (
            stored1.saturating_sub(stored0),
            compr1.saturating_sub(compr0),
        );
        if super::worth_offloading(stored, compressed) != Some(false) {
            return true;
        }
        book.incompressible
            .store(true, std::sync::atomic::Ordering::Relaxed);
        pool.observe(
            &instance.action,
            &instance.id,
            crate::pool::Observed::Incompressible,
        );
        self.skip(pool, "incompressible");
        pool.events.emit(
            &instance.id,
            &instance.fqn,
            EventKind::Offloaded,
            None,
            Some(format!(
                "offloading stopped: {stored} bytes compressed to {compressed} (gain under {:.0} %)",
                super::MIN_COMPRESSION_GAIN * 100.0
            )),
        );
        false
    }

    fn note_refaults(&self, pool: &Pool, instance: &Instance, bytes: u64) {
        if bytes == 0 {
            return;
        }
        if let Some(book) = book_of(instance) {
            book.add_refaulted(bytes);
        }
        pool.metrics.offload.refaulted_bytes.inc_by(bytes);
        pool.events.emit(
            &instance.id,
            &instance.fqn,
            EventKind::Refaulted,
            None,
            Some(format!("{bytes} bytes")),
        );
    }

    /// After a step, on the blocking thread that took it (compaction may write to sysfs):
    /// the pool's cost per swapped byte as the step left it, before anyone sees the step. An
    /// instance measured now would otherwise be charged at the last round's figure (a zram
    /// instance whose pages just went in: its USS alone).
    pub(super) fn step_done(&self, pool: &Pool) {
        self.offload_pool.refresh(Some(&pool.metrics.offload));
    }

    pub(super) fn note_step(
        &self,
        pool: &Pool,
        instance: &Instance,
        step: &str,
        report: &OffloadReport,
    ) {
        let label = StepLabel { step: step.into() };
        pool.metrics
            .offload
            .step_seconds
            .get_or_create(&label)
            .observe(report.took.as_secs_f64());
        if report.offloaded_bytes == 0 {
            return;
        }
        if let Some(book) = book_of(instance) {
            book.add_moved(report.offloaded_bytes);
        }
        pool.metrics
            .offload
            .offloaded_bytes
            .get_or_create(&label)
            .inc_by(report.offloaded_bytes);
        pool.events.emit(
            &instance.id,
            &instance.fqn,
            EventKind::Offloaded,
            None,
            Some(format!(
                "{step} {} bytes in {} us",
                report.offloaded_bytes,
                report.took.as_micros()
            )),
        );
    }

    pub(super) fn skip(&self, pool: &Pool, reason: &str) {
        pool.metrics
            .offload
            .skipped
            .get_or_create(&ReasonLabel {
                reason: reason.into(),
            })
            .inc();
    }

    /// Semi-warm: idle faasmem instances past their action's p99 reuse interval offload
    /// their remaining local pages at the configured rate (shared under the node's cap).
    pub(super) fn semiwarm_round(&self, pool: &Arc<Pool>, now: Millis, elapsed: Millis) {
        if self.cfg.faasmem.semiwarm == SemiWarm::Off {
            return;
        }
        let mut due = Vec::new();
        for slot in pool.slots.snapshot() {
            if !is_faasmem(pool, &slot.instance) || !slot.state.is_kept_alive() {
                continue;
            }
            let idle = now.saturating_sub(slot.idle_since);
            if idle < self.semiwarm_after(&slot.instance.fqn) {
                continue;
            }
            // With Desiccant, frozen garbage goes first: offloading dead objects would only
            // fill the pool (and the collection would fault them all back in).
            if desiccant::reclaims(pool, &slot.instance) && !slot.reclaimed_since_last_run {
                if slot.state == InstanceState::Frozen && !slot.reclaiming {
                    if let Some(desiccant) = pool.component::<Desiccant>() {
                        desiccant.start_reclaim(
                            pool,
                            &slot.instance.id,
                            "reclaim before semi-warm",
                        );
                    }
                }
                continue;
            }
            due.push(slot.instance.clone());
        }
        if due.is_empty() || elapsed == 0 {
            return;
        }
        let mut planned = Vec::new();
        for instance in &due {
            let book = book_of(instance).expect("faasmem instances have books");
            // An instance still busy with its last step is left for the next tick.
            let Ok(mut state) = book.state.try_lock() else {
                continue;
            };
            if state.puckets.is_none() {
                continue;
            }
            let local = instance.measured_memory().uss;
            if !book
                .semiwarm
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                state.semiwarm_size = local;
                pool.events.emit(
                    &instance.id,
                    &instance.fqn,
                    EventKind::Offloaded,
                    None,
                    Some(format!("semi-warm begins ({local} bytes local)")),
                );
            }
            planned.push(SemiWarmInstance {
                id: instance.id.clone(),
                local_bytes: local,
                size_at_start: state.semiwarm_size,
            });
        }
        let plan = semiwarm_tick(&self.cfg.faasmem, &planned, elapsed);
        for (id, bytes) in plan {
            let Some(instance) = due.iter().find(|i| i.id == id).cloned() else {
                continue;
            };
            if let Err(reason) = self.offload_pool.room_for(bytes) {
                self.skip(pool, reason);
                continue;
            }
            let pool = pool.clone();
            tokio::task::spawn_blocking(move || {
                if let Some(me) = pool.component::<Offload>() {
                    at_low_priority(|| me.semiwarm_step(&pool, &instance, bytes));
                }
            });
        }
    }

    fn semiwarm_step(&self, pool: &Pool, instance: &Instance, bytes: u64) {
        let Some(book) = book_of(instance) else {
            return;
        };
        let Ok(mut state) = book.state.try_lock() else {
            return;
        };
        // The request that ends the period may have arrived since the plan; an earlier step
        // may have found the pages incompressible.
        if book.incompressible()
            || !book.in_semiwarm()
            || pool.slots.get(&instance.id).map(|s| s.state) == Some(InstanceState::Running)
        {
            return;
        }
        let Some(puckets) = state.puckets.as_mut() else {
            return;
        };
        let before = self.offload_pool.compression_sample();
        match puckets.offload_any(bytes) {
            Ok(report) => {
                self.step_done(pool);
                self.note_step(pool, instance, "semiwarm", &report);
                self.judge_compression(pool, instance, book, before);
            }
            Err(e) => tracing::debug!(instance = %instance.id, "semi-warm step failed: {e}"),
        }
        // Segments are shown as of the last request's scan: one more whole scan a second per
        // semi-warm instance is not worth it (`local_bytes` still moves with each step).
        instance.measure();
    }
}
