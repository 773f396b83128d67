//! What PID 1 sets up before anything else: the pseudo filesystems, cgroup v2 with the memory
//! and pids controllers delegated to `/sys/fs/cgroup/icebox`, and the socket directory.

use rustix::mount::MountFlags;
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
    flags: MountFlags,
    data: &str,
) -> std::io::Result<()> {
    let _ = std::fs::create_dir_all(target);
    let data = CString::new(data).expect("no NUL in mount options");
    rustix::mount::mount(source, target, fstype, flags, Some(data.as_c_str()))?;
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
    let nosuid = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    must("mount /proc", mount("proc", "/proc", "proc", nosuid, ""));
    must("mount /sys", mount("sysfs", "/sys", "sysfs", nosuid, ""));
    if !Path::new("/dev/null").exists() {
        must(
            "mount /dev",
            mount(
                "devtmpfs",
                "/dev",
                "devtmpfs",
                MountFlags::NOSUID,
                "mode=0755",
            ),
        );
    }
    must(
        "mount /dev/shm",
        mount(
            "shm",
            "/dev/shm",
            "tmpfs",
            MountFlags::NOSUID | MountFlags::NODEV,
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
            MountFlags::NOSUID | MountFlags::NODEV,
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
    let _ = rustix::system::sethostname(b"icebox");
}

pub fn set_time(unix_nanos: u64) -> std::io::Result<()> {
    // Seconds since 1970 in a u64 divided by 10^9 fit an i64; nanoseconds are below 10^9.
    let ts = rustix::time::Timespec {
        tv_sec: i64::try_from(unix_nanos / 1_000_000_000).unwrap_or(i64::MAX),
        tv_nsec: i64::try_from(unix_nanos % 1_000_000_000).unwrap_or(0),
    };
    rustix::time::clock_settime(rustix::time::ClockId::Realtime, ts)?;
    Ok(())
}

pub fn kernel_release() -> String {
    rustix::system::uname()
        .release()
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
