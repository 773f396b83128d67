//! The pager's shared state and the page operations both of its threads use. Every
//! operation runs under one lock, and messages are read from a userfaultfd only under it:
//! while a non-cooperative event (remove, unmap, remap, fork) is queued and unread, the
//! kernel fails UFFDIO_COPY with EAGAIN, and once it is read it is applied before the lock is
//! released. So no copy ever fills a range with data the task has dropped since.

use super::pending::{Pending, Run};
use super::source::{Mapped, TaskSource};
use super::stats::{By, PagerStats};
use super::uffd::{self, Fill, Msg};
use crate::loadset_file::TouchedPage;
use crate::PAGE_SIZE;
use rustix::event::epoll;
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::AtomicBool;
use std::sync::{Condvar, Mutex, MutexGuard};

/// One address space served: a restored task, or a child it forked.
pub struct Space {
    pub fd: OwnedFd,
    /// Index of the dumped task whose data it holds (a forked child shares its parent's).
    pub task: usize,
    pub child: bool,
    pub pending: Pending,
}

#[derive(Default)]
pub struct State {
    pub spaces: Vec<Option<Space>>,
    /// criu said the restore is complete: every VMA is registered, tasks are about to run.
    pub finished: bool,
    pub failed: Option<String>,
    pub record: Option<Vec<TouchedPage>>,
    /// Faults read but not served yet (space, page address).
    pub queue: VecDeque<(usize, u64)>,
    /// REAP mode: faults wait until the loading set is in.
    pub hold_faults: bool,
    pub stats: PagerStats,
}

/// How an installation ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// An event is being delivered: try again after reading it.
    Busy,
    /// The address space is gone.
    Gone,
}

pub struct Core {
    pub state: Mutex<State>,
    pub changed: Condvar,
    pub sources: Vec<TaskSource>,
    pub task_of_pid: HashMap<u32, usize>,
    pub loadset: Option<Mapped>,
    pub epoll: OwnedFd,
    pub stop: AtomicBool,
    pub stop_fd: OwnedFd,
    /// Pages served per fault beyond the loading set (1 while recording: exact order).
    pub fault_pages: u64,
    /// Lowest address a mapping may have: probing it tells a live address space from a gone one.
    pub probe_addr: u64,
}

pub const TOKEN_STOP: u64 = 0;
pub const TOKEN_CONN: u64 = 1;
pub const TOKEN_LISTEN: u64 = 2;
pub const TOKEN_SPACE: u64 = 16;

impl Core {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn watch(&self, fd: BorrowedFd<'_>, token: u64) -> std::io::Result<()> {
        epoll::add(
            &self.epoll,
            fd,
            epoll::EventData::new_u64(token),
            epoll::EventFlags::IN,
        )?;
        Ok(())
    }

    fn unwatch(&self, fd: BorrowedFd<'_>) {
        // An error only means it was not there.
        let _ = epoll::delete(&self.epoll, fd);
    }

    /// A new address space: registered for events before anyone can fault in it.
    pub fn add_space(&self, st: &mut State, space: Space) -> std::io::Result<usize> {
        let id = st.spaces.len();
        self.watch(space.fd.as_fd(), TOKEN_SPACE + id as u64)?;
        st.spaces.push(Some(space));
        st.stats.spaces += 1;
        Ok(id)
    }

    fn mark_gone(&self, st: &mut State, id: usize) {
        if let Some(space) = st.spaces[id].take() {
            self.unwatch(space.fd.as_fd());
            st.stats.spaces_gone += 1;
        }
        st.queue.retain(|(s, _)| *s != id);
    }

    pub fn live_spaces(&self, st: &State) -> usize {
        st.spaces.iter().flatten().count()
    }

    /// Reads every message of space `id`: events are applied now, faults queued.
    pub fn read_and_apply(&self, st: &mut State, id: usize) {
        let mut msgs = Vec::new();
        let read = match &st.spaces[id] {
            Some(space) => uffd::read_msgs(space.fd.as_fd(), &mut msgs),
            None => return,
        };
        if let Err(e) = read {
            tracing::warn!(space = id, "cannot read userfaultfd messages: {e}");
        }
        for msg in msgs {
            self.apply(st, id, msg);
        }
    }

