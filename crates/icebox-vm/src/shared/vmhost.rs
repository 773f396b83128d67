//! One N:1 VM: booted for the first instance of its action, then a partition per instance —
//! plugged before the instance starts, unplugged after it stopped. It ends when QEMU does
//! (every instance with it) or when it has been empty for a while.

use super::common::{Common, PartitionEvent, VmKey};
use super::exit::InstanceExit;
use super::layout::Layout;
use super::report::{PlugReport, ReclaimOutcome, ReclaimReport};
use super::resize::Resizer;
use super::runtime::{start_request, warm_up};
use super::slots::{Slot, Slots};
use crate::qemu::VmConfig;
use crate::vm::{Vm, VmPaths};
use icebox_core::units::MIB;
use icebox_guest::protocol::{Event, InstanceStats, StartRequest, Stats};
use icebox_guest::{AgentError, EventStream};
use icebox_sandbox_api::{ExitCause, InstanceSpec, SandboxError};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{Notify, OnceCell};
use tokio::task::JoinHandle;

/// QEMU binds its sockets by path: sun_path holds 107 bytes.
const SUN_PATH_MAX: usize = 107;

/// The guest's counters around an unplug: a guest too busy to answer in this time costs the
/// report its migration count, not the release its progress.
const STATS_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a partition may take to hold no page of its exited instance.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// A VM in the table: booted once by the first start that needs it.
#[derive(Default)]
pub struct VmEntry {
    pub vm: OnceCell<Arc<SharedVm>>,
    /// Starts under way: an empty VM they are about to use is not shut down under them.
    pub starting: AtomicUsize,
}

/// The backend's VMs, one per key (action, runtime, partition size). A VM that ends drops
/// itself from it (`forget_vm`).
pub type VmTable = Mutex<HashMap<VmKey, Arc<VmEntry>>>;

/// Drop `vm` from the table (it ended, or was shut down idle).
pub fn forget_vm(vms: &VmTable, vm: &Arc<SharedVm>) {
    let mut vms = vms.lock().unwrap();
    let same = vms
        .get(&vm.key)
        .and_then(|e| e.vm.get())
        .is_some_and(|v| Arc::ptr_eq(v, vm));
    if same {
        vms.remove(&vm.key);
    }
}

pub struct SharedVm {
    pub id: String,
    pub key: VmKey,
    pub layout: Layout,
    common: Arc<Common>,
    /// The table this VM is in, which it leaves when it ends.
    vms: Arc<VmTable>,
    vm: Vm,
    resizer: Resizer,
    slots: Mutex<Slots>,
    slot_freed: Notify,
    /// Resizes that must not overlap: every unplug (the guest's migration counters are read
    /// around it) and, where the VM has one target for all partitions, every plug too.
    turn: tokio::sync::Mutex<()>,
    /// How each instance ends, told when its runtime exits or the VM ends.
    exits: Mutex<HashMap<String, Weak<InstanceExit>>>,
    /// Since when no partition is held (`None` while one is).
    idle_since: Mutex<Option<Instant>>,
    /// Why the VM ended, once it has.
    ended: OnceLock<String>,
    /// True once an ended VM's QEMU is reaped and its directory removed: only then are its
    /// instances reported exited, so whoever waits on an instance finds nothing left.
    gone: tokio::sync::watch::Sender<bool>,
    releases: Mutex<Vec<JoinHandle<()>>>,
    watcher: Mutex<Option<JoinHandle<()>>>,
    guest_stats: Mutex<GuestStats>,
}

#[derive(Default)]
struct GuestStats {
    at: Option<Instant>,
    stats: Option<Stats>,
    refreshing: bool,
}

fn failed(what: &'static str, e: impl std::error::Error + Send + Sync + 'static) -> SandboxError {
    SandboxError::agent(what, e)
}

