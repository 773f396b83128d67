//! cgroup v1: one hierarchy per controller, so an instance is a same-named directory in each
//! of the memory, freezer, cpu and pids hierarchies, and joins all of them.

use super::fs::{self as cgfs, with_path};
use super::mounts::{self, Mount};
use super::{CgroupLimits, Limit, FREEZE_TIMEOUT};
use std::io;
use std::path::{Path, PathBuf};

/// Directories of one cgroup (or of the hierarchy roots) in every hierarchy icebox uses.
/// Memory and freezer are required (accounting, limits, freezing); a missing cpu or pids
/// hierarchy only means those limits cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dirs {
    pub memory: PathBuf,
    pub freezer: PathBuf,
    pub cpu: Option<PathBuf>,
    pub pids: Option<PathBuf>,
}

impl Dirs {
    pub fn from_mounts(mounts: &[Mount], base: &Path) -> Option<Dirs> {
        let find = |c: &str| mounts::v1_mount(mounts, c, base).map(Path::to_path_buf);
        Some(Dirs {
            memory: find("memory")?,
            freezer: find("freezer")?,
            cpu: find("cpu"),
            pids: find("pids"),
        })
    }

    pub fn join(&self, rel: &str) -> Dirs {
        Dirs {
            memory: self.memory.join(rel),
            freezer: self.freezer.join(rel),
            cpu: self.cpu.as_ref().map(|d| d.join(rel)),
            pids: self.pids.as_ref().map(|d| d.join(rel)),
        }
    }

    pub fn all(&self) -> Vec<&Path> {
        let mut dirs = vec![self.freezer.as_path(), self.memory.as_path()];
        dirs.extend(self.cpu.as_deref());
        dirs.extend(self.pids.as_deref());
        dirs
    }
}

/// Creates `rel` (and missing parents) in every hierarchy and makes sure the OOM killer is
/// on: with it disabled, a cgroup at its limit would hang its processes instead.
pub(crate) fn create(root: &Dirs, rel: &str) -> io::Result<Dirs> {
    for dir in root.all() {
        cgfs::mkdir_p(dir, rel)?;
    }
    let dirs = root.join(rel);
    cgfs::write(&dirs.memory.join("memory.oom_control"), "0")?;
    Ok(dirs)
}

/// Applies the limits that are set; returns those whose hierarchy is missing.
pub(crate) fn set_limits(dirs: &Dirs, limits: &CgroupLimits) -> io::Result<Vec<Limit>> {
    let mut unapplied = Vec::new();
    if let Some(bytes) = limits.memory_bytes {
        set_memory_limit(&dirs.memory, bytes)?;
    }
    if let Some(max) = limits.pids_max {
        match &dirs.pids {
            Some(dir) => cgfs::write(&dir.join("pids.max"), &max.to_string())?,
            None => unapplied.push(Limit::Pids),
        }
    }
    if let Some(weight) = limits.cpu_weight {
        match &dirs.cpu {
            Some(dir) => cgfs::write(&dir.join("cpu.shares"), &cpu_shares(weight).to_string())?,
            None => unapplied.push(Limit::Cpu),
        }
    }
    Ok(unapplied)
}

/// Sets memory.limit_in_bytes and, where swap accounting exists, memory.memsw.limit_in_bytes
/// to the same value. Without the memsw limit an instance could exceed its limit by swapping
/// itself out once swap is on (OpenWhisk's docker backend likewise sets `--memory-swap` equal
/// to `--memory`). icebox's own page-out still works: swapped pages move from the memory
/// counter to swap, and the memory+swap total is unchanged.
fn set_memory_limit(dir: &Path, bytes: u64) -> io::Result<()> {
    let mem = dir.join("memory.limit_in_bytes");
    let memsw = dir.join("memory.memsw.limit_in_bytes");
    let has_memsw = memsw.exists();
    let value = bytes.to_string();
    match cgfs::write_raw(&mem, &value) {
        Ok(()) => {}
        // The kernel keeps memsw ≥ memory: when raising both, memsw must go first.
        Err(e) if has_memsw && e.raw_os_error() == Some(libc::EINVAL) => {
            cgfs::write(&memsw, &value)?;
            return cgfs::write(&mem, &value);
        }
        Err(e) => return Err(with_path(e, &mem)),
    }
    if has_memsw {
        cgfs::write(&memsw, &value)?;
    }
    Ok(())
}

/// v2 cpu.weight (1..=10000, default 100) → v1 cpu.shares (2..=262144, default 1024),
/// proportionally so that the defaults match (systemd's mapping).
pub(crate) fn cpu_shares(weight: u64) -> u64 {
    (weight.saturating_mul(1024) / 100).clamp(2, 262_144)
}

/// Writes FROZEN and waits until the freezer reports every task frozen. A task that is
/// busy in the kernel keeps the state at FREEZING; rewriting FROZEN retries it.
pub(crate) fn freeze(freezer: &Path) -> io::Result<()> {
    let state = freezer.join("freezer.state");
    cgfs::write(&state, "FROZEN")?;
    let frozen = cgfs::wait_until(FREEZE_TIMEOUT, || {
        if cgfs::read(&state)?.trim() == "FROZEN" {
            return Ok(true);
        }
        cgfs::write(&state, "FROZEN")?;
        Ok(false)
    })?;
    if frozen {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "{}: still FREEZING after {FREEZE_TIMEOUT:?}",
                state.display()
            ),
        ))
    }
}

/// Thawing is synchronous in v1; the state is checked because a frozen ancestor keeps
/// reporting FROZEN and the caller must know its processes still do not run.
pub(crate) fn thaw(freezer: &Path) -> io::Result<()> {
    let state = freezer.join("freezer.state");
    cgfs::write(&state, "THAWED")?;
    let now = cgfs::read(&state)?;
    if now.trim() == "THAWED" {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{}: {} after writing THAWED",
            state.display(),
            now.trim()
        )))
    }
}

pub(crate) fn is_frozen(freezer: &Path) -> bool {
    cgfs::read(&freezer.join("freezer.state")).is_ok_and(|s| s.trim() == "FROZEN")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_weight_maps_to_shares_with_matching_defaults() {
        assert_eq!(cpu_shares(100), 1024);
        assert_eq!(cpu_shares(200), 2048);
        assert_eq!(cpu_shares(1), 10);
        assert_eq!(cpu_shares(10_000), 102_400);
        assert_eq!(cpu_shares(0), 2);
        assert_eq!(cpu_shares(u64::MAX), 262_144);
    }
}
