//! Snapshots of crun instances with CRIU (docs/snapshots.md). `snapshot` dumps an idle
//! instance's whole process tree (tini and the proxy, with their namespaces, seccomp filter
//! and tmpfs mounts; the host bind mounts stay external) and drops zero pages from the images;
//! `restore` brings a new instance back in a new cgroup, with new stdout/stderr pipes, its
//! memory served by icebox's pager (record, FaaSnap, REAP), CRIU's own lazy-pages daemon
//! (lazy) or loaded by criu up front (eager); `finish_record` turns a recorded first
//! invocation into the snapshot's loading set.

mod meta;

use self::meta::{DumpedPipe, SnapshotMeta, IMAGES_DIR};
use super::restored::{self, Restored};
use super::sandbox::{Isolation, ProcessSandbox};
use super::{oci, pidfd, socket_dir, ProcessBackend};
use crate::cgroup::CgroupLimits;
use crate::client::RuntimeClient;
use crate::logs::LogCollector;
use crate::{
    InstanceSpec, LoadingSetInfo, RestoreMode, Sandbox, SandboxError, SnapshotInfo, Snapshots,
};
use async_trait::async_trait;
use icebox_snap::criu::{DumpOptions, RestoreOptions};
use icebox_snap::pager::{Pager, PagerConfig, PagerMode};
use icebox_snap::{compact, image, loadset_file, mounts, netns};

/// What a restore must reconnect: pipes, external mounts, (empty network namespace, its
/// loopback up).
type Dumped = (Vec<DumpedPipe>, Vec<mounts::ExternalMount>, (bool, bool));
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the proxy may take to close the connections the daemon dropped.
const QUIESCE_TIMEOUT: Duration = Duration::from_secs(3);
/// A restore that takes longer is stuck (a fault nobody serves, say).
const RESTORE_TIMEOUT: Duration = Duration::from_secs(30);

/// Taking a snapshot or building its loading set failed.
fn failed(what: impl std::fmt::Display) -> SandboxError {
    SandboxError::Snapshot(what.to_string())
}

/// Restoring the snapshot in `dir` was refused or failed.
fn refused(dir: &Path, why: impl std::fmt::Display) -> SandboxError {
    SandboxError::restore("process", dir, why)
}

#[async_trait]
impl Snapshots for ProcessBackend {
    async fn snapshot(
        &self,
        sandbox: &Arc<dyn Sandbox>,
        dir: &Path,
    ) -> Result<SnapshotInfo, SandboxError> {
        let criu = self
            .criu
            .as_ref()
            .ok_or_else(|| failed("snapshots are off"))?;
        let me = sandbox
            .as_any()
            .downcast_ref::<ProcessSandbox>()
            .filter(|s| matches!(s.isolation(), Isolation::Crun { .. }))
            .ok_or_else(|| failed("only crun instances of this backend can be snapshotted"))?;
        let spec = me
            .spec()
            .ok_or_else(|| failed("the instance's spec is unknown"))?
            .clone();
        let started = Instant::now();
        // Pinned before the template goes, so no other instance gets its uid in between.
        let uid = me.uid();
        let pinned = match (uid, &self.uids) {
            (Some(uid), Some(uids)) => uids.pin(uid, dir).map(|_| Some((uids, uid))),
            _ => Ok(None),
        };
        let (result, pinned) = match pinned {
            Ok(pinned) => (self.dump(me, criu, dir).await, pinned),
            Err(e) => (
                Err(failed(format!("cannot pin the template's uid: {e}"))),
                None,
            ),
        };
        // The template is gone either way: criu kills it after a dump, and one that failed
        // half-way is not worth keeping.
        sandbox.destroy().await;
        let written = match result {
            Ok(dumped) => write_meta(dumped, spec, criu, dir, uid, started).await,
            Err(e) => Err(e),
        };
        if let Some((uids, uid)) = pinned {
            uids.pinned(uid, written.is_ok());
        }
        let meta = written?;
        Ok(SnapshotInfo {
            backend: "crun".into(),
            memory_bytes: meta.memory_bytes,
            took_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        })
    }

