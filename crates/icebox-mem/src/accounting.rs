//! Per-instance accounting: an instance is a set of processes, its memory is their sum.

use crate::smaps::{is_gone, smaps_rollup};
use icebox_core::MemoryStats;

/// Sum of [`smaps_rollup`] over `pids`. A process that exited between listing and reading
/// is skipped: its memory is already gone. Other read errors (which would mean /proc is
/// unreadable) are logged and the process skipped, so one bad PID cannot hide the rest.
pub fn measure_pids(pids: &[u32]) -> MemoryStats {
    let mut total = MemoryStats::default();
    for &pid in pids {
        match smaps_rollup(pid) {
            Ok(stats) => total.add(&stats),
            Err(err) if is_gone(&err) => {}
            Err(err) => tracing::warn!(pid, error = %err, "cannot read smaps_rollup"),
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::units::MIB_USIZE;
    use rustix::process::{kill_process, waitpid, Pid, Signal, WaitOptions};
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    use std::process::{Command, Stdio};

    fn assert_sane(s: &MemoryStats, what: &str) {
        assert!(s.uss > 0, "{what}: {s:?}");
        assert!(s.uss <= s.pss && s.pss <= s.rss, "{what}: {s:?}");
    }

    #[test]
    fn measures_self_and_a_child() {
        let mut child = Command::new("sleep")
            .arg("60")
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let me = std::process::id();
        assert_sane(&smaps_rollup(me).unwrap(), "self");
        assert_sane(&smaps_rollup(child.id()).unwrap(), "child");
        let both = measure_pids(&[me, child.id()]);
        assert_sane(&both, "sum");
        assert_eq!(both.cgroup, 0);
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn vanished_and_zombie_processes_are_skipped() {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Not reaped yet: once it has exited it is a zombie, whose smaps_rollup fails ESRCH.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap()
            .contains(") Z ")
        {
            assert!(std::time::Instant::now() < deadline, "`true` did not exit");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(is_gone(&smaps_rollup(pid).unwrap_err()));
        assert_eq!(
            measure_pids(&[pid, i32::MAX as u32]),
            MemoryStats::default()
        );
        let me = measure_pids(&[pid, std::process::id()]);
        assert_sane(&me, "self among the dead");
        child.wait().unwrap();
    }

    /// A forked copy of this process that touches 64 MiB of fresh anonymous memory when told.
    /// Forking (rather than exec'ing a helper program) keeps the test self-contained; the
    /// child runs only async-signal-safe calls, as required after fork in a threaded process.
    struct Toucher {
        pid: libc::pid_t,
        to_child: OwnedFd,
        from_child: OwnedFd,
    }

    const TOUCH_BYTES: usize = 64 * MIB_USIZE;

    impl Toucher {
        fn fork() -> Toucher {
            let (p2c_r, p2c_w) = pipe();
            let (c2p_r, c2p_w) = pipe();
            // SAFETY: the child only calls read/write/mmap/_exit and writes to its own mapping.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
            if pid == 0 {
                // SAFETY: the forked child, which toucher_child requires; the descriptors are open.
                unsafe { toucher_child(p2c_r.as_fd(), c2p_w.as_fd()) }
            }
            let t = Toucher {
                pid,
                to_child: p2c_w,
                from_child: c2p_r,
            };
            t.expect_byte();
            t
        }

        fn expect_byte(&self) {
            let mut b = [0u8];
            let n = rustix::io::read(&self.from_child, &mut b);
            assert_eq!(n, Ok(1), "child did not report");
        }

        fn touch(&self) {
            assert_eq!(rustix::io::write(&self.to_child, b"t"), Ok(1));
            self.expect_byte();
        }
    }

    impl Drop for Toucher {
        /// Kills and reaps our own child.
        fn drop(&mut self) {
            if let Some(pid) = Pid::from_raw(self.pid) {
                let _ = kill_process(pid, Signal::KILL);
                let _ = waitpid(Some(pid), WaitOptions::empty());
            }
        }
    }

    /// Runs in the forked child; never returns. rustix's read and write are bare syscalls,
    /// safe after fork.
    unsafe fn toucher_child(from_parent: BorrowedFd<'_>, to_parent: BorrowedFd<'_>) -> ! {
        let mut b = [0u8];
        let _ = rustix::io::write(to_parent, b"r");
        if rustix::io::read(from_parent, &mut b) != Ok(1) {
            libc::_exit(1);
        }
        let p = libc::mmap(
            std::ptr::null_mut(),
            TOUCH_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            libc::_exit(2);
        }
        // Non-zero writes, so no page can stay the shared zero page.
        for off in (0..TOUCH_BYTES).step_by(4096) {
            std::ptr::write_volatile(p.cast::<u8>().add(off), 1);
        }
        let _ = rustix::io::write(to_parent, b"d");
        let _ = rustix::io::read(from_parent, &mut b);
        libc::_exit(0)
    }

    fn pipe() -> (OwnedFd, OwnedFd) {
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).expect("pipe2")
    }

    #[test]
    fn touching_64_mib_raises_uss_by_64_mib() {
        let child = Toucher::fork();
        let pid = child.pid.cast_unsigned();
        let before = measure_pids(&[pid]);
        child.touch();
        let after = measure_pids(&[pid]);
        assert_sane(&after, "toucher");
        let grown = after.uss.saturating_sub(before.uss);
        assert!(
            grown >= TOUCH_BYTES as u64,
            "USS grew by {grown} bytes only: {before:?} → {after:?}"
        );
    }
}
