//! Finding what a daemon left behind: processes that belong to its state directory and the
//! cgroups named after it (`icebox-<tag>`), and removing them when a test failed half-way.

use rustix::process::{kill_process, Pid, Signal};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What ties a process to a daemon's state directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tie {
    /// Its command line names the state directory (the daemon, crun).
    CommandLine,
    /// Its environment names the state directory (an unisolated runtime).
    Environment,
    /// It sits in one of the daemon's cgroups (a sandboxed runtime).
    Cgroup,
}

impl std::fmt::Display for Tie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Tie::CommandLine => "command line names the state dir",
            Tie::Environment => "environment names the state dir",
            Tie::Cgroup => "in the daemon's cgroup",
        })
    }
}

/// A live process tied to a daemon's state directory.
#[derive(Debug, Clone)]
pub struct LeftProcess {
    pub pid: u32,
    pub tie: Tie,
    pub cmdline: String,
}

/// Processes and cgroups of one state directory that are still there.
#[derive(Debug, Default)]
pub struct Leftovers {
    pub processes: Vec<LeftProcess>,
    pub cgroups: Vec<PathBuf>,
}

impl Leftovers {
    pub fn is_empty(&self) -> bool {
        self.processes.is_empty() && self.cgroups.is_empty()
    }
}

impl std::fmt::Display for Leftovers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for p in &self.processes {
            writeln!(f, "  process {} ({}): {}", p.pid, p.tie, p.cmdline)?;
        }
        for c in &self.cgroups {
            writeln!(f, "  cgroup {}", c.display())?;
        }
        Ok(())
    }
}

/// Everything of `state_dir` (whose cgroups are `icebox-<tag>`) still alive on this host.
pub fn leftovers(state_dir: &Path, tag: &str) -> Leftovers {
    Leftovers {
        processes: processes_of(state_dir, tag),
        cgroups: cgroup_dirs(tag),
    }
}

