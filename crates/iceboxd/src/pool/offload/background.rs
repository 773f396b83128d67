//! Offload steps are background work: scanning page tables and compressing pages into zram
//! (the kernel compresses in the thread that calls process_madvise) must not take CPU from
//! cold starts and activations. They run at the lowest CPU priority, on the blocking pool's
//! thread that runs them, which gets its priority back afterwards.

/// Runs `f` with the calling thread at nice 19, then restores the thread's priority.
pub(super) fn at_low_priority<T>(f: impl FnOnce() -> T) -> T {
    let _priority = LowPriority::enter();
    f()
}

struct LowPriority {
    tid: libc::id_t,
    before: Option<libc::c_int>,
}

impl LowPriority {
    fn enter() -> LowPriority {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() }.cast_unsigned();
        // getpriority returns the nice value, and -1 is a valid one: errno tells failures.
        // SAFETY: plain syscalls on this thread's own priority.
        let before = unsafe {
            *libc::__errno_location() = 0;
            let nice = libc::getpriority(libc::PRIO_PROCESS, tid);
            (*libc::__errno_location() == 0).then_some(nice)
        };
        if before.is_some() {
            // SAFETY: lowering this thread's own priority needs no privilege.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, 19) };
        }
        LowPriority { tid, before }
    }
}

impl Drop for LowPriority {
    fn drop(&mut self) {
        if let Some(nice) = self.before {
            // SAFETY: restoring this thread's own earlier priority (the daemon runs as root
            // when it isolates instances; unprivileged, raising it back may fail, and the
            // thread then stays low, which only slows later blocking work).
            unsafe { libc::setpriority(libc::PRIO_PROCESS, self.tid, nice) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nice() -> libc::c_int {
        // SAFETY: reading this thread's own priority.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid().cast_unsigned()) }
    }

    #[test]
    fn runs_at_nice_19_and_restores_the_thread() {
        let before = nice();
        let inside = at_low_priority(nice);
        assert_eq!(inside, 19);
        // Unprivileged, a thread cannot raise its priority back.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!(nice(), before);
        }
    }
}
