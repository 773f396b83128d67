//! Reclaiming one idle instance (Desiccant): thaw it only for the reclaim, ask its runtime to
//! collect and release its frozen garbage (POST /icebox/reclaim), freeze it again, then page
//! out the private, unmodified library pages of its processes that no running instance maps.
//! The CPU is the node's idle CPU, never an activation's. An invocation that picks the
//! instance meanwhile waits for the reclaim (it holds the instance's freeze lock); the pool
//! prefers other warm instances of the action while one is being reclaimed.

use super::Desiccant;
use crate::metrics::OutcomeLabel;
use crate::pool::{ControlError, EvictReason, Instance, Pool};
use icebox_core::api::ReclaimReport;
use icebox_core::{EventKind, InstanceState};
use icebox_policy::{LibraryPageout, Profile};
use icebox_sandbox::RuntimeError;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A runtime that takes longer than this to reclaim is treated as hung and evicted.
const RECLAIM_TIMEOUT: Duration = Duration::from_secs(10);

impl Desiccant {
    /// Reclaim one idle or frozen instance now (manual `icebox reclaim`).
    pub async fn reclaim(
        &self,
        pool: &Arc<Pool>,
        id: &str,
        variant: Option<String>,
    ) -> Result<ReclaimReport, ControlError> {
        let instance = match self.begin_reclaim(pool, id) {
            Some(i) => i,
            None if pool.instance(id).is_some() => return Err(ControlError::Busy(id.to_string())),
            None => return Err(ControlError::NotFound(id.to_string())),
        };
        self.run_reclaim(pool, instance, variant).await
    }

    /// Start reclaiming an idle instance in the background (the policy, or another technique
    /// that wants the garbage gone first); `why` names the caller in the log.
    pub fn start_reclaim(&self, pool: &Arc<Pool>, id: &str, why: &'static str) {
        let Some(instance) = self.begin_reclaim(pool, id) else {
            return;
        };
        let pool = pool.clone();
        let id = id.to_string();
        tokio::spawn(async move {
            let Some(me) = pool.component::<Desiccant>() else {
                return;
            };
            if let Err(e) = me.run_reclaim(&pool, instance, None).await {
                tracing::warn!(instance = %id, "{why} failed: {e}");
            }
        });
    }

    /// Mark an idle instance as being reclaimed (synchronously, so the policy never plans it
    /// twice and the CPU slot is taken at once).
    fn begin_reclaim(&self, pool: &Pool, id: &str) -> Option<Arc<Instance>> {
        let instance = pool.slots.begin_reclaim(id)?;
        self.books.begin();
        Some(instance)
    }

    async fn run_reclaim(
        &self,
        pool: &Arc<Pool>,
        instance: Arc<Instance>,
        variant: Option<String>,
    ) -> Result<ReclaimReport, ControlError> {
        let result = self.reclaim_instance(pool, &instance, variant).await;
        self.books.end();
        pool.slots.end_reclaim(&instance.id, result.is_ok());
        let outcome = match &result {
            Ok(report) => {
                let memory_before = report.uss_before;
                let recorded = self.books.record(
                    &instance.id,
                    &instance.fqn,
                    Profile {
                        memory_before,
                        live_bytes: report.live_bytes.unwrap_or(0),
                        cpu_ms: report.cpu_ms.unwrap_or(report.wall_ms),
                        freed: report.freed,
                    },
                );
                if !recorded {
                    tracing::debug!(instance = %instance.id, "reclaim profile not usable");
                }
                if report.uss_before > 0 {
                    pool.observe(
                        &instance.action,
                        &instance.id,
                        crate::pool::Observed::GarbageShare(
                            report.freed as f64 / report.uss_before as f64,
                        ),
                    );
                }
                pool.metrics.reclaimed_bytes.inc_by(report.freed);
                pool.metrics
                    .reclaim_cpu_seconds
                    .inc_by(report.cpu_ms.unwrap_or(0.0) / 1000.0);
                pool.events.emit(
                    &instance.id,
                    &instance.fqn,
                    EventKind::Reclaimed,
                    Some(instance.measured_memory()),
                    Some(format!(
                        "freed {} bytes (uss {} -> {}), runtime cpu {:.1} ms, wall {:.1} ms, pageout {} bytes, variant {}",
                        report.freed,
                        report.uss_before,
                        report.uss_after,
                        report.cpu_ms.unwrap_or(0.0),
                        report.wall_ms,
                        report.pageout_bytes,
                        report.variant
                    )),
                );
                "ok"
            }
            Err(ControlError::Runtime(_))
            | Err(ControlError::Timeout(_))
            | Err(ControlError::Freezer(_)) => {
                // A runtime that hangs in a reclaim would hang in the next one too: the
                // action goes on without reclaims (its other instances included).
                if let Err(e @ ControlError::Timeout(_)) = &result {
                    pool.technique_failed(
                        &instance.action,
                        &instance.id,
                        icebox_policy::Technique::Reclaim,
                        format!("reclaim: {e}"),
                    );
                }
                // Dead, hung or unfreezable: never leave it thawed in the pool.
                pool.evict(&instance.id, EvictReason::Error).await;
                "evicted"
            }

            Err(_) => "failed",
        };
        pool.metrics
            .reclaims
            .get_or_create(&OutcomeLabel {
                outcome: outcome.to_string(),
            })
            .inc();
        pool.manager_wake.notify_one();
        result
    }

