//! Waiting for a process that is not our child (crun detaches; the instance's init is
//! reparented), via a pidfd that becomes readable when the process exits.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use tokio::io::unix::AsyncFd;

#[expect(
    clippy::cast_possible_truncation,
    reason = "a descriptor the kernel returned (checked non-negative above) fits in an int"
)]
pub fn open(pid: u32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.cast_signed(), 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this fd to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Whether the process is gone already (a pidfd polls readable once it exited).
pub fn has_exited(fd: &OwnedFd) -> bool {
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    unsafe { libc::poll(&mut poll, 1, 0) == 1 }
}

pub async fn wait_exit(fd: OwnedFd) {
    // SAFETY: the OwnedFd moves into the AsyncFd and stays open, the same fd, until it drops.
    match unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) } {
        Ok(afd) => {
            let _ = afd.readable().await;
        }
        Err(e) => tracing::warn!("cannot watch pidfd: {e}"),
    }
}
