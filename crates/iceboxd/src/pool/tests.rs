//! The pool against an in-memory sandbox backend (each fake runtime is a tiny HTTP server on
//! a UNIX socket, answering /init and /run) and the manual clock.

use super::*;
use async_trait::async_trait;
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use icebox_core::{ActionLimits, ActionSpec, Exec, InstanceState, MemoryStats};
use icebox_policy::{KeepAliveConfig, LibraryPageout, ManualClock, OffloadMode, ReclaimMode};
use icebox_sandbox::{
    ExitCause, InstanceSpec, LogCollector, RuntimeClient, RuntimeManifest, Runtimes, Sandbox,
    SandboxBackend, SandboxError,
};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::Semaphore;

use icebox_core::units::MIB;

#[derive(Default)]
pub(super) struct Counters {
    started: AtomicUsize,
    live: AtomicUsize,
    pub(super) inits: AtomicUsize,
    /// Restores by mode, in order.
    pub(super) restores: std::sync::Mutex<Vec<icebox_core::RestoreMode>>,
    pub(super) snapshots: AtomicUsize,
    pub(super) recorded: AtomicUsize,
    /// Bytes live instances hold of the host budget.
    host_in_use: std::sync::atomic::AtomicU64,
    /// Holds a freeze in progress while a test acts (tests_freeze.rs).
    pub(super) freeze_gate: super::tests_gate::FreezeGate,
}

pub(super) struct FakeBackend {
    pub(super) dir: tempfile::TempDir,
    pub(super) counters: Arc<Counters>,
    /// When set, every /init waits for a permit.
    init_gate: Option<Arc<Semaphore>>,
    /// /init answers an error.
    pub(super) bad_code: AtomicBool,
    /// Offers snapshots (tests_snapshots.rs).
    snapshots: bool,
    /// Hands out memory from a host budget of this many bytes (as N:1 VMs do).
    host_limit: Option<u64>,
    /// Hosts at most this many instances of one action (an N:1 VM's partitions).
    per_action: Option<usize>,
    /// Runtimes started from now on never answer POST /icebox/reclaim (a hung collector).
    pub(super) hang_reclaim: AtomicBool,
}

struct FakeSandbox {
    id: String,
    client: RuntimeClient,
    logs: Arc<LogCollector>,
    memory_limit: u64,
    frozen: AtomicBool,
    destroyed: AtomicBool,
    server: tokio::task::JoinHandle<()>,
    counters: Arc<Counters>,
}

#[derive(Clone)]
struct RuntimeState {
    counters: Arc<Counters>,
    init_gate: Option<Arc<Semaphore>>,
    bad_code: bool,
}

async fn fake_init(State(s): State<RuntimeState>) -> (axum::http::StatusCode, Json<Value>) {
    s.counters.inits.fetch_add(1, Ordering::SeqCst);
    if let Some(gate) = &s.init_gate {
        gate.acquire().await.expect("gate open").forget();
    }
    if s.bad_code {
        (
            axum::http::StatusCode::BAD_GATEWAY,
            Json(json!({"error": "SyntaxError"})),
        )
    } else {
        (axum::http::StatusCode::OK, Json(json!({"ok": true})))
    }
}

async fn never_answer() -> Json<Value> {
    futures::future::pending().await
}

async fn fake_run() -> Json<Value> {
    Json(json!({"done": true}))
}

