//! The fallback for kernels without PAGEMAP_SCAN: the 8-byte entries of `/proc/PID/pagemap`
//! (Documentation/admin-guide/mm/pagemap.rst), read for the private mappings of
//! `/proc/PID/maps`.
//!
//! The shared zero page (a never-written page that was read) is told apart by its page frame
//! number, which only CAP_SYS_ADMIN sees: without it such pages count as present here.

use super::vmas::{read_vmas, VmaKind};
use super::{explain, open_pagemap, AnonPages};
use crate::pageset::{PageSet, PAGE_SIZE};
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

const PM_PRESENT: u64 = 1 << 63;
const PM_SWAP: u64 = 1 << 62;
/// File page or shared anonymous page.
const PM_FILE: u64 = 1 << 61;
/// Linux 6.14+: a guard region marker, not a swapped page.
const PM_GUARD_REGION: u64 = 1 << 58;

const PM_PFN: u64 = (1 << 55) - 1;

/// Entries read per `pread` (512 KiB, 256 MiB of address space).
const ENTRIES_PER_READ: u64 = 64 << 10;

/// The present and swapped anonymous pages of `pid` (within `within`, if given) from its
/// pagemap entries.
#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
pub(crate) fn anon_pages_from_entries(pid: u32, within: Option<&PageSet>) -> io::Result<AnonPages> {
    // Inaccessible reservations are skipped for cost (they can be huge and hold no pages).
    let vmas = read_vmas(pid)?;
    let mut ranges = PageSet::from_ranges(
        vmas.iter()
            .filter(|v| v.kind != VmaKind::None && v.accessible)
            .map(|v| (v.start, v.end)),
    );
    if let Some(within) = within {
        ranges = ranges.intersection(within);
    }
    let file = open_pagemap(pid)?;
    let zero_pfn = zero_pfn();
    let (mut present, mut swapped) = (Vec::new(), Vec::new());
    let mut buf = vec![0u8; (ENTRIES_PER_READ * 8) as usize];
    for &(start, end) in ranges.ranges() {
        let mut page = start / PAGE_SIZE;
        let last = end / PAGE_SIZE;
        while page < last {
            let count = (last - page).min(ENTRIES_PER_READ);
            let bytes = &mut buf[..(count * 8) as usize];
            file.read_exact_at(bytes, page * 8).map_err(|err| {
                // pagemap reads nothing once the process has exited.
                if err.kind() == io::ErrorKind::UnexpectedEof {
                    io::Error::from_raw_os_error(libc::ESRCH)
                } else {
                    explain(err, pid, "reading pagemap")
                }
            })?;
            for (i, entry) in bytes.chunks_exact(8).enumerate() {
                let entry = u64::from_ne_bytes(entry.try_into().expect("8 bytes"));
                let addr = (page + i as u64) * PAGE_SIZE;
                if entry & PM_FILE != 0 {
                    continue;
                }
                if entry & PM_PRESENT != 0 {
                    if zero_pfn.is_some_and(|pfn| entry & PM_PFN == pfn) {
                        continue;
                    }
                    push_page(&mut present, addr);
                } else if entry & PM_SWAP != 0 && entry & PM_GUARD_REGION == 0 {
                    push_page(&mut swapped, addr);
                }
            }
            page += count;
        }
    }
    Ok(AnonPages {
        present: PageSet::from_ranges(present),
        swapped: PageSet::from_ranges(swapped),
    })
}

/// The page frame number of the shared zero page, when this process may see frame numbers:
/// that of a fresh anonymous page of our own after a read.
#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
fn zero_pfn() -> Option<u64> {
    static ZERO_PFN: OnceLock<Option<u64>> = OnceLock::new();
    *ZERO_PFN.get_or_init(|| {
        let len = PAGE_SIZE as usize;
        // SAFETY: a new private anonymous mapping of one page, read once and unmapped; no
        // reference to it outlives this block.
        unsafe {
            let page = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if page == libc::MAP_FAILED {
                return None;
            }
            std::ptr::read_volatile(page as *const u8);
            let entry = read_own_entry(page as u64);
            libc::munmap(page, len);
            entry
                .filter(|e| e & PM_PRESENT != 0 && e & PM_PFN != 0)
                .map(|e| e & PM_PFN)
        }
    })
}

fn read_own_entry(addr: u64) -> Option<u64> {
    let file = std::fs::File::open("/proc/self/pagemap").ok()?;
    let mut entry = [0u8; 8];
    file.read_exact_at(&mut entry, addr / PAGE_SIZE * 8).ok()?;
    Some(u64::from_ne_bytes(entry))
}

/// Appends a page, extending the last range when adjacent (entries come in address order).
fn push_page(ranges: &mut Vec<(u64, u64)>, addr: u64) {
    match ranges.last_mut() {
        Some(last) if last.1 == addr => last.1 += PAGE_SIZE,
        _ => ranges.push((addr, addr + PAGE_SIZE)),
    }
}
