//! Finding the cgroup hierarchies: statfs on /sys/fs/cgroup tells a pure cgroup2 host from a
//! v1/hybrid one, and /proc/self/mountinfo says where each v1 controller is mounted (`cpu`
//! may be its own hierarchy or co-mounted as `cpu,cpuacct`).

use icebox_core::proc_text::unescape_octal;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    pub point: PathBuf,
    pub fstype: String,
    /// Per-superblock options; for cgroup v1 these name the hierarchy's controllers.
    pub super_opts: Vec<String>,
}

/// Parses /proc/PID/mountinfo (proc(5)): `id parent maj:min root point opts [optional…] -
/// fstype source super_opts`.
pub(crate) fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let point = left.split(' ').nth(4)?;
            let mut right = right.split(' ');
            let fstype = right.next()?.to_string();
            let super_opts = right
                .nth(1)
                .unwrap_or("")
                .split(',')
                .map(str::to_string)
                .collect();
            Some(Mount {
                point: PathBuf::from(unescape_octal(point)),
                fstype,
                super_opts,
            })
        })
        .collect()
}

/// Mount point of the v1 hierarchy carrying `controller`, preferring one under `base`
/// (containers may also see bind mounts of the same hierarchy elsewhere).
pub(crate) fn v1_mount<'a>(mounts: &'a [Mount], controller: &str, base: &Path) -> Option<&'a Path> {
    let mut found = mounts
        .iter()
        .filter(|m| m.fstype == "cgroup" && m.super_opts.iter().any(|o| o == controller))
        .map(|m| m.point.as_path());
    let first = found.next()?;
    if first.starts_with(base) {
        return Some(first);
    }
    found.find(|p| p.starts_with(base)).or(Some(first))
}

/// A cgroup2 mount next to v1 hierarchies (hybrid layout), preferring `base/unified`.
pub(crate) fn unified_mount(mounts: &[Mount], base: &Path) -> Option<PathBuf> {
    let preferred = base.join("unified");
    let mut found = mounts
        .iter()
        .filter(|m| m.fstype == "cgroup2")
        .map(|m| &m.point);
    let first = found.next()?.clone();
    if first == preferred {
        return Some(first);
    }
    Some(found.find(|p| **p == preferred).cloned().unwrap_or(first))
}

/// The file-system type of `path` (statfs `f_type`).
pub(crate) fn fs_magic(path: &Path) -> io::Result<i64> {
    let st = rustix::fs::statfs(path)?;
    #[allow(clippy::unnecessary_cast)] // f_type's type differs between architectures.
    Ok(st.f_type as i64)
}

#[allow(clippy::unnecessary_cast)] // c_long or c_uint depending on the architecture.
pub(crate) const CGROUP2_MAGIC: i64 = libc::CGROUP2_SUPER_MAGIC as i64;

/// Whether this process may create cgroups under `dir` (a read-only cgroupfs, as containers
/// often get, fails this even for root).
pub(crate) fn writable(dir: &Path) -> bool {
    rustix::fs::access(dir, rustix::fs::Access::WRITE_OK).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trimmed from this project's build machine (v1 hybrid, one controller per hierarchy).
    const HYBRID: &str = "\
25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 25 0:26 / /sys/fs/cgroup rw,relatime shared:9 - tmpfs tmpfs rw,mode=755
32 31 0:27 / /sys/fs/cgroup/cpu rw,relatime shared:10 - cgroup cgroup rw,cpu
33 31 0:28 / /sys/fs/cgroup/cpuacct rw,relatime shared:11 - cgroup cgroup rw,cpuacct
35 31 0:30 / /sys/fs/cgroup/memory rw,relatime shared:13 - cgroup cgroup rw,memory
37 31 0:32 / /sys/fs/cgroup/freezer rw,relatime shared:15 - cgroup cgroup rw,freezer
39 31 0:34 / /sys/fs/cgroup/pids rw,relatime shared:17 - cgroup cgroup rw,pids
40 31 0:35 / /sys/fs/cgroup/systemd rw,relatime shared:18 - cgroup cgroup rw,name=systemd
41 31 0:36 / /sys/fs/cgroup/unified rw,relatime shared:19 - cgroup2 cgroup2 rw
";

    #[test]
    fn finds_v1_controllers_and_the_unified_mount() {
        let m = parse_mountinfo(HYBRID);
        let base = Path::new("/sys/fs/cgroup");
        assert_eq!(
            v1_mount(&m, "memory", base),
            Some(Path::new("/sys/fs/cgroup/memory"))
        );
        assert_eq!(
            v1_mount(&m, "cpu", base),
            Some(Path::new("/sys/fs/cgroup/cpu"))
        );
        assert_eq!(
            v1_mount(&m, "pids", base),
            Some(Path::new("/sys/fs/cgroup/pids"))
        );
        assert_eq!(
            v1_mount(&m, "freezer", base),
            Some(Path::new("/sys/fs/cgroup/freezer"))
        );
        assert_eq!(
            v1_mount(&m, "systemd", base),
            None,
            "named hierarchies are not controllers"
        );
        assert_eq!(v1_mount(&m, "cpuset", base), None);
        assert_eq!(
            unified_mount(&m, base),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
    }

    #[test]
    fn co_mounted_controllers_and_escaped_paths() {
        let text = "\
1 0 0:1 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
2 0 0:2 / /mnt/my\\040cgroups rw shared:3 master:1 - cgroup cgroup rw,memory
3 0 0:3 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
";
        let m = parse_mountinfo(text);
        let base = Path::new("/sys/fs/cgroup");
        assert_eq!(m[1].point, PathBuf::from("/mnt/my cgroups"));
        assert_eq!(
            v1_mount(&m, "cpu", base),
            Some(Path::new("/sys/fs/cgroup/cpu,cpuacct"))
        );
        assert_eq!(
            v1_mount(&m, "cpuacct", base),
            Some(Path::new("/sys/fs/cgroup/cpu,cpuacct"))
        );
        assert_eq!(
            v1_mount(&m, "memory", base),
            Some(Path::new("/sys/fs/cgroup/memory"))
        );
        assert_eq!(unified_mount(&m, base), None);
    }

    #[test]
    fn statfs_magic_of_a_real_file_system() {
        assert_ne!(fs_magic(Path::new("/proc")).unwrap(), CGROUP2_MAGIC);
        assert!(fs_magic(Path::new("/nonexistent/dir")).is_err());
    }
}
