//! Scans of real processes: a Python child with anonymous regions it wrote, the scan checked
//! against the pagemap-entry fallback on the same process. Timings are printed, not asserted.

use super::*;
use crate::pageout;
use crate::testchild::TestChild;
use crate::testswap::{without_swap, TestSwap};
use icebox_core::units::MIB;
use rustix::process::{kill_process, Pid, Signal};
use std::time::{Duration, Instant};

#[test]
fn spans_bridge_small_gaps_only() {
    let set = PageSet::from_ranges([(0, 4096), (8192, 12288), (10 * MIB, 11 * MIB)]);
    assert_eq!(spans(&set, 2 * MIB), vec![(0, 12288), (10 * MIB, 11 * MIB)]);
}

#[test]
fn ioctl_number_matches_the_uapi() {
    assert_eq!(std::mem::size_of::<PmScanArg>(), 96);
    assert_eq!(std::mem::size_of::<PageRegion>(), 24);
    assert_eq!(PAGEMAP_SCAN, 0xc060_6610);
}

#[test]
fn written_anonymous_memory_is_present() {
    let Some(_no_swap) = without_swap("written_anonymous_memory_is_present") else {
        return;
    };
    assert!(scanner().is_some(), "this kernel (6.7+) has PAGEMAP_SCAN");
    let mut child = TestChild::spawn();
    let region = child.alloc(8 * MIB);
    let range = PageSet::from_ranges([region.range(0, region.len)]);

    let all = anon_pages(child.pid()).unwrap();
    assert_eq!(all.present.intersection(&range), range);
    assert!(all.swapped.is_empty(), "no swap: nothing is swapped");
    assert_eq!(anon_pages_in(child.pid(), &range).unwrap().present, range);

    child.free(region, 2 * MIB, MIB);
    let within = anon_pages_in(child.pid(), &range).unwrap();
    let freed = PageSet::from_ranges([region.range(2 * MIB, MIB)]);
    assert_eq!(within.present, range.difference(&freed));
}

#[test]
fn scan_and_pagemap_entries_agree() {
    let mut child = TestChild::spawn();
    let region = child.alloc(16 * MIB);
    child.free(region, 4 * MIB, 4 * MIB);
    let pid = child.pid();
    let scanned = anon_pages(pid).unwrap();
    let read = anon_pages_from_entries(pid, None).unwrap();
    assert_eq!(scanned, read);
    assert!(scanned.present.bytes() >= 12 * MIB);

    let within = PageSet::from_ranges([region.range(MIB, 6 * MIB), region.range(12 * MIB, MIB)]);
    let scanned = anon_pages_in(pid, &within).unwrap();
    assert_eq!(
        scanned,
        anon_pages_from_entries(pid, Some(&within)).unwrap()
    );
    assert_eq!(scanned.present.bytes(), 4 * MIB);
}

#[test]
fn swapped_pages_are_seen_by_both_paths() {
    let Some(_swap) = TestSwap::create("swapped_pages_are_seen_by_both_paths") else {
        return;
    };
    let mut child = TestChild::spawn();
    let region = child.alloc(8 * MIB);
    let pid = child.pid();
    let out = PageSet::from_ranges([region.range(0, 4 * MIB)]);
    pageout(pid, out.ranges()).unwrap();

    let scanned = anon_pages(pid).unwrap();
    assert_eq!(scanned.swapped.intersection(&out), out);
    assert!(scanned.present.intersection(&out).is_empty());
    assert_eq!(scanned, anon_pages_from_entries(pid, None).unwrap());

    child.touch(region, 0, MIB);
    let back = anon_pages_in(pid, &out).unwrap();
    assert_eq!(back.present, PageSet::from_ranges([region.range(0, MIB)]));
    assert_eq!(
        back.swapped,
        PageSet::from_ranges([region.range(MIB, 3 * MIB)])
    );
}

#[test]
fn a_full_output_vector_is_resumed() {
    // Every other page freed: more regions than one call returns.
    let mut child = TestChild::spawn();
    let pages = REGIONS_PER_CALL as u64 * 3;
    let region = child.alloc(pages * PAGE_SIZE);
    child.free_every_other_page(region);
    let range = PageSet::from_ranges([region.range(0, region.len)]);
    let present = anon_pages_in(child.pid(), &range).unwrap().present;
    assert_eq!(present.ranges().len() as u64, pages / 2);
    assert_eq!(present.pages(), pages / 2);
    assert_eq!(
        anon_pages(child.pid()).unwrap(),
        anon_pages_from_entries(child.pid(), None).unwrap()
    );
}

#[test]
fn a_process_that_is_gone_is_recognisable() {
    let mut child = TestChild::spawn();
    let pid = child.pid();
    child.kill();
    let err = anon_pages(pid).unwrap_err();
    assert!(is_gone(&err), "{err}");
    let err = anon_pages_from_entries(pid, None).unwrap_err();
    assert!(is_gone(&err), "{err}");
}

#[test]
fn a_zombie_has_no_pages() {
    let mut child = TestChild::spawn();
    let pid = child.pid();
    let child_pid = Pid::from_raw(pid.cast_signed()).expect("the child's pid");
    kill_process(child_pid, Signal::KILL).expect("SIGKILL to our child");
    // Not reaped yet: a zombie, its address space gone.
    std::thread::sleep(std::time::Duration::from_millis(100));
    match anon_pages(pid) {
        Ok(pages) => assert_eq!(pages, AnonPages::default()),
        Err(err) => assert!(is_gone(&err), "{err}"),
    }
    child.kill();
}

#[test]
fn scan_times() {
    for mib in [64, 1024] {
        let mut child = TestChild::spawn();
        child.alloc(mib * MIB);
        let pid = child.pid();
        // The best of a few runs: the machine's other load only adds to it.
        let (mut scan, mut entries) = (Duration::MAX, Duration::MAX);
        let mut pages = AnonPages::default();
        for _ in 0..5 {
            let start = Instant::now();
            pages = anon_pages(pid).unwrap();
            scan = scan.min(start.elapsed());
            let start = Instant::now();
            anon_pages_from_entries(pid, None).unwrap();
            entries = entries.min(start.elapsed());
        }
        println!(
            "{mib} MiB process ({} MiB present, {} ranges), best of 5: PAGEMAP_SCAN {scan:?}, \
             pagemap entries {entries:?}",
            pages.present.bytes() / MIB,
            pages.present.ranges().len()
        );
    }
}
