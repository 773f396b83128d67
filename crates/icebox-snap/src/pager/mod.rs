//! The pager: a lazy-pages server inside iceboxd that `criu restore --lazy-pages` hands the
//! restored tasks' userfaultfds to. It serves their faults from the snapshot's images (a copy
//! of the page, or the zero page for pages the image does not hold), follows the
//! non-cooperative events (madvise/munmap drop ranges, mremap moves them, fork adds the
//! child's address space), and, per mode, records the faulting pages in order (record) or
//! installs the loading set: concurrently with the running task (FaaSnap) or before any fault
//! is served (REAP). Two threads: the handler (epoll over the fds) and, for FaaSnap, the
//! loader. It ends when told to, or by itself once every address space is gone.

mod core;
mod handler;
mod loader;
mod pending;
mod socket;
mod source;
mod stats;
mod uffd;

pub use self::socket::SOCKET_NAME;
pub use self::stats::PagerStats;

use self::core::{Core, State, TOKEN_LISTEN, TOKEN_STOP};
use self::source::{Mapped, TaskSource};
use crate::checksum::FileSums;
use crate::image;
use crate::loadset_file::{self, TouchedPage};
use crate::PAGE_SIZE;
use rustix::event::{epoll, eventfd, EventfdFlags};
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PagerMode {
    /// Faults only (tests, and restores without a loading set).
    OnDemand,
    /// Faults only, one page each, logged in order.
    Record,
    /// The loading set installed by a loader thread while the task runs.
    Faasnap,
    /// The loading set installed before any fault is served.
    Reap,
}

impl PagerMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PagerMode::OnDemand => "on-demand",
            PagerMode::Record => "record",
            PagerMode::Faasnap => "faasnap",
            PagerMode::Reap => "reap",
        }
    }
}

/// What to do when the pager fails while its tasks may still run.
pub type OnFatal = Box<dyn Fn(&str) + Send + Sync>;

pub struct PagerConfig {
    /// The dump's directory.
    pub images: PathBuf,
    /// criu's working directory for the restore: the socket is made there.
    pub work_dir: PathBuf,
    pub mode: PagerMode,
    /// Directory holding loadset.img and loadset.idx (FaaSnap and REAP).
    pub loadset_dir: Option<PathBuf>,
    /// Pages served per fault outside the loading set (ignored while recording).
    pub fault_pages: u64,
    /// Called once if the pager fails while tasks may still run: the caller kills them
    /// (a task left without its pager would see zeros where its memory was).
    pub on_fatal: Option<OnFatal>,
    /// Checksums of the images' files by name (the snapshot's record): with them, no page is
    /// installed before its chunk checked out. The loading set carries its own.
    pub checksums: Option<BTreeMap<String, FileSums>>,
}

