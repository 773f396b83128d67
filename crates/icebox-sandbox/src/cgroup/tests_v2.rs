//! Tests on a real cgroup2 hierarchy: the host's, or the `unified` mount of a hybrid host
//! (which may have no controllers at all: limits are then reported as unapplied).

use super::test_support::*;
use super::*;
use icebox_core::units::MIB;
use std::fs;
use std::os::unix::process::ExitStatusExt;

fn controllers(dir: &Path) -> Vec<String> {
    fs::read_to_string(dir.join("cgroup.controllers"))
        .unwrap()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn frozen_event(dir: &Path) -> Option<u64> {
    super::fs::read_keyed(&dir.join("cgroup.events"), "frozen")
}

#[test]
fn join_freeze_thaw_kill_remove() {
    let Some(root) = v2_root() else { return };
    let scratch = Scratch::new(root.clone());
    let rel = scratch.rel("inst-1");
    let limits = CgroupLimits {
        memory_bytes: Some(64 * MIB),
        pids_max: Some(32),
        cpu_weight: Some(200),
    };
    let cg = root.create(&rel, &limits).unwrap();
    assert_eq!(cg.version(), CgroupVersion::V2);
    let Location::V2(dir) = &cg.location else {
        unreachable!()
    };

    let available = controllers(dir);
    let expected: Vec<Limit> = [
        ("memory", Limit::Memory),
        ("pids", Limit::Pids),
        ("cpu", Limit::Cpu),
    ]
    .into_iter()
    .filter(|(c, _)| !available.iter().any(|a| a == c))
    .map(|(_, l)| l)
    .collect();
    assert_eq!(cg.unapplied_limits(), expected.as_slice());
    if available.iter().any(|c| c == "memory") {
        assert_eq!(
            fs::read_to_string(dir.join("memory.max")).unwrap().trim(),
            (64 * MIB).to_string()
        );
    }
    if available.iter().any(|c| c == "pids") {
        assert_eq!(
            fs::read_to_string(dir.join("pids.max")).unwrap().trim(),
            "32"
        );
    }

    let mut child = spawn_sleep(&cg);
    assert_eq!(cg.pids(), vec![child.id()]);
    let line = cgroup_line(child.id(), "");
    assert!(line.ends_with(&format!("/{rel}")), "{line}");

    cg.freeze().unwrap();
    assert!(cg.is_frozen());
    assert_eq!(frozen_event(dir), Some(1));
    cg.thaw().unwrap();
    assert!(!cg.is_frozen());
    assert_eq!(frozen_event(dir), Some(0));

    cg.freeze().unwrap();
    assert!(
        dir.join("cgroup.kill").exists(),
        "kernels since 5.14 have cgroup.kill"
    );
    cg.kill_all().unwrap();
    assert!(cg.pids().is_empty());
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));

    cg.remove().unwrap();
    assert!(!dir.exists());
    assert_eq!(root.children(&scratch.top), Vec::<String>::new());
}

#[test]
fn remove_kills_a_whole_subtree() {
    let Some(root) = v2_root() else { return };
    let scratch = Scratch::new(root.clone());
    let a = root
        .create(&scratch.rel("a"), &CgroupLimits::default())
        .unwrap();
    let b = root
        .create(&scratch.rel("b"), &CgroupLimits::default())
        .unwrap();
    let mut children = [spawn_sleep(&a), spawn_sleep(&b)];
    let top = root.open(&scratch.top);
    let mut expected: Vec<u32> = children.iter().map(|c| c.id()).collect();
    expected.sort_unstable();
    assert_eq!(top.pids(), expected);
    top.remove().unwrap();
    for child in &mut children {
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    }
    assert!(top.paths().iter().all(|d| !d.exists()));
}
