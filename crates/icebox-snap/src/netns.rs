//! The network namespace of a dumped instance holds nothing but its loopback device (crun
//! makes it so when the action has no network). Dumped with `--empty-ns net`, criu neither
//! saves nor restores its configuration (it runs `ip` and `iptables-restore` several times for
//! that); the restore gets a fresh namespace, whose loopback icebox brings up as crun did.

use rustix::net::{socket_with, AddressFamily, SocketFlags, SocketType};
use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};
use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// Whether the network namespace of `pid` has no device but `lo`.
pub fn only_loopback(pid: u32) -> io::Result<bool> {
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/dev"))?;
    Ok(table
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .all(|name| name.trim() == "lo"))
}

/// Whether the loopback device of `pid`'s network namespace is up.
#[expect(
    clippy::cast_possible_truncation,
    reason = "IFF_UP is 1: it fits in the short ifr_flags"
)]
pub fn loopback_up(pid: u32) -> io::Result<bool> {
    in_netns(pid, |sock| Ok(lo_flags(sock)? & libc::IFF_UP as i16 != 0))
}

/// Brings the loopback device of `pid`'s network namespace up (127.0.0.1 and ::1 come with it).
#[expect(
    clippy::cast_possible_truncation,
    reason = "IFF_UP is 1: it fits in the short ifr_flags"
)]
pub fn set_loopback_up(pid: u32) -> io::Result<()> {
    in_netns(pid, |sock| {
        let mut req = lo_request();
        // SAFETY: ioctls on our socket with a filled ifreq.
        unsafe {
            if libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut req) != 0 {
                return Err(io::Error::last_os_error());
            }
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as i16;
            if libc::ioctl(sock, libc::SIOCSIFFLAGS, &req) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    })
}

#[expect(
    clippy::cast_possible_wrap,
    reason = "bytes of a name copied into a C char array: the bits are what matter"
)]
fn lo_request() -> libc::ifreq {
    // SAFETY: ifreq is plain data.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    req
}

fn lo_flags(sock: i32) -> io::Result<i16> {
    let mut req = lo_request();
    // SAFETY: ioctl on our socket with a filled ifreq.
    if unsafe { libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut req) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFFLAGS filled the flags member.
    Ok(unsafe { req.ifr_ifru.ifru_flags })
}

/// Runs `f` with a socket in the network namespace of `pid`, on a thread of its own (a
/// thread's namespace is its own; the thread ends with it).
fn in_netns<T: Send + 'static>(
    pid: u32,
    f: impl FnOnce(i32) -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
    std::thread::spawn(move || {
        // Affects only this thread.
        move_into_link_name_space(ns.as_fd(), Some(LinkNameSpaceType::Network))?;
        let sock = socket_with(
            AddressFamily::INET,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC,
            None,
        )?;
        f(sock.as_raw_fd())
    })
    .join()
    .map_err(|_| io::Error::other("network namespace helper panicked"))?
}
