//! Which anonymous pages of a process are present and which are swapped, from its page tables.
//!
//! The `PAGEMAP_SCAN` ioctl on `/proc/PID/pagemap` (Linux 6.7+) returns these as merged
//! ranges: a whole address space in a few milliseconds per GiB. On older kernels the 8-byte
//! entries of `/proc/PID/pagemap` are read instead, for the private mappings of
//! `/proc/PID/maps`. Neither needs the page frame numbers, so neither needs CAP_SYS_ADMIN,
//! only ptrace read access to the process.

use crate::pageset::{PageSet, PAGE_SIZE};
use icebox_core::units::MIB;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::OnceLock;

mod entries;
mod vmas;

pub(crate) use entries::anon_pages_from_entries;

/// The anonymous pages of a process: in RAM, and in swap.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AnonPages {
    /// Anonymous pages in RAM (the shared zero page excluded: it costs nothing).
    pub present: PageSet,
    /// Anonymous pages in swap.
    pub swapped: PageSet,
}

/// The present and swapped anonymous pages of `pid`'s whole address space (its private
/// mappings at the time of the call).
///
/// A process that is gone fails with `ENOENT` or `ESRCH` (raw OS errors, so that callers can
/// tell); other errors name the pid.
pub fn anon_pages(pid: u32) -> io::Result<AnonPages> {
    match scanner() {
        Some(scanner) => scanner.scan(pid, None),
        None => anon_pages_from_entries(pid, None),
    }
}

/// The present and swapped anonymous pages of `pid` within `within`.
pub fn anon_pages_in(pid: u32, within: &PageSet) -> io::Result<AnonPages> {
    if within.is_empty() {
        return Ok(AnonPages::default());
    }
    match scanner() {
        Some(scanner) => scanner.scan(pid, Some(within)),
        None => anon_pages_from_entries(pid, Some(within)),
    }
}

/// Ranges closer than this are scanned as one: a walk over a gap this small costs less than
/// another ioctl (one page-table page covers 2 MiB).
const SPAN_GAP: u64 = 2 * MIB;

/// The ranges of `set`, with gaps shorter than `gap` bridged.
fn spans(set: &PageSet, gap: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &(start, end) in set.ranges() {
        match out.last_mut() {
            Some(last) if start - last.1 < gap => last.1 = end,
            _ => out.push((start, end)),
        }
    }
    out
}

/// Opens `/proc/PID/pagemap` (ptrace read access is checked at open).
pub(crate) fn open_pagemap(pid: u32) -> io::Result<File> {
    File::open(format!("/proc/{pid}/pagemap")).map_err(|err| explain(err, pid, "opening pagemap"))
}

/// Keeps "the process is gone" (`ENOENT`, `ESRCH`) raw and recognisable; names the pid in
/// every other error.
pub(crate) fn explain(err: io::Error, pid: u32, what: &str) -> io::Error {
    match err.raw_os_error() {
        Some(libc::ENOENT | libc::ESRCH) => err,
        Some(libc::EPERM | libc::EACCES) => io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{what} of pid {pid}: {err}; reading another process's page tables needs ptrace read access to it"),
        ),
        _ => io::Error::new(err.kind(), format!("{what} of pid {pid}: {err}")),
    }
}

/// Whether `err` says the process is gone.
pub(crate) fn is_gone(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOENT | libc::ESRCH))
}

// uapi linux/fs.h
const PAGE_IS_FILE: u64 = 1 << 2;
const PAGE_IS_PRESENT: u64 = 1 << 3;
const PAGE_IS_SWAPPED: u64 = 1 << 4;
const PAGE_IS_PFNZERO: u64 = 1 << 5;
/// Linux 6.14+: guard regions (MADV_GUARD_INSTALL) are swap-like markers, not swapped pages.
const PAGE_IS_GUARD: u64 = 1 << 8;

#[repr(C)]
#[derive(Default)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

/// `_IOWR('f', 16, struct pm_scan_arg)`.
const PAGEMAP_SCAN: u64 =
    (3 << 30) | ((std::mem::size_of::<PmScanArg>() as u64) << 16) | ((b'f' as u64) << 8) | 16;

/// Regions returned per ioctl; a full vector is resumed from `walk_end`.
const REGIONS_PER_CALL: usize = 4096;

/// What this kernel's PAGEMAP_SCAN accepts, found once on our own pagemap.
#[derive(Debug, Clone, Copy)]
struct Scanner {
    /// Whether it knows PAGE_IS_GUARD (6.14+): unknown categories are refused.
    guard: bool,
}