#[async_trait]
impl SandboxBackend for FakeBackend {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn cgroup_version(&self) -> &'static str {
        "none"
    }
    async fn start(&self, spec: InstanceSpec) -> Result<Arc<dyn Sandbox>, SandboxError> {
        self.counters.started.fetch_add(1, Ordering::SeqCst);
        let path = self.dir.path().join(format!("{}.sock", spec.id));
        let listener = tokio::net::UnixListener::bind(&path)?;
        let state = RuntimeState {
            counters: self.counters.clone(),
            init_gate: self.init_gate.clone(),
            bad_code: self.bad_code.load(Ordering::SeqCst),
        };
        let mut app = Router::new()
            .route("/init", post(fake_init))
            .route("/run", post(fake_run))
            .route("/icebox/restored", post(fake_run));
        if self.hang_reclaim.load(Ordering::SeqCst) {
            app = app.route("/icebox/reclaim", post(never_answer));
        }
        let app = app.with_state(state);
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        self.counters.live.fetch_add(1, Ordering::SeqCst);
        self.counters
            .host_in_use
            .fetch_add(spec.memory_limit_bytes, Ordering::SeqCst);
        Ok(Arc::new(FakeSandbox {
            id: spec.id,
            client: RuntimeClient::new(path),
            logs: Arc::new(LogCollector::new()),
            memory_limit: spec.memory_limit_bytes,
            frozen: AtomicBool::new(false),
            destroyed: AtomicBool::new(false),
            server,
            counters: self.counters.clone(),
        }))
    }
    async fn cleanup_orphans(&self) -> anyhow::Result<usize> {
        Ok(0)
    }
    async fn shutdown(&self) {}
    fn snapshots(&self) -> Option<&dyn icebox_sandbox::Snapshots> {
        self.snapshots
            .then_some(self as &dyn icebox_sandbox::Snapshots)
    }
    fn instances_per_action(&self) -> Option<usize> {
        self.per_action
    }
    fn memory_budget(&self) -> Option<icebox_sandbox::MemoryBudget> {
        self.host_limit.map(|limit| icebox_sandbox::MemoryBudget {
            limit,
            in_use: self.counters.host_in_use.load(Ordering::SeqCst),
            releasing: 0,
        })
    }
}

#[async_trait]
impl Sandbox for FakeSandbox {
    fn id(&self) -> &str {
        &self.id
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn client(&self) -> &RuntimeClient {
        &self.client
    }
    fn logs(&self) -> &Arc<LogCollector> {
        &self.logs
    }
    fn pids(&self) -> Vec<u32> {
        Vec::new()
    }
    fn memory(&self) -> MemoryStats {
        MemoryStats {
            uss: self.memory_limit / 2,
            pss: self.memory_limit / 2,
            rss: self.memory_limit / 2,
            ..Default::default()
        }
    }
    fn freeze(&self) -> std::io::Result<()> {
        self.counters.freeze_gate.pass();
        if self.destroyed.load(Ordering::SeqCst) {
            // What cgroupfs answers once the instance's cgroup is removed.
            return Err(std::io::Error::from(std::io::ErrorKind::NotFound));
        }
        self.frozen.store(true, Ordering::SeqCst);
        Ok(())
    }
    fn thaw(&self) -> std::io::Result<()> {
        self.frozen.store(false, Ordering::SeqCst);
        Ok(())
    }
    async fn exited(&self) {
        futures::future::pending::<()>().await
    }
    fn exit_cause(&self) -> Option<ExitCause> {
        None
    }
    async fn destroy(&self) {
        if !self.destroyed.swap(true, Ordering::SeqCst) {
            self.server.abort();
            self.counters.live.fetch_sub(1, Ordering::SeqCst);
            self.counters
                .host_in_use
                .fetch_sub(self.memory_limit, Ordering::SeqCst);
        }
    }
}

pub(super) struct Setup {
    pub(super) max_instances: usize,
    pub(super) budget: u64,
    pub(super) queue_size: usize,
    pub(super) prewarm: Vec<(String, usize)>,
    pub(super) init_gate: Option<Arc<Semaphore>>,
    pub(super) snapshots: bool,
    pub(super) host_limit: Option<u64>,
    pub(super) per_action: Option<usize>,
    pub(super) hybrid: Option<icebox_policy::HybridConfig>,
    pub(super) reclaim_mode: ReclaimMode,
    pub(super) techniques: super::TechniquesMode,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            max_instances: 4,
            budget: 1 << 30,
            queue_size: 4,
            prewarm: Vec::new(),
            init_gate: None,
            snapshots: false,
            host_limit: None,
            hybrid: None,
            per_action: None,
            reclaim_mode: ReclaimMode::Vanilla,
            techniques: super::TechniquesMode::Default,
        }
    }
}

