//! Small file-system helpers for cgroupfs: cgroup control files are tiny, single-purpose and
//! report state through errno, so these keep the per-version code about semantics only.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Attaches the path to an error while keeping its kind and message. `raw_os_error` is
/// lost, so callers that branch on errno must do so before wrapping.
pub(crate) fn with_path(err: io::Error, path: &Path) -> io::Error {
    io::Error::new(err.kind(), format!("{}: {err}", path.display()))
}

pub(crate) fn read(path: &Path) -> io::Result<String> {
    fs::read_to_string(path).map_err(|e| with_path(e, path))
}

/// Writes `value` in one write(2): cgroupfs acts on each write call separately.
pub(crate) fn write(path: &Path, value: &str) -> io::Result<()> {
    fs::write(path, value).map_err(|e| with_path(e, path))
}

/// Like [`write`] but keeps the raw OS error, for callers that branch on errno.
pub(crate) fn write_raw(path: &Path, value: &str) -> io::Result<()> {
    fs::write(path, value)
}

pub(crate) fn read_u64(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Value of `key` in a flat keyed file (`key value` per line: memory.events, pids.events,
/// memory.oom_control, cgroup.events).
pub(crate) fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        if k == key {
            v.trim().parse().ok()
        } else {
            None
        }
    })
}

pub(crate) fn read_keyed(path: &Path, key: &str) -> Option<u64> {
    keyed_value(&fs::read_to_string(path).ok()?, key)
}

/// Creates `base/rel` and its missing parents; an existing directory is fine.
pub(crate) fn mkdir_p(base: &Path, rel: &str) -> io::Result<PathBuf> {
    let dir = base.join(rel);
    fs::create_dir_all(&dir).map_err(|e| with_path(e, &dir))?;
    Ok(dir)
}

/// PIDs in `dir`'s cgroup.procs and in every descendant cgroup's, sorted. Anything that
/// cannot be read (a cgroup removed meanwhile) contributes nothing.
pub(crate) fn pids_recursive(dir: &Path) -> Vec<u32> {
    let mut pids = Vec::new();
    collect_pids(dir, &mut pids);
    pids.sort_unstable();
    pids.dedup();
    pids
}

fn collect_pids(dir: &Path, out: &mut Vec<u32>) {
    if let Ok(text) = fs::read_to_string(dir.join("cgroup.procs")) {
        out.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    for child in subdirs(dir) {
        collect_pids(&child, out);
    }
}

/// Child cgroups of `dir` (cgroupfs directories are exactly the child cgroups).
pub(crate) fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

/// Removes the cgroup `dir` and its descendants, deepest first. A cgroup whose last
/// processes just died can still be busy for a moment, so EBUSY is retried until
/// `RMDIR_TIMEOUT`. A missing directory counts as removed.
pub(crate) fn rmdir_tree(dir: &Path) -> io::Result<()> {
    for child in subdirs(dir) {
        rmdir_tree(&child)?;
    }
    let mut last = None;
    let done = wait_until(RMDIR_TIMEOUT, || match fs::remove_dir(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            last = Some(e);
            Ok(false)
        }
        Err(e) => Err(e),
    })
    .map_err(|e| with_path(e, dir))?;
    if done {
        Ok(())
    } else {
        Err(with_path(
            last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EBUSY)),
            dir,
        ))
    }
}

const RMDIR_TIMEOUT: Duration = Duration::from_secs(2);

/// Polls `cond` until it holds or `timeout` passes; returns whether it held. The common case
/// (freezing, thawing) completes within microseconds, so the first checks only yield the
/// CPU; then sleeps start at 20 µs and double up to 5 ms, so a slow case neither burns a
/// core nor adds more than ~2× latency.
pub(crate) fn wait_until(
    timeout: Duration,
    mut cond: impl FnMut() -> io::Result<bool>,
) -> io::Result<bool> {
    const SPINS: u32 = 16;
    let deadline = Instant::now() + timeout;
    let mut sleep = Duration::from_micros(20);
    for attempt in 0.. {
        if cond()? {
            return Ok(true);
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(false);
        }
        if attempt < SPINS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(sleep.min(deadline - now));
            sleep = (sleep * 2).min(Duration::from_millis(5));
        }
    }
    unreachable!("the loop only exits by returning")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_files() {
        let events = "populated 1\nfrozen 0\n";
        assert_eq!(keyed_value(events, "frozen"), Some(0));
        assert_eq!(keyed_value(events, "populated"), Some(1));
        assert_eq!(keyed_value(events, "froze"), None);
        let oom = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(keyed_value(oom, "oom_kill"), Some(3));
        assert_eq!(keyed_value("max 12\n", "max"), Some(12));
    }

    #[test]
    fn wait_until_reports_success_failure_and_errors() {
        let mut n = 0;
        assert!(wait_until(Duration::from_secs(5), || {
            n += 1;
            Ok(n == 40)
        })
        .unwrap());
        assert_eq!(n, 40);
        assert!(!wait_until(Duration::from_millis(1), || Ok(false)).unwrap());
        let err = wait_until(Duration::from_secs(1), || Err(io::Error::other("boom"))).unwrap_err();
        assert_eq!(err.to_string(), "boom");
    }

    #[test]
    fn rmdir_tree_removes_nested_dirs_and_tolerates_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = mkdir_p(tmp.path(), "a/b/c").unwrap();
        assert!(dir.is_dir());
        rmdir_tree(&tmp.path().join("a")).unwrap();
        assert!(!tmp.path().join("a").exists());
        rmdir_tree(&tmp.path().join("a")).unwrap();
    }
}
