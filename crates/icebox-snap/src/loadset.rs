//! FaaSnap's loading set, the pure part shared by process and VM snapshots (§4.3–4.7 of the
//! paper): pages recorded in the order the first invocation touched them are numbered in
//! groups of 1024; zero pages leave the set (they are never read from disk); what remains is
//! cut into regions of consecutive pages, regions closer than the merge gap are joined (the
//! pages between them come along), and the regions are ordered by group, then address, which
//! is the order the loader reads them in.
//!
//! Pages are numbered in whatever space the caller uses (guest frame numbers for a VM, virtual
//! page numbers for a process); the caller says which neighbours may be joined.

use serde::{Deserialize, Serialize};

/// Pages per working-set group (FaaSnap records the 1024 most recently touched pages at a time).
pub const GROUP_PAGES: usize = 1024;
/// Regions closer than this many pages are merged (FaaSnap's empirical threshold).
pub const MERGE_GAP_PAGES: u64 = 32;

/// A run of consecutive pages of the loading set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Region {
    pub start: u64,
    pub pages: u64,
    /// The lowest group of any recorded page in the region: when it is first needed.
    pub group: u32,
}

impl Region {
    pub fn end(&self) -> u64 {
        self.start + self.pages
    }
}

/// The loading set, regions in load order (group, then address).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadingSet {
    pub regions: Vec<Region>,
    /// Distinct pages recorded (the working set).
    pub working_set_pages: u64,
    /// Recorded pages left out because they are zero.
    pub zero_pages: u64,
    pub groups: u32,
}

impl LoadingSet {
    pub fn pages(&self) -> u64 {
        self.regions.iter().map(|r| r.pages).sum()
    }
}

/// Builds the loading set from pages in first-touch order. `is_zero(page)` says a page's
/// content is all zero; `joinable(a_end, b_start)` says the pages `a_end..b_start` between two
/// regions may be loaded too (same mapping, data present), so the two become one.
#[expect(
    clippy::cast_possible_truncation,
    reason = "loading-set groups of one snapshot's memory stay far below 2^32"
)]
pub fn build(
    touched_in_order: &[u64],
    is_zero: impl Fn(u64) -> bool,
    joinable: impl Fn(u64, u64) -> bool,
    merge_gap: u64,
) -> LoadingSet {
    let mut group_of: std::collections::HashMap<u64, u32> =
        std::collections::HashMap::with_capacity(touched_in_order.len());
    for page in touched_in_order {
        let next = (group_of.len() / GROUP_PAGES) as u32;
        group_of.entry(*page).or_insert(next);
    }
    let working_set_pages = group_of.len() as u64;
    let groups = working_set_pages.div_ceil(GROUP_PAGES as u64) as u32;

    let mut pages: Vec<(u64, u32)> = group_of
        .into_iter()
        .filter(|(page, _)| !is_zero(*page))
        .collect();
    let zero_pages = working_set_pages - pages.len() as u64;
    pages.sort_unstable();

    let mut regions: Vec<Region> = Vec::new();
    for (page, group) in pages {
        if let Some(last) = regions.last_mut() {
            let adjacent = last.end() == page;
            let close = page - last.end() < merge_gap && joinable(last.end(), page);
            if adjacent || close {
                last.pages = page + 1 - last.start;
                last.group = last.group.min(group);
                continue;
            }
        }
        regions.push(Region {
            start: page,
            pages: 1,
            group,
        });
    }
    regions.sort_by_key(|r| (r.group, r.start));
    LoadingSet {
        regions,
        working_set_pages,
        zero_pages,
        groups,
    }
}

/// Whether a page (or any buffer) is all zero bytes.
pub fn is_zero(bytes: &[u8]) -> bool {
    // SAFETY: every bit pattern is a valid u64, and align_to hands out as u64s only the
    // aligned middle of the slice; the borrow of `bytes` covers all three parts.
    let (head, words, tail) = unsafe { bytes.align_to::<u64>() };
    head.iter().all(|b| *b == 0) && words.iter().all(|w| *w == 0) && tail.iter().all(|b| *b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_follow_first_touch_order() {
        // Every other page, highest first: no two recorded pages are adjacent.
        let touched: Vec<u64> = (0..2500u64).rev().map(|p| p * 2).collect();
        let set = build(&touched, |_| false, |_, _| false, 0);
        assert_eq!(set.working_set_pages, 2500);
        assert_eq!(set.groups, 3);
        assert_eq!(set.regions.len(), 2500);
        // The highest pages were touched first, so they load first.
        assert_eq!(
            set.regions[0],
            Region {
                start: 2 * 1476,
                pages: 1,
                group: 0
            }
        );
        assert_eq!(
            set.regions[1023],
            Region {
                start: 2 * 2499,
                pages: 1,
                group: 0
            }
        );
        assert_eq!(
            set.regions[1024],
            Region {
                start: 2 * 452,
                pages: 1,
                group: 1
            }
        );
        assert_eq!(
            set.regions[2499],
            Region {
                start: 2 * 451,
                pages: 1,
                group: 2
            }
        );
    }

    #[test]
    fn a_run_of_consecutive_pages_is_one_region_with_its_earliest_group() {
        let touched: Vec<u64> = (0..2500u64).rev().collect();
        let set = build(&touched, |_| false, |_, _| false, 0);
        assert_eq!(
            set.regions,
            vec![Region {
                start: 0,
                pages: 2500,
                group: 0
            }]
        );
    }

    #[test]
    fn repeated_touches_count_once() {
        let set = build(&[5, 5, 6, 5], |_| false, |_, _| true, 0);
        assert_eq!(set.working_set_pages, 2);
        assert_eq!(
            set.regions,
            vec![Region {
                start: 5,
                pages: 2,
                group: 0
            }]
        );
    }

    #[test]
    fn zero_pages_leave_the_set() {
        let set = build(&[1, 2, 3, 4], |p| p == 2 || p == 3, |_, _| false, 32);
        assert_eq!(set.zero_pages, 2);
        assert_eq!(set.pages(), 2);
        assert_eq!(set.regions.len(), 2);
    }

    #[test]
    fn close_regions_merge_only_when_joinable_and_within_the_gap() {
        let touched = [10, 50, 80, 200];
        let set = build(&touched, |_| false, |a, _| a != 51, MERGE_GAP_PAGES);
        // 10 and 50 are 39 pages apart: too far. 50 and 80 are close but the caller refuses
        // (another mapping); 80 and 200 too far.
        assert_eq!(set.regions.len(), 4);
        let set = build(&[10, 20, 40], |_| false, |_, _| true, MERGE_GAP_PAGES);
        assert_eq!(
            set.regions,
            vec![Region {
                start: 10,
                pages: 31,
                group: 0
            }]
        );
    }

    #[test]
    fn a_merged_region_takes_its_earliest_group() {
        let mut touched: Vec<u64> = (10_000..11_024).collect(); // group 0
        touched.push(5); // group 1
        touched.push(7); // group 1, merges with 5
        touched.push(10_024 + 2000); // group 1
        let set = build(&touched, |_| false, |_, _| true, MERGE_GAP_PAGES);
        assert_eq!(set.regions[0].group, 0);
        assert_eq!(
            set.regions[1],
            Region {
                start: 5,
                pages: 3,
                group: 1
            }
        );
    }

    #[test]
    fn zero_detection() {
        assert!(is_zero(&[0u8; 4096]));
        let mut page = [0u8; 4096];
        page[4095] = 1;
        assert!(!is_zero(&page));
        assert!(!is_zero(&page[1..]));
    }
}
