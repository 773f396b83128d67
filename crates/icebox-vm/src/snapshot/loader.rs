//! The loader: a thread reading ranges of the memory file into the host page cache, in the
//! order given. FaaSnap's concurrent paging runs it beside the resumed guest (a page the
//! loader got to first costs the guest a minor fault instead of a disk read); REAP and eager
//! restores wait for it before the guest resumes.

use super::memfile::read_into_cache;
use icebox_core::units::MIB_USIZE;
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes per read: large enough for the disk to stream, small enough to stop promptly.
const READ: usize = MIB_USIZE;

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct LoadReport {
    pub bytes: u64,
    pub ranges: u64,
    pub ms: f64,
    pub error: Option<String>,
}

pub struct Loader {
    stop: Arc<AtomicBool>,
    /// Becomes true when the thread is done.
    done: tokio::sync::watch::Receiver<bool>,
    bytes: Arc<AtomicU64>,
    started: Instant,
    thread: Mutex<Option<JoinHandle<LoadReport>>>,
    report: Mutex<Option<LoadReport>>,
}

impl Loader {
    /// Starts reading `ranges` (offset, length in bytes) of `file`, in order.
    pub fn spawn(file: File, ranges: Vec<(u64, u64)>) -> std::io::Result<Loader> {
        let stop = Arc::new(AtomicBool::new(false));
        let bytes = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let (done_tx, done) = tokio::sync::watch::channel(false);
        let thread = {
            let (stop, bytes) = (stop.clone(), bytes.clone());
            std::thread::Builder::new()
                .name("vm-loader".into())
                .spawn(move || {
                    let report = load(&file, &ranges, &stop, &bytes, started);
                    let _ = done_tx.send(true);
                    report
                })?
        };
        Ok(Loader {
            stop,
            done,
            bytes,
            started,
            thread: Mutex::new(Some(thread)),
            report: Mutex::new(None),
        })
    }

    /// Waits until every range is read (or the loader was stopped).
    pub fn wait(&self) -> LoadReport {
        if let Some(thread) = self.thread.lock().unwrap().take() {
            let report = thread.join().unwrap_or_else(|_| LoadReport {
                error: Some("the loader panicked".into()),
                ..Default::default()
            });
            *self.report.lock().unwrap() = Some(report);
        }
        self.report.lock().unwrap().clone().unwrap_or_default()
    }

    /// Waits, without blocking the caller's thread, until the loader is done.
    pub async fn finished(&self) -> LoadReport {
        let mut done = self.done.clone();
        let _ = done.wait_for(|d| *d).await;
        self.wait()
    }

    /// Its report if it is done, else the bytes read so far and the time since it started.
    pub fn progress(&self) -> (LoadReport, bool) {
        let finished = self
            .thread
            .lock()
            .unwrap()
            .as_ref()
            .is_none_or(|t| t.is_finished());
        if finished {
            return (self.wait(), true);
        }
        let report = LoadReport {
            bytes: self.bytes.load(Ordering::Relaxed),
            ms: self.started.elapsed().as_secs_f64() * 1000.0,
            ..Default::default()
        };
        (report, false)
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.stop();
    }
}

fn load(
    file: &File,
    ranges: &[(u64, u64)],
    stop: &AtomicBool,
    bytes: &AtomicU64,
    started: Instant,
) -> LoadReport {
    let mut buf = vec![0u8; READ];
    let stopped = || stop.load(Ordering::Relaxed);
    let mut report = LoadReport::default();
    for (offset, len) in ranges {
        if stopped() {
            break;
        }
        match read_into_cache(file, *offset, *len, &mut buf, &stopped) {
            Ok(n) => {
                report.bytes += n;
                bytes.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                report.error = Some(e.to_string());
                break;
            }
        }
        report.ranges += 1;
    }
    report.ms = ms(started.elapsed());
    report
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::units::{GIB, MIB};
    use std::os::unix::fs::FileExt;

    #[test]
    fn reads_every_range_in_order_and_reports_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m");
        let f = File::create(&path).unwrap();
        f.write_all_at(&vec![3u8; 3 * MIB_USIZE], 0).unwrap();
        let loader = Loader::spawn(
            File::open(&path).unwrap(),
            vec![(0, 4096), (2 * MIB, MIB), ((3 * MIB) - 100, 1000)],
        )
        .unwrap();
        let report = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(loader.finished());
        // The last range runs past the end of the file: only what is there is read.
        assert_eq!(report.bytes, 4096 + MIB + 100);
        assert_eq!(report.ranges, 3);
        assert!(report.error.is_none());
        assert_eq!(loader.progress(), (report, true));
    }

    #[test]
    fn a_stopped_loader_ends_early() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m");
        // A GiB of holes takes the loader far longer than it takes to stop it.
        File::create(&path).unwrap().set_len(GIB).unwrap();
        let ranges = (0..1024).map(|i| (i * MIB, MIB)).collect();
        let loader = Loader::spawn(File::open(&path).unwrap(), ranges).unwrap();
        loader.stop();
        assert!(loader.wait().bytes < GIB);
    }
}
