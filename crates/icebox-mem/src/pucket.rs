//! FaaSMem's page buckets ("puckets") of one instance, the mechanism only: which anonymous
//! pages belong to the runtime, init and execution segments, which icebox paged out, and
//! which came back (the hot pool). The policy (when to call each step) lives elsewhere.
//!
//! Without accessed bits, hotness is learnt by offloading and watching: a page icebox paged
//! out that is present again at the next scan was touched. Every step scans each process's
//! whole address space (a few ms per GiB) and first brings the sets up to date: pages that are
//! neither present nor swapped were freed by the process and leave every set.

use crate::pagemap::{anon_pages, anon_pages_in, is_gone, AnonPages};
use crate::pageout::pageout;
use crate::pageset::PageSet;
use std::collections::BTreeMap;
use std::io;
use std::time::{Duration, Instant};

/// Local (present) anonymous bytes per segment; the four local fields do not overlap: a hot
/// page counts only in `hot`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentBytes {
    pub runtime: u64,
    pub init: u64,
    /// Present anonymous pages outside the runtime and init segments and the hot pool.
    pub execution: u64,
    /// The hot pool's present pages.
    pub hot: u64,
    /// Pages icebox paged out (probes included) that are still swapped.
    pub offloaded: u64,
}

/// What [`Puckets::observe`] saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observation {
    /// Bytes icebox paged out that came back since the last observation (now in the hot pool).
    pub refaulted_bytes: u64,
    /// Probe pages being watched (init probes, or hot-pool probes after a rollback) that are
    /// still swapped.
    pub untouched_probes: u64,
    /// Probe pages being watched, touched or not.
    pub probes: u64,
    pub segments: SegmentBytes,
}

/// What a paging-out step did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffloadReport {
    /// Bytes advised MADV_PAGEOUT.
    pub advised_bytes: u64,
    /// Advised bytes that are swapped afterwards. Without swap the kernel cannot move
    /// anonymous pages anywhere, and this is 0; pages shared with another process (after a
    /// fork) stay too.
    pub offloaded_bytes: u64,
    pub took: Duration,
}

/// The page sets of one process of the instance.
#[derive(Clone, Debug, Default)]
struct Sets {
    runtime: PageSet,
    init: PageSet,
    hot: PageSet,
    /// Paged out by icebox, still swapped (not seen back).
    offloaded: PageSet,
    /// Init probes paged out and still swapped.
    probes: PageSet,
    /// Init probes that came back.
    probes_back: PageSet,
    /// Hot-pool probes paged out and still swapped.
    hot_probes: PageSet,
    hot_probes_back: PageSet,
    /// Pages [`Puckets::offload_any`] advised that stayed in RAM (shared, or no swap): not
    /// chosen again until the next observation.
    unmovable: PageSet,
    /// Bytes seen back since the last observation.
    refaulted: u64,
}

impl Sets {
    /// Brings the sets up to date with a whole-address-space scan.
    fn refresh(&mut self, now: &AnonPages) {
        let live = now.present.union(&now.swapped);
        for set in [
            &mut self.runtime,
            &mut self.init,
            &mut self.hot,
            &mut self.offloaded,
            &mut self.probes,
            &mut self.probes_back,
            &mut self.hot_probes,
            &mut self.hot_probes_back,
            &mut self.unmovable,
        ] {
            *set = set.intersection(&live);
        }
        let back = self.offloaded.intersection(&now.present);
        self.offloaded = self.offloaded.difference(&back);
        self.hot = self.hot.union(&back);
        let probes_back = self.probes.intersection(&now.present);
        self.probes = self.probes.difference(&probes_back);
        self.probes_back = self.probes_back.union(&probes_back);
        let hot_back = self.hot_probes.intersection(&now.present);
        self.hot_probes = self.hot_probes.difference(&hot_back);
        self.hot_probes_back = self.hot_probes_back.union(&hot_back);
        self.refaulted += back.bytes() + probes_back.bytes() + hot_back.bytes();
    }

    fn segments(&self, now: &AnonPages) -> SegmentBytes {
        let present = &now.present;
        let hot = self.hot.intersection(present);
        let runtime = self.runtime.intersection(present).difference(&hot);
        let init = self.init.intersection(present).difference(&hot);
        let execution = present
            .difference(&self.runtime)
            .difference(&self.init)
            .difference(&hot);
        let offloaded = self.offloaded.union(&self.probes).union(&self.hot_probes);
        SegmentBytes {
            runtime: runtime.bytes(),
            init: init.bytes(),
            execution: execution.bytes(),
            hot: hot.bytes(),
            offloaded: offloaded.intersection(&now.swapped).bytes(),
        }
    }
}

