//! Keeping paged-out library pages in the page cache.
//!
//! Desiccant (§4.6) unmaps a frozen instance's private library pages: they leave the
//! instance's USS but stay in the page cache, so the next invocation faults them back in from
//! memory. `MADV_PAGEOUT` — the only advice `process_madvise` offers that unmaps another
//! process's file pages — also evicts them from the page cache when no one else maps them, and
//! the next invocation then waits for the disk (measured on a Node.js instance running fft: 12 MiB
//! of the `node` binary re-read in 21–25 major faults, 46–67 ms added to a 21 ms activation).
//!
//! So before a page-out, [`exclusive_file_pages`] notes which pages the kernel is about to
//! evict — resident, file-backed and mapped by this process alone (`/proc/PID/pagemap`) — and
//! after it [`recache`] asks for exactly those back into the page cache with
//! `posix_fadvise(POSIX_FADV_WILLNEED)`, asynchronous readahead that maps nothing into the
//! instance. The result is Desiccant's: the pages are out of the instance's USS, in the page
//! cache, where the kernel can still reclaim them first under memory pressure (unmapped clean
//! page cache is the cheapest memory it has).

use crate::FileMapping;
use icebox_core::units::{KIB, PAGE};
use rustix::fs::Advice;
use std::fs::File;
use std::io;
use std::num::NonZeroU64;
use std::os::unix::fs::FileExt;

/// `/proc/PID/pagemap` entry bits (Documentation/admin-guide/mm/pagemap.rst).
const PRESENT: u64 = 1 << 63;
const FILE_OR_SHARED_ANON: u64 = 1 << 61;
const EXCLUSIVELY_MAPPED: u64 = 1 << 56;
/// No larger than the smallest readahead window a block device is given (128 KiB by default).
const WILLNEED_STEP: u64 = 128 * KIB;

/// One mapping and the runs of its file, `(file offset, length)` in bytes, whose pages a
/// page-out of the mapping will evict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictedPages {
    pub start: u64,
    pub end: u64,
    pub runs: Vec<(u64, u64)>,
}

impl EvictedPages {
    pub fn bytes(&self) -> u64 {
        self.runs.iter().map(|r| r.1).sum()
    }
}

/// For each of `pid`'s `mappings`, the pages a page-out would evict: resident, file-backed,
/// mapped by this process alone. Mappings with none are left out.
pub fn exclusive_file_pages(pid: u32, mappings: &[&FileMapping]) -> io::Result<Vec<EvictedPages>> {
    let pagemap = File::open(format!("/proc/{pid}/pagemap"))?;
    let mut out = Vec::new();
    let mut buf = Vec::new();
    for &&FileMapping {
        start, end, offset, ..
    } in mappings
    {
        let pages = ((end.saturating_sub(start)) / PAGE) as usize;
        if pages == 0 {
            continue;
        }
        buf.resize(pages * 8, 0);
        // A mapping gone since it was listed reads short or fails: nothing to keep for it.
        match pagemap.read_exact_at(&mut buf, start / PAGE * 8) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => continue,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => continue,
            Err(e) => return Err(e),
        }
        let entries = buf
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()));
        let runs = evicted_runs(entries, offset);
        if !runs.is_empty() {
            out.push(EvictedPages { start, end, runs });
        }
    }
    Ok(out)
}

/// Coalesces the evictable pages of one mapping, given its pagemap entries in address order
/// and the file offset of its first page, into `(file offset, length)` runs.
pub fn evicted_runs(entries: impl Iterator<Item = u64>, offset: u64) -> Vec<(u64, u64)> {
    let evictable = PRESENT | FILE_OR_SHARED_ANON | EXCLUSIVELY_MAPPED;
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for (i, entry) in entries.enumerate() {
        if entry & evictable != evictable {
            continue;
        }
        let at = offset + i as u64 * PAGE;
        match runs.last_mut() {
            Some((o, len)) if *o + *len == at => *len += PAGE,
            _ => runs.push((at, PAGE)),
        }
    }
    runs
}

/// Starts reading `evicted` back into the page cache (asynchronous readahead); returns the
/// bytes asked for. Each file is opened through `/proc/PID/map_files/`, so it is the very
/// file the instance maps, whatever mount namespace it sees it through.
pub fn recache(pid: u32, evicted: &[EvictedPages]) -> io::Result<u64> {
    let mut asked = 0;
    for mapping in evicted {
        let file = match File::open(format!(
            "/proc/{pid}/map_files/{:x}-{:x}",
            mapping.start, mapping.end
        )) {
            Ok(f) => f,
            // Unmapped meanwhile, or the process is gone: nothing to keep.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for &(offset, len) in &mapping.runs {
            // The kernel reads at most one readahead window per call (the device's
            // read_ahead_kb or its largest I/O) and silently drops the rest: ask in steps.
            let mut done = 0;
            while done < len {
                let step = (len - done).min(WILLNEED_STEP);
                // A zero length would mean "to the end of the file"; `step` is never 0 here.
                if let Some(n) = NonZeroU64::new(step) {
                    rustix::fs::fadvise(&file, offset + done, Some(n), Advice::WillNeed)?;
                }
                done += step;
            }
            asked += len;
        }
    }
    Ok(asked)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVICTABLE: u64 = PRESENT | FILE_OR_SHARED_ANON | EXCLUSIVELY_MAPPED;

    #[test]
    fn runs_hold_only_resident_exclusive_file_pages_and_coalesce() {
        let entries = [
            EVICTABLE,
            EVICTABLE,
            PRESENT | FILE_OR_SHARED_ANON, // shared with another process: the kernel keeps it
            EVICTABLE,
            0,                            // not resident
            PRESENT | EXCLUSIVELY_MAPPED, // anonymous (a copy-on-write copy): not a file page
            EVICTABLE,
            EVICTABLE,
        ];
        let runs = evicted_runs(entries.into_iter(), 0x10_000);
        assert_eq!(
            runs,
            vec![
                (0x10_000, 2 * PAGE),
                (0x10_000 + 3 * PAGE, PAGE),
                (0x10_000 + 6 * PAGE, 2 * PAGE)
            ]
        );
        assert!(evicted_runs([0u64; 4].into_iter(), 0).is_empty());
    }
}
