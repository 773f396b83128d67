//! cgroup v2: one hierarchy. Controllers reach a cgroup only when every ancestor enables them
//! in `cgroup.subtree_control`; freezing and killing are core features that need none.

use super::fs as cgfs;
use super::{CgroupLimits, Limit, FREEZE_TIMEOUT};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Creates `root/rel` one component at a time, first enabling each wanted controller in the
/// parent when the parent has it available. A controller that cannot be enabled is not an
/// error here: [`set_limits`] then reports the limits that depend on it.
pub(crate) fn create(root: &Path, rel: &str, wanted: &[&str]) -> io::Result<PathBuf> {
    let mut dir = root.to_path_buf();
    for component in rel.split('/') {
        enable_controllers(&dir, wanted);
        dir.push(component);
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(cgfs::with_path(e, &dir)),
        }
    }
    Ok(dir)
}

fn enable_controllers(dir: &Path, wanted: &[&str]) {
    let available = words(&dir.join("cgroup.controllers"));
    let enabled = words(&dir.join("cgroup.subtree_control"));
    let subtree = dir.join("cgroup.subtree_control");
    for c in wanted
        .iter()
        .filter(|c| available.iter().any(|a| a == *c) && !enabled.iter().any(|e| e == *c))
    {
        // One write per controller, so one refused controller does not block the others.
        // (Typical refusal: EBUSY because `dir` itself holds processes.)
        if let Err(err) = cgfs::write(&subtree, &format!("+{c}")) {
            tracing::warn!(controller = c, error = %err, "cannot enable cgroup controller");
        }
    }
}

fn words(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Applies the limits that are set; returns those whose controller this cgroup lacks.
/// memory.swap.max is left as inherited: limiting it would also forbid icebox's own
/// page-out of idle instances.
pub(crate) fn set_limits(dir: &Path, limits: &CgroupLimits) -> io::Result<Vec<Limit>> {
    let controllers = words(&dir.join("cgroup.controllers"));
    let has = |c: &str| controllers.iter().any(|x| x == c);
    let mut unapplied = Vec::new();
    let settings = [
        (limits.memory_bytes, "memory", "memory.max", Limit::Memory),
        (limits.pids_max, "pids", "pids.max", Limit::Pids),
        (limits.cpu_weight, "cpu", "cpu.weight", Limit::Cpu),
    ];
    for (value, controller, file, limit) in settings {
        let Some(value) = value else { continue };
        if has(controller) {
            cgfs::write(&dir.join(file), &value.to_string())?;
        } else {
            unapplied.push(limit);
        }
    }
    Ok(unapplied)
}

pub(crate) fn freeze(dir: &Path) -> io::Result<()> {
    set_frozen(dir, true)
}

pub(crate) fn thaw(dir: &Path) -> io::Result<()> {
    set_frozen(dir, false)
}

/// Writes cgroup.freeze and waits for cgroup.events to confirm: the write only starts the
/// transition, each task stops at its next return to user space.
fn set_frozen(dir: &Path, frozen: bool) -> io::Result<()> {
    cgfs::write(&dir.join("cgroup.freeze"), if frozen { "1" } else { "0" })?;
    let events = dir.join("cgroup.events");
    let want = u64::from(frozen);
    let done = cgfs::wait_until(FREEZE_TIMEOUT, || {
        Ok(cgfs::keyed_value(&cgfs::read(&events)?, "frozen") == Some(want))
    })?;
    if done {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "{}: not frozen {want} after {FREEZE_TIMEOUT:?}",
                events.display()
            ),
        ))
    }
}

pub(crate) fn is_frozen(dir: &Path) -> bool {
    cgfs::read_keyed(&dir.join("cgroup.events"), "frozen") == Some(1)
}

/// SIGKILLs the whole subtree atomically through cgroup.kill (Linux ≥ 5.14). Returns false
/// when the kernel has no cgroup.kill, so the caller falls back to signalling PIDs.
pub(crate) fn kill(dir: &Path) -> io::Result<bool> {
    let file = dir.join("cgroup.kill");
    match cgfs::write_raw(&file, "1") {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(cgfs::with_path(e, &file)),
    }
}