/// The puckets of one instance: page sets per process.
#[derive(Clone, Debug)]
pub struct Puckets {
    group_pages: u64,
    pids: BTreeMap<u32, Sets>,
}

impl Puckets {
    /// Puckets probing one page per aligned group of `group_pages` pages.
    pub fn new(group_pages: u64) -> Self {
        Puckets {
            group_pages: group_pages.max(1),
            pids: BTreeMap::new(),
        }
    }

    /// The processes tracked.
    pub fn pids(&self) -> Vec<u32> {
        self.pids.keys().copied().collect()
    }

    /// Records the runtime segment: the present anonymous pages of each process now. Starts
    /// the puckets of these processes afresh. Returns the time the scans took.
    pub fn barrier_runtime(&mut self, pids: &[u32]) -> io::Result<Duration> {
        let start = Instant::now();
        for &pid in pids {
            match scan(pid)? {
                Some(now) => {
                    let sets = Sets {
                        runtime: now.present,
                        ..Sets::default()
                    };
                    self.pids.insert(pid, sets);
                }
                None => self.forget_pid(pid),
            }
        }
        Ok(start.elapsed())
    }

    /// Records the init segment: the present anonymous pages now that were not runtime pages.
    /// A process not seen at the runtime barrier has an empty runtime segment.
    pub fn barrier_init(&mut self, pids: &[u32]) -> io::Result<Duration> {
        let start = Instant::now();
        for &pid in pids {
            match scan(pid)? {
                Some(now) => {
                    let sets = self.pids.entry(pid).or_default();
                    sets.refresh(&now);
                    sets.init = now.present.difference(&sets.runtime);
                }
                None => self.forget_pid(pid),
            }
        }
        Ok(start.elapsed())
    }

    /// Pages out every present runtime page not in the hot pool.
    pub fn offload_runtime(&mut self) -> io::Result<OffloadReport> {
        self.step(|sets, now, _| {
            let target = sets
                .runtime
                .intersection(&now.present)
                .difference(&sets.hot);
            (
                target,
                Box::new(|sets: &mut Sets, gone: &PageSet| {
                    sets.offloaded = sets.offloaded.union(gone);
                }),
            )
        })
    }

    /// Pages out the init segment's probe pages (one per group) that are present, and
    /// watches those that went.
    pub fn probe_init(&mut self) -> io::Result<OffloadReport> {
        self.step(|sets, now, group| {
            let target = sets
                .init
                .probes(group)
                .intersection(&now.present)
                .difference(&sets.hot);
            (
                target,
                Box::new(|sets: &mut Sets, gone: &PageSet| {
                    sets.probes = sets.probes.union(gone);
                }),
            )
        })
    }

    /// Scans: pages icebox paged out that are present again join the hot pool, probes that
    /// came back count as touched; and the local bytes of each segment.
    pub fn observe(&mut self) -> io::Result<Observation> {
        let mut observation = Observation::default();
        let mut gone = Vec::new();
        for (&pid, sets) in &mut self.pids {
            let Some(now) = scan(pid)? else {
                gone.push(pid);
                continue;
            };
            sets.refresh(&now);
            sets.unmovable = PageSet::new();
            observation.refaulted_bytes += std::mem::take(&mut sets.refaulted);
            let untouched = sets.probes.pages() + sets.hot_probes.pages();
            observation.untouched_probes += untouched;
            observation.probes +=
                untouched + sets.probes_back.pages() + sets.hot_probes_back.pages();
            let segments = sets.segments(&now);
            let total = &mut observation.segments;
            total.runtime += segments.runtime;
            total.init += segments.init;
            total.execution += segments.execution;
            total.hot += segments.hot;
            total.offloaded += segments.offloaded;
        }
        for pid in gone {
            self.forget_pid(pid);
        }
        Ok(observation)
    }

    /// Closes the init window: the init groups whose probe is still swapped are paged out
    /// whole; the groups whose probe came back join the hot pool. The probes are done.
    pub fn offload_init_cold(&mut self) -> io::Result<OffloadReport> {
        self.step(|sets, now, group| {
            let hot_groups = sets.init.in_groups_of(&sets.probes_back, group);
            sets.hot = sets.hot.union(&hot_groups);
            let cold_groups = sets.init.in_groups_of(&sets.probes, group);
            let target = cold_groups.intersection(&now.present).difference(&sets.hot);
            sets.offloaded = sets.offloaded.union(&sets.probes);
            sets.probes = PageSet::new();
            sets.probes_back = PageSet::new();
            (
                target,
                Box::new(|sets: &mut Sets, gone: &PageSet| {
                    sets.offloaded = sets.offloaded.union(gone);
                }),
            )
        })
    }

