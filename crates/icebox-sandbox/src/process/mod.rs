//! The process backend: one instance = one action proxy process tree, isolated by crun
//! (namespaces, no capabilities, seccomp) in a cgroup icebox creates and owns, or — when the
//! daemon is not root — a bare process group frozen with SIGSTOP.

mod crun;
mod oci;
mod pidfd;
mod restored;
mod rlimit;
mod sandbox;
mod snapshot;
mod socket_dir;
mod uids;

pub use self::crun::Crun;
pub use self::rlimit::DEFAULT_NOFILE;
pub use self::sandbox::ProcessSandbox;
pub use self::uids::{UidPool, UidRange};

use self::sandbox::Isolation;
use crate::cgroup::{CgroupLimits, CgroupRoot, CgroupVersion};
use crate::client::RuntimeClient;
use crate::logs::LogCollector;
use crate::{InstanceSpec, Sandbox, SandboxBackend, SandboxError, Snapshots};
use anyhow::Context;
use async_trait::async_trait;
pub use icebox_snap::criu::Criu;
use rustix::process::{kill_process_group, Pid, Signal};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

/// How long a runtime may take from exec to accepting on its socket (JVMs under load are slow).
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How deep below the state directory snapshots are looked for at start-up (iceboxd keeps
/// them in `snapshots/<action>/<isolation>-<version>/image`).
const SNAPSHOT_DEPTH: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationMode {
    /// crun when root and crun is installed, else none.
    Auto,
    Crun,
    None,
}

impl std::str::FromStr for IsolationMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(IsolationMode::Auto),
            "crun" => Ok(IsolationMode::Crun),
            "none" => Ok(IsolationMode::None),
            other => Err(format!(
                "unknown isolation '{other}' (expected auto, crun or none)"
            )),
        }
    }
}

pub struct ProcessBackend {
    state_dir: PathBuf,
    instances_dir: PathBuf,
    rootfs: PathBuf,
    /// Parent cgroup of every instance of this daemon, e.g. `icebox-1a2b3c4d`.
    cgroup_parent: String,
    cgroups: Option<CgroupRoot>,
    crun: Option<Crun>,
    /// Set when snapshots are on (crun isolation and a usable criu).
    criu: Option<Criu>,
    /// RLIMIT_NOFILE of instance processes.
    nofile: u64,
    /// Each crun instance's own uid (without crun instances run as the daemon's user).
    uids: Option<Arc<UidPool>>,
}

impl ProcessBackend {
    /// `tag` distinguishes daemons (one per state dir) on one host, so start-up cleanup only
    /// ever touches this daemon's leftovers.
    pub fn new(state_dir: &Path, tag: &str, mode: IsolationMode) -> anyhow::Result<ProcessBackend> {
        let is_root = rustix::process::geteuid().is_root();
        let crun_bin = Crun::find();
        let use_crun = match mode {
            IsolationMode::None => false,
            IsolationMode::Crun => {
                anyhow::ensure!(
                    is_root,
                    "--isolation crun needs root (namespaces and cgroups)"
                );
                anyhow::ensure!(
                    crun_bin.is_some(),
                    "--isolation crun: crun is not installed (apt-get install crun)"
                );
                true
            }
            IsolationMode::Auto => is_root && crun_bin.is_some(),
        };
        let cgroups = if use_crun {
            Some(
                CgroupRoot::detect()?
                    .context("running as root but no writable cgroup hierarchy was found")?,
            )
        } else {
            None
        };
        let instances_dir = state_dir.join("instances");
        let rootfs = state_dir.join("rootfs");
        std::fs::create_dir_all(&instances_dir)?;
        let crun = if use_crun {
            oci::prepare_rootfs(&rootfs)?;
            let root = state_dir.join("crun");
            std::fs::create_dir_all(&root)?;
            let hybrid = cgroups.as_ref().is_some_and(|c| c.is_hybrid());
            Some(Crun {
                binary: crun_bin.expect("checked above"),
                root,
                hide_cgroup2: hybrid.then(|| CString::new("/sys/fs/cgroup/unified").unwrap()),
            })
        } else {
            None
        };
        Ok(ProcessBackend {
            state_dir: state_dir.to_path_buf(),
            instances_dir,
            rootfs,
            cgroup_parent: format!("icebox-{tag}"),
            cgroups,
            uids: use_crun.then(|| UidPool::new(UidRange::DEFAULT)),
            crun,
            criu: None,
            nofile: rlimit::DEFAULT_NOFILE,
        })
    }

