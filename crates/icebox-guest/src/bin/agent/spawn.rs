//! Starting a runtime inside its instance: its own session, its own mount namespace with a
//! private size-limited /tmp (the root is read-only), its cgroup joined before exec (so every
//! byte it allocates is charged there), then the instance's own uid (gid the same number):
//! the kernel counts inotify instances, message-queue bytes and RLIMIT_NPROC per uid, so
//! instances of one VM must not share one.

use icebox_guest::protocol::StartRequest;
use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

pub fn command(
    req: &StartRequest,
    socket: &str,
    cgroup_procs: &str,
    uid: u32,
) -> std::io::Result<Command> {
    let mut argv: Vec<String> = Vec::new();
    if let Some(node) = req.numa_node {
        argv.extend([
            "/usr/bin/numactl".to_string(),
            format!("--membind={node}"),
            format!("--cpunodebind={node}"),
            "--".to_string(),
        ]);
    }
    argv.extend(req.argv.iter().cloned());
    let Some(program) = argv.first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "empty argv",
        ));
    };
    // Checked here: a failed exec would be reported by std after our reaper took the child.
    if std::fs::metadata(program).is_err() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{program} does not exist in the guest image"),
        ));
    }
    let mut cmd = Command::new(program);
    cmd.args(&argv[1..])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", "/tmp")
        .env("LANG", "C.UTF-8")
        .env("TMPDIR", "/tmp")
        .envs(req.env.iter().cloned())
        .env("ICEBOX_PROXY_SOCKET", socket)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());

    let procs = CString::new(cgroup_procs).expect("no NUL");
    let tmp_opts =
        CString::new(format!("mode=1777,size={}", req.tmp_bytes.max(4096))).expect("no NUL");
    // SAFETY: only async-signal-safe syscalls on memory prepared before fork.
    unsafe {
        cmd.pre_exec(move || {
            let check = |rc: libc::c_int| {
                if rc < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(())
                }
            };
            check(libc::setsid())?;
            // Join the cgroup: write our pid (formatted without allocating).
            let mut buf = [0u8; 16];
            let mut pid = libc::getpid().cast_unsigned();
            let mut i = buf.len();
            loop {
                i -= 1;
                buf[i] = b'0' + (pid % 10) as u8;
                pid /= 10;
                if pid == 0 {
                    break;
                }
            }
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            check(fd)?;
            let n = libc::write(fd, buf[i..].as_ptr().cast(), buf.len() - i);
            libc::close(fd);
            if n < 0 {
                return Err(std::io::Error::last_os_error());
            }
            check(libc::unshare(libc::CLONE_NEWNS))?;
            check(libc::mount(
                c"none".as_ptr(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            check(libc::mount(
                c"tmpfs".as_ptr(),
                c"/tmp".as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                tmp_opts.as_ptr().cast(),
            ))?;
            check(libc::chdir(c"/tmp".as_ptr()))?;
            check(libc::setgroups(0, std::ptr::null()))?;
            check(libc::setgid(uid))?;
            check(libc::setuid(uid))?;
            Ok(())
        });
    }
    Ok(cmd)
}