/// The scanner, or `None` when the kernel has no PAGEMAP_SCAN (before 6.7).
fn scanner() -> Option<Scanner> {
    static SCANNER: OnceLock<Option<Scanner>> = OnceLock::new();
    *SCANNER.get_or_init(detect)
}

fn detect() -> Option<Scanner> {
    let file = File::open("/proc/self/pagemap").ok()?;
    let here = 0u8;
    let page = (&here as *const u8 as u64) / PAGE_SIZE * PAGE_SIZE;
    for guard in [true, false] {
        let scanner = Scanner { guard };
        let mut vec = [PageRegion::default(); 1];
        match scanner.ioctl(
            &file,
            (page, page + PAGE_SIZE),
            scanner.return_mask(true),
            &mut vec,
        ) {
            Ok(_) => return Some(scanner),
            Err(err) if err.raw_os_error() == Some(libc::EINVAL) && guard => continue,
            Err(_) => return None,
        }
    }
    None
}

impl Scanner {
    fn return_mask(&self, file: bool) -> u64 {
        let mut mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED | PAGE_IS_PFNZERO;
        if file {
            mask |= PAGE_IS_FILE;
        }
        if self.guard {
            mask | PAGE_IS_GUARD
        } else {
            mask
        }
    }

    /// One PAGEMAP_SCAN call: the regions filled and where the walk stopped.
    fn ioctl(
        &self,
        file: &File,
        (start, end): (u64, u64),
        return_mask: u64,
        vec: &mut [PageRegion],
    ) -> io::Result<(usize, u64)> {
        let mut arg = PmScanArg {
            size: std::mem::size_of::<PmScanArg>() as u64,
            start,
            end,
            vec: vec.as_mut_ptr() as u64,
            vec_len: vec.len() as u64,
            category_anyof_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
            return_mask,
            ..PmScanArg::default()
        };
        loop {
            // SAFETY: `arg` is a valid pm_scan_arg whose `vec` points at `vec.len()` writable
            // page_regions; the kernel writes at most that many and updates `walk_end`.
            let n = unsafe { libc::ioctl(file.as_raw_fd(), PAGEMAP_SCAN as _, &mut arg) };
            if n >= 0 {
                return Ok((n.unsigned_abs() as usize, arg.walk_end));
            }
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                return Err(err);
            }
        }
    }

    /// The anonymous pages of `pid`'s private mappings (within `within`, if given): the
    /// anonymous mappings scanned without the file-page test, the file ones with it.
    fn scan(&self, pid: u32, within: Option<&PageSet>) -> io::Result<AnonPages> {
        let (mut anon, mut file_backed) = vmas::private_mappings(pid)?;
        if let Some(within) = within {
            anon = anon.intersection(within);
            file_backed = file_backed.intersection(within);
        }
        let pagemap = open_pagemap(pid)?;
        let mut vec = vec![PageRegion::default(); REGIONS_PER_CALL];
        let mut pages = AnonPages::default();
        for (mappings, file) in [(anon, false), (file_backed, true)] {
            let (mut present, mut swapped) = (Vec::new(), Vec::new());
            for span in spans(&mappings, SPAN_GAP) {
                let mut cursor = span.0;
                while cursor < span.1 {
                    let (n, walk_end) = self
                        .ioctl(&pagemap, (cursor, span.1), self.return_mask(file), &mut vec)
                        .map_err(|err| explain(err, pid, "PAGEMAP_SCAN"))?;
                    for region in &vec[..n] {
                        classify(region, &mut present, &mut swapped);
                    }
                    if walk_end <= cursor {
                        break;
                    }
                    cursor = walk_end;
                }
            }
            // Bridged gaps may reach into mappings of the other kind.
            let present = PageSet::from_ranges(present).intersection(&mappings);
            let swapped = PageSet::from_ranges(swapped).intersection(&mappings);
            pages.present = pages.present.union(&present);
            pages.swapped = pages.swapped.union(&swapped);
        }
        Ok(pages)
    }
}

fn classify(region: &PageRegion, present: &mut Vec<(u64, u64)>, swapped: &mut Vec<(u64, u64)>) {
    let c = region.categories;
    if c & PAGE_IS_FILE != 0 {
        return;
    }
    if c & PAGE_IS_PRESENT != 0 && c & PAGE_IS_PFNZERO == 0 {
        present.push((region.start, region.end));
    } else if c & PAGE_IS_SWAPPED != 0 && c & PAGE_IS_GUARD == 0 {
        swapped.push((region.start, region.end));
    }
}

#[cfg(test)]
mod tests;