pub(super) struct Harness {
    pub(super) pool: Arc<Pool>,
    pub(super) backend: Arc<FakeBackend>,
    pub(super) clock: Arc<ManualClock>,
}

impl Harness {
    pub(super) fn new(setup: Setup) -> Harness {
        let backend = Arc::new(FakeBackend {
            dir: tempfile::tempdir().unwrap(),
            counters: Arc::default(),
            init_gate: setup.init_gate,
            bad_code: AtomicBool::new(false),
            snapshots: setup.snapshots,
            host_limit: setup.host_limit,
            per_action: setup.per_action,
            hang_reclaim: AtomicBool::new(false),
        });
        let mut runtimes = Runtimes::default();
        runtimes.insert(RuntimeManifest {
            kind: "python:3".into(),
            aliases: vec![],
            command: vec!["fake".into()],
            env: Default::default(),
            sharing_env: Default::default(),
            dir: Default::default(),
        });
        let clock = Arc::new(ManualClock::new(1_000));
        let policy = KeepAlivePolicy::new(KeepAliveConfig {
            keep_alive_ms: 600_000,
            pause_grace_ms: 50,
            budget_bytes: setup.budget,
            max_instances: setup.max_instances,
        });
        let pool = Pool::new(
            super::backends::Backends::process_only(backend.clone()),
            runtimes,
            policy,
            clock.clone(),
            PoolConfig {
                charge: ChargeMode::Limit,
                queue_size: setup.queue_size,
                pids_max: 64,
                tmp_bytes: MIB,
                sample_interval: Duration::from_secs(1),
                api_host: String::new(),
                prewarm: setup.prewarm,
                reclaim_mode: setup.reclaim_mode,
                desiccant: Default::default(),
                cores: 1,
                library_pageout: LibraryPageout::Off,
                offload: OffloadConfig {
                    mode: OffloadMode::None,
                    faasmem: Default::default(),
                    tmo: Default::default(),
                    group_pages: 16,
                },
                offload_pool: Arc::new(PoolState::none()),
                snapshots: super::snapshots::SnapshotConfig {
                    enabled: true,
                    restore: icebox_core::RestoreMode::Faasnap,
                    state_dir: backend.dir.path().to_path_buf(),
                },
                hybrid: setup.hybrid,
                output_budget: icebox_sandbox::OutputBudget::new(64 * MIB),
                techniques: setup.techniques,
            },
            Arc::new(EventBus::new()),
            Arc::new(Metrics::new()),
        );
        Harness {
            pool,
            backend,
            clock,
        }
    }

    pub(super) fn live(&self) -> usize {
        self.backend.counters.live.load(Ordering::SeqCst)
    }

    pub(super) fn started(&self) -> usize {
        self.backend.counters.started.load(Ordering::SeqCst)
    }

    pub(super) async fn lease(&self, action: &Arc<ActionSpec>) -> Lease {
        self.pool
            .admit(action)
            .expect("admitted")
            .lease(Duration::from_secs(30))
            .await
            .expect("leased")
    }
}

pub(super) fn action(name: &str, version: &str) -> Arc<ActionSpec> {
    Arc::new(ActionSpec {
        namespace: "guest".into(),
        name: name.into(),
        exec: Exec {
            kind: "python:3".into(),
            code: "def main(a): return a".into(),
            binary: false,
            main: None,
            sha256: None,
        },
        limits: ActionLimits {
            memory: 128,
            ..Default::default()
        },
        parameters: vec![],
        annotations: vec![],
        version: version.into(),
        updated: 0,
    })
}

fn prewarmed(pool: &Pool) -> usize {
    pool.instance_views()
        .iter()
        .filter(|v| v.state == InstanceState::Prewarmed)
        .count()
}

/// Background work (a destroy spawned from a drop) finishes: wait for it, boundedly.
pub(super) async fn eventually(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..5_000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("never happened: {what}");
}

