//! The loading set on disk: `loadset.img` holds the pages of every region back to back, in
//! load order (group, then address), so the loader reads it sequentially; `loadset.idx` says
//! which task and address each region belongs to and where its pages are in the file, with
//! the CRC-32 of every 64 KiB of loadset.img and of the index itself (a damaged loading set
//! is refused before a page of it is installed).

use crate::checksum::{self, FileSums, CHUNK};
use crate::image::TaskMemory;
use crate::loadset::{self, LoadingSet, MERGE_GAP_PAGES};
use crate::PAGE_SIZE;
use icebox_core::units::MIB_USIZE;
use prost::Message;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

pub const DATA_FILE: &str = "loadset.img";
pub const INDEX_FILE: &str = "loadset.idx";
/// Followed by the CRC-32 of the rest of the index (4 bytes, little-endian), then the index.
const INDEX_MAGIC: &[u8; 8] = b"ICBXLS02";

/// A page touched during the recorded invocation: task (its pid in the dump) and image
/// address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TouchedPage {
    pub pid: u32,
    pub vaddr: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct IndexRegion {
    #[prost(uint32, tag = "1")]
    pub pid: u32,
    #[prost(uint64, tag = "2")]
    pub vaddr: u64,
    #[prost(uint64, tag = "3")]
    pub pages: u64,
    /// Byte offset of the region's first page in loadset.img.
    #[prost(uint64, tag = "4")]
    pub offset: u64,
    #[prost(uint32, tag = "5")]
    pub group: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Index {
    #[prost(message, repeated, tag = "1")]
    pub regions: Vec<IndexRegion>,
    #[prost(uint64, tag = "2")]
    pub working_set_pages: u64,
    #[prost(uint64, tag = "3")]
    pub zero_pages: u64,
    #[prost(uint32, tag = "4")]
    pub groups: u32,
    /// Size of loadset.img, to refuse a truncated one.
    #[prost(uint64, tag = "5")]
    pub data_bytes: u64,
    /// CRC-32 of each 64 KiB chunk of loadset.img.
    #[prost(uint32, repeated, tag = "6")]
    pub chunk_crc32: Vec<u32>,
}

impl Index {
    pub fn pages(&self) -> u64 {
        self.regions.iter().map(|r| r.pages).sum()
    }

    /// The sums of loadset.img.
    pub fn data_sums(&self) -> FileSums {
        FileSums {
            bytes: self.data_bytes,
            crc32: self.chunk_crc32.clone(),
        }
    }
}

/// Pages are numbered per task in one space: the task's index in the high bits, the virtual
/// page number below (user addresses are below 2^47, so page numbers below 2^35).
const TASK_SHIFT: u32 = 36;

fn key(task: usize, vaddr: u64) -> u64 {
    ((task as u64) << TASK_SHIFT) | (vaddr / PAGE_SIZE)
}

fn unkey(key: u64) -> (usize, u64) {
    (
        (key >> TASK_SHIFT) as usize,
        (key & ((1 << TASK_SHIFT) - 1)) * PAGE_SIZE,
    )
}

/// Builds the loading set of the recorded pages and writes loadset.img and loadset.idx into
/// `dir` (replacing older ones). `tasks` is the dump's memory, `images` its directory.
#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
pub fn write(
    dir: &Path,
    images: &Path,
    tasks: &[TaskMemory],
    touched: &[TouchedPage],
) -> io::Result<Index> {
    let task_of: HashMap<u32, usize> = tasks.iter().enumerate().map(|(i, t)| (t.pid, i)).collect();
    let keys: Vec<u64> = touched
        .iter()
        .filter_map(|p| Some(key(*task_of.get(&p.pid)?, p.vaddr)))
        .collect();
    let set: LoadingSet = loadset::build(
        &keys,
        |k| {
            let (t, vaddr) = unkey(k);
            tasks[t].locate(vaddr).is_none()
        },
        |a_end, b_start| {
            let ((ta, va), (tb, vb)) = (unkey(a_end), unkey(b_start));
            let task = &tasks[ta];
            ta == tb
                && task.vma_of(va).map(|v| v.start) == task.vma_of(vb).map(|v| v.start)
                && (va..vb)
                    .step_by(PAGE_SIZE as usize)
                    .all(|p| task.locate(p).is_some())
        },
        MERGE_GAP_PAGES,
    );

    let sources: Vec<File> = tasks
        .iter()
        .map(|t| File::open(t.pages_path(images)))
        .collect::<io::Result<_>>()?;
    let tmp_data = dir.join(format!("{DATA_FILE}.tmp"));
    let mut out = io::BufWriter::with_capacity(MIB_USIZE, crate::private::create_file(&tmp_data)?);
    let mut index = Index {
        regions: Vec::with_capacity(set.regions.len()),
        working_set_pages: set.working_set_pages,
        zero_pages: set.zero_pages,
        groups: set.groups,
        data_bytes: 0,
        chunk_crc32: Vec::new(),
    };
    // Pages are whole parts of a chunk: the chunk's sum is complete every CHUNK bytes.
    let mut chunk = crc32fast::Hasher::new();
    let mut in_chunk = 0u64;
    let mut page = vec![0u8; PAGE_SIZE as usize];
    for region in &set.regions {
        let (t, vaddr) = unkey(region.start);
        let task = &tasks[t];
        for i in 0..region.pages {
            let at = vaddr + i * PAGE_SIZE;
            let stored = task.locate(at).ok_or_else(|| {
                io::Error::other(format!(
                    "page {at:#x} of task {} is in the loading set but not in the image",
                    task.pid
                ))
            })?;
            sources[t].read_exact_at(&mut page, stored.offset)?;
            out.write_all(&page)?;
            chunk.update(&page);
            in_chunk += PAGE_SIZE;
            if in_chunk == CHUNK {
                index
                    .chunk_crc32
                    .push(std::mem::take(&mut chunk).finalize());
                in_chunk = 0;
            }
        }
        index.regions.push(IndexRegion {
            pid: task.pid,
            vaddr,
            pages: region.pages,
            offset: index.data_bytes,
            group: region.group,
        });
        index.data_bytes += region.pages * PAGE_SIZE;
    }
    if in_chunk > 0 {
        index.chunk_crc32.push(chunk.finalize());
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;

    let tmp_index = dir.join(format!("{INDEX_FILE}.tmp"));
    let body = index.encode_to_vec();
    let mut bytes = INDEX_MAGIC.to_vec();
    bytes.extend(crc32fast::hash(&body).to_le_bytes());
    bytes.extend(body);
    crate::private::write_file(&tmp_index, &bytes)?;
    // The index last: an index names a data file that is complete.
    std::fs::rename(&tmp_data, dir.join(DATA_FILE))?;
    std::fs::rename(&tmp_index, dir.join(INDEX_FILE))?;
    Ok(index)
}

/// Reads the index of the loading set in `dir`, checked against its own checksum and its data
/// file's size (the data itself is checked by whoever installs it: [`verify_data`]).
pub fn read(dir: &Path) -> io::Result<Index> {
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    let bytes = std::fs::read(dir.join(INDEX_FILE))?;
    let rest = bytes
        .strip_prefix(INDEX_MAGIC.as_slice())
        .filter(|r| r.len() >= 4)
        .ok_or_else(|| bad(format!("{INDEX_FILE}: bad magic (an older format?)")))?;
    let (crc, body) = rest.split_at(4);
    if crc32fast::hash(body).to_le_bytes() != crc {
        return Err(bad(format!(
            "{INDEX_FILE} fails its checksum (the file is damaged)"
        )));
    }
    let index = Index::decode(body).map_err(|e| bad(format!("{INDEX_FILE}: {e}")))?;
    if !index.data_sums().consistent() {
        return Err(bad(format!(
            "{INDEX_FILE}: {} checksums for {} bytes of {DATA_FILE}",
            index.chunk_crc32.len(),
            index.data_bytes
        )));
    }
    let len = std::fs::metadata(dir.join(DATA_FILE))?.len();
    if len != index.data_bytes {
        return Err(bad(format!(
            "{DATA_FILE} holds {len} bytes, its index says {}",
            index.data_bytes
        )));
    }
    let mut end = 0;
    for r in &index.regions {
        if r.offset != end || r.vaddr % PAGE_SIZE != 0 {
            return Err(bad(format!(
                "{INDEX_FILE}: region at {:#x} out of place",
                r.vaddr
            )));
        }
        end += r.pages * PAGE_SIZE;
    }
    Ok(index)
}

/// Checks all of loadset.img against the index's sums.
pub fn verify_data(dir: &Path, index: &Index) -> io::Result<()> {
    checksum::verify_file(&dir.join(DATA_FILE), DATA_FILE, &index.data_sums())
}

/// Removes a loading set (before a new recording, or when the snapshot is rebuilt).
pub fn remove(dir: &Path) {
    let _ = std::fs::remove_file(dir.join(INDEX_FILE));
    let _ = std::fs::remove_file(dir.join(DATA_FILE));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_task_and_address_apart() {
        let addr = 0x7fff_ffff_f000;
        assert_eq!(unkey(key(3, addr)), (3, addr));
        assert!(key(0, addr) < key(1, 0));
    }
}