    /// The uids crun instances run as (`--uid-range`); before the first start. What already
    /// uses uids of the range on this host is returned, to be reported.
    pub fn set_uid_range(&mut self, range: UidRange) -> Vec<String> {
        if self.uids.is_none() {
            return Vec::new();
        }
        self.uids = Some(UidPool::new(range));
        range.host_overlaps()
    }

    /// `None` when instances do not get a uid of their own (no crun).
    pub fn uid_range(&self) -> Option<UidRange> {
        self.uids.as_ref().map(|u| u.range())
    }

    pub fn isolated(&self) -> bool {
        self.crun.is_some()
    }

    /// Turns snapshots on with this criu (see `Criu::discover`); only crun instances can be
    /// snapshotted.
    pub fn enable_snapshots(&mut self, criu: Criu) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.crun.is_some(),
            "snapshots need crun isolation (root and crun installed)"
        );
        self.criu = Some(criu);
        Ok(())
    }

    /// RLIMIT_NOFILE of every process of every instance from now on (pids.max × this is
    /// what one instance can take of the host's file table).
    pub fn set_instance_nofile(&mut self, nofile: u64) {
        self.nofile = nofile;
    }

    pub fn instance_nofile(&self) -> u64 {
        self.nofile
    }

    fn instance_dir(&self, id: &str) -> PathBuf {
        self.instances_dir.join(id)
    }

    async fn start_crun(
        &self,
        spec: &InstanceSpec,
        crun: &Crun,
        dir: &Path,
    ) -> Result<Arc<dyn Sandbox>, SandboxError> {
        let cgroups = self.cgroups.as_ref().expect("crun implies cgroups");
        let mut uid = self.uids.as_ref().expect("crun implies uids").take()?;
        let limits = CgroupLimits {
            memory_bytes: Some(spec.memory_limit_bytes),
            pids_max: Some(spec.pids_max),
            cpu_weight: None,
        };
        let cgroup = cgroups.create(&format!("{}/{}", self.cgroup_parent, spec.id), &limits)?;
        uid.watch(&cgroup);

        let bundle = dir.join("bundle");
        std::fs::create_dir_all(&bundle)?;
        let config = oci::config(spec, &self.rootfs.to_string_lossy(), uid.uid(), self.nofile);
        std::fs::write(
            bundle.join("config.json"),
            serde_json::to_vec(&config).map_err(anyhow::Error::from)?,
        )?;

        let (out_rx, out_tx) = pipe()?;
        let (err_rx, err_tx) = pipe()?;
        let pid_file = dir.join("pid");
        let log_file = dir.join("crun.log");
        let log_arg = format!("--log=file:{}", log_file.display());
        let mut cmd = crun.command(
            &[
                &log_arg,
                "run",
                "--detach",
                "--bundle",
                &bundle.to_string_lossy(),
                "--pid-file",
                &pid_file.to_string_lossy(),
                &spec.id,
            ],
            cgroup.procs_files(),
        );
        cmd.stdin(Stdio::null()).stdout(out_tx).stderr(err_tx);
        let status = cmd.status().await?;
        if !status.success() {
            let why = std::fs::read_to_string(&log_file).unwrap_or_default();
            if let Err(e) = cgroup.remove() {
                tracing::warn!(instance = %spec.id, "cannot remove the cgroup of an instance that failed to start: {e}");
            }
            return Err(SandboxError::Container {
                step: "crun run",
                detail: format!("failed ({status}): {}", why.trim()),
            });
        }
        let pid: u32 = std::fs::read_to_string(&pid_file)?.trim().parse().map_err(
            |e: std::num::ParseIntError| SandboxError::Container {
                step: "crun's pid file",
                detail: e.to_string(),
            },
        )?;
        let exit_fd = pidfd::open(pid)?;
        let client = match socket_dir::open(pid, &exit_fd) {
            Ok(socket_dir) => RuntimeClient::in_dir(socket_dir, oci::SOCKET_NAME),
            // Died at once: `start` reports its exit with its output.
            Err(_) if pidfd::has_exited(&exit_fd) => RuntimeClient::unreachable(),
            Err(e) => {
                if let Err(e) = cgroup.remove() {
                    tracing::warn!(instance = %spec.id, "cannot remove the cgroup of an instance that failed to start: {e}");
                }
                sandbox::crun_delete(crun, &spec.id).await;
                return Err(SandboxError::Container {
                    step: "opening the instance's socket directory",
                    detail: e.to_string(),
                });
            }
        };

        let sandbox = ProcessSandbox::new(
            spec.id.clone(),
            dir.to_path_buf(),
            client,
            Arc::new(LogCollector::new()),
            pid,
            Isolation::Crun {
                cgroup,
                crun: crun.clone(),
            },
        );
        sandbox.set_spec(spec.clone());
        sandbox.set_uid(uid);
        sandbox.watch(out_rx, err_rx, sandbox::ExitWatch::Pidfd(exit_fd));
        Ok(sandbox)
    }

    async fn start_direct(
        &self,
        spec: &InstanceSpec,
        dir: &Path,
    ) -> Result<Arc<dyn Sandbox>, SandboxError> {
        let tmp = dir.join("tmp");
        std::fs::create_dir_all(&tmp)?;
        let socket = dir.join("proxy.sock");
        let argv = spec
            .runtime
            .argv(&spec.runtime.dir.to_string_lossy(), spec.memory_limit_bytes);
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .current_dir(&tmp)
            .env("ICEBOX_PROXY_SOCKET", &socket)
            .env("ICEBOX_CONCURRENCY", spec.concurrency.to_string())
            .env("TMPDIR", &tmp)
            .env("HOME", &tmp)
            .envs(
                spec.runtime
                    .env_for(&spec.runtime.dir.to_string_lossy(), spec.memory_limit_bytes),
            )
            .envs(spec.env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(false);
        let mut child = cmd.spawn().map_err(|source| SandboxError::Exec {
            program: argv[0].to_string(),
            source,
        })?;
        let pid = child.id().unwrap_or(0);
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let sandbox = ProcessSandbox::new(
            spec.id.clone(),
            dir.to_path_buf(),
            RuntimeClient::new(socket),
            Arc::new(LogCollector::new()),
            pid,
            Isolation::ProcessGroup {
                pgid: pid.cast_signed(),
            },
        );
        sandbox.watch_child(stdout, stderr, child);
        Ok(sandbox)
    }
}