#[tokio::test]
async fn a_released_instance_serves_the_next_invocation_warm() {
    let h = Harness::new(Setup::default());
    let a = action("a", "0.0.1");
    let first = h.lease(&a).await;
    assert!(first.cold);
    let id = first.instance.id.clone();
    first.release(Health::Reusable).await;
    let second = h.lease(&a).await;
    assert!(!second.cold);
    assert_eq!(second.instance.id, id);
    second.release(Health::Reusable).await;
    assert_eq!((h.started(), h.live(), h.pool.instance_count()), (1, 1, 1));
}

#[tokio::test]
async fn a_broken_instance_is_evicted_on_release() {
    let h = Harness::new(Setup::default());
    let a = action("a", "0.0.1");
    h.lease(&a)
        .await
        .release(Health::Broken(EvictReason::Error))
        .await;
    assert_eq!((h.live(), h.pool.instance_count()), (0, 0));
    assert!(h.lease(&a).await.cold);
}

#[tokio::test]
async fn invocations_beyond_capacity_wait_and_beyond_the_queue_are_refused() {
    let h = Harness::new(Setup {
        max_instances: 1,
        queue_size: 1,
        ..Setup::default()
    });
    let a = action("a", "0.0.1");
    let running = h.lease(&a).await;
    let queued = h.pool.admit(&a).expect("a place in the queue");
    assert!(matches!(h.pool.admit(&a), Err(AdmitError::QueueFull)));
    let waiter = tokio::spawn(queued.lease(Duration::from_secs(30)));
    let id = running.instance.id.clone();
    running.release(Health::Reusable).await;
    let next = waiter
        .await
        .unwrap()
        .expect("the queued invocation gets the instance");
    assert_eq!((next.cold, next.instance.id.clone()), (false, id));
    // It left the queue: there is a place again.
    let again = h.pool.admit(&a).expect("queued again");
    drop(again);
    next.release(Health::Reusable).await;
}

#[tokio::test]
async fn a_queued_invocation_times_out_and_gives_its_place_back() {
    let h = Harness::new(Setup {
        max_instances: 1,
        queue_size: 1,
        ..Setup::default()
    });
    let a = action("a", "0.0.1");
    let running = h.lease(&a).await;
    let queued = h.pool.admit(&a).unwrap();
    assert!(matches!(
        queued.lease(Duration::from_millis(10)).await,
        Err(AcquireError::QueueTimeout(_))
    ));
    let dropped = h
        .pool
        .admit(&a)
        .expect("the timed-out invocation left the queue");
    drop(dropped);
    assert!(
        h.pool.admit(&a).is_ok(),
        "a dropped ticket leaves the queue"
    );
    running.release(Health::Reusable).await;
}

#[tokio::test]
async fn the_memory_budget_evicts_the_least_recently_used() {
    // Charged by limit: the budget holds one idle 128 MiB instance.
    let h = Harness::new(Setup {
        budget: 128 * MIB,
        ..Setup::default()
    });
    let (a, b) = (action("a", "0.0.1"), action("b", "0.0.1"));
    let la = h.lease(&a).await;
    let lb = h.lease(&b).await;
    let b_id = lb.instance.id.clone();
    la.release(Health::Reusable).await;
    h.clock.advance(10);
    lb.release(Health::Reusable).await;
    h.pool.keep_alive_round(h.clock.now_ms()).await;
    let left: Vec<String> = h.pool.instance_views().into_iter().map(|v| v.id).collect();
    assert_eq!(left, vec![b_id.clone()]);
    assert_eq!(h.live(), 1);

    // After the pause grace the idle one is frozen, and thawed for its next invocation.
    h.clock.advance(100);
    let (froze, _) = h.pool.keep_alive_round(h.clock.now_ms()).await;
    assert!(froze);
    assert_eq!(h.pool.instance_views()[0].state, InstanceState::Frozen);
    let lb = h.lease(&b).await;
    assert_eq!(lb.instance.id, b_id);
    assert!(!*lb.instance.frozen.lock().await);
    lb.release(Health::Reusable).await;
}

