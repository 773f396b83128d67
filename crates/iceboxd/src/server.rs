//! Start-up, serving and shutdown of the daemon.

use crate::config::Config;
use crate::events::EventBus;
use crate::metrics::Metrics;
use crate::pool::{Pool, PoolConfig};
use crate::registry::Registry;
use crate::state::{AppState, Node};
use anyhow::Context;
use icebox_policy::{KeepAliveConfig, KeepAlivePolicy, MonotonicClock};
use icebox_sandbox::process::ProcessBackend;
use icebox_sandbox::{Runtimes, SandboxBackend};
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::watch;

pub async fn run(cfg: Config) -> anyhow::Result<()> {
    let offload_cfg = cfg.offload_config()?;
    std::fs::create_dir_all(&cfg.state_dir).with_context(|| {
        format!(
            "cannot create the state directory {}",
            cfg.state_dir.display()
        )
    })?;
    let state_dir = cfg.state_dir.canonicalize()?;
    let _lock = lock_state_dir(&state_dir)?;

    let (key, generated) =
        crate::auth::load_or_create(&state_dir, cfg.auth.as_deref(), &cfg.namespace)?;
    if generated {
        tracing::info!(
            "generated an API key in {}",
            state_dir.join("auth").display()
        );
    }
    // Joining first: a node the cluster refuses stops before it starts anything.
    let cluster = match cfg.cluster_config()? {
        Some(cluster_cfg) => Some(Arc::new(
            crate::cluster::Cluster::join(cluster_cfg, &key.as_basic(), &state_dir).await?,
        )),
        None => None,
    };
    let registry = Arc::new(crate::registry::open_in_state_dir(
        &state_dir,
        cfg.init_registry,
    )?);
    // Not fatal: on a full disk the node still starts (degraded, records kept in memory), and
    // what is left unfinished stays for the next start.
    match crate::recorder::settle_unfinished(&registry) {
        Ok(0) => {}
        Ok(n) => tracing::warn!(
            "{n} activation(s) answered 202 were still running when the node last stopped \
             (killed or crashed): recorded as failed"
        ),
        Err(e) => tracing::error!(
            "cannot record the activations an earlier run left unfinished (tried again at the \
             next start): {e}"
        ),
    }
    let tenants = crate::tenants::Tenants::load(&registry, &key)
        .context("loading namespaces and keys from the registry")?;
    let runtimes_dir = cfg.resolve_runtimes_dir();
    let runtimes = Runtimes::load(&runtimes_dir).with_context(|| {
        format!(
            "loading runtimes from {} (set --runtimes-dir)",
            runtimes_dir.display()
        )
    })?;

    let mut backend = ProcessBackend::new(
        &state_dir,
        &state_tag(&state_dir),
        cfg.isolation.process_mode(),
    )?;
    if backend.isolated() {
        let nofile = crate::open_files::instance_nofile(&cfg, crate::open_files::host_file_max()?)?;
        backend.set_instance_nofile(nofile);
        tracing::info!(
            "instance processes may open {nofile} files each (--pids-max {}, --max-instances {})",
            cfg.pids_max,
            cfg.max_instances
        );
    }
    for overlap in backend.set_uid_range(cfg.uid_range) {
        tracing::warn!(
            "--uid-range {} overlaps what this host already uses ({overlap}): its processes share \
             per-user limits with the instances given those uids",
            cfg.uid_range
        );
    }
    if cfg.snapshots {
        enable_process_snapshots(&mut backend, &cfg, &runtimes_dir);
    }
    let backend = Arc::new(backend);
    if !backend.isolated() {
        tracing::warn!(
            "RUNNING WITHOUT ISOLATION: instances are plain processes (no namespaces, no cgroups, no memory or \
             process limits), frozen with SIGSTOP. Run as root with crun installed for sandboxed instances."
        );
    }
    let cleaned = backend.cleanup_orphans().await?;
    if cleaned > 0 {
        tracing::warn!("removed {cleaned} instance(s) left behind by an earlier run");
    }

    let policy = KeepAlivePolicy::new(KeepAliveConfig {
        keep_alive_ms: u64::try_from(cfg.keep_alive.as_millis()).unwrap_or(u64::MAX),
        pause_grace_ms: u64::try_from(cfg.pause_grace.as_millis()).unwrap_or(u64::MAX),
        budget_bytes: cfg.pool_memory,
        max_instances: cfg.max_instances,
    });
    policy.config().validate()?;
    let desiccant = icebox_policy::DesiccantConfig {
        frozen_timeout_ms: u64::try_from(cfg.reclaim_frozen_after.as_millis()).unwrap_or(u64::MAX),
        threshold_after_eviction: cfg.reclaim_threshold_min,
        threshold_max: cfg.reclaim_threshold_max,
        ..Default::default()
    };
    desiccant
        .validate()
        .map_err(|e| anyhow::anyhow!("invalid reclaim settings: {e}"))?;
    let offload_pool = crate::pool::PoolState::open(&cfg.offload_pool, &state_dir)?;
    let events = Arc::new(EventBus::new());
    let connections = Arc::new(crate::serve::ConnectionStats::default());
    let mut metrics = Metrics::new();
    metrics
        .registry
        .register_collector(Box::new(crate::serve::ConnectionCollector(
            connections.clone(),
        )));
    if let Some(cluster) = &cluster {
        cluster.stats.register(&mut metrics.registry);
        metrics
            .registry
            .register_collector(Box::new(crate::cluster::ClusterCollector(cluster.clone())));
    }
    let metrics = Arc::new(metrics);
    let api_host = match cfg.listen.strip_prefix("unix:") {
        Some(_) => String::new(),
        None => format!("http://{}", cfg.listen),
    };
    let (vm, accel) = vm_backend(&cfg, &state_dir, &runtimes_dir).await;
    let vm_shared = vm_shared_backend(&cfg, &state_dir, &runtimes_dir, &vm, accel).await;
    let _partition_events = vm_shared
        .1
        .as_ref()
        .map(|b| crate::metrics::forward::spawn_forwarder(b, events.clone(), metrics.clone()));
    let vm_shared = vm_shared.0;
    let backends = crate::pool::backends::Backends::new(
        cfg.isolation.default_isolation(),
        backend.clone() as Arc<dyn SandboxBackend>,
        vm,
        vm_shared,
    );
    if let Err(why) = backends.get(cfg.isolation.default_isolation()) {
        anyhow::bail!(
            "--isolation {}: {why}",
            cfg.isolation.default_isolation().as_str()
        );
    }
    let pool = Pool::new(
        backends,
        runtimes,
        policy,
        Arc::new(MonotonicClock::new()),
        PoolConfig {
            charge: cfg.pool_charge,
            queue_size: cfg.queue_size,
            pids_max: cfg.pids_max,
            tmp_bytes: cfg.tmp_size,
            sample_interval: cfg.sample_interval,
            api_host,
            prewarm: cfg
                .prewarm
                .iter()
                .filter(|(_, n)| *n > 0)
                .cloned()
                .collect(),
            reclaim_mode: cfg.reclaim_mode,
            desiccant,
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            library_pageout: cfg.library_pageout,
            offload: offload_cfg,
            offload_pool: Arc::new(offload_pool),
            snapshots: crate::pool::snapshots::SnapshotConfig {
                enabled: cfg.snapshots,
                restore: cfg.snapshot_restore,
                state_dir: state_dir.clone(),
            },
            hybrid: (cfg.keep_alive_policy == "hybrid").then(|| {
                let bin_ms = u64::try_from(cfg.hybrid_bin.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1);
                icebox_policy::HybridConfig {
                    bin_ms,
                    range_ms: bin_ms.saturating_mul(240),
                    fallback_keep_alive_ms: u64::try_from(cfg.keep_alive.as_millis())
                        .unwrap_or(u64::MAX),
                    ..Default::default()
                }
            }),
            output_budget: icebox_sandbox::OutputBudget::new(cfg.output_budget),
            techniques: cfg.techniques,
        },
        events.clone(),
        metrics.clone(),
    );

    let actions: HashMap<_, _> = registry
        .all_actions()?
        .into_iter()
        .map(|a| ((a.namespace.clone(), a.name.clone()), Arc::new(a)))
        .collect();
    tracing::info!("{} action(s) in the registry", actions.len());
    let code = crate::code_store::CodeStore::open(&state_dir)
        .with_context(|| format!("opening the code store in {}", state_dir.display()))?;
    let state: AppState = Arc::new(Node {
        registry: registry.clone(),
        recorder: crate::recorder::Recorder::start(
            registry.clone(),
            metrics.recorder.clone(),
            cfg.registry_max_bytes,
        ),
        tenants,
        pool: pool.clone(),
        events,
        metrics,
        actions: RwLock::new(actions),
        started: Instant::now(),
        body: crate::serve::BodyLimits::new(
            usize::try_from(cfg.effective_max_body()).unwrap_or(usize::MAX),
            usize::try_from(cfg.max_payload).unwrap_or(usize::MAX),
            cfg.max_code_size,
            cfg.body_timeout,
            cfg.max_buffered,
        ),
        connections,
        code,
        cluster,
    });
    // Code files of actions deleted while the daemon was down, or of uploads cut short.
    state.collect_code().await;

    let (stop_tx, stop_rx) = watch::channel(false);
    for (kind, _) in &cfg.prewarm {
        if pool.runtimes().resolve(kind).is_none() {
            anyhow::bail!("--prewarm names the kind '{kind}', which is not installed");
        }
    }
    let known: Vec<_> = state.actions.read().unwrap().values().cloned().collect();
    pool.start_components(&known).await;
    if state.cluster.is_some() {
        crate::cluster_sync::start(&state, stop_rx.clone()).await?;
    }
    let manager = tokio::spawn(pool.clone().run_manager(stop_rx.clone()));
    let shares = tokio::spawn(crate::shares::keep_shares(state.clone(), stop_rx.clone()));
    let pruner = tokio::spawn(prune_loop(
        registry,
        cfg.activation_retention,
        cfg.activation_max_age,
        stop_rx,
    ));

    let app = crate::api::router(state.clone());
    let shutdown = async {
        shutdown_signal().await;
        tracing::info!("shutting down: removing every instance");
    };
    let limits = crate::serve::ServeLimits {
        header_timeout: cfg.header_timeout,
        max_connections: connection_cap(cfg.max_connections),
        shutdown_grace: cfg.shutdown_grace,
    };
    let listener = match cfg.listen.strip_prefix("unix:") {
        Some(path) => {
            let _ = std::fs::remove_file(path);
            let listener = tokio::net::UnixListener::bind(path)
                .with_context(|| format!("cannot listen on unix:{path}"))?;
            tracing::info!("iceboxd listening on unix:{path}");
            crate::serve::Listener::Unix(listener)
        }
        None => {
            let listener = tokio::net::TcpListener::bind(&cfg.listen)
                .await
                .with_context(|| format!("cannot listen on {}", cfg.listen))?;
            tracing::info!("iceboxd listening on http://{}", listener.local_addr()?);
            crate::serve::Listener::Tcp(listener)
        }
    };
    crate::serve::serve(listener, app, limits, state.connections.clone(), shutdown).await;
    let _ = stop_tx.send(true);
    if let Some(cluster) = &state.cluster {
        cluster.leave().await;
    }
    pool.shutdown().await;
    state.recorder.flush_and_stop();
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        let _ = manager.await;
        let _ = pruner.await;
        let _ = shares.await;
    })
    .await;
    tracing::info!("stopped");
    Ok(())
}

