//! Zero-page compaction (FaaSnap §4.5, for processes): after a dump, pages of anonymous
//! private mappings that hold only zeros are dropped from pagemap-*.img and pages-*.img. A
//! restore (eager or lazy) then gets them zero-filled without reading anything: CRIU maps
//! anonymous memory fresh and only writes the pages it has, and the pager answers a fault on
//! a page it does not have with UFFDIO_ZEROPAGE. File-backed private mappings keep every
//! page: there a missing page would show the file's content, not zeros.

use crate::image::file::{write_image, EncodeEntry, PAGEMAP_MAGIC};
use crate::image::proto::{PagemapEntry, PagemapHead};
use crate::image::{load_all, TaskMemory};
use crate::loadset::is_zero;
use crate::PAGE_SIZE;
use icebox_core::units::MIB_USIZE;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CompactStats {
    /// Pages stored before compaction.
    pub pages_before: u64,
    /// All-zero pages of anonymous private mappings dropped.
    pub zero_pages_dropped: u64,
}

/// Compacts every task of the dump in `dir`, in place.
pub fn compact_zero_pages(dir: &Path) -> io::Result<CompactStats> {
    let mut total = CompactStats::default();
    for task in load_all(dir)? {
        let stats = compact_task(dir, &task)?;
        total.pages_before += stats.pages_before;
        total.zero_pages_dropped += stats.zero_pages_dropped;
    }
    Ok(total)
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
fn compact_task(dir: &Path, task: &TaskMemory) -> io::Result<CompactStats> {
    let pages_path = task.pages_path(dir);
    let pagemap_path = dir.join(format!("pagemap-{}.img", task.pid));
    let new_pages = dir.join(format!("pages-{}.img.compact", task.pages_id));
    let new_pagemap = dir.join(format!("pagemap-{}.img.compact", task.pid));

    let mut input = io::BufReader::with_capacity(MIB_USIZE, File::open(&pages_path)?);
    let mut output = BufWriter::with_capacity(MIB_USIZE, File::create(&new_pages)?);
    let mut stats = CompactStats::default();
    let mut entries: Vec<PagemapEntry> = Vec::with_capacity(task.pagemap.len());
    let mut page = vec![0u8; PAGE_SIZE as usize];

    for entry in &task.pagemap {
        if !entry.is_present() {
            entries.push(entry.clone());
            continue;
        }
        // The entry is re-emitted as the runs of pages that survive.
        let mut run: Option<PagemapEntry> = None;
        for i in 0..u64::from(entry.nr_pages) {
            let vaddr = entry.vaddr + i * PAGE_SIZE;
            input.read_exact(&mut page)?;
            stats.pages_before += 1;
            let droppable = task.vma_of(vaddr).is_some_and(|v| v.is_anon_private());
            if droppable && is_zero(&page) {
                stats.zero_pages_dropped += 1;
                entries.extend(run.take());
                continue;
            }
            output.write_all(&page)?;
            match &mut run {
                Some(r) => r.nr_pages += 1,
                None => {
                    run = Some(PagemapEntry {
                        vaddr,
                        nr_pages: 1,
                        ..entry.clone()
                    })
                }
            }
        }
        entries.extend(run);
    }
    let mut rest = [0u8; 1];
    if input.read(&mut rest)? != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} holds more data than its pagemap", pages_path.display()),
        ));
    }
    output
        .into_inner()
        .map_err(|e| e.into_error())?
        .sync_all()?;

    let head = PagemapHead {
        pages_id: task.pages_id,
    };
    let mut framed: Vec<&dyn EncodeEntry> = vec![&head];
    framed.extend(entries.iter().map(|e| e as &dyn EncodeEntry));
    write_image(&new_pagemap, PAGEMAP_MAGIC, &framed)?;
    // The pages file first: a crash between the renames leaves a pagemap that no longer
    // matches its pages file, which load_all's size check refuses.
    std::fs::rename(&new_pages, &pages_path)?;
    std::fs::rename(&new_pagemap, &pagemap_path)?;
    Ok(stats)
}
