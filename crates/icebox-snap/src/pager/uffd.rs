//! userfaultfd ioctls and messages (include/uapi/linux/userfaultfd.h). The fds come from
//! `criu restore`, which has already done the UFFDIO_API handshake (with the fork, remap,
//! remove and unmap events) and registered the lazy VMAs; the pager only reads messages and
//! resolves faults.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

const UFFDIO: u64 = 0xAA;

const fn iowr(nr: u64, size: u64) -> u64 {
    (3 << 30) | (size << 16) | (UFFDIO << 8) | nr
}
const fn ior(nr: u64, size: u64) -> u64 {
    (2 << 30) | (size << 16) | (UFFDIO << 8) | nr
}

const UFFDIO_UNREGISTER: u64 = ior(0x01, 16);
const UFFDIO_WAKE: u64 = ior(0x02, 16);
const UFFDIO_COPY: u64 = iowr(0x03, 40);
const UFFDIO_ZEROPAGE: u64 = iowr(0x04, 32);

pub const EVENT_PAGEFAULT: u8 = 0x12;
pub const EVENT_FORK: u8 = 0x13;
pub const EVENT_REMAP: u8 = 0x14;
pub const EVENT_REMOVE: u8 = 0x15;
pub const EVENT_UNMAP: u8 = 0x16;

#[repr(C)]
struct Range {
    start: u64,
    len: u64,
}

#[repr(C)]
struct Copy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

#[repr(C)]
struct ZeroPage {
    range: Range,
    mode: u64,
    zeropage: i64,
}

/// One message read from a userfaultfd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msg {
    /// A thread faulted on a missing page (address not aligned).
    PageFault {
        address: u64,
    },
    /// The task forked: the child's address space has its own userfaultfd, now open in this
    /// process as `fd`.
    Fork {
        fd: i32,
    },
    /// mremap moved `len` bytes from `from` to `to`.
    Remap {
        from: u64,
        to: u64,
        len: u64,
    },
    /// madvise(DONTNEED/FREE/REMOVE) dropped the range; it stays registered.
    Remove {
        start: u64,
        end: u64,
    },
    /// munmap (or a mapping over it) removed the range.
    Unmap {
        start: u64,
        end: u64,
    },
    Unknown(u8),
}

pub const MSG_SIZE: usize = 32;

#[expect(
    clippy::cast_possible_wrap,
    reason = "the fd field of a userfaultfd message is an int the kernel wrote"
)]
pub fn parse(raw: &[u8; MSG_SIZE]) -> Msg {
    let u64_at = |at: usize| u64::from_ne_bytes(raw[at..at + 8].try_into().unwrap());
    let u32_at = |at: usize| u32::from_ne_bytes(raw[at..at + 4].try_into().unwrap());
    // struct uffd_msg: u8 event, 7 reserved bytes, then the 24-byte argument union.
    match raw[0] {
        EVENT_PAGEFAULT => Msg::PageFault {
            address: u64_at(16),
        },
        EVENT_FORK => Msg::Fork {
            fd: u32_at(8) as i32,
        },
        EVENT_REMAP => Msg::Remap {
            from: u64_at(8),
            to: u64_at(16),
            len: u64_at(24),
        },
        EVENT_REMOVE => Msg::Remove {
            start: u64_at(8),
            end: u64_at(16),
        },
        EVENT_UNMAP => Msg::Unmap {
            start: u64_at(8),
            end: u64_at(16),
        },
        other => Msg::Unknown(other),
    }
}

/// Reads every message available now (the fd is non-blocking).
pub fn read_msgs(fd: BorrowedFd<'_>, out: &mut Vec<Msg>) -> io::Result<()> {
    let mut buf = [[0u8; MSG_SIZE]; 32];
    loop {
        // SAFETY: reads into a local buffer of the given size.
        let n = unsafe {
            libc::read(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                std::mem::size_of_val(&buf),
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::EAGAIN) => Ok(()),
                Some(libc::EINTR) => continue,
                _ => Err(err),
            };
        }
        let n = n.cast_unsigned() / MSG_SIZE;
        out.extend(buf[..n].iter().map(parse));
        if n < buf.len() {
            return Ok(());
        }
    }
}