impl SharedVm {
    /// Boot the VM for `key` with `spec`'s runtime: QEMU, the agent, the balloon at its
    /// starting size, and the runtime's files read into node 0's page cache.
    pub async fn boot(
        common: &Arc<Common>,
        vms: &Arc<VmTable>,
        key: VmKey,
        spec: &InstanceSpec,
    ) -> Result<Arc<SharedVm>, SandboxError> {
        let cfg = &common.cfg;
        let id = common.new_vm_id();
        let dir = common.dir.join(&id);
        check_socket_path(&VmPaths::new(&dir).qmp_sync_socket)?;
        std::fs::create_dir_all(&dir)?;
        let t0 = Instant::now();
        match Self::boot_in(common, vms, key, spec, &id, &dir).await {
            Ok(vm) => {
                let boot_ms = t0.elapsed().as_secs_f64() * 1e3;
                tracing::info!(vm = %id, action = %spec.action, mode = %cfg.mode, boot_ms, "vm-shared VM booted");
                common.emit(PartitionEvent::VmBooted {
                    vm: id,
                    action: spec.action.clone(),
                    boot_ms,
                });
                Ok(vm)
            }
            Err(e) => {
                crate::backend::orphans::kill_recorded(&dir).await;
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    async fn boot_in(
        common: &Arc<Common>,
        vms: &Arc<VmTable>,
        key: VmKey,
        spec: &InstanceSpec,
        id: &str,
        dir: &Path,
    ) -> Result<Arc<SharedVm>, SandboxError> {
        let cfg = &common.cfg;
        let layout = Layout::new(
            cfg.mode,
            cfg.partitions,
            key.partition_bytes / MIB,
            cfg.block_mib,
            cfg.shared_mib,
        )
        .with_guest_zeroing(cfg.guest_zeroing);
        let mut config = VmConfig::new(
            &format!("icebox-shared-{id}"),
            common.accel,
            layout.shared_mib,
            &common.image,
        );
        layout.apply(&mut config);
        config.tcg_tb_mib = cfg.tcg_tb_mib;
        let vm = Vm::boot(&cfg.qemu, config, VmPaths::new(dir), cfg.boot_timeout)
            .await
            .map_err(|e| SandboxError::VmBoot(Box::new(e)))?;
        let agent = vm.agent.clone();
        agent
            .set_time(SystemTime::now())
            .await
            .map_err(|e| failed("set_time", e))?;
        let node0 = agent
            .hello_info()
            .numa_nodes
            .iter()
            .find(|n| n.id == 0)
            .map(|n| n.memory_total_bytes)
            .unwrap_or(0);
        let resizer = Resizer::new(layout, node0);
        // Inflating the balloon over every partition takes seconds per GiB under TCG.
        resizer
            .prepare(&vm.qmp, cfg.resize_timeout * cfg.partitions.max(1))
            .await
            .map_err(|e| failed("preparing the balloon", e))?;
        let mut events = agent.events().await.map_err(|e| failed("events", e))?;
        warm_up(&vm.agent, &common.image, cfg, spec, &mut events).await;
        let shared = Arc::new(SharedVm {
            id: id.to_string(),
            key,
            layout,
            common: common.clone(),
            vms: vms.clone(),
            vm,
            resizer,
            slots: Mutex::new(Slots::new(cfg.partitions)),
            slot_freed: Notify::new(),
            turn: tokio::sync::Mutex::new(()),
            exits: Mutex::new(HashMap::new()),
            idle_since: Mutex::new(Some(Instant::now())),
            ended: OnceLock::new(),
            gone: tokio::sync::watch::channel(false).0,
            releases: Mutex::new(Vec::new()),
            watcher: Mutex::new(None),
            guest_stats: Mutex::new(GuestStats::default()),
        });
        let watcher = tokio::spawn(watch(Arc::downgrade(&shared), events));
        *shared.watcher.lock().unwrap() = Some(watcher);
        Ok(shared)
    }

    /// The VM itself: QEMU, QMP and the agent (for measurements and tests).
    pub fn vm(&self) -> &Vm {
        &self.vm
    }

    pub fn dir(&self) -> &Path {
        &self.vm.paths.dir
    }

    pub fn ended(&self) -> Option<&str> {
        self.ended.get().map(String::as_str)
    }

    /// Returns once an ended VM has left nothing behind (QEMU reaped, directory removed).
    pub async fn wait_gone(&self) {
        let mut gone = self.gone.subscribe();
        let _ = gone.wait_for(|g| *g).await;
    }

    /// Instances holding a partition now.
    pub fn instances(&self) -> usize {
        self.slots.lock().unwrap().held()
    }

    /// Partition `p`'s state (1-based).
    pub fn slot(&self, p: u32) -> Slot {
        self.slots.lock().unwrap().get(p).clone()
    }

    /// Empty for at least `d` (nothing held, released or stuck).
    pub fn idle_for(&self, d: Duration) -> bool {
        self.idle_since
            .lock()
            .unwrap()
            .is_some_and(|t| t.elapsed() >= d)
    }

    fn host_socket(&self, instance: &str) -> PathBuf {
        self.dir().join(format!("{instance}.sock"))
    }

    /// The first half of starting `spec` in this VM: budget, a free partition, plug. Gives
    /// the partition, the host socket the instance is to serve on, and how the plug went.
    pub(super) async fn plug_partition(
        self: &Arc<Self>,
        spec: &InstanceSpec,
        deadline: Instant,
        booted_vm: bool,
    ) -> Result<(u32, PathBuf, PlugReport), SandboxError> {
        let cfg = &self.common.cfg;
        let socket = self.host_socket(&spec.id);
        check_socket_path(&socket)?;
        let bytes = self.key.partition_bytes;
        let t0 = Instant::now();
        self.common
            .reserve(bytes, deadline)
            .await
            .map_err(|e| SandboxError::NoCapacity(e.to_string()))?;
        let p = match self.claim(&spec.id, bytes, deadline).await {
            Ok(p) => p,
            Err(e) => {
                self.common.budget.give_back(bytes, false);
                return Err(e);
            }
        };
        let waited_ms = t0.elapsed().as_secs_f64() * 1e3;
        let t_plug = Instant::now();
        let plugged = {
            let _turn = match self.layout.mode.single_target() {
                true => Some(self.turn.lock().await),
                false => None,
            };
            self.resizer
                .plug(&self.vm.qmp, &self.vm.agent, p, bytes, cfg.resize_timeout)
                .await
        };
        if let Err(e) = plugged {
            // Whatever did get plugged goes back the normal way.
            self.release(p, &spec.id, 0.0).await;
            return Err(SandboxError::Partition {
                vm: self.id.clone(),
                partition: p,
                source: e.into(),
            });
        }
        let plug = PlugReport {
            vm: self.id.clone(),
            action: spec.action.clone(),
            instance: spec.id.clone(),
            mode: self.layout.mode,
            partition: p,
            bytes,
            waited_ms,
            plug_ms: t_plug.elapsed().as_secs_f64() * 1e3,
            booted_vm,
        };
        Ok((p, socket, plug))
    }

    /// Where the VM tells `instance` how it ended.
    pub(super) fn register(&self, instance: &str, exit: Weak<InstanceExit>) {
        self.exits
            .lock()
            .unwrap()
            .insert(instance.to_string(), exit);
    }

    /// The agent's request to start `spec`'s runtime bound to partition `p`'s node.
    pub(super) fn start_request(
        &self,
        spec: &InstanceSpec,
        p: u32,
    ) -> Result<StartRequest, SandboxError> {
        start_request(
            &self.common.image,
            spec,
            self.layout.node_of(p),
            self.common.cfg.ready_timeout,
        )
    }

    /// The instance of `plug` runs: the plug is reported.
    pub(super) fn plugged(&self, plug: PlugReport) {
        tracing::info!(
            vm = %self.id, action = %plug.action, instance = %plug.instance,
            partition = plug.partition, bytes = plug.bytes, waited_ms = plug.waited_ms,
            plug_ms = plug.plug_ms, "vm-shared partition plugged"
        );
        self.common.emit(PartitionEvent::Plugged(plug));
    }

    async fn claim(
        &self,
        instance: &str,
        bytes: u64,
        deadline: Instant,
    ) -> Result<u32, SandboxError> {
        let started = Instant::now();
        loop {
            let freed = self.slot_freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut slots = self.slots.lock().unwrap();
                if slots.is_closed() {
                    return Err(SandboxError::VmEnded {
                        vm: self.id.clone(),
                        why: self.ended().unwrap_or("shut down").to_string(),
                    });
                }
                if let Some(p) = slots.claim(instance, bytes) {
                    *self.idle_since.lock().unwrap() = None;
                    return Ok(p);
                }
                if !slots.any_coming_free() {
                    return Err(SandboxError::NoCapacity(format!(
                        "all {} partitions of VM {} ({}) hold live instances (--vm-partitions)",
                        self.layout.partitions, self.id, self.key.action
                    )));
                }
            }
            if tokio::time::timeout_at(deadline.into(), freed)
                .await
                .is_err()
            {
                return Err(SandboxError::NoCapacity(format!(
                    "no partition of VM {} ({}) became free within {:?}",
                    self.id,
                    self.key.action,
                    started.elapsed()
                )));
            }
        }
    }

    pub(super) fn unregister(&self, instance: &str) {
        self.exits.lock().unwrap().remove(instance);
    }

    /// Take back partition `p` after `instance` stopped (it took `stop_ms`): unplug it,
    /// counting the guest's page migrations, and report. Called once per instance; a second
    /// call (or one after the VM ended) reports without touching anything.
    pub(super) async fn release(
        self: &Arc<Self>,
        p: u32,
        instance: &str,
        stop_ms: f64,
    ) -> ReclaimReport {
        let mut report = ReclaimReport {
            vm: self.id.clone(),
            action: self.key.action.clone(),
            instance: instance.to_string(),
            mode: self.layout.mode,
            partition: p,
            bytes: self.key.partition_bytes,
            outcome: ReclaimOutcome::VmGone,
            stop_ms,
            drain_ms: 0.0,
            unplug_ms: 0.0,
            pages_migrated: 0,
            migrate_failures: 0,
            residue_bytes: None,
            neighbours: 0,
        };
        let begun = self.slots.lock().unwrap().begin_release(p, instance);
        let Some((bytes, change)) = begun else {
            return report;
        };
        self.common.apply(change);
        let turn = self.turn.lock().await;
        report.neighbours = self.instances();
        let t_drain = Instant::now();
        let before = match self.layout.node_of(p) {
            Some(node) => self.drained(node).await,
            None => self.stats_within(STATS_TIMEOUT).await,
        };
        report.drain_ms = t_drain.elapsed().as_secs_f64() * 1e3;
        if let (Some(stats), Some(node)) = (&before, self.layout.node_of(p)) {
            report.residue_bytes = stats
                .nodes
                .get(&node)
                .and_then(|n| n.get("MemUsed"))
                .copied();
        }
        let t0 = Instant::now();
        let result = self
            .resizer
            .unplug(&self.vm.qmp, p, bytes, self.common.cfg.resize_timeout)
            .await;
        report.unplug_ms = t0.elapsed().as_secs_f64() * 1e3;
        let change = match &result {
            Ok(()) => {
                report.outcome = ReclaimOutcome::Released;
                self.slots.lock().unwrap().freed(p)
            }
            Err(_) if self.ended().is_some() => super::slots::BudgetChange::None,
            Err(_) => {
                report.outcome = ReclaimOutcome::TimedOut;
                self.slots.lock().unwrap().stuck(p)
            }
        };
        self.common.apply(change);
        self.after_slot_change();
        if let (Some(before), Some(after)) = (&before, self.stats_within(STATS_TIMEOUT).await) {
            let delta = |k: &str| {
                after
                    .vmstat
                    .get(k)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(before.vmstat.get(k).copied().unwrap_or(0))
            };
            report.pages_migrated = delta("pgmigrate_success");
            report.migrate_failures = delta("pgmigrate_fail");
        }
        drop(turn);
        match &result {
            Ok(()) => tracing::info!(
                vm = %self.id, action = %self.key.action, instance, partition = p, bytes,
                mode = %self.layout.mode, stop_ms, unplug_ms = report.unplug_ms,
                pages_migrated = report.pages_migrated, residue_bytes = report.residue_bytes,
                neighbours = report.neighbours, "vm-shared partition released"
            ),
            Err(e) if report.outcome == ReclaimOutcome::TimedOut => {
                tracing::error!(
                    vm = %self.id, action = %self.key.action, instance, partition = p, bytes,
                    "vm-shared partition could not be unplugged: {e}; unusable until it is"
                );
                self.watch_stuck(p, instance.to_string());
            }
            Err(e) => tracing::debug!(vm = %self.id, instance, "unplug after the VM ended: {e}"),
        }
        self.common.emit(PartitionEvent::Reclaimed(report.clone()));
        report
    }

    /// A stuck unplug keeps going in the guest: free the partition once it has completed.
    fn watch_stuck(self: &Arc<Self>, p: u32, instance: String) {
        let me = Arc::downgrade(self);
        let since = Instant::now();
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let Some(vm) = me.upgrade() else { return };
                if vm.ended().is_some() {
                    return;
                }
                match vm.resizer.unplugged(&vm.vm.qmp, p).await {
                    Ok(true) => {
                        let change = vm.slots.lock().unwrap().freed(p);
                        vm.common.apply(change);
                        vm.after_slot_change();
                        let stuck_ms = since.elapsed().as_secs_f64() * 1e3;
                        tracing::warn!(vm = %vm.id, partition = p, instance, stuck_ms, "vm-shared partition unplugged at last: usable again");
                        vm.common.emit(PartitionEvent::Recovered {
                            vm: vm.id.clone(),
                            partition: p,
                            instance,
                            stuck_ms,
                        });
                        return;
                    }
                    Ok(false) => {}
                    Err(e) => {
                        tracing::debug!(vm = %vm.id, "checking a stuck partition: {e}");
                    }
                }
            }
        });
        self.releases.lock().unwrap().push(task);
    }

    fn after_slot_change(&self) {
        if self.slots.lock().unwrap().is_empty() {
            *self.idle_since.lock().unwrap() = Some(Instant::now());
        }
        self.slot_freed.notify_waiters();
    }

    /// The guest's counters once `node` holds no anonymous page any more (bounded). The
    /// cgroup is empty when `stop` returns, but the last pages of exited processes are freed
    /// a moment later (an mm torn down by whoever held it last): unplugging before that would
    /// migrate them. Squeezy frees a partition when its last user is gone; this waits for the
    /// same.
    async fn drained(&self, node: u32) -> Option<Stats> {
        let deadline = Instant::now() + DRAIN_LIMIT;
        loop {
            let stats = self.stats_within(STATS_TIMEOUT).await?;
            let anon = stats
                .nodes
                .get(&node)
                .and_then(|n| n.get("AnonPages"))
                .copied()
                .unwrap_or(0);
            if anon == 0 || Instant::now() >= deadline {
                return Some(stats);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn stats_within(&self, timeout: Duration) -> Option<Stats> {
        tokio::time::timeout(timeout, self.vm.agent.stats())
            .await
            .ok()?
            .ok()
    }

    /// Run `release` in the background, tracked so shutdown can wait for it.
    pub(super) fn spawn_release(
        self: &Arc<Self>,
        p: u32,
        instance: String,
        stop_ms: f64,
        done: tokio::sync::watch::Sender<Option<ReclaimReport>>,
    ) {
        let me = self.clone();
        let task = tokio::spawn(async move {
            let report = me.release(p, &instance, stop_ms).await;
            // `send` drops the value when nobody subscribed yet; `reclaimed()` may ask later.
            done.send_replace(Some(report));
        });
        let mut releases = self.releases.lock().unwrap();
        releases.retain(|t| !t.is_finished());
        releases.push(task);
    }

    /// Wait (bounded) for releases in flight, so their memory is back before shutdown.
    pub async fn settle(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let busy = self.slots.lock().unwrap().any_coming_free();
            if !busy || Instant::now() >= deadline || self.ended().is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The guest's view of memory, measured at most once a second for all instances of the
    /// VM; a stale value triggers a refresh in the background (`Sandbox::memory` is
    /// synchronous).
    pub fn instance_stats(self: &Arc<Self>, instance: &str) -> Option<InstanceStats> {
        let mut g = self.guest_stats.lock().unwrap();
        let stale = g.at.is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
        if stale && !g.refreshing && self.ended().is_none() {
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                g.refreshing = true;
                let me = self.clone();
                handle.spawn(async move {
                    let stats = me.vm.agent.stats().await.ok();
                    let mut g = me.guest_stats.lock().unwrap();
                    g.refreshing = false;
                    g.at = Some(Instant::now());
                    if stats.is_some() {
                        g.stats = stats;
                    }
                });
            }
        }
        g.stats.as_ref()?.instances.get(instance).cloned()
    }

    /// QEMU or the agent is gone: every instance ends, every partition's memory is back
    /// with the host, the VM leaves the table and its directory goes.
    async fn end(self: &Arc<Self>, reason: String) {
        if self.ended.set(reason.clone()).is_err() {
            self.wait_gone().await;
            return;
        }
        let changes = self.slots.lock().unwrap().close();
        for change in changes {
            self.common.apply(change);
        }
        self.slot_freed.notify_waiters();
        forget_vm(&self.vms, self);
        self.vm.shutdown(Duration::from_secs(2)).await;
        for task in self.releases.lock().unwrap().drain(..) {
            task.abort();
        }
        remove_dir(self.dir());
        self.gone.send_replace(true);
        // Reported only now: an instance seen as ended has left no process and no file.
        let exits: Vec<_> = self
            .exits
            .lock()
            .unwrap()
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        for exit in exits {
            exit.mark(ExitCause::Exited, format!("VM {} ended: {reason}", self.id));
        }
        tracing::info!(vm = %self.id, action = %self.key.action, "vm-shared VM ended: {reason}");
        self.common.emit(PartitionEvent::VmEnded {
            vm: self.id.clone(),
            action: self.key.action.clone(),
            reason,
        });
    }

    /// Shut the VM down (idle, or the backend is stopping).
    pub async fn shutdown(self: &Arc<Self>, reason: &str) {
        self.end(reason.to_string()).await;
        if let Some(w) = self.watcher.lock().unwrap().take() {
            w.abort();
        }
    }
}

fn check_socket_path(path: &Path) -> Result<(), SandboxError> {
    if path.as_os_str().len() > SUN_PATH_MAX {
        return Err(SandboxError::Unsupported(format!(
            "{} is too long for a UNIX socket path: use a shorter state directory",
            path.display()
        )));
    }
    Ok(())
}

fn remove_dir(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(dir = %dir.display(), "cannot remove a vm-shared VM's directory: {e}");
        }
    }
}

