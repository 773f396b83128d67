//! Driving the `criu` binary: finding a usable one (≥ 4.1), dump and restore invocations,
//! the stock lazy-pages daemon (the baseline), and errors that carry the tail of criu's log.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

/// Oldest CRIU that works with the kernels icebox targets (3.17 fails on 6.x).
pub const MIN_VERSION: (u32, u32, u32) = (4, 1, 0);

/// Where scripts/criu/build.sh puts its build, relative to the repository.
pub const REPO_BUILD: &str = ".tools/criu/criu";

#[derive(Debug, thiserror::Error)]
pub enum CriuError {
    #[error("no usable criu: {0}")]
    NotFound(String),
    #[error("criu {what} failed ({status}): {log}")]
    Failed {
        what: &'static str,
        status: String,
        log: String,
    },
    #[error("criu {what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, Clone)]
pub struct Criu {
    pub path: PathBuf,
    /// As printed by `criu --version`, e.g. `4.1.1`.
    pub version: String,
}

impl Criu {
    /// The first usable criu of: `explicit` (e.g. `--criu PATH`), the repository build under
    /// `repo`, then `criu` on PATH.
    pub fn discover(explicit: Option<&Path>, repo: Option<&Path>) -> Result<Criu, CriuError> {
        if let Some(path) = explicit {
            return Criu::at(path);
        }
        let mut why = Vec::new();
        let mut candidates: Vec<PathBuf> = repo.map(|r| r.join(REPO_BUILD)).into_iter().collect();
        if let Some(paths) = std::env::var_os("PATH") {
            candidates.extend(std::env::split_paths(&paths).map(|d| d.join("criu")));
        }
        for path in candidates.iter().filter(|p| p.is_file()) {
            match Criu::at(path) {
                Ok(criu) => return Ok(criu),
                Err(e) => why.push(e.to_string()),
            }
        }
        if why.is_empty() {
            why.push(format!(
                "criu is not installed (run scripts/criu/build.sh to build it into {REPO_BUILD})"
            ));
        }
        Err(CriuError::NotFound(why.join("; ")))
    }

    /// The criu at `path`, if it runs and is recent enough.
    pub fn at(path: &Path) -> Result<Criu, CriuError> {
        let out = std::process::Command::new(path)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| CriuError::NotFound(format!("{}: {e}", path.display())))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let version = text
            .lines()
            .find_map(|l| l.strip_prefix("Version:"))
            .map(|v| v.trim().to_string())
            .ok_or_else(|| {
                CriuError::NotFound(format!(
                    "{}: no version in `criu --version`",
                    path.display()
                ))
            })?;
        let parsed = parse_version(&version).ok_or_else(|| {
            CriuError::NotFound(format!("{}: unreadable version {version}", path.display()))
        })?;
        if parsed < MIN_VERSION {
            return Err(CriuError::NotFound(format!(
                "{} is criu {version}; icebox needs {}.{} or newer (scripts/criu/build.sh builds it)",
                path.display(),
                MIN_VERSION.0,
                MIN_VERSION.1
            )));
        }
        let criu = Criu {
            path: path.to_path_buf(),
            version,
        };
        criu.prepare_rundir();
        Ok(criu)
    }

