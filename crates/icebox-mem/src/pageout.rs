//! Paging out ranges of another process: `process_madvise(pidfd, iov, n, MADV_PAGEOUT, 0)`.
//!
//! The kernel reclaims the pages of each range right away: clean file pages are dropped
//! (re-read from the file on the next access), anonymous pages go to swap if there is any.
//! Pages that other processes also map are skipped by the kernel. It works on stopped and
//! cgroup-frozen processes alike, since it acts on the address space, not the task.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// What a [`pageout`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageoutReport {
    /// Ranges advised in full.
    pub ranges: usize,
    /// Ranges the kernel refused (unmapped since they were listed, or mlocked / special
    /// mappings it cannot page out), including any it advised only in part.
    pub skipped: usize,
    /// Bytes of address space advised. The memory actually freed is at most this: pages that
    /// were not resident, or are shared with another process, stay as they were.
    pub bytes_advised: u64,
}

/// The kernel's limit on iovecs per call (UIO_MAXIOV).
const IOV_MAX: usize = libc::UIO_MAXIOV as usize;

/// Advises `MADV_PAGEOUT` on each `(start, end)` range of `pid`'s address space. Empty
/// ranges are ignored.
///
/// A range the kernel refuses with `EINVAL` or `ENOMEM` (typically: the process unmapped it
/// after it was listed) is counted in `skipped` and the rest continue. Paging out another
/// process needs `CAP_SYS_NICE` and ptrace read access to it: without them this fails with
/// `PermissionDenied`. A process that is gone fails with `ESRCH`.
#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
pub fn pageout(pid: u32, ranges: &[(u64, u64)]) -> io::Result<PageoutReport> {
    let iovs: Vec<libc::iovec> = ranges
        .iter()
        .filter(|(start, end)| end > start)
        .map(|&(start, end)| libc::iovec {
            iov_base: start as *mut libc::c_void,
            iov_len: (end - start) as usize,
        })
        .collect();
    let mut report = PageoutReport::default();
    if iovs.is_empty() {
        return Ok(report);
    }
    let pidfd = pidfd_open(pid)?;
    // The kernel stops at the first range it refuses and returns the bytes advised before
    // it (or the error, if that was the first range): resume from where it stopped.
    let mut cursor = Cursor { index: 0, done: 0 };
    while cursor.index < iovs.len() {
        let batch = cursor.batch(&iovs);
        match process_madvise(&pidfd, &batch) {
            Ok(0) => cursor.skip(&mut report),
            Ok(advised) => cursor.advance(&iovs, advised as u64, &mut report),
            Err(err) => match err.raw_os_error() {
                Some(libc::EINTR) => {}
                Some(libc::EINVAL | libc::ENOMEM) => cursor.skip(&mut report),
                _ => return Err(explain(err, pid)),
            },
        }
    }
    Ok(report)
}

/// Position in the iovec list: the first range not finished and the bytes of it already done.
struct Cursor {
    index: usize,
    done: u64,
}

impl Cursor {
    /// Up to [`IOV_MAX`] iovecs from the cursor, the first one trimmed to its undone part.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
    )]
    fn batch(&self, iovs: &[libc::iovec]) -> Vec<libc::iovec> {
        let end = iovs.len().min(self.index + IOV_MAX);
        let mut batch = iovs[self.index..end].to_vec();
        let first = &mut batch[0];
        first.iov_base = (first.iov_base as u64 + self.done) as *mut libc::c_void;
        first.iov_len -= self.done as usize;
        batch
    }

    fn advance(&mut self, iovs: &[libc::iovec], mut bytes: u64, report: &mut PageoutReport) {
        report.bytes_advised += bytes;
        while let Some(iov) = iovs.get(self.index) {
            let left = iov.iov_len as u64 - self.done;
            if bytes < left {
                self.done += bytes;
                return;
            }
            bytes -= left;
            report.ranges += 1;
            self.index += 1;
            self.done = 0;
        }
    }

    fn skip(&mut self, report: &mut PageoutReport) {
        report.skipped += 1;
        self.index += 1;
        self.done = 0;
    }
}

fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    let raw = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
    rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::empty())
        .map_err(|e| explain(e.into(), pid))
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
fn process_madvise(pidfd: &OwnedFd, iovs: &[libc::iovec]) -> io::Result<usize> {
    // SAFETY: `iovs` is a valid array of `iovs.len()` iovecs; the kernel only reads it, and the
    // addresses in it are interpreted in the target's address space, never dereferenced here.
    let n = unsafe {
        libc::syscall(
            libc::SYS_process_madvise,
            pidfd.as_raw_fd(),
            iovs.as_ptr(),
            iovs.len(),
            libc::MADV_PAGEOUT,
            0u32,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n.unsigned_abs() as usize)
    }
}

/// Turns the errors a caller can act on into clear ones; `ESRCH` stays raw so that
/// "the process is gone" can still be recognised.
fn explain(err: io::Error, pid: u32) -> io::Error {
    match err.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "process_madvise(MADV_PAGEOUT) on pid {pid}: {err}; paging out another process \
                 needs CAP_SYS_NICE and ptrace read access to it (run the daemon as root)"
            ),
        ),
        Some(libc::ENOSYS) => io::Error::new(
            io::ErrorKind::Unsupported,
            format!("pidfd_open/process_madvise: {err}; Linux 5.10 or later is required"),
        ),
        _ => err,
    }
}

#[cfg(test)]
mod tests;