    async fn reclaim_instance(
        &self,
        pool: &Pool,
        instance: &Arc<Instance>,
        variant: Option<String>,
    ) -> Result<ReclaimReport, ControlError> {
        let t0 = Instant::now();
        let measure = |inst: Arc<Instance>| async move {
            tokio::task::spawn_blocking(move || inst.measure())
                .await
                .unwrap_or_default()
        };
        let before = measure(instance.clone()).await;
        let runtime = {
            let mut frozen = instance.frozen.lock().await;
            let was_frozen = *frozen;
            if was_frozen {
                instance.sandbox.thaw()?;
                *frozen = false;
            }
            let body = match &variant {
                Some(v) => json!({"variant": v}),
                None => json!({}),
            };
            let reply = tokio::select! {
                r = tokio::time::timeout(RECLAIM_TIMEOUT, instance.sandbox.client().post_json("/icebox/reclaim", &body)) => r,
                _ = instance.sandbox.exited() => Ok(Err(RuntimeError::Transport("the runtime exited".into()))),
            };
            // Freeze again whatever happened: a reclaim must never leave an idle instance running.
            if was_frozen && instance.sandbox.exit_cause().is_none() {
                instance.sandbox.freeze()?;
                *frozen = true;
            }
            match reply {
                Err(_) => return Err(ControlError::Timeout(RECLAIM_TIMEOUT)),
                Ok(Err(e)) => return Err(ControlError::Runtime(e)),
                // An older proxy without the extension: only the library page-out applies.
                Ok(Ok(r)) if r.status == 404 || r.status == 501 => Value::Null,
                Ok(Ok(r)) if r.status == 200 => r.json().unwrap_or(Value::Null),
                Ok(Ok(r)) => {
                    return Err(ControlError::Status {
                        status: r.status,
                        body: String::from_utf8_lossy(&r.body).into_owned(),
                    })
                }
            }
        };
        let pageout_bytes = self.page_out_libraries(pool, instance).await;
        let after = measure(instance.clone()).await;
        let (uss_before, uss_after) = (self.reclaim_measure(&before), self.reclaim_measure(&after));
        Ok(ReclaimReport {
            instance: instance.id.clone(),
            action: instance.fqn.clone(),
            uss_before,
            uss_after,
            freed: uss_before.saturating_sub(uss_after),
            live_bytes: runtime.get("live_bytes").and_then(Value::as_u64),
            cpu_ms: runtime.get("cpu_ms").and_then(Value::as_f64),
            wall_ms: t0.elapsed().as_secs_f64() * 1000.0,
            pageout_bytes,
            variant: runtime
                .get("variant")
                .and_then(Value::as_str)
                .unwrap_or("none")
                .to_string(),
            runtime,
        })
    }

    /// Desiccant §4.6: page out private, unmodified, file-backed pages of the instance's
    /// processes, except files a running (not frozen) instance maps — those pages would only
    /// fault straight back in for it. With `keep-cached` the pages the page-out evicts are
    /// read back into the page cache, unmapped (icebox_mem::recache).
    async fn page_out_libraries(&self, pool: &Pool, instance: &Arc<Instance>) -> u64 {
        let mode = self.library_pageout;
        if mode == LibraryPageout::Off {
            return 0;
        }
        let pids = instance.sandbox.pids();
        let busy_pids: Vec<u32> = pool
            .slots
            .snapshot()
            .iter()
            .filter(|s| s.instance.id != instance.id && s.state != InstanceState::Frozen)
            .flat_map(|s| s.instance.last_measured().pids)
            .collect();
        let id = instance.id.clone();
        tokio::task::spawn_blocking(move || {
            let mut exclude = HashSet::new();
            for pid in busy_pids {
                if let Ok(files) = icebox_mem::mapped_files(pid) {
                    exclude.extend(files);
                }
            }
            let mut advised = 0;
            for pid in pids {
                let Ok(maps) = icebox_mem::file_mappings(pid) else { continue };
                let candidates = icebox_mem::candidate_mappings(&maps, &exclude);
                let ranges: Vec<(u64, u64)> = candidates.iter().map(|m| (m.start, m.end)).collect();
                // Noted before the page-out: afterwards the pages are no longer resident.
                let evicted = match mode {
                    LibraryPageout::KeepCached => icebox_mem::exclusive_file_pages(pid, &candidates).unwrap_or_else(|e| {
                        tracing::debug!(instance = %id, pid, "reading the pagemap failed, pages will be re-read from disk: {e}");
                        Vec::new()
                    }),
                    _ => Vec::new(),
                };
                match icebox_mem::pageout(pid, &ranges) {
                    Ok(report) => advised += report.bytes_advised,
                    Err(e) => tracing::debug!(instance = %id, pid, "library page-out failed: {e}"),
                }
                if let Err(e) = icebox_mem::recache(pid, &evicted) {
                    tracing::debug!(instance = %id, pid, "re-reading paged-out library pages failed: {e}");
                }
            }
            advised
        })
        .await
        .unwrap_or(0)
    }
}