/// Process snapshots need crun isolation and CRIU >= 4.1; without them actions that ask for
/// snapshots simply start normally, and the health view says why.
fn enable_process_snapshots(backend: &mut ProcessBackend, cfg: &Config, runtimes_dir: &Path) {
    let repo = runtimes_dir.parent();
    let enabled = icebox_sandbox::process::Criu::discover(cfg.criu.as_deref(), repo)
        .map_err(anyhow::Error::from)
        .and_then(|criu| backend.enable_snapshots(criu));
    match enabled {
        Ok(()) => tracing::info!("process snapshots: on (CRIU)"),
        Err(e) if cfg.criu.is_some() => tracing::warn!("process snapshots are off: {e:#}"),
        Err(e) => tracing::info!("process snapshots are off: {e:#}"),
    }
}

/// The `vm` backend when this node wants VM backends and can start them (root, QEMU, the
/// guest image), else why not; and the accelerator it settled on.
async fn vm_backend(
    cfg: &Config,
    state_dir: &Path,
    runtimes_dir: &Path,
) -> (crate::pool::backends::Slot, Option<icebox_vm::Accel>) {
    use crate::pool::backends::Slot;
    let (wanted, required) = cfg.vm_backends_wanted();
    if !wanted {
        return (
            Slot::Unavailable("VM backends are off on this node (--vm-backends off)".into()),
            None,
        );
    }
    if !rustix::process::geteuid().is_root() {
        return (Slot::Unavailable("VM backends need root".into()), None);
    }
    let image = cfg.resolve_vm_image(runtimes_dir);
    let mut vm_cfg = icebox_vm::VmBackendConfig::new(state_dir, &image);
    vm_cfg.accel = cfg.vm_accel;
    match icebox_vm::VmBackend::new(vm_cfg).await {
        Ok(vm) => {
            tracing::info!(accel = ?vm.accel(), image = %image.display(), "VM backend ready");
            match vm.cleanup_orphans().await {
                Ok(n) if n > 0 => tracing::warn!("removed {n} VM(s) left behind by an earlier run"),
                Ok(_) => {}
                Err(e) => tracing::warn!("cannot clean up VMs of an earlier run: {e}"),
            }
            let accel = vm.accel();
            (Slot::Ready(Arc::new(vm)), Some(accel))
        }
        Err(e) if required => {
            tracing::error!("no vm backend: {e:#}");
            (Slot::Unavailable(format!("{e:#}")), None)
        }
        Err(e) => {
            tracing::info!("no vm backend (actions cannot ask for VM isolation): {e:#}");
            (Slot::Unavailable(format!("{e:#}")), None)
        }
    }
}