    async fn restore(
        &self,
        spec: InstanceSpec,
        dir: &Path,
        mode: RestoreMode,
    ) -> Result<Arc<dyn Sandbox>, SandboxError> {
        let criu = self
            .criu
            .as_ref()
            .ok_or_else(|| refused(dir, "snapshots are off"))?;
        let started = Instant::now();
        let meta =
            SnapshotMeta::load_for(dir, &spec, &criu.version).map_err(|why| refused(dir, why))?;
        let meta = {
            let snapshot = dir.to_path_buf();
            let pager = uses_pager(mode);
            tokio::task::spawn_blocking(move || meta.verify(&snapshot, pager).map(|()| meta))
                .await
                .map_err(|e| refused(dir, format!("checking the snapshot panicked: {e}")))?
                .map_err(|e| refused(dir, e))?
        };
        if mode.needs_loading_set() {
            loadset_file::read(dir)
                .map_err(|e| refused(dir, format!("no usable loading set: {e}")))?;
        }
        // Its processes come back with the template's uid (pinned by the snapshot).
        let uid = match (&self.uids, meta.uid) {
            (Some(uids), Some(uid)) => uids.share(uid),
            _ => Err(std::io::Error::other("it records no uid")),
        }
        .map_err(|e| refused(dir, e))?;
        let instance_dir = self.instance_dir(&spec.id);
        std::fs::create_dir_all(&instance_dir)?;
        match self
            .restore_into(&spec, dir, &meta, mode, &instance_dir, started, uid)
            .await
        {
            Ok(sandbox) => Ok(sandbox),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&instance_dir);
                Err(e)
            }
        }
    }

    async fn finish_record(
        &self,
        sandbox: &Arc<dyn Sandbox>,
        dir: &Path,
    ) -> Result<LoadingSetInfo, SandboxError> {
        let me = sandbox
            .as_any()
            .downcast_ref::<ProcessSandbox>()
            .ok_or_else(|| failed("not a sandbox of this backend"))?;
        let restored = me
            .restored()
            .filter(|r| r.mode == RestoreMode::Record)
            .ok_or_else(|| failed("the sandbox was not restored in record mode"))?;
        let pager = restored.pager.as_ref().expect("record mode has a pager");
        let touched = pager.take_record();
        let dir = dir.to_path_buf();
        let index = tokio::task::spawn_blocking(move || {
            let images = dir.join(IMAGES_DIR);
            let tasks = image::load_all(&images)?;
            loadset_file::write(&dir, &images, &tasks, &touched)
        })
        .await
        .map_err(|e| failed(format!("building the loading set panicked: {e}")))??;
        Ok(LoadingSetInfo {
            working_set_pages: index.working_set_pages,
            zero_pages: index.zero_pages,
            loading_set_pages: index.pages(),
            regions: index.regions.len() as u64,
            groups: u64::from(index.groups),
        })
    }
}

