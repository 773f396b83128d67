//! Puckets of real processes: a Python child allocates its runtime, init and execution memory
//! in phases and touches what a "request" uses, over pipes. Paging out anonymous memory needs
//! swap: those tests make their own zram device (root only), others run without swap.

use super::*;
use crate::testchild::{Region, TestChild};
use crate::testswap::{swap_is_on, without_swap, TestSwap};
use crate::PAGE_SIZE;

use icebox_core::units::MIB;
const GROUP: u64 = 16;

fn set(region: Region, off: u64, len: u64) -> PageSet {
    PageSet::from_ranges([region.range(off, len)])
}

fn pages_in(pid: u32, within: &PageSet) -> AnonPages {
    anon_pages_in(pid, within).unwrap()
}

/// The aligned groups' worth of slack at the edges of a range: group-aligned probing is exact
/// only inside, and the child's regions are page-aligned only.
fn inner(region: Region, off: u64, len: u64) -> PageSet {
    let slack = GROUP * PAGE_SIZE;
    set(region, off + slack, len - 2 * slack)
}

/// Pages a page-out may miss: freshly faulted pages wait in another CPU's LRU batch (up to 15
/// per CPU) where MADV_PAGEOUT cannot isolate them.
const MAY_MISS: u64 = 64;

/// `part` is `whole` but for at most [`MAY_MISS`] pages.
fn assert_mostly(part: &PageSet, whole: &PageSet, what: &str) {
    assert!(
        part.difference(whole).is_empty(),
        "{what}: pages outside {whole:?}"
    );
    let missing = whole.pages() - part.pages();
    assert!(
        missing <= MAY_MISS,
        "{what}: {missing} of {} pages missing",
        whole.pages()
    );
}

#[test]
fn segments_without_swap_and_an_honest_zero() {
    let Some(_no_swap) = without_swap("segments_without_swap_and_an_honest_zero") else {
        return;
    };
    let mut child = TestChild::spawn();
    let pid = child.pid();
    let mut puckets = Puckets::new(GROUP);
    let runtime = child.alloc(16 * MIB);
    puckets.barrier_runtime(&[pid]).unwrap();
    let init = child.alloc(32 * MIB);
    puckets.barrier_init(&[pid]).unwrap();
    let execution = child.alloc(8 * MIB);

    let sets = &puckets.pids[&pid];
    assert_eq!(
        sets.runtime
            .intersection(&set(runtime, 0, runtime.len))
            .bytes(),
        16 * MIB
    );
    assert!(sets
        .runtime
        .intersection(&set(init, 0, init.len))
        .is_empty());
    assert_eq!(
        sets.init.intersection(&set(init, 0, init.len)).bytes(),
        32 * MIB
    );

    let seen = puckets.observe().unwrap();
    assert!(seen.segments.runtime >= 16 * MIB, "{seen:?}");
    assert!(seen.segments.init >= 32 * MIB, "{seen:?}");
    assert!(seen.segments.execution >= 8 * MIB, "{seen:?}");
    assert_eq!(
        (
            seen.segments.hot,
            seen.segments.offloaded,
            seen.refaulted_bytes
        ),
        (0, 0, 0)
    );

    let report = puckets.offload_runtime().unwrap();
    assert!(report.advised_bytes >= 16 * MIB, "{report:?}");
    let probes = puckets.probe_init().unwrap();
    let semiwarm = puckets.offload_any(4 * MIB).unwrap();
    assert_eq!(semiwarm.advised_bytes, 4 * MIB);
    if !swap_is_on() {
        // Nothing could leave RAM, and nothing is claimed to have.
        for report in [report, probes, semiwarm] {
            assert_eq!(report.offloaded_bytes, 0, "{report:?}");
        }
        let seen = puckets.observe().unwrap();
        assert_eq!(
            (seen.probes, seen.refaulted_bytes, seen.segments.offloaded),
            (0, 0, 0)
        );
        assert!(pages_in(pid, &set(execution, 0, execution.len))
            .swapped
            .is_empty());
    }

    child.kill();
    assert_eq!(puckets.observe().unwrap(), Observation::default());
    assert!(puckets.pids().is_empty(), "an exited process is forgotten");
    assert_eq!(puckets.offload_any(MIB).unwrap().advised_bytes, 0);
}

