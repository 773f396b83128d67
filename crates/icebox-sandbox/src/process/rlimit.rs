//! The open-file limit of an instance's processes. pids.max bounds how many processes an
//! instance has and RLIMIT_NOFILE how many files each opens, so their product bounds the host
//! file table entries (fs.file-max) one instance can take; the daemon chooses the limit from
//! both (docs/reliability.md).

/// What an instance gets unless the daemon chooses: OpenWhisk's fixed `--ulimit nofile=1024`.
use rustix::io::Errno;
use rustix::process::{prlimit, Pid, Resource, Rlimit};
pub const DEFAULT_NOFILE: u64 = 1024;

/// Lowers (or raises) RLIMIT_NOFILE of running processes: a process restored from a snapshot
/// carries the limit it was dumped with, which may be another daemon's. Processes gone
/// meanwhile are skipped; a lower limit leaves the files already open alone.
pub fn set_nofile(pids: &[u32], nofile: u64) -> std::io::Result<()> {
    let limit = Rlimit {
        current: Some(nofile),
        maximum: Some(nofile),
    };
    for &pid in pids {
        // Pid 0 would be this process: the daemon's own limit is not an instance's.
        let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
            continue;
        };
        match prlimit(Some(pid), Resource::Nofile, limit) {
            Ok(_) | Err(Errno::SRCH) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_child_gets_the_new_limit() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        set_nofile(&[child.id()], 77).expect("prlimit of our own child");
        let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        let line = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .expect("Max open files");
        assert_eq!(
            line.split_whitespace().skip(3).take(2).collect::<Vec<_>>(),
            ["77", "77"]
        );
    }
}
