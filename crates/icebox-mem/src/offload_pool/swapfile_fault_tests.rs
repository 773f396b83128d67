//! The swap file's faults on real files, real swapon/swapoff and a real (loop-mounted ext4)
//! filesystem, as root (skipped otherwise), serialised with the zram tests. A guard holding
//! the file open swaps it off wherever it went and puts zswap back as it was, even when an
//! assertion fails.

use super::loopfs::LoopFs;
use super::tests::{zram_devices, zram_tests};
use super::*;
use crate::testchild::TestChild;
use icebox_core::units::MIB;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;

/// Holds the swap file open: swapoff through /proc/<pid>/fd/N reaches it even when its path
/// no longer does. Restores zswap on drop.
struct HeldGuard {
    file: Option<File>,
    zswap_was: Option<bool>,
}

impl HeldGuard {
    fn new() -> HeldGuard {
        HeldGuard {
            file: None,
            zswap_was: zswap::enabled().ok(),
        }
    }

    fn hold(&mut self, path: &Path) {
        self.file = Some(File::open(path).unwrap());
    }

    fn link(&self) -> Option<String> {
        let f = self.file.as_ref()?;
        Some(format!("/proc/{}/fd/{}", std::process::id(), f.as_raw_fd()))
    }

    /// Whether the held file is swapped on, under whatever name.
    fn swapped_on(&self) -> bool {
        let Some(name) = self
            .link()
            .and_then(|l| std::fs::read_link(l).ok())
            .map(|p| p.display().to_string())
        else {
            return false;
        };
        read_swaps().unwrap().iter().any(|a| a.path == name)
    }
}

impl Drop for HeldGuard {
    fn drop(&mut self) {
        if self.swapped_on() {
            let link = self.link().unwrap();
            let _ = std::process::Command::new("swapoff").arg(link).status();
        }
        if let Some(was) = self.zswap_was {
            let _ = zswap::set(was);
        }
    }
}

#[test]
fn a_swap_file_that_does_not_fit_is_refused_with_the_figures_and_leaves_nothing() {
    let Some(_serial) = zram_tests() else { return };
    let Some(fs) = LoopFs::new(32 * MIB) else {
        return;
    };
    let _guard = HeldGuard::new();
    let zswap_before = zswap::enabled().ok();
    let swaps_before = read_swaps().unwrap();
    let zram_before = zram_devices();
    let state = tempfile::tempdir().unwrap();
    let path = fs.path().join("swap");
    for spec in [
        format!("swapfile:{}:64MiB", path.display()),
        format!("zram:16MiB+swapfile:{}:64MiB", path.display()),
    ] {
        let spec: PoolSpec = spec.parse().unwrap();
        let err = OffloadPool::open(&spec, state.path()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull, "{err}");
        let text = err.to_string();
        assert!(text.starts_with(&path.display().to_string()), "{text}");
        assert!(
            text.contains("67108864 bytes (64.0 MiB) needed"),
            "the size asked for: {text}"
        );
        let free = space::available(fs.path()).unwrap();
        assert!(
            text.contains(&format!("{free} bytes")) && text.contains("available"),
            "what the filesystem has: {text}"
        );
        assert!(!path.exists(), "no partial file");
        assert_eq!(read_swaps().unwrap(), swaps_before, "no swap left on");
        assert_eq!(zram_devices(), zram_before, "no zram device left");
        assert_eq!(zswap::enabled().ok(), zswap_before, "zswap as found");
        assert_eq!(marker::read(state.path()).unwrap(), None);
    }
}