#[tokio::test]
async fn the_keep_alive_expires_idle_instances() {
    let h = Harness::new(Setup::default());
    h.lease(&action("a", "0.0.1"))
        .await
        .release(Health::Reusable)
        .await;
    h.clock.advance(600_001);
    h.pool.keep_alive_round(h.clock.now_ms()).await;
    assert_eq!((h.pool.instance_count(), h.live()), (0, 0));
}

#[tokio::test]
async fn a_lease_dropped_without_release_gives_its_place_back() {
    let h = Harness::new(Setup {
        max_instances: 1,
        ..Setup::default()
    });
    let a = action("a", "0.0.1");
    let lease = h.lease(&a).await;
    // A panicking or cancelled activation drops its lease.
    drop(lease);
    assert_eq!(h.pool.instance_count(), 0, "out of the books at once");
    eventually("the dropped lease's sandbox is destroyed", || h.live() == 0).await;
    let next = h.lease(&a).await;
    assert!(
        next.cold,
        "its instance was not reused: its state is unknown"
    );
    next.release(Health::Reusable).await;
}

#[tokio::test]
async fn a_warm_ticket_dropped_unused_leaves_its_instance_idle() {
    let h = Harness::new(Setup {
        max_instances: 1,
        ..Setup::default()
    });
    let a = action("a", "0.0.1");
    h.lease(&a).await.release(Health::Reusable).await;
    drop(h.pool.admit(&a).unwrap());
    let again = h.lease(&a).await;
    assert!(!again.cold);
    again.release(Health::Reusable).await;
    assert_eq!(h.live(), 1);
}

#[tokio::test]
async fn a_cold_start_abandoned_midway_frees_its_place_and_its_sandbox() {
    let gate = Arc::new(Semaphore::new(0));
    let h = Harness::new(Setup {
        max_instances: 1,
        init_gate: Some(gate.clone()),
        ..Setup::default()
    });
    let a = action("a", "0.0.1");
    let ticket = h.pool.admit(&a).unwrap();
    let starting = tokio::spawn(ticket.lease(Duration::from_secs(30)));
    eventually("the runtime is in /init", || {
        h.backend.counters.inits.load(Ordering::SeqCst) == 1
    })
    .await;
    starting.abort();
    let _ = starting.await;
    eventually("the abandoned sandbox is destroyed", || h.live() == 0).await;
    gate.add_permits(10);
    let lease = h.lease(&a).await;
    assert!(lease.cold, "the place under max_instances was given back");
    lease.release(Health::Reusable).await;
}

#[tokio::test]
async fn an_init_failure_is_typed_and_frees_everything() {
    let h = Harness::new(Setup {
        max_instances: 1,
        ..Setup::default()
    });
    h.backend.bad_code.store(true, Ordering::SeqCst);
    let a = action("a", "0.0.1");
    match h
        .pool
        .admit(&a)
        .unwrap()
        .lease(Duration::from_secs(30))
        .await
    {
        Err(AcquireError::Init {
            error: InitError::Refused(m),
            ..
        }) => assert_eq!(m, "SyntaxError"),
        Err(e) => panic!("expected an init failure, got {e}"),
        Ok(_) => panic!("expected an init failure"),
    }
    assert_eq!((h.live(), h.pool.instance_count()), (0, 0));
    h.backend.bad_code.store(false, Ordering::SeqCst);
    h.lease(&a).await.release(Health::Reusable).await;
}

