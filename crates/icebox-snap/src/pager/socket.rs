//! CRIU's side channel to a lazy-pages server (criu/uffd.c): `criu restore --lazy-pages`
//! connects to the UNIX stream socket `lazy-pages.socket` in its working directory and sends,
//! for each task, its pid (a native int) then its userfaultfd (SCM_RIGHTS, one dummy byte); a
//! zombie is a negative pid with no fd. When the restore is complete it sends the u32
//! `RESTORE_FINISHED`. Pids never reach that value, so the two cannot be confused.

use rustix::io::Errno;
use rustix::net::{recv, recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
use std::io::{self, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

pub const SOCKET_NAME: &str = "lazy-pages.socket";
const RESTORE_FINISHED: u32 = 0x5253_5446;

/// Listens on `dir/lazy-pages.socket`. Bound through the directory's fd, so a deep `dir`
/// does not hit the 108-byte limit of socket paths.
pub fn listen(dir: &Path) -> io::Result<UnixListener> {
    let path = dir.join(SOCKET_NAME);
    let _ = std::fs::remove_file(&path);
    let dir_fd = std::fs::File::open(dir)?;
    let short = format!("/proc/self/fd/{}/{SOCKET_NAME}", dir_fd.as_raw_fd());
    let listener = UnixListener::bind(short)?;
    // Only root may hand us userfaultfds.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

#[derive(Debug)]
pub enum Hello {
    Task {
        pid: u32,
        uffd: OwnedFd,
    },
    Zombie,
    Finished,
    /// criu closed the connection (a failed restore).
    Closed,
}

/// Reads the next message of the protocol (blocking).
pub fn next(conn: &UnixStream) -> io::Result<Hello> {
    let mut word = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = match recv(conn, &mut word[got..], RecvFlags::empty()) {
            Ok((n, _)) => n,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            return Ok(Hello::Closed);
        }
        got += n;
    }
    let value = u32::from_ne_bytes(word);
    if value == RESTORE_FINISHED {
        return Ok(Hello::Finished);
    }
    let pid = value.cast_signed();
    if pid <= 0 {
        return Ok(Hello::Zombie);
    }
    let uffd = recv_fd(conn.as_fd())?;
    Ok(Hello::Task {
        pid: pid.cast_unsigned(),
        uffd,
    })
}

fn recv_fd(sock: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = loop {
        // CLOEXEC keeps the fd out of children.
        match recvmsg(
            sock,
            &mut [IoSliceMut::new(&mut byte)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Err(Errno::INTR) => continue,
            r => break r?,
        }
    };
    if received.bytes == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "criu closed the lazy-pages socket before sending a userfaultfd",
        ));
    }
    let fd = control
        .drain()
        .find_map(|msg| match msg {
            RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
            _ => None,
        })
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "criu sent no userfaultfd"))?;
    let flags = rustix::fs::fcntl_getfl(&fd)?;
    rustix::fs::fcntl_setfl(&fd, flags | rustix::fs::OFlags::NONBLOCK)?;
    Ok(fd)
}
