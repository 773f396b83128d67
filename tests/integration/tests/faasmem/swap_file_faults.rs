//! The swap file's faults against the real daemon (issue 21): a file that does not fit, its
//! path gone under load, swapped off under load by an admin. A guard swaps off any swap area
//! left under the test's directories and puts zswap back as it was, even when a test fails.

use super::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Swaps off every area under `roots` and restores zswap, on drop: declared before the daemon
/// so that it runs after the daemon (killed when a test panics) is gone.
struct SwapGuard {
    roots: Vec<PathBuf>,
    zswap_was: Option<bool>,
}

impl SwapGuard {
    fn new(roots: &[&Path]) -> SwapGuard {
        SwapGuard {
            roots: roots.iter().map(|p| p.to_path_buf()).collect(),
            zswap_was: zswap_enabled(),
        }
    }

    /// The swap areas under the guarded directories now.
    fn ours(&self) -> Vec<String> {
        std::fs::read_to_string("/proc/swaps")
            .unwrap()
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next())
            .filter(|p| self.roots.iter().any(|r| Path::new(p).starts_with(r)))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for SwapGuard {
    fn drop(&mut self) {
        for area in self.ours() {
            let _ = Command::new("swapoff").arg(&area).status();
        }
        if let Some(was) = self.zswap_was {
            let _ = std::fs::write(
                "/sys/module/zswap/parameters/enabled",
                if was { "Y" } else { "N" },
            );
        }
    }
}

/// A small ext4 image, loop-mounted (autoclear: the loop device goes with the mount).
struct LoopFs {
    dir: tempfile::TempDir,
}

impl LoopFs {
    fn new(bytes: u64) -> Option<LoopFs> {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("fs.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(bytes)
            .unwrap();
        std::fs::create_dir(dir.path().join("mnt")).unwrap();
        let ok = |c: &mut Command| c.status().is_ok_and(|s| s.success());
        if !(ok(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image))
            && ok(Command::new("mount")
                .args(["-o", "loop"])
                .arg(&image)
                .arg(dir.path().join("mnt"))))
        {
            eprintln!("skipped: cannot make and loop-mount an ext4 image here");
            return None;
        }
        Some(LoopFs { dir })
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.path()).status();
    }
}

fn zram_devices() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/block")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("zram"))
        .collect();
    names.sort();
    names
}

/// Invokes `name` until its instance has moved more than 40 MiB into the pool.
fn offloaded_instance(d: &Daemon, name: &str) -> String {
    deploy(d, name);
    let instance = invoke_ok(d, name);
    for _ in 0..6 {
        assert_eq!(invoke_ok(d, name), instance);
    }
    wait_for("the cold pages offloaded", Duration::from_secs(20), || {
        let o = offload_of(d, &instance);
        (o["moved_bytes"].as_u64().unwrap_or(0) > 40 * MIB).then_some(o)
    });
    instance
}

#[test]
fn a_swap_file_that_does_not_fit_stops_the_start_with_the_figures_and_leaves_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !zram_usable() {
        return;
    }
    let Some(fs) = LoopFs::new(32 * MIB) else {
        return;
    };
    let _guard = SwapGuard::new(&[&fs.path()]);
    let state = StateDir::new();
    let file = fs.path().join("offload.swap");
    let swaps_before = std::fs::read_to_string("/proc/swaps").unwrap();
    let zram_before = zram_devices();
    let zswap_before = zswap_enabled();
    for pool in [
        format!("swapfile:{}:256MiB", file.display()),
        format!("zram:16MiB+swapfile:{}:256MiB", file.display()),
    ] {
        let out = Command::new(icebox_integration::paths::binary("iceboxd"))
            .args(["--listen", "127.0.0.1:0", "--state-dir"])
            .arg(state.path())
            .args(["--offload-pool", &pool])
            .output()
            .expect("iceboxd runs");
        assert!(!out.status.success(), "{pool}: started on a full disk");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "{}: no room for the swap file: 268435456 bytes (256.0 MiB) needed",
                file.display()
            )),
            "{pool}: {err}"
        );
        assert!(err.contains("available on its filesystem"), "{err}");
        assert!(!file.exists(), "{pool}: a partial file was left");
        assert_eq!(
            std::fs::read_to_string("/proc/swaps").unwrap(),
            swaps_before,
            "{pool}: swap left on"
        );
        assert_eq!(
            zram_devices(),
            zram_before,
            "{pool}: a zram device was left"
        );
        assert_eq!(zswap_enabled(), zswap_before, "{pool}: zswap changed");
        assert!(!state.path().join("offload-pool.json").exists());
    }
}

