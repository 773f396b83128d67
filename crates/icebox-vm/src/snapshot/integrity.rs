//! CRC-32 of a snapshot's guest RAM, per 64 KiB chunk with data, and the check before a
//! restore. QEMU maps the RAM file itself and faults pages in from it, so (unlike a process
//! restore, whose pager checks each chunk as it installs it) there is no moment between the
//! disk and the guest to check a page in: the whole file is checked before QEMU starts.
//!
//! That read would make every restore pay for the whole image, so a file that passed is
//! remembered by its identity and times (device, inode, size, mtime, ctime) and the snapshot's
//! id: any write through the file system changes the ctime, and a rebuilt snapshot has a new
//! id, so either is checked again. The check also leaves the page cache as it found it (pages
//! it read that were not cached are dropped again), so a restore measured with a cold cache
//! stays cold.

use super::memfile::{self, Residency, PAGE};
use icebox_snap::checksum::{mismatch, CHUNK};
use rustix::fs::Advice;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The file name errors give.
const NAME: &str = "memory";

/// CRC-32 of each chunk that holds data, by chunk index. Chunks left out are holes: zeros.
pub type ChunkSums = BTreeMap<u64, u32>;

/// Sums of the chunks of `file` that hold data.
#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
pub fn sums_of(file: &File) -> io::Result<ChunkSums> {
    let len = file.metadata()?.len();
    let mut buf = vec![0u8; CHUNK as usize];
    let mut sums = ChunkSums::new();
    for chunk in data_chunks(file)? {
        let data = read_chunk(file, chunk, len, &mut buf)?;
        sums.insert(chunk, crc32fast::hash(data));
    }
    Ok(sums)
}

/// What `verify` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// Read and compared this many chunks.
    Read(u64),
    /// The same file passed before and has not been written since.
    Unchanged,
}

/// Checks `file` (the RAM image at `path` of snapshot `id`) against `sums`: every chunk with
/// data now or when the snapshot was taken.
#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
pub fn verify(path: &Path, id: &str, file: &File, sums: &ChunkSums) -> io::Result<Checked> {
    let stamp = Stamp::of(file, id)?;
    if verified().lock().unwrap().get(path) == Some(&stamp) {
        return Ok(Checked::Unchanged);
    }
    let len = stamp.size;
    let mut chunks: BTreeSet<u64> = data_chunks(file)?.into_iter().collect();
    chunks.extend(sums.keys().copied());
    let cached = CacheGuard::new(file);
    let mut buf = vec![0u8; CHUNK as usize];
    let mut zeros = HashMap::new();
    for &chunk in &chunks {
        let data = read_chunk(file, chunk, len, &mut buf)?;
        let expected = match sums.get(&chunk) {
            Some(crc) => *crc,
            None => *zeros
                .entry(data.len())
                .or_insert_with(|| crc32fast::hash(&vec![0u8; data.len()])),
        };
        if crc32fast::hash(data) != expected {
            return Err(mismatch(NAME, chunk as usize, len));
        }
    }
    drop(cached);
    verified().lock().unwrap().insert(path.to_path_buf(), stamp);
    Ok(Checked::Read(chunks.len() as u64))
}

fn verified() -> &'static Mutex<HashMap<PathBuf, Stamp>> {
    static VERIFIED: OnceLock<Mutex<HashMap<PathBuf, Stamp>>> = OnceLock::new();
    VERIFIED.get_or_init(Default::default)
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    id: String,
}

impl Stamp {
    fn of(file: &File, id: &str) -> io::Result<Stamp> {
        let m = file.metadata()?;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Ok(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.len(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: ns(m.ctime(), m.ctime_nsec()),
            id: id.to_string(),
        })
    }
}

/// Chunks that hold any data (SEEK_DATA/SEEK_HOLE), in order.
fn data_chunks(file: &File) -> io::Result<Vec<u64>> {
    let mut chunks: Vec<u64> = Vec::new();
    for (start, end) in memfile::data_ranges(file)? {
        for chunk in start / CHUNK..end.div_ceil(CHUNK) {
            if chunks.last() != Some(&chunk) {
                chunks.push(chunk);
            }
        }
    }
    Ok(chunks)
}

