//! What PID 1 sets up before anything else: the pseudo filesystems, cgroup v2 with the memory
//! and pids controllers delegated to `/sys/fs/cgroup/icebox`, and the socket directory.

use std::ffi::CString;
use std::path::Path;

pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// Parent of every instance's cgroup.
pub const INSTANCES_CGROUP: &str = "/sys/fs/cgroup/icebox";
pub const RUN_DIR: &str = "/run/icebox";

pub fn mount(
    source: &str,
    target: &str,
    fstype: &str,
    flags: libc::c_ulong,
    data: &str,
) -> std::io::Result<()> {
    let _ = std::fs::create_dir_all(target);
    let c = |s: &str| CString::new(s).expect("no NUL in mount arguments");
    let (source, target, fstype, data) = (c(source), c(target), c(fstype), c(data));
    // SAFETY: valid NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            flags,
            data.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn must(what: &str, r: std::io::Result<()>) {
    if let Err(e) = r {
        // EBUSY: already mounted (the initramfs moved /dev here).
        if e.raw_os_error() != Some(libc::EBUSY) {
            eprintln!("icebox-guest-agent: {what}: {e}");
        }
    }
}

pub fn init() {
    let nosuid = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    must("mount /proc", mount("proc", "/proc", "proc", nosuid, ""));
    must("mount /sys", mount("sysfs", "/sys", "sysfs", nosuid, ""));
    if !Path::new("/dev/null").exists() {
        must(
            "mount /dev",
            mount("devtmpfs", "/dev", "devtmpfs", libc::MS_NOSUID, "mode=0755"),
        );
    }
    must(
        "mount /dev/shm",
        mount(
            "shm",
            "/dev/shm",
            "tmpfs",
            libc::MS_NOSUID | libc::MS_NODEV,
            "mode=1777,size=16m",
        ),
    );
    must(
        "mount cgroup2",
        mount("cgroup2", CGROUP_ROOT, "cgroup2", nosuid, "nsdelegate"),
    );
    must(
        "mount /run",
        mount("tmpfs", "/run", "tmpfs", nosuid, "mode=0755,size=16m"),
    );
    must(
        "mount /tmp",
        mount(
            "tmpfs",
            "/tmp",
            "tmpfs",
            libc::MS_NOSUID | libc::MS_NODEV,
            "mode=1777,size=16m",
        ),
    );
    must("create /run/icebox", std::fs::create_dir_all(RUN_DIR));
    must(
        "enable cgroup controllers",
        std::fs::write(
            Path::new(CGROUP_ROOT).join("cgroup.subtree_control"),
            "+memory +pids +cpu",
        ),
    );
    must(
        "create the instances cgroup",
        std::fs::create_dir_all(INSTANCES_CGROUP),
    );
    must(
        "delegate controllers to instances",
        std::fs::write(
            Path::new(INSTANCES_CGROUP).join("cgroup.subtree_control"),
            "+memory +pids +cpu",
        ),
    );
    // SAFETY: plain syscall with a valid buffer.
    unsafe { libc::sethostname(c"icebox".as_ptr(), 6) };
}

#[expect(
    clippy::cast_possible_wrap,
    reason = "seconds and nanoseconds since 1970 fit time_t and c_long"
)]
pub fn set_time(unix_nanos: u64) -> std::io::Result<()> {
    let ts = libc::timespec {
        tv_sec: (unix_nanos / 1_000_000_000) as libc::time_t,
        tv_nsec: (unix_nanos % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a valid timespec.
    if unsafe { libc::clock_settime(libc::CLOCK_REALTIME, &ts) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

pub fn kernel_release() -> String {
    // SAFETY: utsname is arrays of c_char, for which all zero bytes is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname only writes into the struct we pass, which is valid and ours for the call.
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    // SAFETY: the kernel NUL-terminates release.
    unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
)]
pub fn uptime_ms() -> u64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map(|s| (s * 1000.0) as u64)
        .unwrap_or(0)
}
