//! The swap file tier on a real file (as root; skipped otherwise), serialised with the zram
//! tests: each test turns swap on for a moment only, and a guard swaps off and deletes the
//! file and restores zswap even when an assertion fails.

use super::tests::zram_tests;
use super::*;
use icebox_core::units::MIB;

/// Swaps off and removes the file, and puts zswap back as it was, when dropped.
struct FileGuard {
    path: PathBuf,
    zswap_was: Option<bool>,
}

impl FileGuard {
    fn new(path: &Path) -> FileGuard {
        FileGuard {
            path: path.to_path_buf(),
            zswap_was: zswap::enabled().ok(),
        }
    }
}

impl Drop for FileGuard {
    fn drop(&mut self) {
        let _ = SwapFile::at(&self.path).teardown();
        if let Some(was) = self.zswap_was {
            let _ = zswap::set(was);
        }
    }
}

fn area(path: &Path) -> Option<swaps::SwapArea> {
    read_swaps()
        .unwrap()
        .into_iter()
        .find(|a| Path::new(&a.path) == path)
}

#[test]
fn a_swap_file_is_swapped_on_below_zram_with_zswap_and_gone_at_close() {
    let Some(_serial) = zram_tests() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swap");
    let guard = FileGuard::new(&path);
    let spec: PoolSpec = format!("swapfile:{}:32MiB", path.display())
        .parse()
        .unwrap();
    let pool = OffloadPool::open(&spec, dir.path()).unwrap();
    let a = area(&path).expect("swapped on");
    assert_eq!(a.priority, swapfile::PRIORITY);
    assert!(a.size_bytes > 30 * MIB && a.size_bytes <= 32 * MIB, "{a:?}");
    assert!(SwapFile::is_ours(&path));
    assert_eq!(pool.check(), Ok(()));
    let stats = pool.stats();
    assert_eq!(stats.kind, "swapfile");
    assert_eq!(stats.device.as_deref(), Some(path.to_str().unwrap()));
    if guard.zswap_was == Some(false) {
        assert!(
            zswap::enabled().unwrap(),
            "zswap is on in front of the file"
        );
        assert!(marker::read(dir.path()).unwrap().unwrap().zswap_turned_on);
    }
    pool.close().unwrap();
    assert!(area(&path).is_none());
    assert!(!path.exists());
    assert_eq!(
        zswap::enabled().ok(),
        guard.zswap_was,
        "zswap back as it was"
    );
    assert_eq!(marker::read(dir.path()).unwrap(), None);
}

#[test]
fn both_tiers_fill_zram_first_and_a_crash_leaves_nothing_after_the_next_start() {
    let Some(_serial) = zram_tests() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swap");
    let _guard = FileGuard::new(&path);
    let spec: PoolSpec = format!("zram:16MiB+swapfile:{}:32MiB", path.display())
        .parse()
        .unwrap();
    let pool = OffloadPool::open(&spec, dir.path()).unwrap();
    let _zram = super::tests::DeviceGuard(super::tests::device_id(&pool));
    let zram_area = area(Path::new(&pool.device().unwrap())).expect("zram on");
    let file_area = area(&path).expect("file on");
    assert!(zram_area.priority > file_area.priority, "zram fills first");
    assert_eq!(pool.stats().kind, "zram+swapfile");
    assert_eq!(pool.spec(), spec);
    // A crash: nothing torn down, the marker left.
    std::mem::forget(pool);
    assert!(OffloadPool::cleanup_stale(dir.path()).unwrap());
    assert!(area(&path).is_none() && !path.exists());
    assert!(area(Path::new(&zram_area.path)).is_none());
    assert_eq!(marker::read(dir.path()).unwrap(), None);
}

#[test]
fn a_file_that_is_not_icebox_s_swap_is_never_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swap");
    std::fs::write(&path, vec![0u8; 8192]).unwrap();
    marker::write(
        dir.path(),
        &marker::Marker {
            device: None,
            boot_id: zram::boot_id().unwrap(),
            disksize: 0,
            swap_file: Some(path.clone()),
            zswap_turned_on: false,
        },
    )
    .unwrap();
    assert!(!OffloadPool::cleanup_stale(dir.path()).unwrap());
    assert!(path.exists(), "somebody else's file stays");
    assert_eq!(marker::read(dir.path()).unwrap(), None);
}

#[test]
fn a_swap_file_path_that_exists_is_refused_and_left_alone() {
    let Some(_serial) = zram_tests() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    std::fs::write(&path, b"precious").unwrap();
    let spec: PoolSpec = format!("swapfile:{}:8MiB", path.display()).parse().unwrap();
    let err = OffloadPool::open(&spec, dir.path()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
    assert_eq!(marker::read(dir.path()).unwrap(), None);
}
