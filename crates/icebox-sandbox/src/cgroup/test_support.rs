//! Helpers for the tests that use the host's real cgroups: unique names, cleanup guards,
//! and children that join a cgroup before they run.

use super::{join_self_in_child, Cgroup, CgroupRoot, CgroupVersion};
use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The host's v1 hierarchies, or `None` (with the reason printed) when the test must skip.
pub fn v1_root() -> Option<CgroupRoot> {
    if !is_root() {
        eprintln!("skipping: cgroup tests need root");
        return None;
    }
    match CgroupRoot::detect().unwrap() {
        Some(root) if root.version() == CgroupVersion::V1 => Some(root),
        _ => {
            eprintln!("skipping: no writable cgroup v1 hierarchies on this host");
            None
        }
    }
}

/// A cgroup2 hierarchy: the host's own on a v2 host, the `unified` mount on a hybrid one.
pub fn v2_root() -> Option<CgroupRoot> {
    if !is_root() {
        eprintln!("skipping: cgroup tests need root");
        return None;
    }
    match CgroupRoot::detect().unwrap() {
        Some(root) if root.version() == CgroupVersion::V2 => Some(root),
        Some(root) => match root.unified_mount() {
            Some(path) => Some(CgroupRoot::v2_at(path)),
            None => {
                eprintln!("skipping: no cgroup2 hierarchy on this host");
                None
            }
        },
        None => {
            eprintln!("skipping: no writable cgroup hierarchy on this host");
            None
        }
    }
}

/// Owns a uniquely named top-level cgroup; dropping it kills and removes everything in it,
/// also when the test panicked.
pub struct Scratch {
    pub root: CgroupRoot,
    pub top: String,
}

impl Scratch {
    pub fn new(root: CgroupRoot) -> Scratch {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let top = format!("icebox-test-{}-{nanos:x}-{n}", std::process::id());
        Scratch { root, top }
    }

    pub fn rel(&self, name: &str) -> String {
        format!("{}/{name}", self.top)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(err) = self.root.open(&self.top).remove() {
            eprintln!("cleanup of cgroup {} failed: {err}", self.top);
        }
    }
}

/// `sleep 600` started inside `cg` (it joins between fork and exec).
pub fn spawn_sleep(cg: &Cgroup) -> Child {
    let files = cg.procs_files();
    let mut cmd = Command::new("sleep");
    cmd.arg("600").stdin(Stdio::null());
    // SAFETY: join_self_in_child is async-signal-safe.
    unsafe { cmd.pre_exec(move || join_self_in_child(&files)) };
    cmd.spawn().unwrap()
}

/// Exit code of a forked child whose cgroup join failed.
pub const JOIN_FAILED: i32 = 120;

/// Forks a copy of this process that joins the cgroup whose procs files are `files`, runs
/// `body` and exits with its return value. `body` runs after fork in a multi-threaded
/// process, so it may only make async-signal-safe calls (no allocation, no locks).
pub fn fork_into(files: &[CString], body: impl FnOnce() -> i32) -> libc::pid_t {
    // SAFETY: the child only runs join_self_in_child, `body` (see above) and _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let code = if join_self_in_child(files).is_ok() {
            body()
        } else {
            JOIN_FAILED
        };
        // SAFETY: _exit ends the forked child at once, running no destructor or atexit
        // handler that could touch state copied from the parent.
        unsafe { libc::_exit(code) }
    }
    pid
}

/// Reaps `pid`; returns its raw wait status.
pub fn wait_status(pid: libc::pid_t) -> i32 {
    let child = rustix::process::Pid::from_raw(pid).expect("a child's pid");
    match rustix::process::waitpid(Some(child), rustix::process::WaitOptions::empty()) {
        Ok(Some((reaped, status))) if reaped == child => status.as_raw(),
        other => panic!("waitpid({pid}): {other:?}"),
    }
}

/// The line of /proc/PID/cgroup for `controller` (`""` selects the cgroup2 line `0::/…`).
pub fn cgroup_line(pid: u32, controller: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    text.lines()
        .find(|l| {
            l.split(':')
                .nth(1)
                .is_some_and(|c| c.split(',').any(|x| x == controller))
        })
        .unwrap_or_else(|| panic!("no {controller:?} line in /proc/{pid}/cgroup: {text}"))
        .to_string()
}
