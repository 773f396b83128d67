//! The harness's last-resort cleanup (a daemon killed and never restarted, or a failed test)
//! must leave no cgroup behind, also when what is left is frozen: under cgroup v1 the freezer
//! is its own hierarchy, and a frozen task in `cpu` cannot die until it is thawed there.

use icebox_integration::leaks::{cgroup_dirs, force_remove_cgroups};
use std::path::Path;
use std::process::Command;

#[test]
fn a_frozen_leftover_in_several_hierarchies_is_removed_from_all() {
    let root = Path::new("/sys/fs/cgroup");
    let tag = format!("leftover-test-{}", std::process::id());
    let name = format!("icebox-{tag}");
    let v1 = root.join("freezer").is_dir() && root.join("cpu").is_dir();
    let instance_dirs: Vec<_> = if v1 {
        ["cpu", "freezer"]
            .iter()
            .map(|c| root.join(c).join(&name).join("inst"))
            .collect()
    } else {
        vec![root.join(&name).join("inst")]
    };
    for dir in &instance_dirs {
        std::fs::create_dir_all(dir).expect("creating a test cgroup (needs root)");
    }
    let mut child = Command::new("sleep").arg("600").spawn().expect("sleep");
    for dir in &instance_dirs {
        std::fs::write(dir.join("cgroup.procs"), child.id().to_string()).expect("moving the task");
    }
    let frozen = if v1 {
        std::fs::write(
            root.join("freezer").join(&name).join("inst/freezer.state"),
            "FROZEN",
        )
    } else {
        std::fs::write(instance_dirs[0].join("cgroup.freeze"), "1")
    };
    frozen.expect("freezing the task");

    force_remove_cgroups(&tag);

    let _ = child.wait();
    assert!(
        cgroup_dirs(&tag).is_empty(),
        "left behind: {:?}",
        cgroup_dirs(&tag)
    );
}