impl ProcessBackend {
    /// Dumps the instance into `dir/criu`; returns what the restore must reconnect.
    async fn dump(
        &self,
        me: &ProcessSandbox,
        criu: &icebox_snap::criu::Criu,
        dir: &Path,
    ) -> Result<Dumped, SandboxError> {
        let pid = me.main_pid();
        me.thaw()?;
        me.client().close_idle();
        wait_for_no_connection(me, QUIESCE_TIMEOUT).await?;
        let pipes = [1, 2]
            .into_iter()
            .map(|fd| {
                let target = std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))?;
                let inode = target
                    .to_str()
                    .and_then(|t| t.strip_prefix("pipe:["))
                    .and_then(|t| t.strip_suffix(']'))
                    .and_then(|t| t.parse().ok())
                    .ok_or_else(|| {
                        failed(format!("fd {fd} of the instance is not a pipe: {target:?}"))
                    })?;
                Ok(DumpedPipe { fd, inode })
            })
            .collect::<Result<Vec<_>, SandboxError>>()?;
        let externals = mounts::external_mounts(pid)?;
        let network = me.spec().is_some_and(|s| s.network);
        let empty_net_ns = !network && netns::only_loopback(pid)?;
        let loopback_up = empty_net_ns && netns::loopback_up(pid)?;
        let images = dir.join(IMAGES_DIR);
        std::fs::create_dir_all(&images)?;
        let keys: Vec<(String, String)> = externals
            .iter()
            .map(|m| (m.mountpoint.clone(), m.key.clone()))
            .collect();
        criu.dump(&DumpOptions {
            pid,
            images: &images,
            externals: &keys,
            tcp_established: network,
            empty_net_ns,
        })
        .await
        .map_err(|e| failed(format!("snapshot of {} failed: {e}", me.id())))?;
        Ok((pipes, externals, (empty_net_ns, loopback_up)))
    }

    #[allow(clippy::too_many_arguments)]
    async fn restore_into(
        &self,
        spec: &InstanceSpec,
        dir: &Path,
        meta: &SnapshotMeta,
        mode: RestoreMode,
        instance_dir: &Path,
        started: Instant,
        mut uid: super::uids::UidLease,
    ) -> Result<Arc<dyn Sandbox>, SandboxError> {
        let criu = self.criu.as_ref().expect("checked by the caller");
        let cgroups = self
            .cgroups
            .as_ref()
            .expect("snapshots imply crun and cgroups");
        let rel = format!("{}/{}", self.cgroup_parent, spec.id);
        let limits = CgroupLimits {
            memory_bytes: Some(spec.memory_limit_bytes),
            pids_max: Some(spec.pids_max),
            cpu_weight: None,
        };
        let cgroup = cgroups.create(&rel, &limits)?;
        uid.watch(&cgroup);
        let images = dir.join(IMAGES_DIR);
        let work = instance_dir.join("criu");
        std::fs::create_dir_all(&work)?;

        // Whatever serves the memory must listen before criu starts.
        let killer = cgroups.open(&rel);
        let (pager, lazy_daemon) =
            match serve_memory(criu, dir, meta, &work, mode, &spec.id, killer).await {
                Ok(served) => served,
                Err(e) => {
                    let _ = cgroup.remove();
                    return Err(e);
                }
            };

        let (out_rx, out_tx) = std::io::pipe()?;
        let (err_rx, err_tx) = std::io::pipe()?;
        let new_ends: Vec<(i32, OwnedFd)> = meta
            .pipes
            .iter()
            .map(|p| {
                let end = if p.fd == 2 { &err_tx } else { &out_tx };
                (p.fd, OwnedFd::from(end.try_clone().expect("dup of a pipe")))
            })
            .collect();
        let inherit: Vec<(i32, u64)> = meta
            .pipes
            .iter()
            .zip(&new_ends)
            .map(|(p, (_, fd))| (fd.as_raw_fd(), p.inode))
            .collect();
        drop((out_tx, err_tx));
        let externals: Vec<(String, PathBuf)> = meta
            .externals
            .iter()
            .map(|m| (m.key.clone(), m.host.clone()))
            .collect();
        let procs = cgroup.procs_files();
        let criu_started = Instant::now();
        let restored = criu
            .restore(
                &RestoreOptions {
                    images: &images,
                    work_dir: &work,
                    root: Some(&self.rootfs),
                    externals: &externals,
                    inherit_pipes: &inherit,
                    lazy_pages: pager.is_some() || lazy_daemon.is_some(),
                    tcp_close: spec.network,
                    empty_net_ns: meta.empty_net_ns,
                    // criu's log (in the instance's directory) stays terse unless asked.
                    verbosity: std::env::var("ICEBOX_CRIU_VERBOSITY")
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(1),
                    timeout: Some(RESTORE_TIMEOUT),
                },
                |cmd| {
                    // SAFETY: between fork and exec; only raw syscalls on buffers prepared
                    // before the fork (the same join crun instances make).
                    unsafe {
                        cmd.pre_exec(move || crate::cgroup::join_self_in_child(&procs));
                    }
                },
            )
            .await;
        let criu_ms = criu_started.elapsed().as_secs_f64() * 1e3;
        drop(new_ends);
        let restored_state = Restored {
            mode,
            snapshot: dir.to_path_buf(),
            restore_ms: 0.0,
            criu_ms,
            pager,
            lazy_daemon: Mutex::new(lazy_daemon.map(restored::watch_lazy_daemon)),
        };
        let pid = match restored {
            Ok(pid) => pid,
            Err(e) => {
                // Kill first, then stop the pager (tasks must never outlive it).
                let _ = cgroup.remove();
                restored_state.stop();
                return Err(refused(dir, format!("criu restore failed: {e}")));
            }
        };
        let setup = (|| -> std::io::Result<(OwnedFd, OwnedFd)> {
            let exit_fd = pidfd::open(pid)?;
            if meta.loopback_up {
                netns::set_loopback_up(pid)?;
            }
            let socket_dir = socket_dir::open(pid, &exit_fd)?;
            // CRIU gives back the limit of the dumped processes; this daemon's may differ.
            // Setting another uid's limit needs CAP_SYS_RESOURCE, which some hosts' root lacks
            // (docs/snapshots.md): the instance then keeps the limit it was dumped with.
            if let Err(e) = super::rlimit::set_nofile(&cgroup.pids(), self.nofile) {
                tracing::warn!(instance = %spec.id, "the restored instance keeps its dumped open-file limit: {e}");
            }
            Ok((exit_fd, socket_dir))
        })();
        let (exit_fd, socket_dir) = match setup {
            Ok(fds) => fds,
            Err(e) => {
                let _ = cgroup.remove();
                restored_state.stop();
                return Err(refused(
                    dir,
                    format!("the restored instance died at once: {e}"),
                ));
            }
        };
        let sandbox = ProcessSandbox::new(
            spec.id.clone(),
            instance_dir.to_path_buf(),
            RuntimeClient::in_dir(socket_dir, oci::SOCKET_NAME),
            Arc::new(LogCollector::new()),
            pid,
            Isolation::Restored { cgroup },
        );
        sandbox.set_spec(spec.clone());
        sandbox.set_uid(uid);
        let out_rx = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(out_rx))?;
        let err_rx = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(err_rx))?;
        sandbox.watch(out_rx, err_rx, super::sandbox::ExitWatch::Pidfd(exit_fd));
        let ready = tokio::select! {
            ready = sandbox.client().wait_ready(Duration::from_secs(5)) => ready,
            _ = sandbox.exited() => false,
        };
        let restore_ms = started.elapsed().as_secs_f64() * 1e3;
        sandbox.set_restored(Restored {
            restore_ms,
            ..restored_state
        });
        if !ready {
            sandbox.destroy().await;
            return Err(refused(
                dir,
                "the restored proxy does not accept connections",
            ));
        }
        Ok(sandbox)
    }
}