#[tokio::test]
async fn stale_versions_are_never_reused() {
    let h = Harness::new(Setup::default());
    let v1 = action("a", "0.0.1");
    let idle = h.lease(&v1).await;
    let busy = h.lease(&v1).await;
    let idle_id = idle.instance.id.clone();
    idle.release(Health::Reusable).await;
    // An update: the new version never gets an old instance.
    let v2 = action("a", "0.0.2");
    let fresh = h.lease(&v2).await;
    assert!(fresh.cold);
    assert_ne!(fresh.instance.id, idle_id);
    h.pool.retire_action(&v1.fqn()).await;
    assert!(
        h.pool.instance(&idle_id).is_none(),
        "the idle old instance is evicted at once"
    );
    let busy_id = busy.instance.id.clone();
    assert!(
        h.pool.instance(&busy_id).is_some(),
        "the busy one finishes its activation"
    );
    busy.release(Health::Reusable).await;
    assert!(h.pool.instance(&busy_id).is_none(), "and goes when it does");
    fresh.release(Health::Reusable).await;
}

#[tokio::test]
async fn shutdown_refuses_new_work_fails_the_queue_and_destroys_everything() {
    let h = Harness::new(Setup {
        max_instances: 1,
        queue_size: 1,
        prewarm: vec![("python:3".into(), 1)],
        ..Setup::default()
    });
    h.pool.refill_prewarm();
    eventually("a stem cell is ready", || prewarmed(&h.pool) == 1).await;
    let a = action("a", "0.0.1");
    let running = h.lease(&a).await;
    let queued = tokio::spawn(h.pool.admit(&a).unwrap().lease(Duration::from_secs(30)));
    h.pool.shutdown().await;
    assert!(matches!(
        queued.await.unwrap(),
        Err(AcquireError::ShuttingDown)
    ));
    assert!(matches!(h.pool.admit(&a), Err(AdmitError::ShuttingDown)));
    assert_eq!(h.live(), 0, "every instance and stem cell is destroyed");
    running.release(Health::Reusable).await;
    assert_eq!(h.live(), 0);
}

#[tokio::test]
async fn shutdown_waits_for_a_cold_start_in_flight_and_destroys_it() {
    let gate = Arc::new(Semaphore::new(0));
    let h = Harness::new(Setup {
        init_gate: Some(gate.clone()),
        ..Setup::default()
    });
    let a = action("a", "0.0.1");
    let starting = tokio::spawn(h.pool.admit(&a).unwrap().lease(Duration::from_secs(30)));
    eventually("the runtime is in /init", || {
        h.backend.counters.inits.load(Ordering::SeqCst) == 1
    })
    .await;
    let pool = h.pool.clone();
    let shutdown = tokio::spawn(async move { pool.shutdown().await });
    gate.add_permits(10);
    shutdown.await.unwrap();
    assert!(matches!(
        starting.await.unwrap(),
        Err(AcquireError::ShuttingDown)
    ));
    assert_eq!(
        h.live(),
        0,
        "the instance that finished starting during shutdown is destroyed"
    );
}

/// pool/view.rs used to hold the instances' lock while taking the stem cells' lock, and the
/// prewarm refill the other way round: views and refills from two threads could deadlock.
#[test]
fn views_and_prewarm_refills_from_threads_do_not_deadlock() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let h = rt.block_on(async {
        let h = Harness::new(Setup {
            prewarm: vec![("python:3".into(), 1)],
            ..Setup::default()
        });
        h.lease(&action("a", "0.0.1"))
            .await
            .release(Health::Reusable)
            .await;
        h.pool.refill_prewarm();
        eventually("a stem cell is ready", || prewarmed(&h.pool) == 1).await;
        h
    });
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let threads = 4;
    let start = Arc::new(std::sync::Barrier::new(threads));
    let workers: Vec<_> = (0..threads)
        .map(|w| {
            let pool = h.pool.clone();
            let handle = rt.handle().clone();
            let (done, start) = (done_tx.clone(), start.clone());
            std::thread::spawn(move || {
                let _rt = handle.enter();
                start.wait();
                for _ in 0..100_000 {
                    if w % 2 == 0 {
                        pool.instance_views();
                    } else {
                        pool.refill_prewarm();
                    }
                }
                done.send(()).unwrap();
            })
        })
        .collect();
    for _ in 0..threads {
        done_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a thread is stuck: lock-order deadlock");
    }
    for w in workers {
        w.join().unwrap();
    }
}

