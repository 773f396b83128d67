//! Where a page's data is: the loading set file (read ahead by the loader, so likely in the
//! page cache) or the task's pages image. Both are mapped read-only into this process and used
//! directly as the source of UFFDIO_COPY, so a page is copied once, from the page cache into
//! the task. A file with checksums has each 64 KiB chunk checked the first time anything of
//! it is installed.

use crate::checksum::{self, FileSums, CHUNK};
use crate::image::TaskMemory;
use crate::PAGE_SIZE;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// A read-only private mapping of a whole file.
pub struct Mapped {
    ptr: *mut u8,
    len: usize,
    /// The file's name (for errors) and sums, if it has any.
    name: String,
    sums: Option<FileSums>,
    /// Chunks checked already.
    checked: Vec<AtomicBool>,
}

// SAFETY: the mapping is read-only and lives until drop; sharing its address is sound.
unsafe impl Send for Mapped {}
// SAFETY: through `&Mapped` threads only read the read-only mapping, and the one piece of
// mutable state, `checked`, is atomics.
unsafe impl Sync for Mapped {}

impl Mapped {
    #[expect(
        clippy::cast_possible_truncation,
        reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
    )]
    pub fn open(path: &Path) -> io::Result<Mapped> {
        let file = File::open(path)?;
        let len = file.metadata()?.len() as usize;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if len == 0 {
            return Ok(Mapped {
                ptr: std::ptr::null_mut(),
                len: 0,
                name,
                sums: None,
                checked: Vec::new(),
            });
        }
        // SAFETY: a fresh read-only mapping of a file we opened; checked for failure.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapped {
            ptr: ptr.cast(),
            len,
            name,
            sums: None,
            checked: Vec::new(),
        })
    }

    /// From now on every chunk is checked against `sums` before its bytes are used.
    pub fn with_sums(mut self, sums: FileSums) -> io::Result<Mapped> {
        if sums.bytes != self.len as u64 || !sums.consistent() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} holds {} bytes, {} were written",
                    self.name, self.len, sums.bytes
                ),
            ));
        }
        self.checked = (0..sums.crc32.len())
            .map(|_| AtomicBool::new(false))
            .collect();
        self.sums = Some(sums);
        Ok(self)
    }

    /// Checks the chunks that bytes `offset..offset + len` fall in (each chunk once).
    pub fn verify(&self, offset: u64, len: u64) -> io::Result<()> {
        let Some(sums) = &self.sums else {
            return Ok(());
        };
        for chunk in checksum::chunks_of(offset, len) {
            let Some(done) = self.checked.get(chunk) else {
                return Err(checksum::mismatch(&self.name, chunk, sums.bytes));
            };
            if done.load(Ordering::Acquire) {
                continue;
            }
            let start = chunk as u64 * CHUNK;
            let n = (self.len as u64 - start).min(CHUNK);
            let ptr = self
                .at(start, n)
                .ok_or_else(|| checksum::mismatch(&self.name, chunk, sums.bytes))?;
            // SAFETY: `at` checked the range lies inside our read-only mapping.
            let data = unsafe { std::slice::from_raw_parts(ptr, n as usize) };
            checksum::check_chunk(&self.name, sums, chunk, data)?;
            done.store(true, Ordering::Release);
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Address of byte `offset`; `offset + len` must lie inside the file.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
    )]
    pub fn at(&self, offset: u64, len: u64) -> Option<*const u8> {
        (offset.checked_add(len)? <= self.len as u64 && len > 0).then(|| {
            // SAFETY: offset + len <= self.len, checked just above: the pointer stays inside
            // the mapping that `ptr` starts.
            unsafe { self.ptr.add(offset as usize) as *const u8 }
        })
    }

    /// Reads `offset..offset+len` into the page cache and this mapping now (the loader does
    /// it before taking the pager's lock, so copies under the lock do not wait for the disk).
    #[expect(
        clippy::cast_possible_truncation,
        reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
    )]
    pub fn populate(&self, offset: u64, len: u64) {
        let Some(ptr) = self.at(offset, len) else {
            return;
        };
        // SAFETY: advice on a range of our own mapping.
        let rc = unsafe { libc::madvise(ptr as *mut _, len as usize, libc::MADV_POPULATE_READ) };
        if rc != 0 {
            // Older kernels: touch one byte per page.
            for page in (0..len).step_by(PAGE_SIZE as usize) {
                // SAFETY: inside the mapping, checked by `at`.
                unsafe { std::ptr::read_volatile(ptr.add(page as usize)) };
            }
        }
    }

    /// Starts reading `offset..offset+len` in the background.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
    )]
    pub fn will_need(&self, offset: u64, len: u64) {
        let len = len.min((self.len as u64).saturating_sub(offset));
        if let Some(ptr) = self.at(offset, len) {
            // SAFETY: advice on a range of our own mapping.
            unsafe { libc::madvise(ptr as *mut _, len as usize, libc::MADV_WILLNEED) };
        }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: unmapping exactly what mmap returned.
            unsafe { libc::munmap(self.ptr.cast(), self.len) };
        }
    }
}