#[test]
fn a_swap_file_is_fully_allocated_so_a_filesystem_filling_up_later_does_not_matter() {
    let Some(_serial) = zram_tests() else { return };
    let Some(fs) = LoopFs::new(64 * MIB) else {
        return;
    };
    let mut guard = HeldGuard::new();
    let state = tempfile::tempdir().unwrap();
    let path = fs.path().join("swap");
    let spec: PoolSpec = format!("swapfile:{}:24MiB", path.display())
        .parse()
        .unwrap();
    let pool = OffloadPool::open(&spec, state.path()).unwrap();
    guard.hold(&path);
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.len(), 24 * MIB);
    assert!(
        meta.blocks() * 512 >= 24 * MIB,
        "every block allocated: {} of {} bytes",
        meta.blocks() * 512,
        24 * MIB
    );
    assert!(fs.fill() > 0);
    assert_eq!(
        space::available(fs.path()).unwrap(),
        0,
        "the filesystem is full"
    );
    // Straight to the file: zswap would keep these compressible pages in RAM.
    if zswap::available() {
        zswap::set(false).unwrap();
    }
    let mut child = TestChild::spawn();
    let region = child.alloc(16 * MIB);
    crate::pageout(child.pid(), &[region.range(0, region.len)]).unwrap();
    let used = read_swaps()
        .unwrap()
        .into_iter()
        .find(|a| Path::new(&a.path) == path)
        .expect("still swapped on")
        .used_bytes;
    assert!(
        used >= 8 * MIB,
        "pages went to the file on a full filesystem: {used}"
    );
    assert!(child.intact(region), "pages came back from the file intact");
    assert_eq!(pool.check(), Ok(()));
    drop(child);
    pool.close().unwrap();
    assert!(!path.exists());
    assert!(!guard.swapped_on());
}

#[test]
fn the_kernel_refuses_to_unlink_or_rename_an_active_swap_file() {
    let Some(_serial) = zram_tests() else { return };
    let mut guard = HeldGuard::new();
    let state = tempfile::tempdir().unwrap();
    let path = state.path().join("swap");
    let spec: PoolSpec = format!("swapfile:{}:16MiB", path.display())
        .parse()
        .unwrap();
    let pool = OffloadPool::open(&spec, state.path()).unwrap();
    guard.hold(&path);
    let unlink = std::fs::remove_file(&path).unwrap_err();
    assert_eq!(unlink.kind(), io::ErrorKind::PermissionDenied, "{unlink}");
    let rename = std::fs::rename(&path, state.path().join("elsewhere")).unwrap_err();
    assert_eq!(rename.kind(), io::ErrorKind::PermissionDenied, "{rename}");
    assert_eq!(pool.check(), Ok(()));
    pool.close().unwrap();
    assert!(!path.exists() && !guard.swapped_on());
}

/// The path stops leading to the file (`how` does it); the pool must stay usable and close
/// must still swap it off.
fn path_gone_under_the_pool(how: impl FnOnce(&mut LoopFs, &Path) -> Option<PathBuf>) {
    let Some(_serial) = zram_tests() else { return };
    let Some(mut fs) = LoopFs::new(64 * MIB) else {
        return;
    };
    let mut guard = HeldGuard::new();
    let state = tempfile::tempdir().unwrap();
    let dir = fs.path().join("pool");
    std::fs::create_dir(&dir).unwrap();
    let path = dir.join("swap");
    let spec: PoolSpec = format!("swapfile:{}:16MiB", path.display())
        .parse()
        .unwrap();
    let pool = OffloadPool::open(&spec, state.path()).unwrap();
    guard.hold(&path);
    let moved_to = how(&mut fs, &path);
    assert!(!path.exists(), "the path no longer leads to the file");
    assert!(guard.swapped_on(), "the kernel still swaps to it");
    assert_eq!(pool.check(), Ok(()), "still usable: offloading goes on");
    assert!(
        pool.stats().capacity_bytes > 0,
        "still counted: {:?}",
        pool.stats()
    );
    pool.close().unwrap();
    assert!(!guard.swapped_on(), "swapped off at close");
    if let Some(now) = moved_to {
        assert!(!now.exists(), "removed where it went: {}", now.display());
    }
    assert_eq!(marker::read(state.path()).unwrap(), None);
}

#[test]
fn a_swap_file_whose_directory_was_renamed_is_still_swapped_off_and_removed_at_close() {
    path_gone_under_the_pool(|fs, path| {
        let moved = fs.path().join("moved");
        std::fs::rename(path.parent().unwrap(), &moved).unwrap();
        Some(moved.join("swap"))
    });
}

#[test]
fn a_swap_file_whose_filesystem_was_lazily_unmounted_is_still_swapped_off_at_close() {
    path_gone_under_the_pool(|fs, _| {
        fs.detach();
        None
    });
}
