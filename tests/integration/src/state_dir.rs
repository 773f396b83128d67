//! A daemon's state directory in a temp dir, shared by the daemons started on it in turn.

use crate::leaks::{self, Tie};
use rustix::process::{kill_process, Pid, Signal};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A state directory that outlives the daemons started on it (restart tests). When the last
/// handle goes, anything still running for it is killed, so a failed test (or a daemon killed
/// with SIGKILL and never restarted) cannot leave processes or cgroups on the machine.
#[derive(Clone)]
pub struct StateDir(Arc<StateInner>);

struct StateInner {
    root: tempfile::TempDir,
    path: PathBuf,
    tag: String,
    starts: AtomicUsize,
}

impl StateDir {
    pub fn new() -> StateDir {
        let root = tempfile::Builder::new()
            .prefix("icebox-it-")
            .tempdir()
            .expect("creating a temp dir");
        let path = root
            .path()
            .canonicalize()
            .expect("temp dir path")
            .join("state");
        std::fs::create_dir_all(&path).expect("creating the state dir");
        std::fs::create_dir_all(root.path().join("home")).expect("creating the CLI home");
        let tag = iceboxd::server::state_tag(&path);
        StateDir(Arc::new(StateInner {
            root,
            path,
            tag,
            starts: AtomicUsize::new(0),
        }))
    }

    /// The `--state-dir` (canonical, as the daemon sees it).
    pub fn path(&self) -> &Path {
        &self.0.path
    }

    /// The daemon's cgroups are `icebox-<tag>` in every hierarchy.
    pub fn tag(&self) -> &str {
        &self.0.tag
    }

    /// An empty HOME for CLI runs, so no user config file is read.
    pub fn home(&self) -> PathBuf {
        self.0.root.path().join("home")
    }

    pub(crate) fn next_log(&self) -> PathBuf {
        let n = self.0.starts.fetch_add(1, Ordering::SeqCst) + 1;
        self.0.root.path().join(format!("iceboxd-{n}.log"))
    }

    pub fn leftovers(&self) -> leaks::Leftovers {
        leaks::leftovers(self.path(), self.tag())
    }
}

impl Default for StateDir {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for StateInner {
    fn drop(&mut self) {
        let left = leaks::leftovers(&self.path, &self.tag);
        if left.is_empty() {
            return;
        }
        eprintln!(
            "cleaning up what the test left behind for {}:\n{left}",
            self.path.display()
        );
        for p in &left.processes {
            if p.tie != Tie::Cgroup {
                // A daemon (or its crun) started by this test for this state dir.
                if let Some(pid) = Pid::from_raw(p.pid.cast_signed()) {
                    let _ = kill_process(pid, Signal::KILL);
                }
            }
        }
        leaks::force_remove_cgroups(&self.tag);
    }
}
