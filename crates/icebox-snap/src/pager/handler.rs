//! The handler thread: takes criu's connection and the tasks' userfaultfds, and serves them
//! (faults and events) with epoll until stopped or until every address space is gone.

use super::core::{Core, Space, TOKEN_CONN, TOKEN_LISTEN, TOKEN_SPACE, TOKEN_STOP};
use super::loader::reap;
use super::pending::Pending;
use super::socket;
use super::source::TaskSource;
use crate::loadset_file;
use crate::PAGE_SIZE;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;

/// The handler thread: accepts criu's connection, takes the tasks' userfaultfds, and serves
/// them until stopped or until every address space is gone.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    reason = "the epoll event buffer is small and fixed; u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
pub(super) fn handle(
    core: &Core,
    listener: std::os::unix::net::UnixListener,
    reap_plan: &[loadset_file::IndexRegion],
) -> io::Result<()> {
    let mut conn: Option<UnixStream> = None;
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
    loop {
        let (idle_ms, finished) = {
            let st = core.lock();
            if st.failed.is_some() {
                return Ok(());
            }
            let wait = if !st.queue.is_empty() {
                1
            } else if st.finished {
                1000
            } else {
                -1
            };
            (wait, st.finished)
        };
        // SAFETY: waits on our epoll fd into a buffer of the given length.
        let n = unsafe {
            libc::epoll_wait(
                core.epoll.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as i32,
                idle_ms,
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(err);
        }
        if core.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        for ev in &events[..n.unsigned_abs() as usize] {
            match ev.u64 {
                TOKEN_STOP => return Ok(()),
                TOKEN_LISTEN => {
                    if conn.is_none() {
                        if let Ok((stream, _)) = listener.accept() {
                            stream.set_nonblocking(false)?;
                            core.watch(stream.as_raw_fd(), TOKEN_CONN)?;
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
        if finished && n == 0 {
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
