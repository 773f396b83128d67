//! FaaSMem's steps on one instance: the two time barriers, the segment-wise offloads after
//! each request (runtime after the first, init after its request window, periodic rollback of
//! the hot pool), and semi-warm: the gradual offload of what is left once an idle instance
//! has waited longer than the action's p99 reuse interval.

use super::background::at_low_priority;
use crate::metrics::offload::{BarrierLabel, StepLabel};
use crate::metrics::ReasonLabel;
use crate::pool::{Instance, Pool};
use icebox_core::{EventKind, InstanceState};
use icebox_mem::{OffloadReport, Puckets};
use icebox_policy::{semiwarm_tick, Millis, OffloadMode, OffloadStep, SemiWarm, SemiWarmInstance};
use std::sync::Arc;

/// Which barrier (FaaSMem's runtime-init and init-execution time barriers).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Barrier {
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

impl Pool {
    /// Records a time barrier of a faasmem instance (blocking: scans its page tables). A
    /// failure only turns offloading off for this instance.
    pub(in crate::pool) async fn offload_barrier(
        &self,
        instance: &Arc<Instance>,
        barrier: Barrier,
    ) {
        if instance.offload.mode != OffloadMode::Faasmem {
            return;
        }
        let inst = instance.clone();
        let group_pages = self.offload.cfg.group_pages;
        let took = tokio::task::spawn_blocking(move || {
            let pids = inst.sandbox.pids();
            let mut state = inst.offload.state.lock().unwrap();
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
            self.metrics
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
    pub(in crate::pool) fn offload_after_request(self: &Arc<Self>, instance: &Arc<Instance>) {
        if instance.offload.mode != OffloadMode::Faasmem {
            return;
        }
        let pool = self.clone();
        let instance = instance.clone();
        tokio::task::spawn_blocking(move || {
            at_low_priority(|| pool.faasmem_after_request(&instance))
        });
    }

    fn faasmem_after_request(&self, instance: &Instance) {
        let book = &instance.offload;
        let mut state = book.state.lock().unwrap();
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
        self.note_refaults(instance, observation.refaulted_bytes);
        let now = self.clock.now_ms();
        let cfg = &self.offload.cfg.faasmem;
        let steps =
            state
                .policy
                .after_request(cfg, now, observation.untouched_probes, observation.probes);
        let mut segments = observation.segments;
        let mut stepped = false;
        for step in steps {
            let name = step.as_str();
            if let Err(reason) = self.offload.pool.room_for(1) {
                self.skip(reason);
                break;
            }
            let puckets = state.puckets.as_mut().expect("checked above");
            let result = match step {
                OffloadStep::Runtime => puckets.offload_runtime(),
                OffloadStep::ProbeInit => puckets.probe_init(),
                OffloadStep::InitCold => puckets.offload_init_cold(),
                OffloadStep::Rollback => puckets.rollback(),
                OffloadStep::RollbackCold => puckets.offload_rollback_cold(),
            };
            match result {
                Ok(report) => self.note_step(instance, name, &report),
                Err(e) => {
                    tracing::debug!(instance = %instance.id, step = name, "offload step failed: {e}");
                    break;
                }
            }
            stepped = true;
        }
        if stepped {
            // Show the segments as the steps left them (and count what came back meanwhile:
            // an observation hands its refaults over only once).
            if let Some(after) = state.puckets.as_mut().and_then(|p| p.observe().ok()) {
                self.note_refaults(instance, after.refaulted_bytes);
                segments = after.segments;
            }
            // What it is charged changed now, not at the next sample.
            instance.measure();
        }
        book.show(&state, segments);
    }

    fn note_refaults(&self, instance: &Instance, bytes: u64) {
        if bytes == 0 {
            return;
        }
        instance.offload.add_refaulted(bytes);
        self.metrics.offload.refaulted_bytes.inc_by(bytes);
        self.events.emit(
            &instance.id,
            &instance.fqn,
            EventKind::Refaulted,
            None,
            Some(format!("{bytes} bytes")),
        );
    }

    pub(super) fn note_step(&self, instance: &Instance, step: &str, report: &OffloadReport) {
        let label = StepLabel { step: step.into() };
        self.metrics
            .offload
            .step_seconds
            .get_or_create(&label)
            .observe(report.took.as_secs_f64());
        if report.offloaded_bytes == 0 {
            return;
        }
        instance.offload.add_moved(report.offloaded_bytes);
        self.metrics
            .offload
            .offloaded_bytes
            .get_or_create(&label)
            .inc_by(report.offloaded_bytes);
        self.events.emit(
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

    pub(super) fn skip(&self, reason: &str) {
        self.metrics
            .offload
            .skipped
            .get_or_create(&ReasonLabel {
                reason: reason.into(),
            })
            .inc();
    }

    /// Semi-warm: idle faasmem instances past their action's p99 reuse interval offload
    /// their remaining local pages at the configured rate (shared under the node's cap).
    pub(in crate::pool) fn semiwarm_round(self: &Arc<Self>, now: Millis, elapsed: Millis) {
        if self.offload.cfg.faasmem.semiwarm == SemiWarm::Off {
            return;
        }
        let mut due = Vec::new();
        for slot in self.slots.snapshot() {
            let book = &slot.instance.offload;
            if book.mode != OffloadMode::Faasmem || !slot.state.is_kept_alive() {
                continue;
            }
            let idle = now.saturating_sub(slot.idle_since);
            if idle < self.offload.semiwarm_after(&slot.instance.fqn) {
                continue;
            }
            // With Desiccant, frozen garbage goes first: offloading dead objects would only
            // fill the pool (and the collection would fault them all back in).
            if slot.instance.mode == icebox_policy::ReclaimMode::Desiccant
                && !slot.reclaimed_since_last_run
            {
                if slot.state == InstanceState::Frozen && !slot.reclaiming {
                    self.reclaim_before_semiwarm(&slot.instance.id);
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
            // An instance still busy with its last step is left for the next tick.
            let Ok(mut state) = instance.offload.state.try_lock() else {
                continue;
            };
            if state.puckets.is_none() {
                continue;
            }
            let local = instance.measured_memory().uss;
            if !instance
                .offload
                .semiwarm
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                state.semiwarm_size = local;
                self.events.emit(
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
        let plan = semiwarm_tick(&self.offload.cfg.faasmem, &planned, elapsed);
        for (id, bytes) in plan {
            let Some(instance) = due.iter().find(|i| i.id == id).cloned() else {
                continue;
            };
            if let Err(reason) = self.offload.pool.room_for(bytes) {
                self.skip(reason);
                continue;
            }
            let pool = self.clone();
            tokio::task::spawn_blocking(move || {
                at_low_priority(|| pool.semiwarm_step(&instance, bytes))
            });
        }
    }

    fn reclaim_before_semiwarm(self: &Arc<Self>, id: &str) {
        if let Some(instance) = self.begin_reclaim(id) {
            let pool = self.clone();
            let id = id.to_string();
            tokio::spawn(async move {
                if let Err(e) = pool.run_reclaim(instance, None).await {
                    tracing::warn!(instance = %id, "reclaim before semi-warm failed: {e}");
                }
            });
        }
    }

    fn semiwarm_step(&self, instance: &Instance, bytes: u64) {
        let book = &instance.offload;
        let Ok(mut state) = book.state.try_lock() else {
            return;
        };
        // The request that ends the period may have arrived since the plan.
        if !book.in_semiwarm()
            || self.slots.get(&instance.id).map(|s| s.state) == Some(InstanceState::Running)
        {
            return;
        }
        let Some(puckets) = state.puckets.as_mut() else {
            return;
        };
        match puckets.offload_any(bytes) {
            Ok(report) => self.note_step(instance, "semiwarm", &report),
            Err(e) => tracing::debug!(instance = %instance.id, "semi-warm step failed: {e}"),
        }
        // Segments are shown as of the last request's scan: one more whole scan a second per
        // semi-warm instance is not worth it (`local_bytes` still moves with each step).
        instance.measure();
    }
}