/// The `vm-shared` backend (Squeezy's N:1 VMs) on the same conditions as `vm`; it reuses
/// the accelerator the `vm` backend settled on rather than probing again.
async fn vm_shared_backend(
    cfg: &Config,
    state_dir: &Path,
    runtimes_dir: &Path,
    vm: &crate::pool::backends::Slot,
    accel: Option<icebox_vm::Accel>,
) -> (
    crate::pool::backends::Slot,
    Option<Arc<icebox_vm::SharedBackend>>,
) {
    use crate::pool::backends::Slot;
    let accel = match (vm, accel) {
        (Slot::Unavailable(why), _) => return (Slot::Unavailable(why.clone()), None),
        (_, Some(icebox_vm::Accel::Kvm)) => icebox_vm::AccelChoice::Kvm,
        (_, Some(icebox_vm::Accel::Tcg)) => icebox_vm::AccelChoice::Tcg,
        (_, None) => cfg.vm_accel,
    };
    let mut shared = icebox_vm::SharedConfig::new(state_dir, &cfg.resolve_vm_image(runtimes_dir));
    shared.accel = accel;
    shared.mode = cfg.vm_shared_mode;
    shared.partitions = cfg.vm_partitions;
    shared.memory_limit = cfg.vm_memory;
    match icebox_vm::SharedBackend::new(shared).await {
        Ok(b) => {
            match b.cleanup_orphans().await {
                Ok(n) if n > 0 => {
                    tracing::warn!("removed {n} N:1 VM(s) left behind by an earlier run")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("cannot clean up N:1 VMs of an earlier run: {e}"),
            }
            tracing::info!(
                mode = %cfg.vm_shared_mode,
                partitions = cfg.vm_partitions,
                memory = ?cfg.vm_memory,
                "vm-shared backend ready"
            );
            let b = Arc::new(b);
            (Slot::Ready(b.clone()), Some(b))
        }
        Err(e) => {
            tracing::warn!("no vm-shared backend: {e:#}");
            (Slot::Unavailable(format!("{e:#}")), None)
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("installing a SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

async fn prune_loop(
    registry: Arc<Registry>,
    keep: usize,
    max_age: Duration,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let r = registry.clone();
        let pruned = tokio::task::spawn_blocking(move || {
            r.prune_activations(
                keep,
                u64::try_from(max_age.as_millis()).unwrap_or(u64::MAX),
                crate::now_ms(),
            )
        })
        .await;
        if let Ok(Ok(n)) = pruned {
            if n > 0 {
                tracing::debug!("pruned {n} activation(s)");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(60)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// The connection cap, lowered when the open-file limit cannot hold it next to what instances
/// need (pipes, pidfds and sockets per instance, SQLite). The soft limit is raised to the hard
/// one first: the default soft limit (1024) is far below what a busy node needs.
fn connection_cap(wanted: usize) -> usize {
    const RESERVED_FDS: u64 = 1024;
    // `None` is RLIM_INFINITY.
    let lim = getrlimit(Resource::Nofile);
    let mut soft = lim.current.unwrap_or(u64::MAX);
    let hard = lim.maximum.unwrap_or(u64::MAX);
    if soft < hard {
        let raised = Rlimit {
            current: lim.maximum,
            maximum: lim.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            soft = hard;
        }
    }
    let room = usize::try_from(soft.saturating_sub(RESERVED_FDS).max(16)).unwrap_or(usize::MAX);
    if room < wanted {
        tracing::warn!(
            "--max-connections {wanted} lowered to {room}: the open-file limit is {soft}"
        );
    }
    wanted.min(room)
}

/// One daemon per state directory: a second one would clean up the first one's instances.
fn lock_state_dir(dir: &Path) -> anyhow::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("lock"))?;
    if rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        anyhow::bail!(
            "another iceboxd is already using the state directory {}",
            dir.display()
        );
    }
    Ok(file)
}

/// A stable short tag for this state directory (FNV-1a of its canonical path), naming its
/// cgroups (`icebox-<tag>`). Public so tests can find what a daemon left behind.
pub fn state_tag(dir: &Path) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in dir.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{:08x}", h & 0xffff_ffff)
}
