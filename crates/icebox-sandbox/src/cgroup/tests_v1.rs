//! Tests on the host's real cgroup v1 hierarchies (skipped elsewhere or without root).

use super::test_support::*;
use super::*;
use icebox_core::units::{MIB, MIB_USIZE};
use std::fs;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::process::ExitStatusExt;

fn read(dir: &Path, file: &str) -> String {
    fs::read_to_string(dir.join(file))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn limits_join_freeze_thaw_kill_remove() {
    let Some(root) = v1_root() else { return };
    let scratch = Scratch::new(root.clone());
    let rel = scratch.rel("inst-1");
    let limits = CgroupLimits {
        memory_bytes: Some(64 * MIB),
        pids_max: Some(32),
        cpu_weight: Some(200),
    };
    let cg = root.create(&rel, &limits).unwrap();
    assert_eq!(cg.version(), CgroupVersion::V1);
    assert_eq!(cg.unapplied_limits(), &[] as &[Limit]);
    let Location::V1(dirs) = &cg.location else {
        unreachable!()
    };
    assert_eq!(
        read(&dirs.memory, "memory.limit_in_bytes"),
        (64 * MIB).to_string()
    );
    if dirs.memory.join("memory.memsw.limit_in_bytes").exists() {
        assert_eq!(
            read(&dirs.memory, "memory.memsw.limit_in_bytes"),
            (64 * MIB).to_string()
        );
    }
    assert!(read(&dirs.memory, "memory.oom_control").contains("oom_kill_disable 0"));
    assert_eq!(read(dirs.pids.as_ref().unwrap(), "pids.max"), "32");
    assert_eq!(read(dirs.cpu.as_ref().unwrap(), "cpu.shares"), "2048");

    let mut child = spawn_sleep(&cg);
    assert_eq!(cg.pids(), vec![child.id()]);
    for controller in ["memory", "freezer", "pids", "cpu"] {
        let line = cgroup_line(child.id(), controller);
        assert!(line.ends_with(&format!(":/{rel}")), "{line}");
    }
    assert!(cg.memory_usage().is_some_and(|u| u > 0));
    assert_eq!(root.children(&scratch.top), vec!["inst-1".to_string()]);

    cg.freeze().unwrap();
    assert!(cg.is_frozen());
    assert_eq!(read(&dirs.freezer, "freezer.state"), "FROZEN");
    cg.thaw().unwrap();
    assert!(!cg.is_frozen());
    assert_eq!(read(&dirs.freezer, "freezer.state"), "THAWED");

    // Killing must also work on a frozen cgroup (v1 frozen tasks die only once thawed).
    cg.freeze().unwrap();
    cg.kill_all().unwrap();
    assert!(cg.pids().is_empty());
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));

    cg.remove().unwrap();
    for dir in dirs.all() {
        assert!(!dir.exists(), "{} still exists", dir.display());
    }
    cg.remove().unwrap();
}

#[test]
fn raising_and_lowering_the_memory_limit_keeps_memsw_in_step() {
    let Some(root) = v1_root() else { return };
    let scratch = Scratch::new(root.clone());
    let cg = root
        .create(
            &scratch.rel("inst"),
            &CgroupLimits {
                memory_bytes: Some(64 * MIB),
                ..Default::default()
            },
        )
        .unwrap();
    let Location::V1(dirs) = &cg.location else {
        unreachable!()
    };
    for bytes in [256 * MIB, 32 * MIB] {
        cg.set_limits(&CgroupLimits {
            memory_bytes: Some(bytes),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            read(&dirs.memory, "memory.limit_in_bytes"),
            bytes.to_string()
        );
        if dirs.memory.join("memory.memsw.limit_in_bytes").exists() {
            assert_eq!(
                read(&dirs.memory, "memory.memsw.limit_in_bytes"),
                bytes.to_string()
            );
        }
    }
}

/// Touches `bytes` of fresh anonymous memory; returns 0 if that was allowed.
fn allocate_and_touch(bytes: usize) -> i32 {
    // SAFETY: a private anonymous mapping written only by this (forked, single-threaded) child.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return 2;
        }
        for off in (0..bytes).step_by(4096) {
            std::ptr::write_volatile(p.cast::<u8>().add(off), 1);
        }
    }
    0
}

