//! Building a snapshot: a *template* instance of the action is started in the background,
//! initialised (and warmed up, if asked), its connections closed, and handed to the backend,
//! which writes the snapshot and destroys it. No activation ever waits for this.

use super::error::{BuildError, RunFailure};
use super::settings::{effective, When};
use super::ActionSnapshots;
use crate::pool::backends::Isolation;
use crate::pool::Pool;
use icebox_core::{ActionSpec, EventKind};
use icebox_sandbox::Sandbox;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl ActionSnapshots {
    /// At start-up: keeps the snapshots an earlier run took of these actions (same version),
    /// deletes the rest, and builds the missing ones.
    pub(super) fn take_over(&self, pool: &Arc<Pool>, actions: &[Arc<ActionSpec>]) {
        self.books.load(|fqn| {
            actions
                .iter()
                .find(|a| a.fqn() == fqn)
                .map(|a| a.version.clone())
        });
        for action in actions {
            self.build_if_missing(pool, action);
        }
    }

    /// Builds the action's snapshot now (POST /icebox/v1/snapshots/…), or says why it cannot.
    /// A failed snapshot is rebuilt at once, however many failures its backoff counts.
    pub fn request(&self, pool: &Arc<Pool>, action: &Arc<ActionSpec>) -> Result<(), String> {
        if !self.books.enabled() {
            return Err("Snapshots are off on this node (--snapshots off).".into());
        }
        // An operator asking for a build overrides an earlier failure's "off".
        pool.technique_retry(action, icebox_policy::Technique::Snapshot);
        let settings = effective(pool, action);
        if !settings.enabled() {
            return Err(format!(
                "The action '{}' does not have snapshots on: set its annotation 'icebox.snapshot' \
                 to true or \"warm\" (and, if it has 'icebox.techniques', list snapshot there).",
                action.fqn()
            ));
        }
        let isolation = pool.backends.isolation_of(action);
        let backend = pool.backends.get(isolation)?;
        if backend.snapshots().is_none() {
            return Err(format!(
                "The {} backend cannot take snapshots on this node (process snapshots need root, \
                 crun and CRIU >= 4.1).",
                backend.name()
            ));
        }
        if self.books.request_build_as(action, &settings, isolation) {
            spawn_build(pool, action, isolation);
        }
        Ok(())
    }

    /// Discards the action's snapshots; returns how many there were.
    pub fn discard(&self, fqn: &str) -> usize {
        self.books.forget(fqn)
    }

    /// Starts building a snapshot of the action in the background when it wants one and has
    /// none (nor one in the making).
    pub(super) fn build_if_missing(&self, pool: &Arc<Pool>, action: &Arc<ActionSpec>) {
        let isolation = pool.backends.isolation_of(action);
        let Ok(backend) = pool.backends.get(isolation) else {
            return;
        };
        if backend.snapshots().is_none()
            || !self
                .books
                .start_build_as(action, &effective(pool, action), isolation)
        {
            return;
        }
        spawn_build(pool, action, isolation);
    }

    async fn build(
        &self,
        pool: &Pool,
        action: &Arc<ActionSpec>,
        isolation: Isolation,
    ) -> Result<(), BuildError> {
        let backend = pool
            .backends
            .get(isolation)
            .map_err(BuildError::Isolation)?
            .clone();
        let snapshots = backend
            .snapshots()
            .ok_or(BuildError::Unsupported(backend.name()))?;
        let t0 = Instant::now();
        let id = format!("snap-{}", crate::pool::cold::new_instance_id(&action.name));
        let spec = pool
            .instance_spec(action, id.clone())
            .map_err(BuildError::Spec)?;
        let fqn = action.fqn();
        pool.events.emit(
            &id,
            &fqn,
            EventKind::Created,
            None,
            Some("snapshot template".into()),
        );
        let sandbox = backend.start(spec).await.map_err(|e| {
            pool.events.emit(
                &id,
                &fqn,
                EventKind::Evicted,
                None,
                Some(format!("start failed: {e}")),
            );
            BuildError::Start(e)
        })?;
        let prepared = prepare_template(pool, action, &sandbox).await;
        if let Err(why) = prepared {
            sandbox.destroy().await;
            pool.events.emit(
                &id,
                &fqn,
                EventKind::Evicted,
                None,
                Some("snapshot template failed".into()),
            );
            return Err(why);
        }
        let scratch = self.books.scratch(&fqn).map_err(BuildError::Scratch)?;
        let taken = snapshots
            .snapshot(&sandbox, &super::store::Store::image_dir(&scratch))
            .await;
        // The backend destroyed the template; this makes sure of it (idempotent).
        sandbox.destroy().await;
        let info = match taken {
            Ok(info) => info,
            Err(e) => {
                super::store::remove(&scratch);
                pool.events.emit(
                    &id,
                    &fqn,
                    EventKind::Evicted,
                    None,
                    Some(format!("snapshot failed: {e}")),
                );
                return Err(BuildError::Snapshot(e));
            }
        };
        let detail = format!(
            "{} MiB of memory in {} ms ({} ms with the template's start)",
            info.memory_bytes >> 20,
            info.took_ms,
            t0.elapsed().as_millis()
        );
        self.books
            .built(action, isolation, &scratch, info)
            .map_err(BuildError::Store)?;
        pool.events
            .emit(&id, &fqn, EventKind::Snapshotted, None, Some(detail));
        pool.events.emit(
            &id,
            &fqn,
            EventKind::Evicted,
            None,
            Some("snapshotted".into()),
        );
        pool.metrics
            .snapshots
            .builds
            .get_or_create(&result("ok"))
            .inc();
        Ok(())
    }
}