pub struct Pager {
    core: Arc<Core>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Pager {
    /// Reads the images (and loading set), listens on the socket and starts the handler.
    /// Start `criu restore --lazy-pages -W work_dir` after this returns.
    /// A damaged loading set, or damaged pages CRIU would install itself, fail it here.
    pub fn start(config: PagerConfig) -> io::Result<Pager> {
        let checking = Instant::now();
        let memory = image::load_all(&config.images)?;
        let mut sources: Vec<TaskSource> = memory
            .into_iter()
            .map(|m| {
                let sums = match &config.checksums {
                    None => None,
                    Some(all) => {
                        let name = format!("pages-{}.img", m.pages_id);
                        Some(all.get(&name).cloned().ok_or_else(|| {
                            io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!("{name} has no checksums"),
                            )
                        })?)
                    }
                };
                TaskSource::open(&config.images, m, sums)
            })
            .collect::<io::Result<_>>()?;
        let task_of_pid: HashMap<u32, usize> = sources
            .iter()
            .enumerate()
            .map(|(i, s)| (s.memory.pid, i))
            .collect();
        let mut plan = Vec::new();
        let mut loadset = None;
        let mut stats = stats::PagerStats {
            mode: config.mode.as_str().to_string(),
            ..Default::default()
        };
        if matches!(config.mode, PagerMode::Faasnap | PagerMode::Reap) {
            let dir = config.loadset_dir.as_deref().ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "this mode needs a loading set")
            })?;
            let index = loadset_file::read(dir)?;
            for r in &index.regions {
                let task = task_of_pid.get(&r.pid).ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("the loading set names task {} which the dump lacks", r.pid),
                    )
                })?;
                sources[*task].add_overlay(r.vaddr, r.pages, r.offset);
            }
            sources.iter_mut().for_each(TaskSource::sort_overlay);
            stats.loadset_pages = index.pages();
            // All of it is installed soon, most of it while the task already runs: checked
            // now, while a damaged one can still fail the restore into a normal start.
            let file =
                Mapped::open(&dir.join(loadset_file::DATA_FILE))?.with_sums(index.data_sums())?;
            file.verify(0, file.len() as u64)?;
            loadset = Some(file);
            plan = index.regions;
        }
        stats.checked_ms = checking.elapsed().as_secs_f64() * 1e3;
        let record = (config.mode == PagerMode::Record).then(Vec::new);
        let fault_pages = match config.mode {
            PagerMode::Record => 1,
            _ => config.fault_pages.max(1),
        };

        let listener = socket::listen(&config.work_dir)?;
        listener.set_nonblocking(true)?;
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let stop_fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        let core = Arc::new(Core {
            state: Mutex::new(State {
                record,
                stats,
                ..Default::default()
            }),
            changed: Condvar::new(),
            sources,
            task_of_pid,
            loadset,
            epoll,
            stop: Default::default(),
            stop_fd,
            fault_pages,
            probe_addr: probe_addr(),
        });
        core.watch(core.stop_fd.as_fd(), TOKEN_STOP)?;
        core.watch(listener.as_fd(), TOKEN_LISTEN)?;

        // The loading set is read into the page cache while criu restores (criu's work is
        // mostly CPU, not our files): the loader then installs pages without waiting for the
        // disk. Asynchronous readahead, no thread.
        if let Some(file) = core.loadset.as_ref() {
            file.will_need(0, file.len() as u64);
        }
        let mut threads = Vec::new();
        let handler_core = core.clone();
        let mode = config.mode;
        let reap_plan = if mode == PagerMode::Reap {
            plan.clone()
        } else {
            Vec::new()
        };
        let on_fatal = config.on_fatal;
        threads.push(
            std::thread::Builder::new()
                .name("icebox-pager".into())
                .spawn(move || {
                    let result = handler::handle(&handler_core, listener, &reap_plan);
                    let failed = {
                        let mut st = handler_core.lock();
                        if let Err(e) = result {
                            st.failed.get_or_insert(e.to_string());
                        }
                        st.stats.error = st.failed.clone();
                        st.failed.clone()
                    };
                    handler_core.changed.notify_all();
                    if let (Some(why), Some(kill)) = (failed, on_fatal) {
                        if !handler_core.stop.load(Ordering::SeqCst) {
                            kill(&why);
                        }
                    }
                })?,
        );
        if mode == PagerMode::Faasnap {
            let loader_core = core.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("icebox-loader".into())
                    .spawn(move || loader::load_concurrently(&loader_core, &plan))?,
            );
        }
        Ok(Pager {
            core,
            threads: Mutex::new(threads),
        })
    }

    pub fn stats(&self) -> PagerStats {
        let st = self.core.lock();
        let mut stats = st.stats.clone();
        stats.recorded = st.record.as_ref().map(|r| r.len() as u64);
        stats.pending_pages = st
            .spaces
            .iter()
            .flatten()
            .filter(|s| !s.child)
            .map(|s| s.pending.bytes() / PAGE_SIZE)
            .sum();
        stats.error = st.failed.clone();
        stats
    }

    /// Ends the recording: the pages faulted so far, in order. Later faults are not
    /// recorded.
    pub fn take_record(&self) -> Vec<TouchedPage> {
        self.core.lock().record.take().unwrap_or_default()
    }

    /// Waits until criu reported the restore complete (or the pager failed).
    pub fn wait_restored(&self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let mut st = self.core.lock();
        loop {
            if let Some(why) = &st.failed {
                return Err(why.clone());
            }
            if st.finished {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("criu did not finish the restore".into());
            }
            st = self.core.changed.wait_timeout(st, left).unwrap().0;
        }
    }

    /// Whether the handler still runs (it ends when every served task is gone).
    pub fn is_running(&self) -> bool {
        self.threads
            .lock()
            .unwrap()
            .first()
            .is_some_and(|t| !t.is_finished())
    }

    /// Stops the threads and closes the userfaultfds. Kill the tasks first: once the fds
    /// are closed, a task's missing pages would read as zeros. Idempotent.
    pub fn stop(&self) {
        self.core.stop.store(true, Ordering::SeqCst);
        let _ = rustix::io::write(&self.core.stop_fd, &1u64.to_ne_bytes());
        self.core.changed.notify_all();
        let threads: Vec<JoinHandle<()>> = std::mem::take(&mut *self.threads.lock().unwrap());
        for t in threads {
            let _ = t.join();
        }
        let mut st = self.core.lock();
        st.spaces.clear();
    }
}

impl Drop for Pager {
    fn drop(&mut self) {
        self.stop();
    }
}

fn probe_addr() -> u64 {
    let min = std::fs::read_to_string("/proc/sys/vm/mmap_min_addr")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .unwrap_or(65536);
    min.max(PAGE_SIZE).next_multiple_of(PAGE_SIZE)
}
