//! Joining cgroups from a freshly forked child, before it execs the sandbox runtime. Joining
//! before exec (rather than moving the PID afterwards) means no instance process ever runs,
//! allocates or forks outside its limits.

use std::ffi::CString;
use std::io;

/// Moves the calling process into every cgroup whose `cgroup.procs` path is in `files` by
/// writing "0" (meaning "the writer") to each. Meant for `Command::pre_exec`: it calls only
/// open/write/close and does not allocate, so it is async-signal-safe. Stops at the first
/// failure and returns the OS error.
pub fn join_self_in_child(files: &[CString]) -> io::Result<()> {
    for file in files {
        // SAFETY: `file` is a valid NUL-terminated path; the fd is closed on every path.
        unsafe {
            let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let written = libc::write(fd, b"0".as_ptr().cast(), 1);
            // Capture errno before close() can overwrite it.
            let result = if written == 1 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            };
            libc::close(fd);
            result?;
        }
    }
    Ok(())
}