/// Builds in the background the snapshot the books just marked as building.
fn spawn_build(pool: &Arc<Pool>, action: &Arc<ActionSpec>, isolation: Isolation) {
    let pool = pool.clone();
    let action = action.clone();
    tokio::spawn(async move {
        let Some(me) = pool.component::<ActionSnapshots>() else {
            return;
        };
        let _permit = me.books.builds.acquire().await;
        if let Err(reason) = me.build(&pool, &action, isolation).await {
            tracing::warn!(action = %action.fqn(), "cannot snapshot the action: {reason}");
            // A build that failed would fail again: the action runs on without snapshots
            // until it is updated (or an operator asks for a build).
            pool.technique_failed(
                &action,
                "",
                icebox_policy::Technique::Snapshot,
                format!("snapshot build: {reason}"),
            );
            me.books
                .build_failed(&action, isolation, reason.to_string());
            pool.metrics
                .snapshots
                .builds
                .get_or_create(&result("failed"))
                .inc();
        }
    });
}

/// `/init`, the warm-up run if asked, then no connection left open: CRIU cannot dump a
/// socket whose peer is outside the snapshot.
async fn prepare_template(
    pool: &Pool,
    action: &ActionSpec,
    sandbox: &Arc<dyn Sandbox>,
) -> Result<(), BuildError> {
    pool.init_sandbox(action, sandbox)
        .await
        .map_err(BuildError::Init)?;
    if let When::AfterWarmup(params) = effective(pool, action).when {
        warm_up(action, sandbox, params)
            .await
            .map_err(BuildError::WarmUp)?;
    }
    sandbox.client().close_idle();
    Ok(())
}

async fn warm_up(
    action: &ActionSpec,
    sandbox: &Arc<dyn Sandbox>,
    params: serde_json::Map<String, Value>,
) -> Result<(), RunFailure> {
    let mut value: serde_json::Map<String, Value> = action
        .parameters
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.clone()))
        .collect();
    value.extend(params);
    let timeout = Duration::from_millis(action.limits.timeout);
    let body = json!({
        "value": value,
        "namespace": action.namespace,
        "action_name": format!("/{}", action.fqn()),
        "activation_id": "",
        "transaction_id": "",
        "deadline": (crate::now_ms() + action.limits.timeout).to_string(),
        "action_version": action.version,
    });
    let marks = sandbox.logs().marks();
    let reply = tokio::time::timeout(timeout, sandbox.client().post_json("/run", &body))
        .await
        .map_err(|_| RunFailure::Timeout)?
        .map_err(RunFailure::Transport)?;
    // Its output is the template's, not any activation's.
    let _ = sandbox
        .logs()
        .take_after(marks, Duration::from_millis(100))
        .await;
    if reply.status != 200 {
        return Err(RunFailure::Status {
            status: reply.status,
            body: String::from_utf8_lossy(&reply.body).into_owned(),
        });
    }
    Ok(())
}

fn result(r: &str) -> crate::metrics::snapshots::ResultLabel {
    crate::metrics::snapshots::ResultLabel { result: r.into() }
}
