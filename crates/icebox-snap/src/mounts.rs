//! Which mounts of a process's mount namespace CRIU must treat as external: bind mounts of
//! host files and directories (the read-only /usr, /etc, the runtime directory, the host's
//! /dev/null over masked /proc files). CRIU dumps the mounts it can recreate by itself
//! (proc, tmpfs with its content, devpts, mqueue, …); the root is given to the restore with
//! `--root`. Each external mount gets a key, and the restore binds the host path under it.

use std::io;
use std::path::{Path, PathBuf};

/// Filesystems CRIU recreates itself.
const OWN_FILESYSTEMS: &[&str] = &[
    "proc",
    "tmpfs",
    "devpts",
    "mqueue",
    "sysfs",
    "cgroup",
    "cgroup2",
    "binfmt_misc",
];

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExternalMount {
    /// Where it is mounted, as the dumped process sees it.
    pub mountpoint: String,
    /// The key criu records instead of the mount (`mnt[mountpoint]:key`).
    pub key: String,
    /// What to bind there at restore.
    pub host: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct MountLine {
    dev: String,
    root: String,
    mountpoint: String,
    fstype: String,
}

fn unescape(field: &str) -> String {
    // mountinfo escapes space, tab, newline and backslash as \ooo.
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4].iter().all(u8::is_ascii_digit)
        {
            let code = std::str::from_utf8(&bytes[i + 1..i + 4])
                .ok()
                .and_then(|s| u8::from_str_radix(s, 8).ok());
            if let Some(c) = code {
                out.push(c);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse(text: &str) -> Vec<MountLine> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let dash = fields.iter().position(|f| *f == "-")?;
            Some(MountLine {
                dev: fields.get(2)?.to_string(),
                root: unescape(fields.get(3)?),
                mountpoint: unescape(fields.get(4)?),
                fstype: fields.get(dash + 1)?.to_string(),
            })
        })
        .collect()
}

/// The external mounts of process `pid`, with their host paths found in this process's own
/// mount table (same device, the longest root that contains the mount's root).
pub fn external_mounts(pid: u32) -> io::Result<Vec<ExternalMount>> {
    let inside = std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))?;
    let host = std::fs::read_to_string("/proc/self/mountinfo")?;
    externals_of(&parse(&inside), &parse(&host))
}

fn externals_of(inside: &[MountLine], host: &[MountLine]) -> io::Result<Vec<ExternalMount>> {
    let mut out = Vec::new();
    for m in inside {
        if m.mountpoint == "/" || OWN_FILESYSTEMS.contains(&m.fstype.as_str()) {
            continue;
        }
        let source = host
            .iter()
            .filter(|h| h.dev == m.dev && within(&m.root, &h.root))
            .max_by_key(|h| h.root.len())
            .ok_or_else(|| {
                io::Error::other(format!(
                    "mount {} ({} {}) has no source visible to this process",
                    m.mountpoint, m.fstype, m.root
                ))
            })?;
        let rest = m.root[source.root.len()..].trim_start_matches('/');
        let mut path = PathBuf::from(&source.mountpoint);
        if !rest.is_empty() {
            path.push(rest);
        }
        out.push(ExternalMount {
            mountpoint: m.mountpoint.clone(),
            key: format!("x{}", out.len()),
            host: path,
        });
    }
    Ok(out)
}

fn within(path: &str, dir: &str) -> bool {
    dir == "/" || path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

/// Checks that every host path still exists before a restore binds it.
pub fn check_hosts(mounts: &[ExternalMount]) -> io::Result<()> {
    for m in mounts {
        if !Path::new(&m.host).exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} (mounted at {}) is gone", m.host.display(), m.mountpoint),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_mounts_of_host_paths_are_external() {
        let inside = parse(
            "500 400 254:0 /srv/state/rootfs / ro,relatime - ext4 /dev/vda rw\n\
             501 500 0:60 / /proc rw,nosuid - proc proc rw\n\
             502 500 0:61 / /dev rw - tmpfs tmpfs rw,size=64k\n\
             503 500 254:0 /usr /usr ro - ext4 /dev/vda rw\n\
             504 500 254:0 /srv/my\\040repo/runtimes/python /opt/icebox/runtime ro - ext4 /dev/vda rw\n\
             505 501 0:5 /null /proc/keys ro - devtmpfs udev rw\n\
             506 501 0:62 / /proc/acpi ro - tmpfs tmpfs ro\n\
             507 503 0:70 / /usr/local/data rw - ext4 /dev/vdb rw\n",
        );
        let host = parse(
            "20 1 254:0 / / rw - ext4 /dev/vda rw\n\
             21 20 0:5 / /dev rw - devtmpfs udev rw\n\
             22 20 0:70 / /usr/local/data rw - ext4 /dev/vdb rw\n",
        );
        let ext = externals_of(&inside, &host).unwrap();
        let pairs: Vec<(&str, &str)> = ext
            .iter()
            .map(|e| (e.mountpoint.as_str(), e.host.to_str().unwrap()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("/usr", "/usr"),
                ("/opt/icebox/runtime", "/srv/my repo/runtimes/python"),
                ("/proc/keys", "/dev/null"),
                ("/usr/local/data", "/usr/local/data"),
            ]
        );
        assert_eq!(ext[2].key, "x2");
    }

    #[test]
    fn a_mount_without_a_visible_source_is_an_error() {
        let inside = parse("503 500 9:9 /x /x ro - ext4 /dev/z rw\n");
        assert!(externals_of(&inside, &[]).is_err());
    }
}
