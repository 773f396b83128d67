//! The loading set of a VM snapshot, `loadset.json` beside it: regions of the memory file in
//! load order (group, then address). A VM maps one RAM file, so unlike FaaSnap's compact
//! loading-set file this is an index into the memory file itself: the loader reads those
//! ranges, and the restored guest finds them in the page cache.

use super::memfile::{DataMap, PAGE};
use super::meta::SnapshotMeta;
use icebox_core::LoadingSetInfo;
use icebox_snap::loadset::{self, LoadingSet, Region, GROUP_PAGES, MERGE_GAP_PAGES};
use serde::{Deserialize, Serialize};
use std::path::Path;

pub const LOADSET_FILE: &str = "loadset.json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct LoadsetFile {
    /// The snapshot's id: a loading set recorded on another snapshot is never used.
    snapshot: String,
    group_pages: usize,
    merge_gap: u64,
    info: LoadingSetInfo,
    regions: Vec<Region>,
}

/// FaaSnap's loading set from a recording: the recorded pages that hold data in the memory
/// file (holes are zero pages), regions closer than 32 pages merged (the pages between are
/// in the same file, so any two regions may be joined), in group order.
pub fn build(recorded: &[u64], data: &DataMap) -> LoadingSet {
    loadset::build(
        recorded,
        |page| !data.has_data(page),
        |_, _| true,
        MERGE_GAP_PAGES,
    )
}

pub fn info(set: &LoadingSet) -> LoadingSetInfo {
    LoadingSetInfo {
        working_set_pages: set.working_set_pages,
        zero_pages: set.zero_pages,
        loading_set_pages: set.pages(),
        regions: set.regions.len() as u64,
        groups: u64::from(set.groups),
    }
}

/// Writes the loading set of the snapshot `meta` into `dir` (replacing an older one).
pub fn write(dir: &Path, meta: &SnapshotMeta, set: &LoadingSet) -> std::io::Result<LoadingSetInfo> {
    let file = LoadsetFile {
        snapshot: meta.id.clone(),
        group_pages: GROUP_PAGES,
        merge_gap: MERGE_GAP_PAGES,
        info: info(set),
        regions: set.regions.clone(),
    };
    let tmp = dir.join(format!(".{LOADSET_FILE}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec(&file)?)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(tmp, dir.join(LOADSET_FILE))?;
    Ok(file.info)
}

/// The regions to load, in order, of the snapshot `meta` in `dir`.
pub fn read(dir: &Path, meta: &SnapshotMeta) -> Result<Vec<Region>, String> {
    let path = dir.join(LOADSET_FILE);
    let text = std::fs::read(&path)
        .map_err(|e| format!("the snapshot has no loading set ({}: {e})", path.display()))?;
    let file: LoadsetFile =
        serde_json::from_slice(&text).map_err(|e| format!("{} is damaged: {e}", path.display()))?;
    if file.snapshot != meta.id {
        return Err(format!(
            "{} was recorded on another snapshot",
            path.display()
        ));
    }
    let pages = meta.memory.bytes / PAGE;
    if let Some(r) = file
        .regions
        .iter()
        .find(|r| r.pages == 0 || r.end() > pages)
    {
        return Err(format!(
            "{} names pages {}..{} outside the {pages}-page memory image",
            path.display(),
            r.start,
            r.end()
        ));
    }
    Ok(file.regions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::meta::{Fingerprint, MemoryImage, StateImage};
    use icebox_core::units::MIB;
    use std::os::unix::fs::FileExt;

    fn meta() -> SnapshotMeta {
        SnapshotMeta::new(
            Fingerprint {
                image: Default::default(),
                qemu: "q".into(),
                accel: "tcg".into(),
                memory_mib: 1,
                vcpus: 1,
                runtime: "python".into(),
            },
            "g".into(),
            MemoryImage {
                bytes: MIB,
                data_pages: 0,
                crc32: Default::default(),
            },
            StateImage {
                bytes: 0,
                fnv1a: String::new(),
            },
            0,
        )
    }

    #[test]
    #[expect(
        clippy::cast_possible_truncation,
        reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
    )]
    fn recorded_holes_leave_the_set_and_near_regions_merge() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(dir.path().join("m")).unwrap();
        f.set_len(256 * PAGE).unwrap();
        for page in [10u64, 20, 30, 200] {
            f.write_all_at(&[1u8; PAGE as usize], page * PAGE).unwrap();
        }
        let data = DataMap::of(&f).unwrap();
        // Touched: 200 first, then 10, a hole (100), 20 and 30.
        let set = build(&[200, 10, 100, 20, 30], &data);
        assert_eq!(set.working_set_pages, 5);
        assert_eq!(set.zero_pages, 1);
        assert_eq!(
            set.regions,
            vec![
                Region {
                    start: 10,
                    pages: 21,
                    group: 0
                },
                Region {
                    start: 200,
                    pages: 1,
                    group: 0
                }
            ]
        );
        let info = write(dir.path(), &meta(), &set).unwrap();
        assert_eq!(info.loading_set_pages, 22);
        assert_eq!(info.regions, 2);
    }

    #[test]
    fn a_loading_set_is_read_back_only_for_its_own_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let m = meta();
        let set = LoadingSet {
            regions: vec![Region {
                start: 5,
                pages: 3,
                group: 0,
            }],
            working_set_pages: 3,
            zero_pages: 0,
            groups: 1,
        };
        write(dir.path(), &m, &set).unwrap();
        assert_eq!(read(dir.path(), &m).unwrap(), set.regions);
        let e = read(dir.path(), &meta()).unwrap_err();
        assert!(e.contains("another snapshot"), "{e}");

        let outside = LoadingSet {
            regions: vec![Region {
                start: 250,
                pages: 10,
                group: 0,
            }],
            ..set
        };
        write(dir.path(), &m, &outside).unwrap();
        assert!(read(dir.path(), &m).unwrap_err().contains("outside"));

        std::fs::write(dir.path().join(LOADSET_FILE), b"[").unwrap();
        assert!(read(dir.path(), &m).unwrap_err().contains("damaged"));
        std::fs::remove_file(dir.path().join(LOADSET_FILE)).unwrap();
        assert!(read(dir.path(), &m).unwrap_err().contains("no loading set"));
    }
}