#[test]
fn a_swap_file_whose_path_went_away_under_load_keeps_offloading_and_is_swapped_off_at_stop() {
    let zswap_before = zswap_enabled();
    let mut roots = Vec::new();
    let mut file = PathBuf::new();
    let node = node_with(|state| {
        let dir = state.path().join("pool");
        std::fs::create_dir(&dir).unwrap();
        file = dir.join("offload.swap");
        roots.push(state.path().to_path_buf());
        vec![
            "--offload-pool".to_string(),
            format!("swapfile:{}:256MiB", file.display()),
            "--offload".to_string(),
            "faasmem".to_string(),
            "--semiwarm".to_string(),
            "off".to_string(),
        ]
    });
    let Some(Node { _serial, state, d }) = node else {
        return;
    };
    let guard = SwapGuard {
        roots,
        zswap_was: zswap_before,
    };
    let first = offloaded_instance(&d, "before");
    // The kernel refuses to unlink an active swap file; its directory can still be moved.
    let unlink = std::fs::remove_file(&file).unwrap_err();
    assert_eq!(
        unlink.kind(),
        std::io::ErrorKind::PermissionDenied,
        "{unlink}"
    );
    let moved = state.path().join("pool.moved");
    std::fs::rename(file.parent().unwrap(), &moved).unwrap();
    assert!(!file.exists());
    // Offloading goes on into the file where it is now.
    offloaded_instance(&d, "after");
    assert_eq!(invoke_ok(&d, "before"), first, "pages back intact");
    let health = d.get_json("/icebox/v1/health");
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(
        guard.ours(),
        vec![moved.join("offload.swap").display().to_string()],
        "swapped on where it went"
    );
    d.stop();
    assert!(guard.ours().is_empty(), "swap left on after stop");
    assert!(
        !moved.join("offload.swap").exists(),
        "the moved file left behind"
    );
    assert_eq!(zswap_enabled(), zswap_before, "zswap as it was");
    assert!(!state.path().join("offload-pool.json").exists());
}

#[test]
fn a_swap_file_swapped_off_under_load_stops_offloading_with_an_event_and_instances_keep_running() {
    let zswap_before = zswap_enabled();
    let Some((Node { _serial, state, d }, file)) =
        node_with_swap_file(&["--offload", "faasmem", "--semiwarm", "off"])
    else {
        return;
    };
    let guard = SwapGuard {
        roots: vec![state.path().to_path_buf()],
        zswap_was: zswap_before,
    };
    let instance = offloaded_instance(&d, "orphaned");
    let status = Command::new("swapoff")
        .arg(&file)
        .status()
        .expect("swapoff runs");
    assert!(status.success());
    let health = wait_for("health degraded", Duration::from_secs(10), || {
        let h = d.get_json("/icebox/v1/health");
        (h["status"] == "degraded").then_some(h)
    });
    let reason = health["reason"].as_str().unwrap();
    assert!(
        reason.contains(&file) && reason.contains("no longer swapped on"),
        "{reason}"
    );
    let event = wait_for("the instance told", Duration::from_secs(10), || {
        d.events_of(&instance).into_iter().find(|e| {
            e["kind"] == "offloaded"
                && e["detail"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("offloading stopped") && s.contains(&file))
        })
    });
    assert!(
        d.get("/metrics")
            .body
            .contains("icebox_offload_pool_unusable_total 1"),
        "{event}"
    );
    let memory = d.get_json("/icebox/v1/memory");
    assert!(memory["pool"]["error"].is_string(), "{memory}");
    // The swapoff brought its pages back: the same instance answers right.
    for _ in 0..3 {
        assert_eq!(invoke_ok(&d, "orphaned"), instance);
    }
    let fresh = d.get_json(&format!("/icebox/v1/instances/{instance}?fresh=true"));
    assert_eq!(fresh["memory"]["swap"], 0, "{fresh}");
    // A new action's instance gets nothing offloaded.
    deploy(&d, "later");
    let later = invoke_ok(&d, "later");
    for _ in 0..6 {
        assert_eq!(invoke_ok(&d, "later"), later);
    }
    wait_for("steps skipped", Duration::from_secs(10), || {
        d.get("/metrics")
            .body
            .contains("icebox_offload_skipped_total{reason=\"pool_unusable\"}")
            .then_some(())
    });
    assert_eq!(offload_of(&d, &later)["moved_bytes"], 0);
    d.stop();
    assert!(guard.ours().is_empty(), "swap left on after stop");
    assert!(!std::path::Path::new(&file).exists(), "{file} left behind");
    assert_eq!(zswap_enabled(), zswap_before, "zswap as it was");
}

