//! Reading (and, for compaction, rewriting) the parts of a CRIU dump that describe memory:
//! the process tree, each task's VMAs, its pagemap and its pages file.

pub mod file;
pub mod proto;

use self::file::{read_entries, read_head_and_entries, MM_MAGIC, PAGEMAP_MAGIC, PSTREE_MAGIC};
use self::proto::{MmEntry, PagemapEntry, PagemapHead, PstreeEntry, VmaEntry};
use crate::PAGE_SIZE;
use std::io;
use std::path::{Path, PathBuf};

/// The memory of one dumped task (process; its threads share it).
#[derive(Debug, Clone)]
pub struct TaskMemory {
    /// Pid in the dump's own pid namespace: the key of its image files.
    pub pid: u32,
    pub vmas: Vec<VmaEntry>,
    pub pages_id: u32,
    pub pagemap: Vec<PagemapEntry>,
    /// Byte offset in the pages file of each pagemap entry's first page (entries without
    /// data in the file advance nothing).
    pub offsets: Vec<u64>,
    /// Bytes the pagemap says the pages file holds.
    pub data_bytes: u64,
}

/// A located page run: `pages` pages from image address `vaddr`, stored at `offset` of the
/// pages file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    pub vaddr: u64,
    pub pages: u64,
    pub offset: u64,
    pub lazy: bool,
}

impl TaskMemory {
    pub fn load(dir: &Path, pid: u32) -> io::Result<TaskMemory> {
        let mm: Vec<MmEntry> = read_entries(&dir.join(format!("mm-{pid}.img")), MM_MAGIC)?;
        let mut vmas = mm.into_iter().next().map(|m| m.vmas).unwrap_or_default();
        vmas.sort_by_key(|v| v.start);
        let (head, pagemap): (PagemapHead, Vec<PagemapEntry>) =
            read_head_and_entries(&dir.join(format!("pagemap-{pid}.img")), PAGEMAP_MAGIC)?;
        let mut offsets = Vec::with_capacity(pagemap.len());
        let mut at = 0u64;
        let mut last_end = 0u64;
        for entry in &pagemap {
            if entry.vaddr % PAGE_SIZE != 0 || entry.vaddr < last_end {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "pagemap-{pid}.img: entries out of order at {:#x}",
                        entry.vaddr
                    ),
                ));
            }
            last_end = entry.end();
            offsets.push(at);
            if entry.is_present() {
                at += u64::from(entry.nr_pages) * PAGE_SIZE;
            }
        }
        Ok(TaskMemory {
            pid,
            vmas,
            pages_id: head.pages_id,
            pagemap,
            offsets,
            data_bytes: at,
        })
    }

    pub fn pages_path(&self, dir: &Path) -> PathBuf {
        pages_path(dir, self.pages_id)
    }

    pub fn vma_of(&self, vaddr: u64) -> Option<&VmaEntry> {
        let i = self.vmas.partition_point(|v| v.end <= vaddr);
        self.vmas.get(i).filter(|v| v.start <= vaddr)
    }

    /// Where the page at `vaddr` is stored, as the rest of its pagemap entry from there.
    pub fn locate(&self, vaddr: u64) -> Option<Stored> {
        let i = self.pagemap.partition_point(|e| e.end() <= vaddr);
        let entry = self.pagemap.get(i).filter(|e| e.vaddr <= vaddr)?;
        if !entry.is_present() {
            return None;
        }
        let skip = (vaddr - entry.vaddr) / PAGE_SIZE;
        Some(Stored {
            vaddr: entry.vaddr + skip * PAGE_SIZE,
            pages: u64::from(entry.nr_pages) - skip,
            offset: self.offsets[i] + skip * PAGE_SIZE,
            lazy: entry.is_lazy(),
        })
    }

    /// Every stored run, in address order.
    pub fn stored(&self) -> impl Iterator<Item = Stored> + '_ {
        self.pagemap
            .iter()
            .zip(&self.offsets)
            .filter(|(e, _)| e.is_present())
            .map(|(e, off)| Stored {
                vaddr: e.vaddr,
                pages: u64::from(e.nr_pages),
                offset: *off,
                lazy: e.is_lazy(),
            })
    }
}

pub fn pages_path(dir: &Path, pages_id: u32) -> PathBuf {
    dir.join(format!("pages-{pages_id}.img"))
}

/// The dumped process tree, in pstree order (the root first).
pub fn read_pstree(dir: &Path) -> io::Result<Vec<PstreeEntry>> {
    let tree: Vec<PstreeEntry> = read_entries(&dir.join("pstree.img"), PSTREE_MAGIC)?;
    if tree.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "pstree.img holds no task",
        ));
    }
    Ok(tree)
}

/// The memory of every task of a dump, checked against the size of its pages file.
pub fn load_all(dir: &Path) -> io::Result<Vec<TaskMemory>> {
    read_pstree(dir)?
        .iter()
        // A zombie has no memory images (and the restore sends no userfaultfd for it).
        .filter(|t| dir.join(format!("mm-{}.img", t.pid)).exists())
        .map(|t| {
            let mem = TaskMemory::load(dir, t.pid)?;
            let len = std::fs::metadata(mem.pages_path(dir))?.len();
            if len != mem.data_bytes {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "pages-{}.img holds {len} bytes, its pagemap says {}",
                        mem.pages_id, mem.data_bytes
                    ),
                ));
            }
            Ok(mem)
        })
        .collect()
}
