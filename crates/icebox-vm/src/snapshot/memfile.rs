//! The guest RAM file of a snapshot: written sparse (zero pages become holes, so a restored
//! guest touching one costs no disk read and the loader never reads one), its data ranges
//! (SEEK_DATA/SEEK_HOLE), and the host page cache around it (dropped, filled, counted).

use icebox_core::units::MIB_USIZE;
use icebox_snap::loadset::is_zero;
use rustix::fs::SeekFrom;
use rustix::io::Errno;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

pub use icebox_core::units::PAGE;
/// Bytes read or written per system call when streaming a file.
const CHUNK: usize = MIB_USIZE;

/// What copying a RAM file found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyStats {
    pub bytes: u64,
    /// Pages written (non-zero).
    pub data_pages: u64,
    /// Pages the source held that were all zeros (left as holes).
    pub zero_pages: u64,
}

/// Byte ranges `(start, end)` of `file` that hold data (the rest are holes), in order.
pub fn data_ranges(file: &File) -> io::Result<Vec<(u64, u64)>> {
    let len = file.metadata()?.len();
    let mut ranges = Vec::new();
    let mut at = 0u64;
    while at < len {
        let start = match rustix::fs::seek(file, SeekFrom::Data(at)) {
            Ok(start) => start,
            Err(Errno::NXIO) => break, // no data past `at`
            Err(e) => return Err(e.into()),
        };
        let end = rustix::fs::seek(file, SeekFrom::Hole(start))?.min(len);
        if end > start {
            ranges.push((start, end));
        }
        at = end;
    }
    Ok(ranges)
}

/// Copies the RAM file `src` to a new file `dst` with only its non-zero pages written,
/// synced: the pages must be on disk before a restore can be measured with a cold cache
/// (dirty pages cannot be dropped from it).
#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
pub fn copy_sparse(src: &Path, dst: &Path) -> io::Result<CopyStats> {
    let input = File::open(src)?;
    let len = input.metadata()?.len();
    let output = File::options().write(true).create_new(true).open(dst)?;
    let mut stats = CopyStats {
        bytes: len,
        ..Default::default()
    };
    let mut buf = vec![0u8; CHUNK];
    for (start, end) in data_ranges(&input)? {
        let (start, end) = (start / PAGE * PAGE, end.div_ceil(PAGE) * PAGE);
        let mut at = start;
        while at < end {
            let want = ((end - at) as usize).min(CHUNK);
            let got = read_full(&input, &mut buf[..want], at)?;
            // Runs of non-zero pages go out in one write each.
            let mut run: Option<usize> = None;
            for (i, page) in buf[..got].chunks(PAGE as usize).enumerate() {
                let off = i * PAGE as usize;
                if is_zero(page) {
                    stats.zero_pages += 1;
                    if let Some(from) = run.take() {
                        output.write_all_at(&buf[from..off], at + from as u64)?;
                    }
                } else {
                    stats.data_pages += 1;
                    run.get_or_insert(off);
                }
            }
            if let Some(from) = run {
                output.write_all_at(&buf[from..got], at + from as u64)?;
            }
            if got < want {
                break; // the file ended early (cannot happen with the size read above)
            }
            at += got as u64;
        }
    }
    output.set_len(len)?;
    output.sync_all()?;
    Ok(stats)
}

fn read_full(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], at + got as u64)? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

/// Which pages of a file hold data: one bit per page.
pub struct DataMap {
    bits: Vec<u64>,
    pages: u64,
}

impl DataMap {
    #[expect(
        clippy::cast_possible_truncation,
        reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
    )]
    pub fn of(file: &File) -> io::Result<DataMap> {
        let pages = file.metadata()?.len().div_ceil(PAGE);
        let mut map = DataMap {
            bits: vec![0; pages.div_ceil(64) as usize],
            pages,
        };
        for (start, end) in data_ranges(file)? {
            for page in start / PAGE..end.div_ceil(PAGE).min(pages) {
                map.bits[(page / 64) as usize] |= 1 << (page % 64);
            }
        }
        Ok(map)
    }

    pub fn has_data(&self, page: u64) -> bool {
        page < self.pages && self.bits[(page / 64) as usize] & (1 << (page % 64)) != 0
    }

    pub fn data_pages(&self) -> u64 {
        self.bits.iter().map(|w| u64::from(w.count_ones())).sum()
    }
}

/// Drops the file's pages from the host page cache (pages some process maps stay).
pub fn drop_cache(file: &File) -> io::Result<()> {
    rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed)?;
    Ok(())
}