    /// criu keeps its kernel-feature cache in the RUNDIR it was built with. The repository
    /// build uses a directory on /dev/shm (a tmpfs everyone may write to): it must be root's
    /// own, mode 0700, not a symlink, or another user could plant a cache that misleads criu.
    /// Anything else found there is removed and the directory made anew.
    fn prepare_rundir(&self) {
        let Some(dir) = self.rundir() else { return };
        if !rustix::process::geteuid().is_root() {
            return;
        }
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let ok = std::fs::symlink_metadata(&dir)
            .is_ok_and(|m| m.is_dir() && m.uid() == 0 && m.mode() & 0o7777 == 0o700);
        if ok {
            return;
        }
        let _ = std::fs::remove_file(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        let made = std::fs::create_dir(&dir)
            .and_then(|_| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)));
        if let Err(e) = made {
            tracing::warn!(dir = %dir.display(), "cannot prepare criu's cache directory (criu probes the kernel on every run): {e}");
        }
    }

    /// The RUNDIR of a repository build, from the stamp build.sh leaves next to it.
    fn rundir(&self) -> Option<PathBuf> {
        let stamp = std::fs::read_to_string(self.path.parent()?.join("stamp")).ok()?;
        let first = stamp.lines().next()?;
        let dir = first
            .split_whitespace()
            .find_map(|w| w.strip_prefix("rundir="))?;
        Some(PathBuf::from(dir))
    }

    /// `criu dump` of the tree rooted at host pid `opts.pid` into `opts.images`.
    pub async fn dump(&self, opts: &DumpOptions<'_>) -> Result<(), CriuError> {
        let log = opts.images.join("dump.log");
        let mut args: Vec<OsString> = vec![
            "dump".into(),
            "-t".into(),
            opts.pid.to_string().into(),
            "-D".into(),
            opts.images.into(),
            "-o".into(),
            "dump.log".into(),
            "-v4".into(),
            "--manage-cgroups=ignore".into(),
            "--network-lock".into(),
            "skip".into(),
        ];
        if opts.empty_net_ns {
            args.push("--empty-ns".into());
            args.push("net".into());
        }
        if opts.tcp_established {
            args.push("--tcp-established".into());
        }
        for (mountpoint, key) in opts.externals {
            args.push("--external".into());
            args.push(format!("mnt[{mountpoint}]:{key}").into());
        }
        let mut cmd = Command::new(&self.path);
        cmd.args(&args);
        run("dump", cmd, &log, None).await
    }

    /// `criu restore` of the images in `opts.images`; returns the host pid of the restored
    /// root task. `configure` may add a pre_exec step (joining a cgroup) to the command.
    pub async fn restore(
        &self,
        opts: &RestoreOptions<'_>,
        configure: impl FnOnce(&mut Command),
    ) -> Result<u32, CriuError> {
        let pidfile = opts.work_dir.join("restored.pid");
        let log = opts.work_dir.join("restore.log");
        let mut args: Vec<OsString> = vec![
            "restore".into(),
            "-D".into(),
            opts.images.into(),
            "-W".into(),
            opts.work_dir.into(),
            "-o".into(),
            "restore.log".into(),
            format!("-v{}", opts.verbosity).into(),
            "--manage-cgroups=ignore".into(),
            "--restore-detached".into(),
            "--pidfile".into(),
            pidfile.clone().into(),
        ];
        if let Some(root) = opts.root {
            args.push("--root".into());
            args.push(root.into());
        }
        if opts.lazy_pages {
            args.push("--lazy-pages".into());
        }
        if opts.empty_net_ns {
            args.push("--empty-ns".into());
            args.push("net".into());
        }
        if opts.tcp_close {
            args.push("--tcp-close".into());
        }
        for (key, host) in opts.externals {
            args.push("--external".into());
            let mut spec = OsString::from(format!("mnt[{key}]:"));
            spec.push(host);
            args.push(spec);
        }
        let mut inherited: Vec<RawFd> = Vec::new();
        for (fd, inode) in opts.inherit_pipes {
            args.push("--inherit-fd".into());
            args.push(format!("fd[{fd}]:pipe:[{inode}]").into());
            inherited.push(*fd);
        }
        let mut cmd = Command::new(&self.path);
        cmd.args(&args);
        keep_fds_open(&mut cmd, inherited);
        configure(&mut cmd);
        run("restore", cmd, &log, opts.timeout).await?;
        let text = std::fs::read_to_string(&pidfile).map_err(|source| CriuError::Io {
            what: "restore",
            source,
        })?;
        text.trim().parse().map_err(|_| CriuError::Failed {
            what: "restore",
            status: "bad pidfile".into(),
            log: text,
        })
    }

    /// Starts CRIU's own lazy-pages daemon for `images` in `work_dir` and returns once it
    /// listens on `work_dir/lazy-pages.socket`. It serves faults, then copies every remaining
    /// page in address order, and exits once all are in.
    pub async fn lazy_pages(
        &self,
        images: &Path,
        work_dir: &Path,
    ) -> Result<tokio::process::Child, CriuError> {
        let io = |source| CriuError::Io {
            what: "lazy-pages",
            source,
        };
        let (status_rx, status_tx) = std::io::pipe().map_err(io)?;
        let status_fd = status_tx.as_raw_fd();
        let mut cmd = Command::new(&self.path);
        cmd.arg("lazy-pages")
            .arg("-D")
            .arg(images)
            .arg("-W")
            .arg(work_dir)
            .args(["-o", "lazy-pages.log", "-v2", "--status-fd"])
            .arg(status_fd.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        keep_fds_open(&mut cmd, vec![status_fd]);
        let mut child = cmd.spawn().map_err(io)?;
        drop(status_tx);
        // criu writes one byte to the status fd once it listens; EOF means it died.
        let ready = tokio::task::spawn_blocking(move || {
            use std::io::Read;
            let mut byte = [0u8; 1];
            let mut rx = status_rx;
            rx.read(&mut byte).map(|n| n == 1)
        })
        .await
        .map_err(|e| io(std::io::Error::other(e)))?
        .map_err(io)?;
        if !ready {
            let status = child.wait().await.map_err(io)?;
            return Err(CriuError::Failed {
                what: "lazy-pages",
                status: status.to_string(),
                log: log_tail(&work_dir.join("lazy-pages.log")),
            });
        }
        Ok(child)
    }
}