#[test]
fn init_window_hot_pool_rollback_and_semiwarm() {
    let Some(_swap) = TestSwap::create("init_window_hot_pool_rollback_and_semiwarm") else {
        return;
    };
    let mut child = TestChild::spawn();
    let pid = child.pid();
    let mut puckets = Puckets::new(GROUP);
    let runtime = child.alloc(16 * MIB);
    puckets.barrier_runtime(&[pid]).unwrap();
    let init = child.alloc(32 * MIB);
    puckets.barrier_init(&[pid]).unwrap();
    let all_runtime = set(runtime, 0, runtime.len);

    // The runtime segment goes, and stays gone: nothing uses it.
    let report = puckets.offload_runtime().unwrap();
    assert!(report.offloaded_bytes >= 16 * MIB, "{report:?}");
    assert_mostly(
        &pages_in(pid, &all_runtime).swapped,
        &all_runtime,
        "runtime swapped",
    );

    // One probe page per 64 KiB group of init.
    let report = puckets.probe_init().unwrap();
    let groups = init.len / (GROUP * PAGE_SIZE);
    assert!(
        report.offloaded_bytes / PAGE_SIZE >= groups - MAY_MISS,
        "{report:?}"
    );
    assert!(
        report.advised_bytes / PAGE_SIZE <= groups + MAY_MISS,
        "{report:?}"
    );
    let seen = puckets.observe().unwrap();
    assert_eq!(seen.untouched_probes, seen.probes);
    assert_eq!(seen.probes, report.offloaded_bytes / PAGE_SIZE);

    // A request uses the first half of init: its probes come back.
    child.touch(init, 0, 16 * MIB);
    let seen = puckets.observe().unwrap();
    assert!(
        seen.refaulted_bytes >= (groups / 2 - MAY_MISS) * PAGE_SIZE,
        "{seen:?}"
    );
    let untouched = seen.untouched_probes;
    assert!(untouched.abs_diff(groups / 2) <= MAY_MISS, "{seen:?}");

    // The window closes: the untouched half is paged out whole, the touched half is hot.
    let report = puckets.offload_init_cold().unwrap();
    assert!(report.offloaded_bytes >= 14 * MIB, "{report:?}");
    let cold = inner(init, 16 * MIB, 16 * MIB);
    let hot = set(init, 0, 16 * MIB);
    assert_mostly(&pages_in(pid, &cold).swapped, &cold, "cold init swapped");
    assert_eq!(pages_in(pid, &hot).present, hot);
    assert_eq!(puckets.pids[&pid].hot.intersection(&hot), hot);

    // The next request: the hot half is still local, the cold half and the runtime stay out.
    child.touch(init, 0, 16 * MIB);
    let seen = puckets.observe().unwrap();
    assert_eq!((seen.probes, seen.untouched_probes), (0, 0));
    assert!(seen.segments.hot >= 16 * MIB, "{seen:?}");
    assert!(seen.segments.offloaded >= 30 * MIB, "{seen:?}");
    assert_mostly(
        &pages_in(pid, &cold).swapped,
        &cold,
        "cold init still swapped",
    );
    assert_mostly(
        &pages_in(pid, &all_runtime).swapped,
        &all_runtime,
        "runtime still swapped",
    );

    // Rollback: the hot pool is probed; a request now uses only its first 8 MiB.
    let report = puckets.rollback().unwrap();
    assert!(
        report.offloaded_bytes >= 8 * MIB / (GROUP * PAGE_SIZE) * PAGE_SIZE,
        "{report:?}"
    );
    child.touch(init, 0, 8 * MIB);
    let seen = puckets.observe().unwrap();
    assert!(
        seen.untouched_probes > 0 && seen.untouched_probes < seen.probes,
        "{seen:?}"
    );
    let report = puckets.offload_rollback_cold().unwrap();
    assert!(report.offloaded_bytes >= 6 * MIB, "{report:?}");
    let still_hot = inner(init, 0, 8 * MIB);
    let cooled = inner(init, 8 * MIB, 8 * MIB);
    assert_eq!(pages_in(pid, &still_hot).present, still_hot);
    assert_mostly(
        &pages_in(pid, &cooled).swapped,
        &cooled,
        "cooled hot pages swapped",
    );
    let sets = &puckets.pids[&pid];
    assert_eq!(sets.hot.intersection(&still_hot), still_hot);
    assert!(sets.hot.intersection(&cooled).is_empty());

    // Freed pages leave every set: neither hot nor offloaded.
    let freed = set(init, 4 * MIB, 16 * MIB);
    child.free(init, 4 * MIB, 16 * MIB);
    let before = puckets.observe().unwrap();
    let sets = &puckets.pids[&pid];
    for (name, s) in [
        ("hot", &sets.hot),
        ("offloaded", &sets.offloaded),
        ("init", &sets.init),
    ] {
        assert!(
            s.intersection(&freed).is_empty(),
            "freed pages still in {name}"
        );
    }

    // Semi-warm: page out everything that is left, a step at a time.
    let first = puckets.offload_any(2 * MIB).unwrap();
    assert_eq!(first.advised_bytes, 2 * MIB);
    assert!(first.offloaded_bytes > 0, "{first:?}");
    puckets.offload_any(u64::MAX).unwrap();
    let left = pages_in(pid, &set(init, 0, init.len).union(&all_runtime));
    assert!(left.present.pages() <= MAY_MISS, "{:?}", left.present);
    assert!(puckets.pids[&pid]
        .hot
        .intersection(&set(init, 0, 4 * MIB))
        .is_empty());
    let after = puckets.observe().unwrap();
    assert!(
        after.segments.offloaded > before.segments.offloaded,
        "{before:?} {after:?}"
    );
    assert!(
        after.segments.hot < before.segments.hot,
        "{before:?} {after:?}"
    );

    child.kill();
    puckets.offload_any(MIB).unwrap();
    assert!(puckets.pids().is_empty());
}

#[test]
fn barrier_times() {
    let Some(_no_swap) = without_swap("barrier_times") else {
        return;
    };
    for mib in [64, 1024] {
        let mut child = TestChild::spawn();
        let pid = child.pid();
        let mut puckets = Puckets::new(GROUP);
        child.alloc(mib * MIB / 4);
        let runtime = puckets.barrier_runtime(&[pid]).unwrap();
        child.alloc(mib * MIB * 3 / 4);
        let init = puckets.barrier_init(&[pid]).unwrap();
        // The best of a few runs: the machine's other load only adds to it.
        let (mut best_init, mut best_observe) = (init, Duration::MAX);
        for _ in 0..5 {
            best_init = best_init.min(puckets.barrier_init(&[pid]).unwrap());
            let observe = Instant::now();
            puckets.observe().unwrap();
            best_observe = best_observe.min(observe.elapsed());
        }
        let seen = puckets.observe().unwrap();
        println!(
            "{mib} MiB process: barrier_runtime {runtime:?}, barrier_init {init:?} (best of 6: \
             {best_init:?}), observe best of 5: {best_observe:?} ({} MiB local)",
            (seen.segments.runtime + seen.segments.init + seen.segments.execution) / MIB
        );
    }
}
