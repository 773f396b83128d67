//! Prewarmed runtimes ("stem cells", as OpenWhisk calls them): for each configured kind a few
//! sandboxes are started ahead of demand, their proxy listening and the whole sandbox frozen.
//! A cold start of an action that fits (intra-instance concurrency 1, no network, the stem
//! cells' memory limit, as OpenWhisk's stem cells are per kind and memory) takes one, thaws
//! it and only pays /init; a replacement starts in the background. Stem cells are not charged
//! against the keep-alive budget or max_instances: their number is the configured count.

use super::backends::Isolation;
use super::component::{Component, Provided};
use super::env::wants_network;
use super::extensions::Extensions;
use super::instance::Origin;
use super::Pool;
use async_trait::async_trait;
use icebox_core::api::InstanceView;
use icebox_core::{ActionSpec, EventKind, InstanceState, MemoryStats};
use icebox_sandbox::{InstanceSpec, Sandbox};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The memory limit a stem cell runs under until an action takes it.
const STEM_CELL_LIMIT: u64 = 256 << 20;

struct StemCell {
    sandbox: Arc<dyn Sandbox>,
    kind: String,
    created: Instant,
    memory: MemoryStats,
    pids: Vec<u32>,
    measured_at_ms: u64,
}

/// The prewarm component: the configured stem cells per kind, and those there are.
pub struct Prewarm {
    /// Kind → how many stem cells to keep ready.
    kinds: Vec<(String, usize)>,
    cells: StemCells,
}

/// The stem cells, under their own lock (never held with another pool lock, see mod.rs).
#[derive(Default)]
struct StemCells {
    state: Mutex<Cells>,
}

#[derive(Default)]
struct Cells {
    /// Kind → ready, frozen stem cells.
    ready: HashMap<String, Vec<StemCell>>,
    /// Kind → stem cells being started.
    starting: HashMap<String, usize>,
    /// Shut down: no new stem cells.
    closed: bool,
}

impl StemCells {
    /// Count the stem cells `kind` lacks as starting; returns how many to start.
    fn reserve_missing(&self, kind: &str, target: usize) -> usize {
        let mut c = self.state.lock().unwrap();
        if c.closed {
            return 0;
        }
        let have =
            c.ready.get(kind).map_or(0, Vec::len) + c.starting.get(kind).copied().unwrap_or(0);
        let missing = target.saturating_sub(have);
        *c.starting.entry(kind.to_string()).or_default() += missing;
        missing
    }

    /// A start finished; the cell is returned when it is not wanted any more (shutdown).
    fn arrived(&self, kind: &str, cell: Option<StemCell>) -> Option<StemCell> {
        let mut c = self.state.lock().unwrap();
        if let Some(n) = c.starting.get_mut(kind) {
            *n = n.saturating_sub(1);
        }
        match cell {
            Some(cell) if !c.closed => {
                c.ready.entry(kind.to_string()).or_default().push(cell);
                None
            }
            other => other,
        }
    }

    fn take(&self, kind: &str) -> Option<StemCell> {
        self.state.lock().unwrap().ready.get_mut(kind)?.pop()
    }

    fn starting(&self) -> usize {
        self.state.lock().unwrap().starting.values().sum()
    }

    /// Refuse new stem cells and hand over the ready ones.
    fn close(&self) -> Vec<StemCell> {
        let mut c = self.state.lock().unwrap();
        c.closed = true;
        c.ready.drain().flat_map(|(_, v)| v).collect()
    }

    fn views(&self, reclaim_mode: &str, backend_name: &str) -> Vec<InstanceView> {
        let c = self.state.lock().unwrap();
        c.ready
            .values()
            .flatten()
            .map(|c| InstanceView {
                id: c.sandbox.id().to_string(),
                action: String::new(),
                kind: c.kind.clone(),
                state: InstanceState::Prewarmed,
                pids: c.pids.clone(),
                age_ms: u64::try_from(c.created.elapsed().as_millis()).unwrap_or(u64::MAX),
                idle_ms: None,
                invocations: 0,
                in_flight: 0,
                memory_limit: STEM_CELL_LIMIT,
                memory: c.memory,
                charged: 0,
                measured_at_ms: c.measured_at_ms,
                reclaimable: None,
                reclaim_mode: reclaim_mode.to_string(),
                // Stem cells are never offloaded: they must start fast.
                offload: icebox_core::OffloadView {
                    mode: "none".into(),
                    local_bytes: c.memory.uss,
                    ..Default::default()
                },
                sharing_mode: "process".into(),
                sharing: None,
                isolation: backend_name.to_string(),
                restored: None,
                restore_stats: None,
                techniques: None,
            })
            .collect()
    }
}

impl Prewarm {
    pub fn new(kinds: Vec<(String, usize)>) -> Prewarm {
        Prewarm {
            kinds,
            cells: StemCells::default(),
        }
    }

    /// Start stem cells until every configured kind has its count (in the background).
    fn refill(&self, pool: &Arc<Pool>) {
        for (kind, target) in &self.kinds {
            for _ in 0..self.cells.reserve_missing(kind, *target) {
                let pool = pool.clone();
                let kind = kind.clone();
                tokio::spawn(async move {
                    let Some(me) = pool.component::<Prewarm>() else {
                        return;
                    };
                    let cell = create_stem_cell(&pool, &kind).await;
                    if let Some(unwanted) = me.cells.arrived(&kind, cell) {
                        unwanted.sandbox.destroy().await;
                    }
                });
            }
        }
    }

