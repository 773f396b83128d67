//! FaaSnap's host page recording (§4.4, §5 of the paper): while the first restored instance
//! runs, QEMU's resident set is polled, and each time it grew by a group's worth of pages the
//! memory file's page-cache residency is scanned (mincore on a mapping of our own); pages new
//! since the last scan are appended in address order. Pages the host read ahead count too:
//! they are what an invocation with other input is likely to touch next.

use super::memfile::{drop_cache, Residency};
use icebox_snap::loadset::GROUP_PAGES;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often QEMU's resident set is read (one small /proc read).
const POLL: Duration = Duration::from_millis(1);

/// The pages that came into the page cache while recording, in the order scans found them.
#[derive(Debug, Default)]
pub struct Recording {
    pub pages: Vec<u64>,
    pub scans: u64,
    /// Pages already cached when recording began (mapped by another instance of the same
    /// snapshot): they cannot be told apart from the working set, so they are not in it.
    pub already_resident: u64,
}

pub struct Recorder {
    pid: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
    recorded: Arc<AtomicU64>,
    thread: Mutex<Option<JoinHandle<io::Result<Recording>>>>,
}

impl Recorder {
    /// Drops the memory file from the page cache (what a restore reads must show up as new)
    /// and starts watching it. QEMU's pid is given by [`Recorder::attach`] once it runs.
    pub fn start(memory: &File) -> io::Result<Recorder> {
        drop_cache(memory)?;
        let residency = Residency::map(memory)?;
        let mut seen = Vec::new();
        residency.scan(&mut seen)?;
        let already_resident = seen.iter().filter(|b| *b & 1 != 0).count() as u64;
        let pid = Arc::new(AtomicU32::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let recorded = Arc::new(AtomicU64::new(0));
        let thread = {
            let (pid, stop, recorded) = (pid.clone(), stop.clone(), recorded.clone());
            std::thread::Builder::new()
                .name("vm-record".into())
                .spawn(move || {
                    let mut rec = Recording {
                        already_resident,
                        ..Default::default()
                    };
                    record(&residency, &mut seen, &pid, &stop, &recorded, &mut rec)?;
                    Ok(rec)
                })?
        };
        Ok(Recorder {
            pid,
            stop,
            recorded,
            thread: Mutex::new(Some(thread)),
        })
    }

    pub fn attach(&self, qemu_pid: u32) {
        self.pid.store(qemu_pid, Ordering::SeqCst);
    }

    /// Pages recorded so far.
    pub fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::Relaxed)
    }

    /// Stops recording without waiting for it (the instance is going).
    pub fn cancel(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Stops (after one last scan) and hands over the recording; `None` once taken.
    pub fn finish(&self) -> Option<io::Result<Recording>> {
        self.stop.store(true, Ordering::SeqCst);
        let thread = self.thread.lock().unwrap().take()?;
        Some(
            thread
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the recorder panicked"))),
        )
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.cancel();
    }
}

fn record(
    residency: &Residency,
    seen: &mut [u8],
    pid: &AtomicU32,
    stop: &AtomicBool,
    recorded: &AtomicU64,
    rec: &mut Recording,
) -> io::Result<()> {
    let mut now = Vec::with_capacity(seen.len());
    let mut scan = |rec: &mut Recording| -> io::Result<()> {
        residency.scan(&mut now)?;
        for (page, (was, is)) in seen.iter_mut().zip(&now).enumerate() {
            if *is & 1 != 0 && *was & 1 == 0 {
                *was = 1;
                rec.pages.push(page as u64);
            }
        }
        rec.scans += 1;
        recorded.store(rec.pages.len() as u64, Ordering::Relaxed);
        Ok(())
    };
    let mut rss_at_scan = 0u64;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(POLL);
        let pid = pid.load(Ordering::SeqCst);
        if pid == 0 {
            continue;
        }
        let Some(rss) = resident_pages(pid) else {
            break; // QEMU is gone: nothing more will come in
        };
        if rss >= rss_at_scan + GROUP_PAGES as u64 {
            scan(rec)?;
            rss_at_scan = rss;
        }
    }
    scan(rec)
}

/// Resident pages of a process (/proc/PID/statm, second field).
fn resident_pages(pid: u32) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    statm.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::memfile::{read_into_cache, PAGE};
    use std::os::unix::fs::FileExt;

    #[test]
    #[expect(
        clippy::cast_possible_truncation,
        reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
    )]
    fn pages_read_while_recording_are_found_in_scan_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ram");
        let f = File::create(&path).unwrap();
        f.write_all_at(&vec![1u8; 4096 * PAGE as usize], 0).unwrap();
        f.sync_all().unwrap();
        drop(f);
        let f = File::open(&path).unwrap();
        let rec = Recorder::start(&f).unwrap();
        // This process stands in for QEMU: what it reads comes into the page cache.
        rec.attach(std::process::id());
        let mut buf = vec![0u8; 64 * PAGE as usize];
        read_into_cache(&f, 1000 * PAGE, 8 * PAGE, &mut buf, &|| false).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let recording = rec.finish().unwrap().unwrap();
        assert!(rec.finish().is_none());
        assert!(recording.scans >= 1);
        // Readahead may bring neighbours along; the pages read are there, each once.
        for p in 1000..1008 {
            assert!(recording.pages.contains(&p), "{p} missing");
        }
        let mut unique = recording.pages.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), recording.pages.len());
    }
}