pub struct DumpOptions<'a> {
    pub pid: u32,
    pub images: &'a Path,
    /// (mount point inside, key) of every mount criu must leave to the restore.
    pub externals: &'a [(String, String)],
    pub tcp_established: bool,
    /// Do not dump the network namespace's configuration (its devices, addresses, routes,
    /// firewall): only for a namespace that holds nothing but the loopback device.
    pub empty_net_ns: bool,
}

pub struct RestoreOptions<'a> {
    pub images: &'a Path,
    /// criu's working directory: logs, the pidfile and the lazy-pages socket go there.
    pub work_dir: &'a Path,
    /// The restored tree's root directory (its mount namespace's root), if it has its own.
    pub root: Option<&'a Path>,
    /// (key, host path) of every external mount.
    pub externals: &'a [(String, PathBuf)],
    /// (fd in this process, inode of the dumped pipe) of pipes the restored tasks get
    /// instead of the dumped ones (their stdout and stderr).
    pub inherit_pipes: &'a [(RawFd, u64)],
    pub lazy_pages: bool,
    pub tcp_close: bool,
    /// Give the tasks a new, empty network namespace (loopback down): the dump was taken
    /// with `empty_net_ns`. Skips criu's `ip` and `iptables-restore` runs.
    pub empty_net_ns: bool,
    pub verbosity: u8,
    pub timeout: Option<Duration>,
}

fn keep_fds_open(cmd: &mut Command, fds: Vec<RawFd>) {
    if fds.is_empty() {
        return;
    }
    // SAFETY: runs between fork and exec; fcntl on fds that are open in the child.
    unsafe {
        cmd.pre_exec(move || {
            for fd in &fds {
                if libc::fcntl(*fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

async fn run(
    what: &'static str,
    mut cmd: Command,
    log: &Path,
    timeout: Option<Duration>,
) -> Result<(), CriuError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = cmd
        .spawn()
        .map_err(|source| CriuError::Io { what, source })?;
    let waited = child.wait_with_output();
    let out = match timeout {
        Some(t) => tokio::time::timeout(t, waited)
            .await
            .map_err(|_| CriuError::Failed {
                what,
                status: format!("no answer within {} ms", t.as_millis()),
                log: log_tail(log),
            })?,
        None => waited.await,
    }
    .map_err(|source| CriuError::Io { what, source })?;
    if out.status.success() {
        return Ok(());
    }
    let mut text = log_tail(log);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !stderr.trim().is_empty() {
        text.push_str("\nstderr: ");
        text.push_str(stderr.trim());
    }
    Err(CriuError::Failed {
        what,
        status: out.status.to_string(),
        log: text,
    })
}

/// The lines of a criu log that explain a failure: its errors (criu prefixes them with
/// "Error"), then the last few lines.
pub fn log_tail(path: &Path) -> String {
    let Ok(text) = std::fs::read_to_string(path) else {
        return format!("(no log at {})", path.display());
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut picked: Vec<&str> = lines
        .iter()
        .filter(|l| l.contains("Error") || l.contains("error"))
        .rev()
        .take(8)
        .copied()
        .collect();
    picked.reverse();
    for l in lines.iter().rev().take(4).rev() {
        if !picked.contains(l) {
            picked.push(l);
        }
    }
    picked.join("\n")
}

fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let mut parts = text.split(['.', '-']).map(|p| p.parse::<u32>());
    let major = parts.next()?.ok()?;
    let minor = parts.next()?.ok()?;
    let patch = parts.next().and_then(|p| p.ok()).unwrap_or(0);
    Some((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_version("4.1.1"), Some((4, 1, 1)));
        assert_eq!(parse_version("4.2"), Some((4, 2, 0)));
        assert!(parse_version("3.17").unwrap() < MIN_VERSION);
        assert_eq!(parse_version("x"), None);
    }

    #[test]
    fn an_old_or_missing_criu_is_refused() {
        let err = Criu::at(Path::new("/nonexistent/criu")).unwrap_err();
        assert!(matches!(err, CriuError::NotFound(_)), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("criu");
        std::fs::write(&fake, "#!/bin/sh\necho 'Version: 3.17'\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = Criu::at(&fake).unwrap_err().to_string();
        assert!(err.contains("3.17") && err.contains("4.1"), "{err}");
    }
}