/// `--pool-charge uss` charges an instance its USS plus its swapped bytes' share of the pool's
/// own RAM: on a swap file with zswap off that share is nothing (the pages are on disk), on
/// zram it is what they compressed to.
#[test]
fn an_instance_whose_pages_went_to_the_file_is_charged_only_what_stays_in_ram() {
    let zswap_before = zswap_enabled();
    let Some((Node { _serial, state, d }, file)) =
        node_with_swap_file(&["--offload", "faasmem", "--semiwarm", "off"])
    else {
        return;
    };
    let _guard = SwapGuard {
        roots: vec![state.path().to_path_buf()],
        zswap_was: zswap_before,
    };
    // Straight to the file: zswap (which the daemon turned on) would keep them in RAM.
    if zswap_before.is_some() {
        std::fs::write("/sys/module/zswap/parameters/enabled", "N").unwrap();
    }
    let instance = offloaded_instance(&d, "on-disk");
    let fresh = d.get_json(&format!("/icebox/v1/instances/{instance}?fresh=true"));
    let (uss, swap) = (
        fresh["memory"]["uss"].as_u64().unwrap(),
        fresh["memory"]["swap"].as_u64().unwrap(),
    );
    let local = fresh["offload"]["local_bytes"].as_u64().unwrap();
    eprintln!("swap file: uss {uss} swap {swap} charged {local}");
    assert!(swap > 30 * MIB, "{fresh}");
    assert_eq!(local, uss, "pages on disk cost no RAM: {fresh}");
    // The pool's figures are re-read once a second.
    let memory = wait_for("the pool's figures", Duration::from_secs(10), || {
        let m = d.get_json("/icebox/v1/memory");
        (m["pool"]["stored_bytes"].as_u64().unwrap_or(0) >= swap).then_some(m)
    });
    assert_eq!(memory["pool"]["memory_bytes"], 0, "{memory}");
    d.stop();
    assert!(!std::path::Path::new(&file).exists());

    let zram = start(
        &state,
        &[
            "--offload-pool",
            "zram:256MiB",
            "--offload",
            "faasmem",
            "--semiwarm",
            "off",
        ],
    );
    let instance = offloaded_instance(&zram, "in-zram");
    let fresh = zram.get_json(&format!("/icebox/v1/instances/{instance}?fresh=true"));
    let (uss, swap) = (
        fresh["memory"]["uss"].as_u64().unwrap(),
        fresh["memory"]["swap"].as_u64().unwrap(),
    );
    let local = fresh["offload"]["local_bytes"].as_u64().unwrap();
    let memory = zram.get_json("/icebox/v1/memory");
    eprintln!(
        "zram: uss {uss} swap {swap} charged {local}; pool {}",
        memory["pool"]
    );
    assert!(swap > 30 * MIB, "{fresh}");
    assert!(
        local > uss && local - uss < swap / 2,
        "its share of zram's RAM, compressed: {fresh}"
    );
    zram.stop();
}