/// Polls until nothing is left or `within` passes; returns what is left at the end.
pub fn wait_for_no_leftovers(state_dir: &Path, tag: &str, within: Duration) -> Leftovers {
    let deadline = Instant::now() + within;
    loop {
        let left = leftovers(state_dir, tag);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The daemon's parent cgroup in every hierarchy: `/sys/fs/cgroup/icebox-<tag>` (v2) and
/// `/sys/fs/cgroup/<controller>/icebox-<tag>` (v1, hybrid).
pub fn cgroup_dirs(tag: &str) -> Vec<PathBuf> {
    let name = format!("icebox-{tag}");
    let root = Path::new("/sys/fs/cgroup");
    let mut found = Vec::new();
    if root.join(&name).is_dir() {
        found.push(root.join(&name));
    }
    if let Ok(entries) = std::fs::read_dir(root) {
        for entry in entries.flatten() {
            let candidate = entry.path().join(&name);
            if candidate.is_dir() {
                found.push(candidate);
            }
        }
    }
    found.sort();
    found
}

/// Whether the cgroup of one instance exists in any hierarchy.
pub fn instance_cgroup_exists(tag: &str, instance: &str) -> bool {
    cgroup_dirs(tag)
        .iter()
        .any(|dir| dir.join(instance).is_dir())
}

/// Whether the kernel holds the instance frozen: v1 `freezer.state`, v2 `cgroup.events`.
/// None when the instance has no freezer cgroup (e.g. running without isolation).
pub fn instance_frozen_in_kernel(tag: &str, instance: &str) -> Option<bool> {
    for dir in cgroup_dirs(tag) {
        let cg = dir.join(instance);
        if let Ok(state) = std::fs::read_to_string(cg.join("freezer.state")) {
            return Some(state.trim() == "FROZEN");
        }
        if let Ok(events) = std::fs::read_to_string(cg.join("cgroup.events")) {
            return Some(events.lines().any(|l| l.trim() == "frozen 1"));
        }
    }
    None
}

/// The instance's pids limit and how often it was hit (`pids.max`, `max` in `pids.events`).
/// None when the instance has no pids cgroup.
pub fn instance_pids_limit(tag: &str, instance: &str) -> Option<(String, u64)> {
    for dir in cgroup_dirs(tag) {
        let cg = dir.join(instance);
        let (Ok(max), Ok(events)) = (
            std::fs::read_to_string(cg.join("pids.max")),
            std::fs::read_to_string(cg.join("pids.events")),
        ) else {
            continue;
        };
        let hits = events
            .lines()
            .find_map(|l| l.strip_prefix("max "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        return Some((max.trim().to_string(), hits));
    }
    None
}

/// A process that exists and is not a zombie (a zombie holds no memory and no cgroup).
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => process_state(&stat) != Some('Z'),
        Err(_) => false,
    }
}

fn process_state(stat: &str) -> Option<char> {
    stat.get(stat.rfind(')')? + 2..)?.chars().next()
}

/// Live processes whose command line or environment names the state directory (the daemon,
/// crun), or that sit in one of its cgroups (the sandboxed runtimes, whose view of the host
/// hides the state directory).
pub fn processes_of(state_dir: &Path, tag: &str) -> Vec<LeftProcess> {
    let me = std::process::id();
    let dir = state_dir.as_os_str().as_encoded_bytes();
    let cgroup_marker = format!("/icebox-{tag}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me || !pid_alive(pid) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        let tie = if mentions_path(&cmdline, dir) {
            Tie::CommandLine
        } else if mentions_path(&environ, dir) {
            Tie::Environment
        } else if cgroups.lines().any(|l| names_cgroup(l, &cgroup_marker)) {
            Tie::Cgroup
        } else {
            continue;
        };
        found.push(LeftProcess {
            pid,
            tie,
            cmdline: String::from_utf8_lossy(&cmdline)
                .replace('\0', " ")
                .trim()
                .to_string(),
        });
    }
    found
}

/// `path` as a whole path or a path prefix inside a NUL-separated block (`/a/b` matches
/// `/a/b`, `/a/b/c`, `X=/a/b`, not `/a/bc`).
fn mentions_path(block: &[u8], path: &[u8]) -> bool {
    if path.is_empty() || block.len() < path.len() {
        return false;
    }
    (0..=block.len() - path.len()).any(|i| {
        block[i..].starts_with(path)
            && matches!(block.get(i + path.len()), None | Some(b'/') | Some(0))
    })
}

/// A `/proc/PID/cgroup` line whose path is `marker` or below it.
fn names_cgroup(line: &str, marker: &str) -> bool {
    let path = line.splitn(3, ':').nth(2).unwrap_or("");
    path == marker || path.starts_with(&format!("{marker}/"))
}

/// Kills every process in the daemon's cgroups and removes them. Only for this daemon's own
/// tag, after a test already failed (or a daemon was killed and never restarted), so one
/// failure does not leave frozen processes on the machine.
pub fn force_remove_cgroups(tag: &str) {
    let dirs = cgroup_dirs(tag);
    // A frozen task cannot die, and under cgroup v1 the freezer is one hierarchy among
    // several: every hierarchy is thawed before any is emptied (`cpu` sorts before `freezer`,
    // and its cgroups were left behind when they were emptied first).
    for dir in &dirs {
        thaw_tree(dir);
    }
    for dir in &dirs {
        remove_cgroup_tree(dir);
    }
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

fn thaw_tree(dir: &Path) {
    // v1 freezer, v2 cgroup.freeze; whichever this directory has.
    let _ = std::fs::write(dir.join("freezer.state"), "THAWED");
    let _ = std::fs::write(dir.join("cgroup.freeze"), "0");
    for sub in subdirs(dir) {
        thaw_tree(&sub);
    }
}

fn remove_cgroup_tree(dir: &Path) {
    for sub in subdirs(dir) {
        remove_cgroup_tree(&sub);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let pids: Vec<i32> = std::fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.is_empty() || Instant::now() >= deadline {
            break;
        }
        for pid in pids {
            // A process inside a cgroup created for a daemon this test started.
            if let Some(pid) = Pid::from_raw(pid) {
                let _ = kill_process(pid, Signal::KILL);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_mentions_respect_component_boundaries() {
        assert!(mentions_path(
            b"iceboxd\0--state-dir\0/tmp/x/state\0",
            b"/tmp/x/state"
        ));
        assert!(mentions_path(b"--root\0/tmp/x/state/crun", b"/tmp/x/state"));
        assert!(mentions_path(b"A=1\0DIR=/tmp/x/state", b"/tmp/x/state"));
        assert!(!mentions_path(b"/tmp/x/state2\0", b"/tmp/x/state"));
        assert!(!mentions_path(b"", b"/tmp/x/state"));
    }

    #[test]
    fn cgroup_lines_match_the_daemon_subtree_only() {
        assert!(names_cgroup(
            "4:memory:/icebox-ab12/hello-1",
            "/icebox-ab12"
        ));
        assert!(names_cgroup("0::/icebox-ab12", "/icebox-ab12"));
        assert!(!names_cgroup(
            "4:memory:/icebox-ab123/hello-1",
            "/icebox-ab12"
        ));
        assert!(!names_cgroup("4:memory:/", "/icebox-ab12"));
    }

    #[test]
    fn zombies_are_recognised_from_stat() {
        assert_eq!(process_state("123 (python3) Z 1 123 123"), Some('Z'));
        assert_eq!(process_state("123 (a) b) S 1 123 123"), Some('S'));
    }
}
