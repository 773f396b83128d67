//! The daemon reaches a crun instance's proxy socket through the instance's own root: the
//! socket directory is a tmpfs that exists only in the instance's mount namespace, so no host
//! filesystem can be filled through it and a crash leaves nothing mounted on the host.

use super::oci::SOCKET_DIR_INSIDE;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

/// A handle on the socket directory of the instance whose init is `pid`. `alive` is a pidfd
/// of that init: it is checked after the open, so a pid recycled in between (the instance
/// died at once) is refused instead of yielding another process's directory.
pub fn open(pid: u32, alive: &OwnedFd) -> std::io::Result<OwnedFd> {
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(format!("/proc/{pid}/root{SOCKET_DIR_INSIDE}"))?;
    // SAFETY: pidfd_send_signal with signal 0 only checks that the process still exists.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            alive.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(OwnedFd::from(dir))
}