/// Data of one task: its image runs, overlaid by the loading set's regions of that task.
pub struct TaskSource {
    pub memory: TaskMemory,
    pages: Mapped,
    /// (image address, pages, offset in the loading set file), sorted by address.
    overlay: Vec<(u64, u64, u64)>,
}

/// Where a run of data starts and how many pages follow contiguously there.
pub struct Located<'a> {
    pub ptr: *const u8,
    pub pages: u64,
    pub from_loadset: bool,
    /// The file it is in and where, to check it before use.
    pub file: &'a Mapped,
    pub offset: u64,
}

impl TaskSource {
    /// Maps the task's pages file; with `sums`, its chunks are checked before use, those of
    /// pages CRIU installs itself (not lazy) right now.
    pub fn open(
        images: &Path,
        memory: TaskMemory,
        sums: Option<FileSums>,
    ) -> io::Result<TaskSource> {
        let mut pages = Mapped::open(&memory.pages_path(images))?;
        if pages.len() as u64 != memory.data_bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "pages-{}.img holds {} bytes, its pagemap says {}",
                    memory.pages_id,
                    pages.len(),
                    memory.data_bytes
                ),
            ));
        }
        if let Some(sums) = sums {
            pages = pages.with_sums(sums)?;
            for run in memory.stored().filter(|r| !r.lazy) {
                pages.verify(run.offset, run.pages * PAGE_SIZE)?;
            }
        }
        Ok(TaskSource {
            memory,
            pages,
            overlay: Vec::new(),
        })
    }

    pub fn add_overlay(&mut self, vaddr: u64, pages: u64, offset: u64) {
        self.overlay.push((vaddr, pages, offset));
    }

    pub fn sort_overlay(&mut self) {
        self.overlay.sort_unstable();
    }

    /// The data of image page `img` and how many following pages are contiguous with it.
    pub fn locate<'a>(&'a self, img: u64, loadset: Option<&'a Mapped>) -> Option<Located<'a>> {
        if let Some(loadset) = loadset {
            let i = self
                .overlay
                .partition_point(|(v, n, _)| v + n * PAGE_SIZE <= img);
            if let Some((v, n, off)) = self.overlay.get(i).filter(|(v, _, _)| *v <= img) {
                let skip = (img - v) / PAGE_SIZE;
                let offset = off + skip * PAGE_SIZE;
                if let Some(ptr) = loadset.at(offset, PAGE_SIZE) {
                    return Some(Located {
                        ptr,
                        pages: n - skip,
                        from_loadset: true,
                        file: loadset,
                        offset,
                    });
                }
            }
        }
        let stored = self.memory.locate(img)?;
        let ptr = self.pages.at(stored.offset, PAGE_SIZE)?;
        Some(Located {
            ptr,
            pages: stored.pages,
            from_loadset: false,
            file: &self.pages,
            offset: stored.offset,
        })
    }
}