/// Reads `len` bytes at `offset` so they are in the page cache; returns the bytes read.
/// `stop` is checked between chunks (a destroyed instance's loader ends early).
#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
pub fn read_into_cache(
    file: &File,
    offset: u64,
    len: u64,
    buf: &mut [u8],
    stop: &dyn Fn() -> bool,
) -> io::Result<u64> {
    let mut done = 0u64;
    while done < len {
        if stop() {
            break;
        }
        let want = ((len - done) as usize).min(buf.len());
        let got = read_full(file, &mut buf[..want], offset + done)?;
        done += got as u64;
        if got < want {
            break;
        }
    }
    Ok(done)
}

/// A read-only shared mapping of a file, to ask the kernel which of its pages are in the page
/// cache (mincore): FaaSnap's host page recording, and the residency figures.
pub struct Residency {
    addr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and only passed to mincore, never dereferenced.
unsafe impl Send for Residency {}
// SAFETY: shared references only pass the address to mincore, which reads no memory through it.
unsafe impl Sync for Residency {}

impl Residency {
    #[expect(
        clippy::cast_possible_truncation,
        reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
    )]
    pub fn map(file: &File) -> io::Result<Residency> {
        let len = file.metadata()?.len() as usize;
        if len == 0 {
            return Err(io::Error::other("an empty memory file"));
        }
        // SAFETY: a new read-only shared mapping of a file we hold; unmapped in Drop.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Residency { addr, len })
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
    )]
    pub fn pages(&self) -> usize {
        self.len.div_ceil(PAGE as usize)
    }

    /// One byte per page, bit 0 set when the page is in the page cache.
    pub fn scan(&self, out: &mut Vec<u8>) -> io::Result<()> {
        out.resize(self.pages(), 0);
        // SAFETY: addr/len is our mapping; out has one byte per page.
        let r = unsafe { libc::mincore(self.addr, self.len, out.as_mut_ptr()) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn resident_pages(&self) -> io::Result<u64> {
        let mut v = Vec::new();
        self.scan(&mut v)?;
        Ok(v.iter().filter(|b| *b & 1 != 0).count() as u64)
    }
}

impl Drop for Residency {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A "RAM file" of 64 pages: pages 3, 4 and 40 hold data, page 10 was written with zeros.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
    )]
    fn ram(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("ram");
        let f = File::create(&path).unwrap();
        f.set_len(64 * PAGE).unwrap();
        f.write_all_at(&[7u8; 2 * PAGE as usize], 3 * PAGE).unwrap();
        f.write_all_at(&[0u8; PAGE as usize], 10 * PAGE).unwrap();
        let mut last = vec![0u8; PAGE as usize];
        last[PAGE as usize - 1] = 1;
        f.write_all_at(&last, 40 * PAGE).unwrap();
        path
    }

    #[test]
    fn a_sparse_copy_keeps_the_content_and_leaves_zero_pages_as_holes() {
        let dir = tempfile::tempdir().unwrap();
        let src = ram(dir.path());
        let dst = dir.path().join("copy");
        let stats = copy_sparse(&src, &dst).unwrap();
        assert_eq!(stats.bytes, 64 * PAGE);
        assert_eq!(stats.data_pages, 3);
        assert_eq!(std::fs::read(&src).unwrap(), std::fs::read(&dst).unwrap());
        let copy = File::open(&dst).unwrap();
        let map = DataMap::of(&copy).unwrap();
        assert_eq!(map.data_pages(), 3);
        assert!(map.has_data(3) && map.has_data(4) && map.has_data(40));
        assert!(!map.has_data(10) && !map.has_data(0) && !map.has_data(63));
        assert!(!map.has_data(64));
        assert!(copy_sparse(&src, &dst).is_err(), "never overwrites");
    }

    #[test]
    #[expect(
        clippy::cast_possible_truncation,
        reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
    )]
    fn residency_sees_pages_read_and_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = ram(dir.path());
        let f = File::open(&path).unwrap();
        let res = Residency::map(&f).unwrap();
        assert_eq!(res.pages(), 64);
        let mut buf = vec![0u8; 8 * PAGE as usize];
        let read = read_into_cache(&f, 0, 64 * PAGE, &mut buf, &|| false).unwrap();
        assert_eq!(read, 64 * PAGE);
        assert_eq!(res.resident_pages().unwrap(), 64);
        // Just written, so dirty: they stay in the cache. Only check the call is accepted.
        drop_cache(&f).unwrap();
        let stopped = read_into_cache(&f, 0, 64 * PAGE, &mut buf, &|| true).unwrap();
        assert_eq!(stopped, 0);
    }
}
