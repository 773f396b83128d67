//! The handler thread: takes criu's connection and the tasks' userfaultfds, and serves them
//! (faults and events) with epoll until stopped or until every address space is gone.

use super::core::{Core, Space, TOKEN_CONN, TOKEN_LISTEN, TOKEN_SPACE, TOKEN_STOP};
use super::loader::reap;
use super::pending::Pending;
use super::socket;
use super::source::TaskSource;
use crate::loadset_file;
use crate::PAGE_SIZE;
use rustix::buffer::spare_capacity;
use rustix::event::{epoll, Timespec};
use rustix::io::Errno;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;

/// The handler thread: accepts criu's connection, takes the tasks' userfaultfds, and serves
/// them until stopped or until every address space is gone.
#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
pub(super) fn handle(
    core: &Core,
    listener: std::os::unix::net::UnixListener,
    reap_plan: &[loadset_file::IndexRegion],
) -> io::Result<()> {
    let mut conn: Option<UnixStream> = None;
    let mut events: Vec<epoll::Event> = Vec::with_capacity(64);
    loop {
        let (timeout, finished) = {
            let st = core.lock();
            if st.failed.is_some() {
                return Ok(());
            }
            let wait = if !st.queue.is_empty() {
                Some(Timespec {
                    tv_sec: 0,
                    tv_nsec: 1_000_000,
                })
            } else if st.finished {
                Some(Timespec {
                    tv_sec: 1,
                    tv_nsec: 0,
                })
            } else {
                None
            };
            (wait, st.finished)
        };
        events.clear();
        match epoll::wait(&core.epoll, spare_capacity(&mut events), timeout.as_ref()) {
            Ok(_) => {}
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
        if core.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        for ev in &events {
            match ev.data.u64() {
                TOKEN_STOP => return Ok(()),
                TOKEN_LISTEN => {
                    if conn.is_none() {
                        if let Ok((stream, _)) = listener.accept() {
                            stream.set_nonblocking(false)?;
                            core.watch(stream.as_fd(), TOKEN_CONN)?;
                            conn = Some(stream);
                        }
                    }
                }
                TOKEN_CONN => {
                    let Some(stream) = conn.as_ref() else {
                        continue;
                    };
                    if greet(core, stream)? {
                        // The restore is complete; criu closes its end. Faults until now
                        // were criu's own (its restorer touches lazy memory): served. The
                        // task's own wait for REAP's loading set.
                        conn = None;
                        if !reap_plan.is_empty() {
                            core.lock().hold_faults = true;
                            reap(core, reap_plan);
                        }
                        let mut st = core.lock();
                        st.hold_faults = false;
                        core.serve_queue(&mut st);
                    }
                }
                token => {
                    let id = (token - TOKEN_SPACE) as usize;
                    let mut st = core.lock();
                    if id < st.spaces.len() {
                        core.read_and_apply(&mut st, id);
                        core.serve_queue(&mut st);
                    }
                }
            }
        }
        let mut st = core.lock();
        if !st.queue.is_empty() {
            core.serve_queue(&mut st);
        }
        if finished && events.is_empty() {
            core.reap_gone(&mut st);
            if core.live_spaces(&st) == 0 {
                return Ok(());
            }
        }
    }
}

/// One message from criu. Returns true once the restore is complete.
fn greet(core: &Core, conn: &UnixStream) -> io::Result<bool> {
    match socket::next(conn)? {
        socket::Hello::Task { pid, uffd } => {
            let mut st = core.lock();
            let Some(task) = core.task_of_pid.get(&pid).copied() else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("criu restores task {pid}, which the images lack"),
                ));
            };
            let space = Space {
                fd: uffd,
                task,
                child: false,
                pending: lazy_runs(&core.sources[task]),
            };
            core.add_space(&mut st, space)?;
            Ok(false)
        }
        socket::Hello::Zombie => Ok(false),
        socket::Hello::Finished => {
            let mut st = core.lock();
            st.finished = true;
            drop(st);
            core.changed.notify_all();
            Ok(true)
        }
        socket::Hello::Closed => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "criu closed the lazy-pages socket before the restore was complete",
        )),
    }
}

/// The pages criu leaves to the pager: its lazy pagemap entries, cut at VMA boundaries
/// (one UFFDIO_COPY may not cross a VMA).
fn lazy_runs(source: &TaskSource) -> Pending {
    let mut pending = Pending::default();
    for stored in source.memory.stored().filter(|s| s.lazy) {
        let end = stored.vaddr + stored.pages * PAGE_SIZE;
        let mut at = stored.vaddr;
        while at < end {
            let cut = source
                .memory
                .vma_of(at)
                .map(|v| v.end.min(end))
                .unwrap_or(end);
            pending.insert(at, cut, at);
            at = cut;
        }
    }
    pending
}
