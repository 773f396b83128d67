//! Installing the loading set: FaaSnap's loader thread (while the task runs) and REAP's
//! up-front load (in the handler thread, before the task's faults are served).

use super::core::{Core, Outcome};
use crate::loadset_file;
use crate::PAGE_SIZE;
use icebox_core::units::MIB;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Largest piece installed under one hold of the lock, so faults wait little behind it.
const LOAD_CHUNK_PAGES: u64 = 64;
/// How far ahead of the loader the loading set file is read.
const READ_AHEAD: u64 = 4 * MIB;

/// REAP: the whole loading set, before any fault is served (faults read meanwhile wait).
pub(super) fn reap(core: &Core, plan: &[loadset_file::IndexRegion]) {
    let started = Instant::now();
    load_plan(core, plan);
    core.lock().stats.loader_ms = Some(started.elapsed().as_secs_f64() * 1e3);
}

/// FaaSnap: the loader thread, from the end of the restore, while the task runs.
pub(super) fn load_concurrently(core: &Core, plan: &[loadset_file::IndexRegion]) {
    {
        let mut st = core.lock();
        while !st.finished && st.failed.is_none() && !core.stop.load(Ordering::SeqCst) {
            st = core.changed.wait(st).unwrap();
        }
        if !st.finished {
            return;
        }
    }
    let started = Instant::now();
    load_plan(core, plan);
    core.lock().stats.loader_ms = Some(started.elapsed().as_secs_f64() * 1e3);
}

fn load_plan(core: &Core, plan: &[loadset_file::IndexRegion]) {
    let Some(file) = core.loadset.as_ref() else {
        return;
    };
    let mut ahead = 0u64;
    for region in plan {
        let mut done = 0;
        while done < region.pages {
            if core.stop.load(Ordering::SeqCst) {
                return;
            }
            let pages = (region.pages - done).min(LOAD_CHUNK_PAGES);
            let offset = region.offset + done * PAGE_SIZE;
            if offset + READ_AHEAD / 2 >= ahead {
                file.will_need(ahead.max(offset), READ_AHEAD);
                ahead = offset + READ_AHEAD;
            }
            // The disk read happens here, outside the lock.
            file.populate(offset, pages * PAGE_SIZE);
            let img = region.vaddr + done * PAGE_SIZE;
            let mut tries = 0;
            loop {
                let outcome = {
                    let mut st = core.lock();
                    core.load(&mut st, region.pid, img, pages)
                };
                if outcome != Outcome::Busy || tries > 1000 {
                    break;
                }
                tries += 1;
                std::thread::sleep(Duration::from_micros(100));
            }
            done += pages;
        }
    }
}