fn read_chunk<'a>(file: &File, chunk: u64, len: u64, buf: &'a mut [u8]) -> io::Result<&'a [u8]> {
    let start = chunk * CHUNK;
    let n = len.saturating_sub(start).min(CHUNK) as usize;
    file.read_exact_at(&mut buf[..n], start)?;
    Ok(&buf[..n])
}

/// Notes which pages of a file are in the page cache and, when dropped, evicts the ones that
/// were not (pages a process maps stay: eviction is only advice).
struct CacheGuard<'a> {
    file: &'a File,
    before: Option<Vec<u8>>,
}

impl<'a> CacheGuard<'a> {
    fn new(file: &'a File) -> CacheGuard<'a> {
        let before = Residency::map(file).ok().and_then(|r| {
            let mut pages = Vec::new();
            r.scan(&mut pages).ok().map(|_| pages)
        });
        CacheGuard { file, before }
    }
}

impl Drop for CacheGuard<'_> {
    fn drop(&mut self) {
        let Some(before) = &self.before else { return };
        let mut page = 0;
        while page < before.len() {
            if before[page] & 1 != 0 {
                page += 1;
                continue;
            }
            let start = page;
            while page < before.len() && before[page] & 1 == 0 {
                page += 1;
            }
            let (offset, len) = (start as u64 * PAGE, (page - start) as u64 * PAGE);
            // A zero length would mean "to the end of the file".
            if let Some(len) = std::num::NonZeroU64::new(len) {
                let _ = rustix::fs::fadvise(self.file, offset, Some(len), Advice::DontNeed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::units::MIB;
    use rustix::fs::FallocateFlags;

    fn sparse_file(dir: &Path) -> (PathBuf, File) {
        let path = dir.join("memory");
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        file.set_len(4 * MIB).unwrap();
        file.write_all_at(&[7u8; 8192], MIB).unwrap();
        file.write_all_at(&[9u8; 4096], 3 * MIB).unwrap();
        (path, file)
    }

    #[test]
    fn sums_cover_only_chunks_with_data() {
        let dir = tempfile::tempdir().unwrap();
        let (_, file) = sparse_file(dir.path());
        let sums = sums_of(&file).unwrap();
        // tmpfs and ext4 report data at page granularity: the two written chunks.
        assert_eq!(sums.keys().copied().collect::<Vec<_>>(), vec![16, 48]);
    }

    #[test]
    fn an_intact_file_passes_and_is_then_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let (path, file) = sparse_file(dir.path());
        let sums = sums_of(&file).unwrap();
        assert_eq!(verify(&path, "a", &file, &sums).unwrap(), Checked::Read(2));
        assert_eq!(
            verify(&path, "a", &file, &sums).unwrap(),
            Checked::Unchanged
        );
        // Another snapshot id at the same path is read again.
        assert_eq!(verify(&path, "b", &file, &sums).unwrap(), Checked::Read(2));
    }

    #[test]
    fn garbage_in_data_or_in_a_hole_is_found_even_after_a_pass() {
        let dir = tempfile::tempdir().unwrap();
        let (path, file) = sparse_file(dir.path());
        let sums = sums_of(&file).unwrap();
        verify(&path, "a", &file, &sums).unwrap();
        // A write changes the ctime (wait past its granularity first).
        std::thread::sleep(std::time::Duration::from_millis(20));
        file.write_all_at(&[1u8; 100], MIB + 4000).unwrap();
        let e = verify(&path, "a", &file, &sums).unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
        assert!(e.to_string().contains("1048576"), "{e}");

        let dir = tempfile::tempdir().unwrap();
        let (path, file) = sparse_file(dir.path());
        let sums = sums_of(&file).unwrap();
        file.write_all_at(&[1u8; 4096], 2 * MIB).unwrap();
        let e = verify(&path, "a", &file, &sums).unwrap_err();
        assert!(e.to_string().contains("2097152"), "{e}");
    }

    #[test]
    fn data_punched_out_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let (path, file) = sparse_file(dir.path());
        let sums = sums_of(&file).unwrap();
        rustix::fs::fallocate(
            &file,
            FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            3 * MIB,
            4096,
        )
        .unwrap();
        assert!(verify(&path, "a", &file, &sums).is_err());
    }
}