    /// A ready stem cell for this action, thawed; it already runs under the action's memory
    /// limit, as stem cells only serve actions of their own limit.
    async fn take(&self, pool: &Arc<Pool>, action: &ActionSpec) -> Option<Arc<dyn Sandbox>> {
        let kind = &action.exec.kind;
        // The memory limit must match: runtimes size their heaps from it at start-up
        // ({heap_mb}, the JVM's MaxRAMPercentage), so another limit would mean a wrong heap.
        // So must every start-up setting the components give the runtime (eager GC, say).
        let fits = pool.sharing_of(action) == icebox_policy::SharingMode::Process
            && action.limits.memory_bytes() == STEM_CELL_LIMIT
            && !wants_network(action)
            && pool.instance_env(kind, Some(action)) == pool.instance_env(kind, None);
        if !fits {
            return None;
        }
        let cell = self.cells.take(kind)?;
        self.refill(pool);
        match cell.sandbox.thaw() {
            Ok(()) => Some(cell.sandbox),
            Err(e) => {
                // The freezer failed: not usable.
                tracing::warn!(instance = %cell.sandbox.id(), "prewarmed runtime unusable: {e}");
                cell.sandbox.destroy().await;
                None
            }
        }
    }
}

async fn create_stem_cell(pool: &Pool, kind: &str) -> Option<StemCell> {
    let runtime = pool.runtimes.resolve(kind)?.clone();
    let id = format!("{}-{:08x}", runtime.language(), rand::random::<u32>());
    let label = format!("(prewarm {kind})");
    let spec = InstanceSpec {
        id: id.clone(),
        action: label.clone(),
        runtime,
        memory_limit_bytes: STEM_CELL_LIMIT,
        pids_max: pool.cfg.pids_max,
        tmp_bytes: pool.cfg.tmp_bytes,
        concurrency: 1,
        network: false,
        env: pool.instance_env(kind, None),
    };
    let created = Instant::now();
    pool.events
        .emit(&id, &label, EventKind::Created, None, None);
    let sandbox = match pool.backends.process().start(spec).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(kind, "cannot prewarm a runtime: {e}");
            pool.events.emit(
                &id,
                &label,
                EventKind::Evicted,
                None,
                Some(format!("start failed: {e}")),
            );
            return None;
        }
    };
    let pids = sandbox.pids();
    let memory = sandbox.memory();
    pool.events
        .emit(&id, &label, EventKind::RuntimeReady, Some(memory), None);
    if let Err(e) = sandbox.freeze() {
        tracing::warn!(kind, "cannot freeze a prewarmed runtime: {e}");
        sandbox.destroy().await;
        return None;
    }
    pool.events
        .emit(&id, &label, EventKind::Frozen, Some(memory), None);
    Some(StemCell {
        sandbox,
        kind: kind.to_string(),
        created,
        memory,
        pids,
        measured_at_ms: crate::now_ms(),
    })
}

#[async_trait]
impl Component for Prewarm {
    fn name(&self) -> &'static str {
        "prewarm"
    }

    fn technique(&self) -> Option<icebox_policy::Technique> {
        Some(icebox_policy::Technique::Stemcell)
    }

    async fn on_node_start(&self, pool: &Arc<Pool>, _actions: &[Arc<ActionSpec>]) {
        self.refill(pool);
    }

    /// Stem cells are processes: only the process backend takes them.
    async fn provide(
        &self,
        pool: &Arc<Pool>,
        action: &Arc<ActionSpec>,
        isolation: Isolation,
        _spec: &InstanceSpec,
    ) -> Option<Provided> {
        if isolation != Isolation::Process {
            return None;
        }
        let sandbox = self.take(pool, action).await?;
        Some(Provided {
            sandbox,
            origin: Origin::Prewarmed,
            ext: Extensions::default(),
        })
    }

    fn extra_views(&self, pool: &Pool) -> Vec<InstanceView> {
        let reclaim_mode = pool
            .component::<super::desiccant::Desiccant>()
            .map_or("vanilla", |d| d.node_mode().as_str());
        self.cells
            .views(reclaim_mode, pool.backends.process().name())
    }

    /// Destroy every stem cell.
    async fn on_shutdown(&self, _pool: &Pool) {
        let mut cells = self.cells.close();
        // Stem cells still starting destroy themselves once they see the pool closed; wait
        // for them so none outlives the daemon.
        let deadline = Instant::now() + std::time::Duration::from_secs(60);
        while self.cells.starting() > 0 && Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        cells.extend(self.cells.close());
        futures::future::join_all(cells.iter().map(|c| c.sandbox.destroy())).await;
    }
}

#[cfg(test)]
impl Pool {
    /// What the node's start does for stem cells, callable from a test's plain thread.
    pub(super) fn refill_prewarm(self: &Arc<Self>) {
        self.component::<Prewarm>()
            .expect("the test configured stem cells")
            .refill(self);
    }
}