/// Drops the dump's zero pages and writes `snapshot.json` (with the template's uid).
async fn write_meta(
    (pipes, externals, net): Dumped,
    spec: InstanceSpec,
    criu: &icebox_snap::criu::Criu,
    dir: &Path,
    uid: Option<u32>,
    started: Instant,
) -> Result<SnapshotMeta, SandboxError> {
    let images = dir.join(IMAGES_DIR);
    let dump_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let criu_version = criu.version.clone();
    let images_for_meta = images.clone();
    let mut meta = tokio::task::spawn_blocking(move || -> std::io::Result<SnapshotMeta> {
        let compaction = compact::compact_zero_pages(&images_for_meta)?;
        SnapshotMeta::new(
            &spec,
            &criu_version,
            pipes,
            externals,
            net,
            &images_for_meta,
            compaction,
            dump_ms,
        )
    })
    .await
    .map_err(|e| failed(format!("snapshot post-processing panicked: {e}")))??;
    meta.uid = uid;
    loadset_file::remove(dir);
    meta.write(dir)?;
    // CRIU wrote its images with the daemon's umask: the action's memory is nobody else's to
    // read.
    icebox_snap::private::restrict_tree(dir)?;
    Ok(meta)
}

/// Starts what serves a restore's memory: icebox's pager (record, FaaSnap, REAP), criu's own
/// lazy-pages daemon (lazy), or nothing (eager: criu loads it all).
async fn serve_memory(
    criu: &icebox_snap::criu::Criu,
    dir: &Path,
    meta: &SnapshotMeta,
    work: &Path,
    mode: RestoreMode,
    id: &str,
    killer: crate::cgroup::Cgroup,
) -> Result<(Option<Pager>, Option<tokio::process::Child>), SandboxError> {
    let images = &dir.join(IMAGES_DIR);
    let pager_mode = match mode {
        RestoreMode::Record => PagerMode::Record,
        RestoreMode::Faasnap => PagerMode::Faasnap,
        RestoreMode::Reap => PagerMode::Reap,
        RestoreMode::Eager => return Ok((None, None)),
        RestoreMode::Lazy => {
            let daemon = criu
                .lazy_pages(images, work)
                .await
                .map_err(|e| refused(dir, e.to_string()))?;
            return Ok((None, Some(daemon)));
        }
    };
    let id = id.to_string();
    let pager = Pager::start(PagerConfig {
        images: images.to_path_buf(),
        work_dir: work.to_path_buf(),
        mode: pager_mode,
        loadset_dir: Some(dir.to_path_buf()),
        fault_pages: 1,
        on_fatal: Some(Box::new(move |why: &str| {
            tracing::error!(instance = %id, "pager failed, killing the instance: {why}");
            let _ = killer.kill_all();
        })),
        checksums: Some(meta.files.clone()),
    })
    .map_err(|e| refused(dir, format!("cannot serve the snapshot's memory: {e}")))?;
    Ok((Some(pager), None))
}

