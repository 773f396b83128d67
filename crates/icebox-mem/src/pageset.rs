//! Sets of pages of one address space, kept as sorted, disjoint, merged, page-aligned
//! `[start, end)` ranges: the sets FaaSMem's puckets are made of, and what page-outs take.

/// The page size the sets are counted in (the x86-64 and arm64-4K base page).
pub const PAGE_SIZE: u64 = icebox_core::units::PAGE;

/// Pages of one address space as sorted, disjoint, non-adjacent, page-aligned ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageSet {
    ranges: Vec<(u64, u64)>,
}

fn align_down(addr: u64, to: u64) -> u64 {
    addr - addr % to
}

fn align_up(addr: u64, to: u64) -> u64 {
    align_down(addr, to).saturating_add(if addr.is_multiple_of(to) { 0 } else { to })
}

impl PageSet {
    pub fn new() -> Self {
        PageSet::default()
    }

    /// The pages touched by `ranges` (each aligned outward to whole pages); empty and
    /// inverted ranges are ignored, overlapping and adjacent ones merged.
    pub fn from_ranges(ranges: impl IntoIterator<Item = (u64, u64)>) -> Self {
        let mut aligned: Vec<(u64, u64)> = ranges
            .into_iter()
            .filter(|(start, end)| end > start)
            .map(|(start, end)| (align_down(start, PAGE_SIZE), align_up(end, PAGE_SIZE)))
            .collect();
        aligned.sort_unstable();
        PageSet {
            ranges: merge_sorted(aligned),
        }
    }

    /// Builds from ranges already sorted and page-aligned (adjacent ones are merged).
    fn from_sorted(ranges: Vec<(u64, u64)>) -> Self {
        PageSet {
            ranges: merge_sorted(ranges),
        }
    }

    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    pub fn bytes(&self) -> u64 {
        self.ranges.iter().map(|(start, end)| end - start).sum()
    }

    pub fn pages(&self) -> u64 {
        self.bytes() / PAGE_SIZE
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn contains(&self, addr: u64) -> bool {
        // The first range ending after `addr` is the only one that can hold it.
        let i = self.ranges.partition_point(|&(_, end)| end <= addr);
        self.ranges.get(i).is_some_and(|&(start, _)| start <= addr)
    }

    pub fn union(&self, other: &PageSet) -> PageSet {
        let mut all = Vec::with_capacity(self.ranges.len() + other.ranges.len());
        let (mut a, mut b) = (
            self.ranges.iter().peekable(),
            other.ranges.iter().peekable(),
        );
        // A merge of two sorted lists keeps the input of `merge_sorted` sorted.
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x <= y => a.next(),
                (Some(_), Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => break,
            };
            all.push(*next.expect("peeked"));
        }
        PageSet::from_sorted(all)
    }

    pub fn intersection(&self, other: &PageSet) -> PageSet {
        let mut out = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < self.ranges.len() && j < other.ranges.len() {
            let (a0, a1) = self.ranges[i];
            let (b0, b1) = other.ranges[j];
            let (start, end) = (a0.max(b0), a1.min(b1));
            if start < end {
                out.push((start, end));
            }
            if a1 < b1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        PageSet::from_sorted(out)
    }

    pub fn difference(&self, other: &PageSet) -> PageSet {
        let mut out = Vec::new();
        let mut j = 0;
        for &(start, end) in &self.ranges {
            let mut cursor = start;
            // Ranges of `other` ending at or before this range cannot cut it, nor any later one.
            while j < other.ranges.len() && other.ranges[j].1 <= cursor {
                j += 1;
            }
            let mut k = j;
            while cursor < end && k < other.ranges.len() && other.ranges[k].0 < end {
                let (cut0, cut1) = other.ranges[k];
                if cut0 > cursor {
                    out.push((cursor, cut0));
                }
                cursor = cursor.max(cut1);
                k += 1;
            }
            if cursor < end {
                out.push((cursor, end));
            }
        }
        PageSet::from_sorted(out)
    }

    /// The lowest-addressed pages of the set, at most `max_bytes` (whole pages).
    pub fn first_bytes(&self, max_bytes: u64) -> PageSet {
        let mut left = align_down(max_bytes, PAGE_SIZE);
        let mut out = Vec::new();
        for &(start, end) in &self.ranges {
            if left == 0 {
                break;
            }
            let take = (end - start).min(left);
            out.push((start, start + take));
            left -= take;
        }
        PageSet { ranges: out }
    }

    /// One probe page per aligned group of `group_pages` pages: the set's lowest page in each group.
    pub fn probes(&self, group_pages: u64) -> PageSet {
        let group = group_pages.max(1) * PAGE_SIZE;
        let mut out = Vec::new();
        let mut last_group = None;
        for &(start, end) in &self.ranges {
            let mut page = start;
            while page < end {
                let g = page / group;
                if last_group != Some(g) {
                    out.push((page, page + PAGE_SIZE));
                    last_group = Some(g);
                }
                page = (g + 1) * group;
            }
        }
        PageSet::from_sorted(out)
    }

    /// The pages of `self` in the same aligned groups (of `group_pages`) as any page of `members`.
    pub fn in_groups_of(&self, members: &PageSet, group_pages: u64) -> PageSet {
        let group = group_pages.max(1) * PAGE_SIZE;
        let groups = PageSet::from_sorted(
            members
                .ranges
                .iter()
                .map(|&(start, end)| (align_down(start, group), align_up(end, group)))
                .collect(),
        );
        self.intersection(&groups)
    }
}

/// Merges overlapping and adjacent ranges of a list sorted by start.
fn merge_sorted(ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        if start >= end {
            continue;
        }
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

#[cfg(test)]
mod tests;
