//! Waiting for a process that is not our child (crun detaches; the instance's init is
//! reparented), via a pidfd that becomes readable when the process exits.

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::process::{pidfd_open, Pid, PidfdFlags};
use std::os::fd::OwnedFd;
use tokio::io::unix::AsyncFd;

pub fn open(pid: u32) -> std::io::Result<OwnedFd> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| std::io::Error::from(rustix::io::Errno::SRCH))?;
    Ok(pidfd_open(pid, PidfdFlags::empty())?)
}

/// Whether the process is gone already (a pidfd polls readable once it exited).
pub fn has_exited(fd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    poll(&mut fds, Some(&Timespec::default())) == Ok(1)
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