#[tokio::test]
async fn at_max_instances_a_new_action_evicts_the_idle_one() {
    let h = Harness::new(Setup {
        max_instances: 1,
        ..Setup::default()
    });
    let a = h.lease(&action("a", "0.0.1")).await;
    let a_id = a.instance.id.clone();
    a.release(Health::Reusable).await;
    let b = h.lease(&action("b", "0.0.1")).await;
    assert!(b.cold);
    assert!(h.pool.instance(&a_id).is_none());
    assert_eq!(
        h.live(),
        1,
        "the evicted instance is destroyed before the new one runs"
    );
    b.release(Health::Reusable).await;
}

#[tokio::test]
async fn a_full_host_budget_evicts_the_least_recently_used_idle_instance_for_a_new_one() {
    // Room for two 128 MiB instances.
    let h = Harness::new(Setup {
        host_limit: Some(256 * MIB),
        ..Setup::default()
    });
    let (a, b, c) = (
        action("a", "0.0.1"),
        action("b", "0.0.1"),
        action("c", "0.0.1"),
    );
    let la = h.lease(&a).await;
    let a_id = la.instance.id.clone();
    la.release(Health::Reusable).await;
    h.clock.advance(10);
    h.lease(&b).await.release(Health::Reusable).await;
    assert_eq!(h.live(), 2);
    // c needs a's partition: a, the least recently used, goes; b stays.
    let lc = h.lease(&c).await;
    let left: Vec<String> = h
        .pool
        .instance_views()
        .into_iter()
        .map(|v| v.action)
        .collect();
    assert!(!left.contains(&"guest/a".to_string()), "{left:?}");
    assert!(left.contains(&"guest/b".to_string()), "{left:?}");
    assert!(h.pool.instance_views().iter().all(|v| v.id != a_id));
    assert_eq!(h.live(), 2);
    lc.release(Health::Reusable).await;
}

#[tokio::test]
async fn past_its_backends_per_action_limit_an_invocation_waits_for_an_instance_of_the_action() {
    // An N:1 VM of one partition: a second instance of the action has nowhere to run.
    let h = Harness::new(Setup {
        per_action: Some(1),
        ..Setup::default()
    });
    let a = action("a", "0.0.1");
    let first = h.lease(&a).await;
    let first_id = first.instance.id.clone();
    let queued = tokio::spawn(h.pool.admit(&a).unwrap().lease(Duration::from_secs(30)));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!queued.is_finished(), "no second instance is started");
    assert_eq!(h.started(), 1);
    // Another action is not held back by a's limit.
    h.lease(&action("b", "0.0.1"))
        .await
        .release(Health::Reusable)
        .await;
    first.release(Health::Reusable).await;
    let second = queued.await.unwrap().expect("leased");
    assert_eq!(second.instance.id, first_id, "it ran on a's instance, warm");
    assert_eq!(h.started(), 2);
    second.release(Health::Reusable).await;
}

#[tokio::test]
async fn a_start_short_of_host_memory_evicts_a_busy_instance_once_it_is_idle() {
    // Room for one 128 MiB instance, held by a busy instance of another action.
    let h = Harness::new(Setup {
        host_limit: Some(128 * MIB),
        ..Setup::default()
    });
    let (a, b) = (action("a", "0.0.1"), action("b", "0.0.1"));
    let la = h.lease(&a).await;
    let a_id = la.instance.id.clone();
    let pool = h.pool.clone();
    let lb =
        tokio::spawn(async move { pool.admit(&b).unwrap().lease(Duration::from_secs(30)).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        h.live(),
        1,
        "b waits for memory rather than overcommitting it"
    );
    la.release(Health::Reusable).await;
    let lb = lb.await.unwrap().expect("leased");
    assert!(
        h.pool.instance_views().iter().all(|v| v.id != a_id),
        "a, idle now, was evicted for b"
    );
    assert_eq!(h.live(), 1);
    lb.release(Health::Reusable).await;
}
