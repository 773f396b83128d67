//! The OCI runtime spec (config.json) crun runs an instance with: every namespace but user,
//! no capabilities, no_new_privs, a deny-list seccomp filter, the instance's own unprivileged
//! uid (uids.rs), a read-only
//! view of the host's /usr and /etc, and private size-limited tmpfs mounts for /tmp and for
//! the proxy socket's directory: nothing of the host is writable from inside.

use crate::InstanceSpec;
use serde_json::{json, Value};

/// Where the runtime directory and the instance's socket directory appear inside.
pub const RUNTIME_MOUNT: &str = "/opt/icebox/runtime";
pub const SOCKET_DIR_INSIDE: &str = "/run/icebox";
pub const SOCKET_NAME: &str = "proxy.sock";
pub const SOCKET_INSIDE: &str = "/run/icebox/proxy.sock";

/// Syscalls an action never needs and that widen the kernel attack surface; the same family
/// Docker's and Podman's default profiles deny. Without capabilities most fail anyway; the
/// filter makes that true even for a kernel bug in a capability check.
const DENIED_SYSCALLS: &[&str] = &[
    "acct",
    "add_key",
    "bpf",
    "clock_adjtime",
    "clock_settime",
    "create_module",
    "delete_module",
    "finit_module",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "get_kernel_syms",
    "init_module",
    "ioperm",
    "iopl",
    "kcmp",
    "kexec_file_load",
    "kexec_load",
    "keyctl",
    "lookup_dcookie",
    "mount",
    "mount_setattr",
    "move_mount",
    "name_to_handle_at",
    "nfsservctl",
    "open_by_handle_at",
    "open_tree",
    "perf_event_open",
    "personality",
    "pivot_root",
    "process_vm_readv",
    "process_vm_writev",
    "ptrace",
    "query_module",
    "quotactl",
    "reboot",
    "request_key",
    "setns",
    "settimeofday",
    "swapoff",
    "swapon",
    "sysfs",
    "_sysctl",
    "umount",
    "umount2",
    "unshare",
    "uselib",
    "userfaultfd",
    "ustat",
    "vhangup",
    "vm86",
    "vm86old",
];

/// `uid` is the instance's own (its group has the same number): the writable mounts are
/// created owned by it, nothing on the host is. `nofile`: RLIMIT_NOFILE of every process of
/// the instance (rlimit.rs).
pub fn config(spec: &InstanceSpec, rootfs: &str, uid: u32, nofile: u64) -> Value {
    let mut env = vec![
        "PATH=/usr/local/bin:/usr/bin:/bin".to_string(),
        "HOME=/tmp".to_string(),
        "LANG=C.UTF-8".to_string(),
        format!("ICEBOX_PROXY_SOCKET={SOCKET_INSIDE}"),
        format!("ICEBOX_CONCURRENCY={}", spec.concurrency),
    ];
    env.extend(
        spec.runtime
            .env_for(RUNTIME_MOUNT, spec.memory_limit_bytes)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}")),
    );
    env.extend(spec.env.iter().map(|(k, v)| format!("{k}={v}")));

    let mut args = vec!["/usr/bin/tini".to_string(), "--".to_string()];
    args.extend(spec.runtime.argv(RUNTIME_MOUNT, spec.memory_limit_bytes));

    let mut namespaces = vec![
        json!({"type": "pid"}),
        json!({"type": "ipc"}),
        json!({"type": "uts"}),
        json!({"type": "mount"}),
    ];
    if !spec.network {
        // A fresh network namespace holds only a down loopback: no network at all.
        namespaces.push(json!({"type": "network"}));
    }

    // Recursive flags: a plain "ro" would leave any writable mount below the source (say a
    // tmpfs under /etc) writable inside.
    let ro_bind = |dest: &str, src: &str| {
        json!({"destination": dest, "type": "bind", "source": src,
               "options": ["rbind", "rro", "rnosuid", "rnodev"]})
    };
    let mounts = vec![
        json!({"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]}),
        json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
               "options": ["nosuid", "strictatime", "mode=755", "size=64k"]}),
        json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
               "options": ["nosuid", "noexec", "nodev", "mode=1777", format!("uid={uid}"),
                           format!("gid={uid}"), "size=16m"]}),
        json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
               "options": ["nosuid", "nodev", "mode=1777", format!("uid={uid}"), format!("gid={uid}"),
                           format!("size={}", spec.tmp_bytes)]}),
        ro_bind("/usr", "/usr"),
        ro_bind("/etc", "/etc"),
        ro_bind(RUNTIME_MOUNT, &spec.runtime.dir.to_string_lossy()),
        // The socket directory only holds the proxy's socket, yet the action runs as its
        // owner: a tmpfs this small (charged to the instance's memory cgroup) is all it can
        // fill. The daemon reaches the socket through the instance's root (socket_dir.rs).
        json!({"destination": SOCKET_DIR_INSIDE, "type": "tmpfs", "source": "tmpfs",
               "options": ["nosuid", "nodev", "noexec", "mode=0700", format!("uid={uid}"),
                           format!("gid={uid}"), "size=64k", "nr_inodes=16"]}),
    ];

    json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": {"uid": uid, "gid": uid, "additionalGids": []},
            "args": args,
            "env": env,
            "cwd": "/tmp",
            "capabilities": {"bounding": [], "effective": [], "inheritable": [], "permitted": [], "ambient": []},
            "noNewPrivileges": true,
            "rlimits": [
                {"type": "RLIMIT_NOFILE", "hard": nofile, "soft": nofile},
                {"type": "RLIMIT_CORE", "hard": 0, "soft": 0}
            ]
        },
        "root": {"path": rootfs, "readonly": true},
        "hostname": "icebox",
        "mounts": mounts,
        "linux": {
            "namespaces": namespaces,
            "maskedPaths": ["/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                            "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
                            "/proc/scsi", "/sys/firmware"],
            "readonlyPaths": ["/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                              "/proc/sysrq-trigger"],
            "seccomp": {
                "defaultAction": "SCMP_ACT_ALLOW",
                "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64"],
                "syscalls": [{"names": DENIED_SYSCALLS, "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]
            }
        }
    })
}

/// The shared read-only root every instance pivots into: only mount points and the usual
/// merged-/usr symlinks; everything else is bind-mounted per the config.
pub fn prepare_rootfs(rootfs: &std::path::Path) -> std::io::Result<()> {
    for dir in [
        "usr",
        "etc",
        "proc",
        "dev",
        "tmp",
        "run/icebox",
        "opt/icebox/runtime",
    ] {
        std::fs::create_dir_all(rootfs.join(dir))?;
    }
    for (link, target) in [
        ("bin", "usr/bin"),
        ("lib", "usr/lib"),
        ("lib64", "usr/lib64"),
        ("sbin", "usr/sbin"),
    ] {
        let path = rootfs.join(link);
        if std::fs::symlink_metadata(&path).is_err() {
            std::os::unix::fs::symlink(target, &path)?;
        }
    }
    Ok(())
}
