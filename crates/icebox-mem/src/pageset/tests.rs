//! Fixed cases, then random small sets checked against a naive set of page numbers.

use super::*;
use std::collections::BTreeSet;

const P: u64 = PAGE_SIZE;

fn set(pages: &[(u64, u64)]) -> PageSet {
    PageSet::from_ranges(pages.iter().map(|&(a, b)| (a * P, b * P)))
}

#[test]
fn from_ranges_aligns_outward_sorts_and_merges() {
    let s = PageSet::from_ranges([(5 * P + 1, 6 * P), (P, 2 * P - 1), (2 * P, 3 * P), (9, 9)]);
    assert_eq!(s.ranges(), &[(P, 3 * P), (5 * P, 6 * P)]);
    assert_eq!(s.pages(), 3);
    assert_eq!(s.bytes(), 3 * P);
    assert!(PageSet::from_ranges([(10, 5), (7, 7)]).is_empty());
    assert_eq!(PageSet::from_ranges([(0, 1)]).ranges(), &[(0, P)]);
}

#[test]
fn contains_is_half_open() {
    let s = set(&[(1, 3), (5, 6)]);
    assert!(!s.contains(P - 1));
    assert!(s.contains(P));
    assert!(s.contains(3 * P - 1));
    assert!(!s.contains(3 * P));
    assert!(s.contains(5 * P));
    assert!(!s.contains(6 * P));
}

#[test]
fn set_operations_on_fixed_cases() {
    let a = set(&[(0, 4), (8, 12)]);
    let b = set(&[(2, 9), (11, 20)]);
    assert_eq!(a.union(&b), set(&[(0, 20)]));
    assert_eq!(a.intersection(&b), set(&[(2, 4), (8, 9), (11, 12)]));
    assert_eq!(a.difference(&b), set(&[(0, 2), (9, 11)]));
    assert_eq!(b.difference(&a), set(&[(4, 8), (12, 20)]));
    assert_eq!(a.difference(&PageSet::new()), a);
    assert!(PageSet::new().union(&PageSet::new()).is_empty());
}

#[test]
fn first_bytes_takes_whole_low_pages() {
    let s = set(&[(0, 2), (10, 14)]);
    assert_eq!(s.first_bytes(3 * P + 100), set(&[(0, 2), (10, 11)]));
    assert_eq!(s.first_bytes(P - 1), PageSet::new());
    assert_eq!(s.first_bytes(u64::MAX), s);
}

#[test]
fn probes_and_groups() {
    // Groups of 4 pages: [0,4) [4,8) [8,12) [12,16).
    let s = set(&[(2, 9), (13, 14)]);
    assert_eq!(s.probes(4), set(&[(2, 3), (4, 5), (8, 9), (13, 14)]));
    let members = set(&[(5, 6)]);
    assert_eq!(s.in_groups_of(&members, 4), set(&[(4, 8)]));
    assert_eq!(s.in_groups_of(&set(&[(3, 5)]), 4), set(&[(2, 8)]));
    assert_eq!(s.probes(1), s);
}

/// A deterministic xorshift: the same random cases on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A few random ranges of page numbers in [0, 64), possibly overlapping and unaligned.
    fn ranges(&mut self) -> Vec<(u64, u64)> {
        (0..self.below(6))
            .map(|_| {
                let start = self.below(64) * P + if self.below(4) == 0 { self.below(P) } else { 0 };
                let end =
                    start + self.below(12) * P + if self.below(4) == 0 { self.below(P) } else { 0 };
                (start, end)
            })
            .collect()
    }
}

fn naive(ranges: &[(u64, u64)]) -> BTreeSet<u64> {
    ranges
        .iter()
        .filter(|(start, end)| end > start)
        .flat_map(|&(start, end)| start / P..end.div_ceil(P))
        .collect()
}

fn pages_of(s: &PageSet) -> BTreeSet<u64> {
    s.ranges()
        .iter()
        .flat_map(|&(start, end)| start / P..end / P)
        .collect()
}

fn check_invariants(s: &PageSet) {
    for &(start, end) in s.ranges() {
        assert!(start < end && start % P == 0 && end % P == 0, "{s:?}");
    }
    for pair in s.ranges().windows(2) {
        assert!(pair[0].1 < pair[1].0, "not disjoint and merged: {s:?}");
    }
}

#[test]
fn random_sets_agree_with_naive_page_sets() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3000 {
        let (ra, rb) = (rng.ranges(), rng.ranges());
        let (a, b) = (
            PageSet::from_ranges(ra.clone()),
            PageSet::from_ranges(rb.clone()),
        );
        let (na, nb) = (naive(&ra), naive(&rb));
        check_invariants(&a);
        assert_eq!(pages_of(&a), na, "{ra:?}");
        assert_eq!(a.pages(), na.len() as u64);

        let union = a.union(&b);
        let inter = a.intersection(&b);
        let diff = a.difference(&b);
        for s in [&union, &inter, &diff] {
            check_invariants(s);
        }
        assert_eq!(pages_of(&union), na.union(&nb).copied().collect());
        assert_eq!(pages_of(&inter), na.intersection(&nb).copied().collect());
        assert_eq!(pages_of(&diff), na.difference(&nb).copied().collect());

        for page in 0..80 {
            assert_eq!(a.contains(page * P + rng.below(P)), na.contains(&page));
        }

        let max = rng.below(20 * P);
        let first = a.first_bytes(max);
        check_invariants(&first);
        let want: BTreeSet<u64> = na.iter().copied().take((max / P) as usize).collect();
        assert_eq!(pages_of(&first), want);

        let g = 1 + rng.below(8);
        let probes = a.probes(g);
        check_invariants(&probes);
        let mut want = BTreeSet::new();
        for &page in &na {
            if !want.iter().any(|&p: &u64| p / g == page / g) {
                want.insert(page);
            }
        }
        assert_eq!(pages_of(&probes), want, "{ra:?} g={g}");

        let grouped = a.in_groups_of(&b, g);
        check_invariants(&grouped);
        let groups: BTreeSet<u64> = nb.iter().map(|p| p / g).collect();
        let want: BTreeSet<u64> = na
            .iter()
            .copied()
            .filter(|p| groups.contains(&(p / g)))
            .collect();
        assert_eq!(pages_of(&grouped), want, "{ra:?} {rb:?} g={g}");
    }
}
