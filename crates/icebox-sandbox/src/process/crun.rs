//! Invoking crun. icebox owns the cgroups (created before crun runs, joined in pre_exec), so
//! crun runs with `--cgroup-manager=disabled`. On a v1 host with a cgroup2 mount beside the
//! v1 hierarchies ("hybrid"), crun refuses to start at all; it gets a private mount namespace
//! with that cgroup2 mount detached, which changes nothing for the instance (its own root
//! never shows host cgroupfs).

use std::ffi::CString;
use std::path::PathBuf;
use tokio::process::Command;

#[derive(Debug, Clone)]
pub struct Crun {
    pub binary: PathBuf,
    /// crun's state directory (`--root`), inside the daemon's state dir.
    pub root: PathBuf,
    /// Detach this cgroup2 mount point in crun's mount namespace (hybrid hosts).
    pub hide_cgroup2: Option<CString>,
}

impl Crun {
    pub fn find() -> Option<PathBuf> {
        ["/usr/bin/crun", "/usr/local/bin/crun", "/bin/crun"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
    }

    /// `crun --root R --cgroup-manager=disabled ARGS…`, with the pre-exec steps: join the
    /// instance cgroups (so crun and everything it forks is accounted from the first page)
    /// and hide the cgroup2 mount on hybrid hosts.
    pub fn command(&self, args: &[&str], join_cgroup: Vec<CString>) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--root")
            .arg(&self.root)
            .arg("--cgroup-manager=disabled")
            .args(args);
        let hide = self.hide_cgroup2.clone();
        // SAFETY: the closure runs between fork and exec and only makes raw syscalls on
        // buffers allocated before the fork.
        unsafe {
            cmd.pre_exec(move || {
                crate::cgroup::join_self_in_child(&join_cgroup)?;
                if let Some(path) = &hide {
                    hide_mount_in_child(path)?;
                }
                Ok(())
            });
        }
        cmd
    }

    pub fn state_of(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }
}

fn hide_mount_in_child(path: &CString) -> std::io::Result<()> {
    // SAFETY: plain syscalls with NUL-terminated buffers prepared before fork.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let root = b"/\0";
        if libc::mount(
            std::ptr::null(),
            root.as_ptr().cast(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        if libc::umount2(path.as_ptr(), libc::MNT_DETACH) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
