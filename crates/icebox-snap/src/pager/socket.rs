//! CRIU's side channel to a lazy-pages server (criu/uffd.c): `criu restore --lazy-pages`
//! connects to the UNIX stream socket `lazy-pages.socket` in its working directory and sends,
//! for each task, its pid (a native int) then its userfaultfd (SCM_RIGHTS, one dummy byte); a
//! zombie is a negative pid with no fd. When the restore is complete it sends the u32
//! `RESTORE_FINISHED`. Pids never reach that value, so the two cannot be confused.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
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
        // SAFETY: reads into the rest of a local buffer.
        let n = unsafe {
            libc::recv(
                conn.as_raw_fd(),
                word[got..].as_mut_ptr().cast(),
                4 - got,
                0,
            )
        };
        if n == 0 {
            return Ok(Hello::Closed);
        }
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(err);
        }
        got += n.cast_unsigned();
    }
    let value = u32::from_ne_bytes(word);
    if value == RESTORE_FINISHED {
        return Ok(Hello::Finished);
    }
    let pid = value.cast_signed();
    if pid <= 0 {
        return Ok(Hello::Zombie);
    }
    let uffd = recv_fd(conn.as_raw_fd())?;
    Ok(Hello::Task {
        pid: pid.cast_unsigned(),
        uffd,
    })
}

fn recv_fd(sock: RawFd) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // Room for one SCM_RIGHTS fd, aligned for cmsghdr.
    let mut control = [0u64; 4];
    // SAFETY: msghdr is plain data; zeroed is a valid empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    loop {
        // SAFETY: msg points at live local buffers; CLOEXEC keeps the fd out of children.
        let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(err);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "criu closed the lazy-pages socket before sending a userfaultfd",
            ));
        }
        break;
    }
    // SAFETY: walking the control buffer the kernel filled, with the libc macros.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "criu sent no userfaultfd",
            ));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const RawFd);
        let owned = OwnedFd::from_raw_fd(fd);
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(owned)
    }
}
