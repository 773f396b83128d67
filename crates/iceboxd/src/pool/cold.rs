//! Cold start: sandbox, runtime ready (FaaSMem's first barrier), /init (the second barrier),
//! then the instance joins the pool already leased to the activation that started it.

use super::admission::StartReservation;
use super::backends::Isolation;
use super::choice::Observed;
use super::component::Provided;
use super::env::wants_network;
use super::extensions::Extensions;
use super::instance::{Instance, Measured, Origin, Slot};
use super::{AcquireError, EvictReason, InitError, Lease, Pool, StartError};
use crate::metrics::KindLabel;
use icebox_core::{ActionSpec, EventKind, InstanceState};
use icebox_sandbox::{InstanceSpec, Sandbox};
use serde_json::json;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

impl Pool {
    /// `activation`: an invocation's start (a pre-warm without one passes false).
    pub(super) async fn cold_start(
        self: &Arc<Self>,
        action: &Arc<ActionSpec>,
        reservation: StartReservation,
        activation: bool,
    ) -> Result<Lease, AcquireError> {
        // A failed start drops the reservation, which frees its place.
        let (instance, init_ms) = self.start_instance(action).await?;
        let slot = Slot {
            instance: instance.clone(),
            state: InstanceState::Running,
            in_flight: 1,
            invocations: 0,
            idle_since: self.clock.now_ms(),
            stale: false,
            frozen_since: None,
            reclaiming: false,
            reclaimed_since_last_run: false,
            keep_alive_ms: None,
        };
        if self.slots.add_started(slot).is_err() {
            // The pool shut down meanwhile; its place is held until the sandbox is gone.
            instance.sandbox.destroy().await;
            self.events.emit(
                &instance.id,
                &instance.fqn,
                EventKind::Evicted,
                None,
                Some(EvictReason::Shutdown.as_str().into()),
            );
            return Err(AcquireError::ShuttingDown);
        }
        reservation.fulfilled();
        // Invocations waiting to join it (a sharing instance) take their places now.
        self.queue.wake_all();
        self.watch_exit(&instance);
        self.events
            .emit(&instance.id, &instance.fqn, EventKind::RunStart, None, None);
        Ok(Lease::new(self, instance, true, Some(init_ms), activation))
    }

    async fn start_instance(
        self: &Arc<Self>,
        action: &Arc<ActionSpec>,
    ) -> Result<(Arc<Instance>, u64), AcquireError> {
        let t0 = Instant::now();
        let fqn = action.fqn();
        let isolation = self.backends.isolation_of(action);
        let backend = self
            .backends
            .get(isolation)
            .map_err(StartError::Isolation)?
            .clone();
        let spec = self.instance_spec(action, new_instance_id(&action.name))?;
        let (sandbox, origin, ext) = match self.provided(action, isolation, &spec).await {
            Some(p) if matches!(p.origin, Origin::Restored { .. }) => {
                return Ok(self.restored_instance(action, p, isolation, t0).await);
            }
            Some(p) => (p.sandbox, p.origin, p.ext),
            None => {
                for c in self.components.iter() {
                    c.before_start(self, isolation, &backend, &spec).await;
                }
                let id = spec.id.clone();
                self.events.emit(&id, &fqn, EventKind::Created, None, None);
                let sandbox = backend.start(spec).await.map_err(|source| {
                    self.events.emit(
                        &id,
                        &fqn,
                        EventKind::Evicted,
                        None,
                        Some(format!("start failed: {source}")),
                    );
                    StartError::Sandbox {
                        kind: action.exec.kind.clone(),
                        source,
                    }
                })?;
                (sandbox, Origin::Started, Extensions::default())
            }
        };
        let id = sandbox.id().to_string();
        // A stem cell's runtime started before this activation: only a fresh start measures
        // what a stem cell would save.
        let runtime_start_ms = (origin == Origin::Started)
            .then(|| u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX));
        let unjoined = Unjoined(Some(sandbox.clone()));
        let instance = self.new_instance(action, sandbox, isolation, origin, ext, t0);
        for c in self.components.iter() {
            c.on_runtime_ready(self, &instance).await;
        }
        let ready_memory = instance.measure();
        let detail = (origin == Origin::Prewarmed).then(|| "prewarmed".to_string());
        self.events.emit(
            &id,
            &fqn,
            EventKind::RuntimeReady,
            Some(ready_memory),
            detail,
        );