    fn apply(&self, st: &mut State, id: usize, msg: Msg) {
        let Some(space) = st.spaces[id].as_mut() else {
            return;
        };
        match msg {
            Msg::PageFault { address } => st.queue.push_back((id, address & !(PAGE_SIZE - 1))),
            Msg::Remove { start, end } => {
                st.stats.removes += 1;
                space.pending.remove(start, end);
                // The range stays registered after madvise; unregistered, the task's next
                // faults there are ordinary zero-fill faults that never reach us.
                if let Err(e) = uffd::unregister(space.fd.as_fd(), start, end - start) {
                    if e.raw_os_error() == Some(libc::ENOMEM) {
                        self.mark_gone(st, id);
                    } else {
                        tracing::debug!(space = id, "unregister {start:#x}..{end:#x}: {e}");
                    }
                }
            }
            Msg::Unmap { start, end } => {
                st.stats.unmaps += 1;
                space.pending.remove(start, end);
            }
            Msg::Remap { from, to, len } => {
                st.stats.remaps += 1;
                space.pending.remap(from, to, len);
            }
            Msg::Fork { fd } => {
                st.stats.forks += 1;
                // SAFETY: the kernel installed this fd in our table when we read the event.
                let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                set_nonblocking_cloexec(&fd);
                // The child is a copy of the parent as of now: present pages were copied,
                // and what the parent still misses the child misses too.
                let child = Space {
                    fd,
                    task: space.task,
                    child: true,
                    pending: space.pending.clone(),
                };
                if let Err(e) = self.add_space(st, child) {
                    st.failed = Some(format!("cannot watch a forked child's userfaultfd: {e}"));
                }
            }
            Msg::Unknown(event) => {
                tracing::warn!(space = id, event, "unexpected userfaultfd event");
            }
        }
    }

    /// Serves queued faults (unless held); a fault that meets a pending event stays queued.
    pub fn serve_queue(&self, st: &mut State) {
        if st.hold_faults {
            return;
        }
        let mut busy = VecDeque::new();
        while let Some((id, page)) = st.queue.pop_front() {
            if self.serve_fault(st, id, page) == Outcome::Busy {
                // The event is being queued: read it, then this fault gets another try.
                self.read_and_apply(st, id);
                if self.serve_fault(st, id, page) == Outcome::Busy {
                    busy.push_back((id, page));
                }
            }
        }
        st.queue = busy;
    }

    fn serve_fault(&self, st: &mut State, id: usize, page: u64) -> Outcome {
        let Some(space) = st.spaces[id].as_ref() else {
            return Outcome::Gone;
        };
        let task = space.task;
        let child = space.child;
        let outcome = if let Some(run) = space.pending.find(page) {
            let window = Run {
                start: page,
                end: run.end.min(page + self.fault_pages * PAGE_SIZE),
                img: run.img_of(page),
            };
            let img = window.img;
            let outcome = self.fill(st, id, window, By::Fault);
            if outcome == Outcome::Done {
                st.stats.faults += 1;
                if !child {
                    if let Some(record) = st.record.as_mut() {
                        record.push(TouchedPage {
                            pid: self.sources[task].memory.pid,
                            vaddr: img,
                        });
                    }
                }
            }
            outcome
        } else {
            let fd = space.fd.as_fd();
            match uffd::zero(fd, page, PAGE_SIZE) {
                Fill::Done => {
                    st.stats.faults += 1;
                    st.stats.zero_pages += 1;
                    if !child {
                        if let Some(record) = st.record.as_mut() {
                            record.push(TouchedPage {
                                pid: self.sources[task].memory.pid,
                                vaddr: page,
                            });
                        }
                    }
                    Outcome::Done
                }
                Fill::Partial { errno, .. } if errno == libc::EAGAIN => Outcome::Busy,
                Fill::Partial { errno, .. } if uffd::is_gone(errno) => Outcome::Gone,
                Fill::Partial { .. } => {
                    // Present already, or no longer registered: the thread just retries.
                    let _ = uffd::wake(fd, page, PAGE_SIZE);
                    Outcome::Done
                }
            }
        };
        if outcome == Outcome::Gone {
            self.mark_gone(st, id);
        }
        outcome
    }

