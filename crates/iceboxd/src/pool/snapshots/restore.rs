//! Restoring an instance from its action's snapshot instead of starting it, and, for the first
//! restore of a snapshot, turning the recording of its first activation into the snapshot's
//! loading set. Any failure falls back to a normal start and says so.

use super::error::RestoreError;
use super::{ActionSnapshots, RestoredFrom};
use crate::pool::backends::Isolation;
use crate::pool::component::Provided;
use crate::pool::extensions::Extensions;
use crate::pool::instance::{Instance, Origin};
use crate::pool::Pool;
use icebox_core::api::RestoreView;
use icebox_core::{ActionSpec, EventKind, RestoreMode};
use icebox_sandbox::{InstanceSpec, Sandbox};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most a runtime may take to reseed and run the action's restore hook.
const RESTORED_TIMEOUT: Duration = Duration::from_secs(10);

impl ActionSnapshots {
    /// A restored, reseeded sandbox ready to run the action, or None: no usable snapshot, or
    /// its restore failed (then the snapshot is discarded and the caller starts normally).
    pub(super) async fn restore(
        &self,
        pool: &Pool,
        action: &Arc<ActionSpec>,
        isolation: Isolation,
        spec: &InstanceSpec,
    ) -> Option<Provided> {
        let settings = super::settings::effective(pool, action);
        let plan = self.books.plan_as(action, &settings, isolation)?;
        let key = (action.fqn(), isolation);
        let backend = pool.backends.get(isolation).ok()?.clone();
        let Some(snapshots) = backend.snapshots() else {
            self.books.recording_abandoned(&key, None);
            return None;
        };
        let (id, fqn) = (spec.id.clone(), action.fqn());
        pool.events.emit(
            &id,
            &fqn,
            EventKind::Created,
            None,
            Some(format!("from snapshot ({})", plan.mode.as_str())),
        );
        let t0 = Instant::now();
        let restored = match snapshots
            .restore(spec.clone(), &plan.image_dir, plan.mode)
            .await
        {
            Ok(sandbox) => match reseed(&sandbox, spec).await {
                Ok(()) => Ok(sandbox),
                Err(e) => {
                    sandbox.destroy().await;
                    Err(e)
                }
            },
            Err(e) => Err(RestoreError::Restore(e)),
        };
        let sandbox = match restored {
            Ok(sandbox) => sandbox,
            Err(reason) => {
                tracing::warn!(action = %fqn, instance = %id, mode = plan.mode.as_str(),
                    "restore from the snapshot failed, starting normally instead: {reason}");
                pool.events.emit(
                    &id,
                    &fqn,
                    EventKind::RestoreFailed,
                    None,
                    Some(format!(
                        "{reason}; starting normally, the snapshot is discarded"
                    )),
                );
                self.books
                    .fail(&key, &plan.version, reason.to_string(), true);
                pool.metrics
                    .snapshots
                    .fallbacks
                    .get_or_create(&mode_label(plan.mode))
                    .inc();
                return None;
            }
        };
        let ms = u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.books.restored(
            &key,
            &plan.version,
            RestoreView {
                instance: id.clone(),
                mode: plan.mode,
                ms,
                at_ms: crate::now_ms(),
            },
        );
        pool.metrics
            .snapshots
            .restore_seconds
            .get_or_create(&mode_label(plan.mode))
            .observe(t0.elapsed().as_secs_f64());
        let detail = json!({"mode": plan.mode, "ms": ms, "pager": sandbox.restore_stats()});
        pool.events.emit(
            &id,
            &fqn,
            EventKind::Restored,
            Some(sandbox.memory()),
            Some(detail.to_string()),
        );
        let mut ext = Extensions::default();
        ext.insert(RestoredFrom {
            image_dir: plan.image_dir,
            version: plan.version,
            recording: AtomicBool::new(plan.mode == RestoreMode::Record),
        });
        Some(Provided {
            sandbox,
            origin: Origin::Restored {
                mode: plan.mode,
                ms,
            },
            ext,
        })
    }