        let t_init = Instant::now();
        let init = self.init_sandbox(action, &instance.sandbox).await;
        let init_ms = u64::try_from(t_init.elapsed().as_millis()).unwrap_or(u64::MAX);
        match init {
            Ok(()) => {
                for c in self.components.iter() {
                    c.on_init_done(self, &instance).await;
                }
                let memory = instance.measure();
                self.events.emit(
                    &id,
                    &fqn,
                    EventKind::InitDone,
                    Some(memory),
                    Some(format!("{init_ms} ms")),
                );
                self.observe_cold_start(action, t0);
                self.observe(
                    action,
                    &id,
                    Observed::ColdStart {
                        runtime_start_ms,
                        init_ms: Some(init_ms),
                    },
                );
                unjoined.disarm();
                Ok((instance, init_ms))
            }
            Err(error) => {
                self.events.emit(
                    &id,
                    &fqn,
                    EventKind::InitFailed,
                    None,
                    Some(error.to_string()),
                );
                unjoined.disarm();
                instance.sandbox.destroy().await;
                self.events.emit(
                    &id,
                    &fqn,
                    EventKind::Evicted,
                    None,
                    Some("init failed".into()),
                );
                Err(AcquireError::Init { error, init_ms })
            }
        }
    }

    /// A sandbox from the first component that has one ready for this start.
    async fn provided(
        self: &Arc<Self>,
        action: &Arc<ActionSpec>,
        isolation: Isolation,
        spec: &InstanceSpec,
    ) -> Option<Provided> {
        for c in self.components.for_action(self, action) {
            if let Some(p) = c.provide(self, action, isolation, spec).await {
                return Some(p);
            }
        }
        None
    }

    /// A restored instance has nothing left to initialise: both of FaaSMem's barriers pass
    /// at once. Its "init time" is the restore's.
    async fn restored_instance(
        self: &Arc<Self>,
        action: &Arc<ActionSpec>,
        provided: Provided,
        isolation: Isolation,
        t0: Instant,
    ) -> (Arc<Instance>, u64) {
        let Provided {
            sandbox,
            origin,
            ext,
        } = provided;
        let ms = match origin {
            Origin::Restored { ms, .. } => ms,
            _ => 0,
        };
        let instance = self.new_instance(action, sandbox, isolation, origin, ext, t0);
        for c in self.components.iter() {
            c.on_runtime_ready(self, &instance).await;
        }
        for c in self.components.iter() {
            c.on_init_done(self, &instance).await;
        }
        let memory = instance.measure();
        self.events.emit(
            &instance.id,
            &instance.fqn,
            EventKind::InitDone,
            Some(memory),
            Some("from snapshot".into()),
        );
        self.observe_cold_start(action, t0);
        self.observe(
            action,
            &instance.id,
            Observed::ColdStart {
                runtime_start_ms: None,
                init_ms: None,
            },
        );
        (instance, ms)
    }

    fn observe_cold_start(&self, action: &ActionSpec, t0: Instant) {
        self.metrics
            .cold_start_seconds
            .get_or_create(&KindLabel {
                kind: action.exec.kind.clone(),
            })
            .observe(t0.elapsed().as_secs_f64());
    }

    /// What the backend needs to start (or restore) an instance of the action.
    pub(super) fn instance_spec(
        &self,
        action: &ActionSpec,
        id: String,
    ) -> Result<InstanceSpec, StartError> {
        let runtime = self
            .runtimes
            .resolve(&action.exec.kind)
            .ok_or_else(|| StartError::NotInstalled(action.exec.kind.clone()))?
            .clone();
        Ok(InstanceSpec {
            id,
            action: action.fqn(),
            runtime,
            memory_limit_bytes: action.limits.memory_bytes(),
            pids_max: self.cfg.pids_max,
            tmp_bytes: self.cfg.tmp_bytes,
            concurrency: self.capacity_of(action),
            network: wants_network(action),
            env: self.instance_env(&action.exec.kind, Some(action)),
        })
    }

    fn new_instance(
        &self,
        action: &Arc<ActionSpec>,
        sandbox: Arc<dyn Sandbox>,
        isolation: Isolation,
        origin: Origin,
        mut ext: Extensions,
        created: Instant,
    ) -> Arc<Instance> {
        sandbox.logs().attach_budget(&self.cfg.output_budget);
        sandbox.logs().set_limit(action.limits.logs_bytes());
        for c in self.components.for_action(self, action) {
            c.on_created(action, &origin, &mut ext);
        }
        Arc::new(Instance {
            id: sandbox.id().to_string(),
            oom_kills_seen: AtomicU64::new(sandbox.oom_kills()),
            action: action.clone(),
            fqn: action.fqn(),
            sandbox,
            created,
            origin,
            frozen: tokio::sync::Mutex::new(false),
            measured: Mutex::new(Measured::default()),
            offload_pool: self.cfg.offload_pool.clone(),
            sharing: self.sharing_of(action),
            isolation,
            ext,
        })
    }

    /// POST /init with the action's code.
    pub(super) async fn init_sandbox(
        &self,
        action: &ActionSpec,
        sandbox: &Arc<dyn Sandbox>,
    ) -> Result<(), InitError> {
        // A stored zip/jar is read and encoded here, held only until /init is sent.
        let code = crate::code_store::init_code(&self.cfg.snapshots.state_dir, &action.exec)
            .map_err(|e| InitError::Refused(format!("the action's code cannot be read: {e}")))?;
        let body = json!({"value": {
            "name": action.name,
            "main": action.exec.main.clone().unwrap_or_else(|| "main".to_string()),
            "code": code,
            "binary": action.exec.binary,
            "env": {},
        }});
        let timeout = Duration::from_millis(action.limits.timeout);
        let marks = sandbox.logs().marks();
        let reply = tokio::select! {
            r = tokio::time::timeout(timeout, sandbox.client().post_json("/init", &body)) => r,
            _ = sandbox.exited() => {
                let out = sandbox.logs().take_after(marks, Duration::from_millis(100)).await;
                return Err(InitError::Exited(out.join("\n")));
            }
        };
        match reply {
            Err(_) => Err(InitError::Timeout(action.limits.timeout)),
            Ok(Err(e)) => Err(e.into()),
            Ok(Ok(r)) if r.status == 200 => Ok(()),
            Ok(Ok(r)) => {
                let msg = r
                    .json()
                    .and_then(|v| v.get("error").cloned())
                    .map(|e| {
                        e.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| e.to_string())
                    })
                    .unwrap_or_else(|| String::from_utf8_lossy(&r.body).into_owned());
                Err(InitError::Refused(msg))
            }
        }
    }
}

/// A sandbox that has not joined the pool yet: destroyed if the start is abandoned midway
/// (its future dropped), so no runtime outlives its books.
struct Unjoined(Option<Arc<dyn Sandbox>>);

impl Unjoined {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Unjoined {
    fn drop(&mut self) {
        if let (Some(sandbox), Ok(rt)) = (self.0.take(), tokio::runtime::Handle::try_current()) {
            rt.spawn(async move { sandbox.destroy().await });
        }
    }
}

/// Short, readable and unique: the action name (trimmed) plus random hex.
pub(super) fn new_instance_id(action_name: &str) -> String {
    let base: String = action_name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(20)
        .collect();
    format!(
        "{}-{:08x}",
        if base.is_empty() { "action" } else { &base },
        rand::random::<u32>()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn instance_ids_are_safe_path_components() {
        let id = super::new_instance_id("../weird name/with/slashes-and-a-very-long-tail");
        assert!(id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert!(id.len() <= 29);
        assert!(super::new_instance_id("").starts_with("action-"));
    }
}