    /// Installs the pending pages of `run` (inside one pending run) from the images.
    pub fn fill(&self, st: &mut State, id: usize, run: Run, by: By) -> Outcome {
        let mut addr = run.start;
        let mut one_page = false;
        while addr < run.end {
            let Some(space) = st.spaces[id].as_mut() else {
                return Outcome::Gone;
            };
            let img = run.img_of(addr);
            let Some(found) = self.sources[space.task].locate(img, self.loadset.as_ref()) else {
                st.failed = Some(format!("page {img:#x} is pending but not in the image"));
                return Outcome::Gone;
            };
            let mut pages = found.pages.min((run.end - addr) / PAGE_SIZE);
            if one_page {
                pages = 1;
            }
            let len = pages * PAGE_SIZE;
            // A damaged snapshot must not reach the task: the pager fails instead, which
            // kills the task (a restore in progress then fails and the start goes cold).
            if let Err(e) = found.file.verify(found.offset, len) {
                st.failed = Some(e.to_string());
                return Outcome::Gone;
            }
            // SAFETY: `locate` returned a pointer with `found.pages` pages of our mapping.
            let fill = unsafe { uffd::copy(space.fd.as_fd(), addr, found.ptr, len) };
            let (done, errno) = match fill {
                Fill::Done => (len, None),
                Fill::Partial { bytes, errno } => (bytes & !(PAGE_SIZE - 1), Some(errno)),
            };
            if done > 0 {
                space.pending.remove(addr, addr + done);
                st.stats.count_copy(by, done, found.from_loadset);
                addr += done;
            }
            match errno {
                None => {}
                Some(libc::EAGAIN) => return Outcome::Busy,
                Some(e) if uffd::is_gone(e) => {
                    self.mark_gone(st, id);
                    return Outcome::Gone;
                }
                // Already present (served another way): nothing to install there.
                Some(libc::EEXIST) => {
                    space.pending.remove(addr, addr + PAGE_SIZE);
                    let _ = uffd::wake(space.fd.as_fd(), addr, PAGE_SIZE);
                    addr += PAGE_SIZE;
                }
                // The run now spans two VMAs (the task split one, e.g. mprotect): go page
                // by page. A single page that is not registered any more is not ours.
                Some(libc::ENOENT) if pages > 1 => one_page = true,
                Some(libc::ENOENT) => {
                    space.pending.remove(addr, addr + PAGE_SIZE);
                    addr += PAGE_SIZE;
                }
                Some(e) => {
                    st.failed = Some(format!(
                        "UFFDIO_COPY at {addr:#x}: {}",
                        std::io::Error::from_raw_os_error(e)
                    ));
                    return Outcome::Gone;
                }
            }
        }
        Outcome::Done
    }

    /// Installs what is still pending of the image range `img..img+pages` of `task` into
    /// its (non-child) address space; events met on the way are read and applied, faults
    /// read on the way are served (unless held).
    pub fn load(&self, st: &mut State, pid: u32, img: u64, pages: u64) -> Outcome {
        let Some(task) = self.task_of_pid.get(&pid).copied() else {
            return Outcome::Gone;
        };
        let Some(id) = st
            .spaces
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.task == task && !s.child))
        else {
            return Outcome::Gone;
        };
        let runs: Vec<Run> = {
            let pending = &st.spaces[id].as_ref().expect("found above").pending;
            if pending.moved {
                (0..pages)
                    .filter_map(|i| {
                        let at = img + i * PAGE_SIZE;
                        let cur = pending.current_of(at)?;
                        Some(Run {
                            start: cur,
                            end: cur + PAGE_SIZE,
                            img: at,
                        })
                    })
                    .collect()
            } else {
                pending.within(img, img + pages * PAGE_SIZE)
            }
        };
        for run in runs {
            // Earlier runs' events may have moved or dropped this one: re-check.
            let still = st.spaces[id]
                .as_ref()
                .map(|s| s.pending.within(run.start, run.end))
                .unwrap_or_default();
            for part in still.into_iter().filter(|p| p.img == run.img_of(p.start)) {
                match self.fill(st, id, part, By::Loader) {
                    Outcome::Done => {}
                    Outcome::Busy => {
                        self.read_and_apply(st, id);
                        self.serve_queue(st);
                        return Outcome::Busy;
                    }
                    Outcome::Gone => return Outcome::Gone,
                }
            }
        }
        self.serve_queue(st);
        Outcome::Done
    }

    /// Drops address spaces whose task is gone (exited, or exec'd after a fork). Probing
    /// with UFFDIO_ZEROPAGE is safe: the probe address is never pending, and a registered
    /// page that is not pending reads as zeros anyway.
    pub fn reap_gone(&self, st: &mut State) {
        for id in 0..st.spaces.len() {
            let Some(space) = st.spaces[id].as_ref() else {
                continue;
            };
            if space.pending.find(self.probe_addr).is_some() {
                continue;
            }
            if let Fill::Partial { errno, .. } =
                uffd::zero(space.fd.as_fd(), self.probe_addr, PAGE_SIZE)
            {
                if uffd::is_gone(errno) {
                    self.mark_gone(st, id);
                }
            }
        }
    }
}

fn set_nonblocking_cloexec(fd: &OwnedFd) {
    if let Ok(flags) = rustix::fs::fcntl_getfl(fd) {
        let _ = rustix::fs::fcntl_setfl(fd, flags | rustix::fs::OFlags::NONBLOCK);
    }
    let _ = rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC);
}