/// Dispatches the agent's exit events to the instances and ends the VM on the first of:
/// QEMU exits, the agent session ends, the agent stops answering pings.
async fn watch(me: Weak<SharedVm>, mut events: EventStream) {
    let Some(this) = me.upgrade() else { return };
    let agent = this.vm.agent.clone();
    let qemu = this.vm.qemu.clone();
    let (interval, timeout) = (this.common.cfg.ping_interval, this.common.cfg.ping_timeout);
    drop(this);
    let exits = async {
        while let Some(Event::Exited {
            instance,
            code,
            signal,
            oom,
        }) = events.next().await
        {
            let Some(vm) = me.upgrade() else { return };
            let exit = vm
                .exits
                .lock()
                .unwrap()
                .get(&instance)
                .and_then(Weak::upgrade);
            if let Some(exit) = exit {
                let cause = if oom {
                    ExitCause::OutOfMemory
                } else {
                    ExitCause::Exited
                };
                exit.mark(
                    cause,
                    format!(
                        "the runtime exited (code {code:?}, signal {signal:?}, OOM-killed: {oom})"
                    ),
                );
            }
        }
    };
    let pings = async {
        loop {
            tokio::time::sleep(interval).await;
            match agent.ping(timeout).await {
                Ok(()) => {}
                Err(AgentError::Timeout(_)) => {
                    return format!("the guest agent did not answer a ping within {timeout:?}")
                }
                Err(e) => return format!("the guest agent session failed: {e}"),
            }
        }
    };
    let session_ended = async {
        match tokio::time::timeout(Duration::from_secs(2), qemu.exited()).await {
            Ok(status) => format!("QEMU exited ({status})"),
            Err(_) => "the guest agent session ended".to_string(),
        }
    };
    let reason = tokio::select! {
        () = exits => session_ended.await,
        () = agent.closed() => session_ended.await,
        status = qemu.exited() => format!("QEMU exited ({status})"),
        reason = pings => reason,
    };
    if let Some(vm) = me.upgrade() {
        vm.end(reason).await;
    }
}