#[test]
fn memory_limit_oom_kills_and_is_counted() {
    let Some(root) = v1_root() else { return };
    let scratch = Scratch::new(root.clone());
    let cg = root
        .create(
            &scratch.rel("hog"),
            &CgroupLimits {
                memory_bytes: Some(64 * MIB),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(cg.oom_kills(), 0);
    let pid = fork_into(&cg.procs_files(), || allocate_and_touch(200 * MIB_USIZE));
    let status = wait_status(pid);
    assert!(
        libc::WIFSIGNALED(status),
        "the 200 MB child exited with status {status:#x} instead of being killed"
    );
    assert_eq!(libc::WTERMSIG(status), libc::SIGKILL);
    assert!(cg.oom_kills() >= 1, "oom_kills = {}", cg.oom_kills());
    assert!(cg.pids().is_empty());
}

/// Forks until fork fails; reports (successful forks, errno) through `report` and waits
/// to be killed. Runs in a forked child: async-signal-safe calls only.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "an errno fits in a byte"
)]
fn fork_until_refused(report: BorrowedFd<'_>) -> i32 {
    let mut forks: u8 = 0;
    let errno = loop {
        // SAFETY: the child only calls pause, an async-signal-safe syscall, until it is killed.
        match unsafe { libc::fork() } {
            0 => loop {
                rustix::event::pause();
            },
            // Reading errno allocates nothing.
            -1 => break std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
            _ if forks == 100 => break 0,
            _ => forks += 1,
        }
    };
    let msg = [forks, errno as u8];
    let _ = rustix::io::write(report, &msg);
    loop {
        rustix::event::pause();
    }
}

#[test]
fn pids_limit_makes_fork_fail() {
    let Some(root) = v1_root() else { return };
    let scratch = Scratch::new(root.clone());
    let cg = root
        .create(
            &scratch.rel("bomb"),
            &CgroupLimits {
                pids_max: Some(4),
                ..Default::default()
            },
        )
        .unwrap();
    let (reader, writer) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let pid = fork_into(&cg.procs_files(), || fork_until_refused(writer.as_fd()));
    drop(writer);
    let mut msg = [0u8; 2];
    let n = rustix::io::read(&reader, &mut msg).unwrap_or(0);
    drop(reader);
    assert_eq!(
        n, 2,
        "the forking child did not report (JOIN_FAILED={JOIN_FAILED})"
    );
    let (forks, errno) = (msg[0], i32::from(msg[1]));
    assert_eq!(
        errno,
        libc::EAGAIN,
        "fork failed with errno {errno} after {forks} forks"
    );
    assert_eq!(forks, 3, "pids.max 4 = the forker and 3 children");
    assert!(cg.pids_max_events() >= 1);
    assert_eq!(cg.pids().len(), 4);
    cg.kill_all().unwrap();
    assert!(cg.pids().is_empty());
    let status = wait_status(pid);
    assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL);
}

#[test]
fn children_lists_instances_and_remove_takes_the_subtree() {
    let Some(root) = v1_root() else { return };
    let scratch = Scratch::new(root.clone());
    let a = root
        .create(&scratch.rel("a"), &CgroupLimits::default())
        .unwrap();
    root.create(&scratch.rel("b"), &CgroupLimits::default())
        .unwrap();
    let mut child = spawn_sleep(&a);
    assert_eq!(
        root.children(&scratch.top),
        vec!["a".to_string(), "b".to_string()]
    );
    let top = root.open(&scratch.top);
    assert_eq!(
        top.pids(),
        vec![child.id()],
        "pids() includes descendant cgroups"
    );
    top.remove().unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert!(root.children(&scratch.top).is_empty());
    for dir in top.paths() {
        assert!(!dir.exists(), "{}", dir.display());
    }
}