    /// After an activation: if this instance was restored in record mode, its first
    /// activation is over, so the snapshot's loading set is built now (in the background).
    pub(super) fn finish_recording(&self, pool: &Arc<Pool>, instance: &Arc<Instance>) {
        let Some(restore) = instance.ext::<RestoredFrom>() else {
            return;
        };
        if !restore.recording.swap(false, Ordering::SeqCst) {
            return;
        }
        let (image_dir, version) = (restore.image_dir.clone(), restore.version.clone());
        let pool = pool.clone();
        let instance = instance.clone();
        tokio::spawn(async move {
            let Some(me) = pool.component::<ActionSnapshots>() else {
                return;
            };
            let key = (instance.fqn.clone(), instance.isolation);
            let backend = pool.backends.get(instance.isolation).ok().cloned();
            let Some(snapshots) = backend.as_ref().and_then(|b| b.snapshots()) else {
                return;
            };
            match snapshots.finish_record(&instance.sandbox, &image_dir).await {
                Ok(info) => {
                    let detail = format!(
                        "working set {} pages ({} zero), loading set {} pages in {} regions, {} groups",
                        info.working_set_pages,
                        info.zero_pages,
                        info.loading_set_pages,
                        info.regions,
                        info.groups
                    );
                    if let Err(e) = me.books.recorded(&key, &version, info) {
                        tracing::warn!(action = %instance.fqn, "cannot store the loading set: {e}");
                    }
                    pool.events.emit(
                        &instance.id,
                        &instance.fqn,
                        EventKind::Recorded,
                        None,
                        Some(detail),
                    );
                }
                Err(e) => {
                    tracing::warn!(action = %instance.fqn, instance = %instance.id,
                        "cannot build the snapshot's loading set: {e}");
                    me.books.recording_abandoned(&key, Some(&instance.id));
                }
            }
        });
    }

    /// A restored instance is gone: if its pager failed (a damaged page of the snapshot met
    /// only after the restore, when the task first touched it), the snapshot is no good and
    /// goes too, to be rebuilt; the instance itself was killed by its pager.
    pub(super) fn check_restored_memory(&self, pool: &Pool, instance: &Instance) {
        let Some(restore) = instance.ext::<RestoredFrom>() else {
            return;
        };
        let Some(error) = instance
            .sandbox
            .restore_stats()
            .and_then(|s| s["pager"]["error"].as_str().map(str::to_string))
        else {
            return;
        };
        tracing::warn!(action = %instance.fqn, instance = %instance.id,
            "the restored instance's pager failed, discarding the snapshot: {error}");
        pool.events.emit(
            &instance.id,
            &instance.fqn,
            EventKind::RestoreFailed,
            None,
            Some(format!(
                "the pager failed after the restore: {error}; the snapshot is discarded"
            )),
        );
        self.books.fail(
            &(instance.fqn.clone(), instance.isolation),
            &restore.version,
            format!("the pager of {} failed: {error}", instance.id),
            // Not a fallback: the instance did not start normally, it died.
            false,
        );
    }

    /// The instance goes before its recording was finished: another restore may record.
    pub(super) fn abandon_recording(&self, instance: &Instance) {
        let Some(restore) = instance.ext::<RestoredFrom>() else {
            return;
        };
        if restore.recording.swap(false, Ordering::SeqCst) {
            self.books.recording_abandoned(
                &(instance.fqn.clone(), instance.isolation),
                Some(&instance.id),
            );
        }
    }
}

/// Tells the restored runtime it is a new instance: fresh random state, this instance's values
/// of the variables in `RESTORE_ENV`, the action's restore hook (docs/runtime-protocol.md,
/// `/icebox/restored`).
async fn reseed(sandbox: &Arc<dyn Sandbox>, spec: &InstanceSpec) -> Result<(), RestoreError> {
    let seed: [u8; 32] = rand::random();
    let seed: String = seed.iter().map(|b| format!("{b:02x}")).collect();
    let env: serde_json::Map<String, serde_json::Value> = spec
        .env
        .iter()
        .filter(|(k, _)| icebox_sandbox::RESTORE_ENV.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let body = json!({"instance": sandbox.id(), "seed": seed, "env": env});
    let reply = tokio::time::timeout(
        RESTORED_TIMEOUT,
        sandbox.client().post_json("/icebox/restored", &body),
    )
    .await
    .map_err(|_| RestoreError::ReseedTimeout)?
    .map_err(RestoreError::ReseedUnreachable)?;
    if reply.status != 200 {
        return Err(RestoreError::ReseedRefused {
            status: reply.status,
            body: String::from_utf8_lossy(&reply.body).into_owned(),
        });
    }
    Ok(())
}

fn mode_label(mode: RestoreMode) -> crate::metrics::snapshots::ModeLabel {
    crate::metrics::snapshots::ModeLabel {
        mode: mode.as_str().into(),
    }
}
