//! Which ranges of a frozen instance may be paged out (Desiccant §4.6, "library unmapping"):
//! file pages the process maps privately and never modified. Dropping them loses nothing —
//! they are re-read from the file on the next access — and, when no other instance uses the
//! file, they are otherwise charged to this instance alone (they are in its USS).

use crate::mappings::FileMapping;
use std::collections::HashSet;

/// `(start, end)` address ranges of the mappings in `mappings` that are private, backed by a
/// live file, unmodified (no dirty and no copy-on-write anonymous pages), resident, and whose
/// `(dev, inode)` is not in `exclude`.
///
/// `exclude` holds the files mapped by other running instances (see
/// [`mapped_files`](crate::mapped_files)): dropping a page-cache page that another running
/// instance is about to fault in would only cost that instance a disk read. Pages mapped by
/// another process at the moment of the page-out are left alone by the kernel anyway.
pub fn pageout_candidates(
    mappings: &[FileMapping],
    exclude: &HashSet<(String, u64)>,
) -> Vec<(u64, u64)> {
    candidate_mappings(mappings, exclude)
        .iter()
        .map(|m| (m.start, m.end))
        .collect()
}

/// The mappings behind [`pageout_candidates`], for callers that also need their file
/// offsets (e.g. [`exclusive_file_pages`](crate::exclusive_file_pages)).
pub fn candidate_mappings<'a>(
    mappings: &'a [FileMapping],
    exclude: &HashSet<(String, u64)>,
) -> Vec<&'a FileMapping> {
    mappings
        .iter()
        .filter(|m| {
            m.is_private()
                && m.is_live_file()
                && m.private_dirty == 0
                && m.anonymous == 0
                && m.rss > 0
                && m.end > m.start
                && !exclude.contains(&(m.dev.clone(), m.inode))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(start: u64, perms: &str, path: &str, inode: u64) -> FileMapping {
        FileMapping {
            start,
            end: start + 0x4000,
            path: path.into(),
            inode,
            dev: "fe:00".into(),
            rss: 0x4000,
            private_clean: 0x4000,
            perms: perms.into(),
            ..FileMapping::default()
        }
    }

    #[test]
    fn selects_private_clean_resident_live_files() {
        let lib = mapping(0x1000_0000, "r-xp", "/usr/lib/libv8.so", 7);
        let data = mapping(0x2000_0000, "r--p", "/usr/bin/node", 8);
        let mut all = vec![lib.clone(), data.clone()];
        all.push(mapping(0x3000_0000, "r--s", "/usr/share/shared.db", 9));
        all.push(FileMapping {
            private_dirty: 0x1000,
            ..mapping(0x4000_0000, "rw-p", "/lib/a.so", 10)
        });
        all.push(FileMapping {
            anonymous: 0x1000,
            ..mapping(0x5000_0000, "rw-p", "/lib/b.so", 11)
        });
        all.push(FileMapping {
            rss: 0,
            private_clean: 0,
            ..mapping(0x6000_0000, "r--p", "/lib/c.so", 12)
        });
        all.push(mapping(0x7000_0000, "r--p", "/tmp/x.so (deleted)", 13));
        all.push(mapping(0x8000_0000, "rw-p", "[heap]", 0));
        all.push(mapping(0x9000_0000, "rw-p", "[stack]", 0));
        all.push(mapping(0xa000_0000, "r--p", "[vvar]", 0));
        all.push(mapping(0xb000_0000, "r-xp", "[vdso]", 0));
        all.push(mapping(0xc000_0000, "rw-p", "", 0));
        assert_eq!(
            pageout_candidates(&all, &HashSet::new()),
            vec![(lib.start, lib.end), (data.start, data.end)]
        );
    }

    #[test]
    fn excluded_files_are_kept() {
        let all = [
            mapping(0x1000_0000, "r-xp", "/usr/bin/node", 8),
            mapping(0x2000_0000, "r--p", "/usr/lib/libc.so.6", 9),
            // Same inode number on another device: a different file.
            FileMapping {
                dev: "00:2a".into(),
                ..mapping(0x3000_0000, "r--p", "/other/fs/f", 9)
            },
        ];
        let exclude: HashSet<_> = [("fe:00".to_owned(), 9)].into_iter().collect();
        assert_eq!(
            pageout_candidates(&all, &exclude),
            vec![(0x1000_0000, 0x1000_4000), (0x3000_0000, 0x3000_4000)]
        );
    }

    #[test]
    fn parsed_smaps_text_yields_only_the_clean_private_file() {
        let m = crate::mappings::parse_smaps(crate::mappings::tests::SMAPS).unwrap();
        assert_eq!(
            pageout_candidates(&m, &HashSet::new()),
            vec![(0x55dbe473d000, 0x55dbe473f000)]
        );
    }
}