    /// Starts a rollback: pages out one probe page per group of the hot pool and watches them.
    pub fn rollback(&mut self) -> io::Result<OffloadReport> {
        self.step(|sets, now, group| {
            let target = sets.hot.probes(group).intersection(&now.present);
            (
                target,
                Box::new(|sets: &mut Sets, gone: &PageSet| {
                    sets.hot_probes = sets.hot_probes.union(gone);
                }),
            )
        })
    }

    /// Ends a rollback: hot groups whose probe stayed swapped leave the hot pool and are paged
    /// out; the rest stay hot.
    pub fn offload_rollback_cold(&mut self) -> io::Result<OffloadReport> {
        self.step(|sets, now, group| {
            let cold = sets.hot.in_groups_of(&sets.hot_probes, group);
            sets.hot = sets.hot.difference(&cold);
            let target = cold.intersection(&now.present);
            sets.offloaded = sets.offloaded.union(&sets.hot_probes);
            sets.hot_probes = PageSet::new();
            sets.hot_probes_back = PageSet::new();
            (
                target,
                Box::new(|sets: &mut Sets, gone: &PageSet| {
                    sets.offloaded = sets.offloaded.union(gone);
                }),
            )
        })
    }

    /// A semi-warm step: pages out up to `max_bytes` of present anonymous pages, init pages
    /// first, then runtime, execution, and the hot pool last. Pages that would not leave RAM
    /// are not chosen again until the next [`Puckets::observe`].
    pub fn offload_any(&mut self, max_bytes: u64) -> io::Result<OffloadReport> {
        let mut left = max_bytes;
        self.step(|sets, now, _| {
            let present = now.present.difference(&sets.unmovable);
            let hot = sets.hot.intersection(&present);
            let init = sets.init.intersection(&present).difference(&hot);
            let runtime = sets.runtime.intersection(&present).difference(&hot);
            let execution = present
                .difference(&sets.init)
                .difference(&sets.runtime)
                .difference(&hot);
            let mut target = PageSet::new();
            for segment in [init, runtime, execution, hot] {
                let take = segment.first_bytes(left);
                left -= take.bytes();
                target = target.union(&take);
            }
            let advised = target.clone();
            (
                target,
                Box::new(move |sets: &mut Sets, gone: &PageSet| {
                    sets.offloaded = sets.offloaded.union(gone);
                    sets.hot = sets.hot.difference(gone);
                    sets.unmovable = sets.unmovable.union(&advised.difference(gone));
                }),
            )
        })
    }

    /// Stops tracking a process (it exited).
    pub fn forget_pid(&mut self, pid: u32) {
        self.pids.remove(&pid);
    }

    /// One paging-out step over every process: scan and refresh, `choose` the pages to page
    /// out (and update the sets), page them out, then hand `apply` the pages that did leave
    /// RAM. Processes that are gone are forgotten.
    fn step<F>(&mut self, mut choose: F) -> io::Result<OffloadReport>
    where
        F: FnMut(&mut Sets, &AnonPages, u64) -> (PageSet, Applier),
    {
        let start = Instant::now();
        let mut report = OffloadReport::default();
        let mut gone_pids = Vec::new();
        let group_pages = self.group_pages;
        for (&pid, sets) in &mut self.pids {
            let Some(now) = scan(pid)? else {
                gone_pids.push(pid);
                continue;
            };
            sets.refresh(&now);
            let (target, apply) = choose(sets, &now, group_pages);
            if target.is_empty() {
                continue;
            }
            match page_out(pid, &target)? {
                Some((advised, gone)) => {
                    report.advised_bytes += advised;
                    report.offloaded_bytes += gone.bytes();
                    apply(sets, &gone);
                }
                None => gone_pids.push(pid),
            }
        }
        for pid in gone_pids {
            self.forget_pid(pid);
        }
        report.took = start.elapsed();
        Ok(report)
    }
}

type Applier = Box<dyn FnOnce(&mut Sets, &PageSet)>;

/// The whole-space scan of `pid`, or `None` when it is gone.
fn scan(pid: u32) -> io::Result<Option<AnonPages>> {
    match anon_pages(pid) {
        Ok(now) => Ok(Some(now)),
        Err(err) if is_gone(&err) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Pages out `target` of `pid`: the bytes advised and the pages of `target` swapped afterwards,
/// or `None` when the process is gone.
fn page_out(pid: u32, target: &PageSet) -> io::Result<Option<(u64, PageSet)>> {
    let advised = match pageout(pid, target.ranges()) {
        Ok(report) => report.bytes_advised,
        Err(err) if is_gone(&err) => return Ok(None),
        Err(err) => return Err(err),
    };
    match anon_pages_in(pid, target) {
        Ok(after) => Ok(Some((advised, after.swapped))),
        Err(err) if is_gone(&err) => Ok(None),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests;