/// A pipe whose read end is async (the daemon's) and whose write end becomes a child's stdio.
fn pipe() -> std::io::Result<(tokio::net::unix::pipe::Receiver, Stdio)> {
    let (rx, tx) = std::io::pipe()?;
    let rx = tokio::net::unix::pipe::Receiver::from_owned_fd(std::os::fd::OwnedFd::from(rx))?;
    Ok((rx, Stdio::from(tx)))
}

#[async_trait]
impl SandboxBackend for ProcessBackend {
    fn name(&self) -> &'static str {
        if self.crun.is_some() {
            "crun"
        } else {
            "none"
        }
    }

    fn cgroup_version(&self) -> &'static str {
        match self.cgroups.as_ref().map(|c| c.version()) {
            Some(CgroupVersion::V1) => "v1",
            Some(CgroupVersion::V2) => "v2",
            None => "none",
        }
    }

    async fn start(&self, spec: InstanceSpec) -> Result<Arc<dyn Sandbox>, SandboxError> {
        let dir = self.instance_dir(&spec.id);
        std::fs::create_dir_all(&dir)?;
        let started = match &self.crun {
            Some(crun) => self.start_crun(&spec, crun, &dir).await,
            None => self.start_direct(&spec, &dir).await,
        };
        let sandbox = match started {
            Ok(s) => s,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let ready = tokio::select! {
            ready = sandbox.client().wait_ready(START_TIMEOUT) => ready,
            _ = sandbox.exited() => false,
        };
        if !ready {
            let output = sandbox.logs().take().join("\n");
            let died = sandbox.exit_cause().is_some();
            sandbox.destroy().await;
            return Err(if died {
                SandboxError::RuntimeExited(output)
            } else {
                SandboxError::StartTimeout(
                    u64::try_from(START_TIMEOUT.as_millis()).unwrap_or(u64::MAX),
                )
            });
        }
        Ok(sandbox)
    }

    async fn cleanup_orphans(&self) -> anyhow::Result<usize> {
        let mut ids: std::collections::BTreeSet<String> = std::fs::read_dir(&self.instances_dir)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if let Some(cgroups) = &self.cgroups {
            ids.extend(cgroups.children(&self.cgroup_parent));
        }
        for id in &ids {
            if let Some(cgroups) = &self.cgroups {
                let cg = cgroups.open(&format!("{}/{}", self.cgroup_parent, id));
                if let Err(e) = cg.remove() {
                    tracing::warn!(instance = %id, "cannot remove orphaned cgroup: {e}");
                }
            } else {
                kill_orphan_process_group(&self.instance_dir(id));
            }
            if let Some(crun) = &self.crun {
                sandbox::crun_delete(crun, id).await;
            }
            let _ = std::fs::remove_dir_all(self.instance_dir(id));
        }
        // An orphan whose cgroup could not be emptied keeps its uid by itself (a uid any host
        // process runs as is never handed out); a snapshot's uid must be pinned again.
        if let Some(uids) = &self.uids {
            uids.pin_snapshots_under(&self.state_dir, SNAPSHOT_DEPTH);
        }
        Ok(ids.len())
    }

    fn snapshots(&self) -> Option<&dyn Snapshots> {
        (self.crun.is_some() && self.criu.is_some()).then_some(self as &dyn Snapshots)
    }

    async fn shutdown(&self) {
        if let Some(cgroups) = &self.cgroups {
            // A cgroup left here outlives the daemon (a later start only cleans its own tag's
            // children), so a failure must be visible.
            if let Err(e) = cgroups.open(&self.cgroup_parent).remove() {
                tracing::error!(cgroup = %self.cgroup_parent, "cannot remove the daemon's cgroup at shutdown: {e}");
            }
        }
    }
}

/// Without cgroups an orphan is found through the process group id its sandbox recorded; the
/// group leader's environment must still name this instance's socket, so a recycled pid is
/// never killed by mistake.
fn kill_orphan_process_group(dir: &Path) {
    let Some(pgid) = std::fs::read_to_string(dir.join("pgid"))
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
    else {
        return;
    };
    let marker = format!("ICEBOX_PROXY_SOCKET={}", dir.join("proxy.sock").display());
    let environ = std::fs::read(format!("/proc/{pgid}/environ")).unwrap_or_default();
    let ours = environ
        .split(|b| *b == 0)
        .any(|var| var == marker.as_bytes());
    // A process group this daemon created in an earlier run.
    if let Some(pgid) = (ours && pgid > 1).then_some(pgid).and_then(Pid::from_raw) {
        let _ = kill_process_group(pgid, Signal::KILL);
    }
}