/// How an ioctl that installs pages ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Every byte installed.
    Done,
    /// Part installed (`bytes`), then `errno`.
    Partial { bytes: u64, errno: i32 },
}

fn fill_result(rc: i32, done: i64, len: u64) -> Fill {
    if rc == 0 {
        return Fill::Done;
    }
    let errno = io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO);
    let bytes = u64::try_from(done).unwrap_or(0);
    if bytes >= len {
        return Fill::Done;
    }
    Fill::Partial { bytes, errno }
}

/// UFFDIO_COPY of `len` bytes at `src` (page-aligned, in this process) to `dst`; wakes the
/// threads waiting there.
///
/// # Safety
/// `src..src+len` must be readable memory of this process.
pub unsafe fn copy(fd: BorrowedFd<'_>, dst: u64, src: *const u8, len: u64) -> Fill {
    let mut arg = Copy {
        dst,
        src: src as u64,
        len,
        mode: 0,
        copy: 0,
    };
    let rc = libc::ioctl(fd.as_raw_fd(), UFFDIO_COPY as _, &mut arg);
    fill_result(rc, arg.copy, len)
}

/// UFFDIO_ZEROPAGE: maps the zero page over the range and wakes its waiters.
pub fn zero(fd: BorrowedFd<'_>, start: u64, len: u64) -> Fill {
    let mut arg = ZeroPage {
        range: Range { start, len },
        mode: 0,
        zeropage: 0,
    };
    // SAFETY: the kernel reads and writes only the argument struct.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_ZEROPAGE as _, &mut arg) };
    fill_result(rc, arg.zeropage, len)
}

/// Wakes threads waiting on the range (after a fault another path already resolved).
pub fn wake(fd: BorrowedFd<'_>, start: u64, len: u64) -> io::Result<()> {
    let arg = Range { start, len };
    // SAFETY: the kernel only reads the argument struct.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_WAKE as _, &arg) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Unregisters the range: later faults there are ordinary (zero-fill) faults.
pub fn unregister(fd: BorrowedFd<'_>, start: u64, len: u64) -> io::Result<()> {
    let arg = Range { start, len };
    // SAFETY: the kernel only reads the argument struct.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_UNREGISTER as _, &arg) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether an errno from a fill means the address space is gone (the task exited or
/// exec'd).
pub fn is_gone(errno: i32) -> bool {
    errno == libc::ESRCH || errno == libc::ENOSPC
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_kernel_headers() {
        assert_eq!(UFFDIO_COPY, 0xc028_aa03);
        assert_eq!(UFFDIO_ZEROPAGE, 0xc020_aa04);
        assert_eq!(UFFDIO_UNREGISTER, 0x8010_aa01);
        assert_eq!(UFFDIO_WAKE, 0x8010_aa02);
    }

    #[test]
    fn messages_decode() {
        let mut raw = [0u8; MSG_SIZE];
        raw[0] = EVENT_REMAP;
        raw[8..16].copy_from_slice(&0x1000u64.to_ne_bytes());
        raw[16..24].copy_from_slice(&0x9000u64.to_ne_bytes());
        raw[24..32].copy_from_slice(&0x2000u64.to_ne_bytes());
        assert_eq!(
            parse(&raw),
            Msg::Remap {
                from: 0x1000,
                to: 0x9000,
                len: 0x2000
            }
        );
        raw[0] = EVENT_PAGEFAULT;
        raw[16..24].copy_from_slice(&0x7f00_1234u64.to_ne_bytes());
        assert_eq!(
            parse(&raw),
            Msg::PageFault {
                address: 0x7f00_1234
            }
        );
    }
}