/// Whether icebox's pager serves the restore's memory (and so checks the pages files itself).
fn uses_pager(mode: RestoreMode) -> bool {
    matches!(
        mode,
        RestoreMode::Record | RestoreMode::Faasnap | RestoreMode::Reap
    )
}

/// Waits until the instance holds no connection to the proxy's socket (criu cannot dump a
/// socket whose peer is outside the tree). The daemon's side is closed already; the proxy
/// closes its side when it sees that. An accepted socket lives in the network namespace of
/// the side that connected, the daemon's: it is looked for in the daemon's socket table,
/// among the sockets the instance's processes hold.
async fn wait_for_no_connection(
    me: &ProcessSandbox,
    timeout: Duration,
) -> Result<(), SandboxError> {
    let deadline = Instant::now() + timeout;
    loop {
        let held: std::collections::HashSet<String> = me
            .pids()
            .into_iter()
            .flat_map(|pid| {
                std::fs::read_dir(format!("/proc/{pid}/fd"))
                    .into_iter()
                    .flatten()
            })
            .filter_map(|fd| {
                let target = std::fs::read_link(fd.ok()?.path()).ok()?;
                let inode = target
                    .to_str()?
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?;
                Some(inode.to_string())
            })
            .collect();
        let table = std::fs::read_to_string("/proc/self/net/unix")?;
        let connected = table.lines().skip(1).any(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // Num RefCount Protocol Flags Type St Inode Path; St 03 = connected.
            f.len() >= 8 && f[5] == "03" && f[7] == oci::SOCKET_INSIDE && held.contains(f[6])
        });
        if !connected {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(failed(
                "the proxy still has an open connection: snapshots need an idle instance whose connections are closed",
            ));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
