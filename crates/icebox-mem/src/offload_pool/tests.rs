//! Tests on real zram devices (as root; skipped otherwise). They run one at a time, and every
//! device is torn down by a guard even when an assertion fails.

use super::*;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};

static ZRAM_TESTS: Mutex<()> = Mutex::new(());

use icebox_core::units::MIB;

/// Serialises the zram tests; `None` (with the reason printed) when they cannot run here.
pub(super) fn zram_tests() -> Option<MutexGuard<'static, ()>> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipping: zram tests need root");
        return None;
    }
    if !Path::new(zram::CONTROL).exists() {
        eprintln!("skipping: no {} (zram module not loaded)", zram::CONTROL);
        return None;
    }
    Some(ZRAM_TESTS.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Removes device `id` when dropped: the safety net for a pool the test forgot on purpose
/// or that an assertion left behind.
pub(super) struct DeviceGuard(pub(super) u32);

impl Drop for DeviceGuard {
    fn drop(&mut self) {
        let zram = Zram { id: self.0 };
        if let Err(e) = zram.teardown() {
            eprintln!("cleanup of {} failed: {e}", zram.dev_path());
        }
    }
}

pub(super) fn device_id(pool: &OffloadPool) -> u32 {
    pool.device()
        .unwrap()
        .strip_prefix("/dev/zram")
        .unwrap()
        .parse()
        .unwrap()
}

fn swap_area(dev: &str) -> Option<swaps::SwapArea> {
    read_swaps().unwrap().into_iter().find(|a| a.path == dev)
}

fn open_zram(dir: &Path, bytes: u64) -> (OffloadPool, DeviceGuard) {
    let pool = OffloadPool::open(&PoolSpec::Zram { bytes }, dir).unwrap();
    let guard = DeviceGuard(device_id(&pool));
    (pool, guard)
}

#[test]
fn zram_pool_is_swapped_on_first_and_closed_without_a_trace() {
    let Some(_serial) = zram_tests() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (pool, _guard) = open_zram(dir.path(), 64 * MIB);
    let dev = pool.device().unwrap();
    let area = swap_area(&dev).expect("swapped on");
    assert_eq!(area.priority, 32767);
    assert!(area.size_bytes > 60 * MIB && area.size_bytes <= 64 * MIB);
    assert_eq!(pool.spec(), PoolSpec::Zram { bytes: 64 * MIB });
    let found = marker::read(dir.path()).unwrap().expect("marker written");
    assert_eq!(found.device, Some(device_id(&pool)));
    assert_eq!(found.disksize, 64 * MIB);
    assert_eq!(found.boot_id, zram::boot_id().unwrap());
    assert_eq!(pool.check(), Ok(()));
    let algorithm = std::fs::read_to_string(format!(
        "/sys/block/zram{}/comp_algorithm",
        device_id(&pool)
    ))
    .unwrap();
    assert!(algorithm.contains("[lz4]"), "{algorithm}");

    let stats = pool.stats();
    assert_eq!(stats.kind, "zram");
    assert_eq!(stats.device.as_deref(), Some(dev.as_str()));
    assert_eq!(stats.capacity_bytes, area.size_bytes);
    assert_eq!(stats.free_bytes(), area.size_bytes - area.used_bytes);

    let sys = PathBuf::from(format!("/sys/block/zram{}", device_id(&pool)));
    pool.close().unwrap();
    assert_eq!(swap_area(&dev), None);
    assert!(!sys.exists());
    assert_eq!(marker::read(dir.path()).unwrap(), None);
}

#[test]
fn a_crashed_daemons_device_is_removed_once() {
    let Some(_serial) = zram_tests() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (pool, _guard) = open_zram(dir.path(), 16 * MIB);
    let dev = pool.device().unwrap();
    let sys = PathBuf::from(format!("/sys/block/zram{}", device_id(&pool)));
    // A crash: no close, no drop.
    std::mem::forget(pool);
    assert!(swap_area(&dev).is_some());

    assert!(OffloadPool::cleanup_stale(dir.path()).unwrap());
    assert_eq!(swap_area(&dev), None);
    assert!(!sys.exists());
    assert_eq!(marker::read(dir.path()).unwrap(), None);
    assert!(!OffloadPool::cleanup_stale(dir.path()).unwrap());
}

#[test]
fn check_notices_an_external_swapoff_and_close_still_succeeds() {
    let Some(_serial) = zram_tests() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (pool, _guard) = open_zram(dir.path(), 16 * MIB);
    let dev = pool.device().unwrap();
    Zram {
        id: device_id(&pool),
    }
    .swapoff()
    .unwrap();
    assert_eq!(
        pool.check(),
        Err(format!(
            "offload pool {dev} is no longer swapped on (swapoff by someone else?)"
        ))
    );
    assert_eq!(pool.stats().capacity_bytes, 0);
    pool.close().unwrap();
    assert!(marker::read(dir.path()).unwrap().is_none());
}

#[test]
fn dropping_an_open_pool_removes_its_device() {
    let Some(_serial) = zram_tests() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (pool, _guard) = open_zram(dir.path(), 16 * MIB);
    let dev = pool.device().unwrap();
    drop(pool);
    assert_eq!(swap_area(&dev), None);
    assert_eq!(marker::read(dir.path()).unwrap(), None);
}

/// A python3 child with 32 MiB of half-random pages that it pages out itself.
struct PagedOutChild(Child);

impl PagedOutChild {
    fn start() -> PagedOutChild {
        let child = Self::run(
            r#"
import ctypes, mmap, os, sys
n = 32 << 20
m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for off in range(0, n, 4096):
    m[off:off + 4096] = os.urandom(2048) + bytes(2048)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
libc = ctypes.CDLL(None, use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
MADV_PAGEOUT = 21
print("ready", libc.madvise(addr, n, MADV_PAGEOUT), ctypes.get_errno(), flush=True)
sys.stdin.read()
"#,
        );
        assert_eq!(child.1.trim(), "ready 0 0", "madvise in the child failed");
        child.0
    }

    /// A python3 child running `script`, and the first line it printed.
    fn run(script: &str) -> (PagedOutChild, String) {
        let mut child = Command::new("python3")
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        (PagedOutChild(child), line)
    }
}

impl Drop for PagedOutChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn stats_show_paged_out_data_compressed() {
    let Some(_serial) = zram_tests() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (pool, _guard) = open_zram(dir.path(), 64 * MIB);
    let child = PagedOutChild::start();

    let stats = pool.stats();
    eprintln!("{stats:?}");
    assert!(stats.stored_bytes >= 16 * MIB, "{stats:?}");
    assert!(stats.memory_bytes > 0, "{stats:?}");
    assert!(stats.memory_bytes < stats.stored_bytes, "{stats:?}");
    assert!(stats.compression_ratio > 1.0, "{stats:?}");
    assert_eq!(stats.local_cost(stats.stored_bytes), stats.memory_bytes);
    assert!(stats.local_cost(stats.stored_bytes / 2) < stats.stored_bytes / 2);

    // The operator-swap view sees icebox's device among the swap areas.
    let swap = OffloadPool::open(&PoolSpec::Swap, dir.path()).unwrap();
    assert_eq!(swap.check(), Ok(()));
    let all = swap.stats();
    assert_eq!(all.kind, "swap");
    assert_eq!(all.device, None);
    assert!(all.capacity_bytes >= stats.capacity_bytes);
    assert!(all.stored_bytes >= stats.stored_bytes);
    assert!(all.memory_bytes >= stats.memory_bytes);
    swap.close().unwrap();

    drop(child);
    pool.close().unwrap();
}

#[test]
fn no_pool_has_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let pool = OffloadPool::open(&PoolSpec::None, dir.path()).unwrap();
    let stats = pool.stats();
    assert_eq!(
        stats,
        PoolStats {
            kind: "none",
            ..PoolStats::default()
        }
    );
    assert_eq!(pool.check(), Err("no offload pool".to_string()));
    assert_eq!(pool.device(), None);
    pool.close().unwrap();
}

#[test]
fn operator_swap_needs_swap() {
    let dir = tempfile::tempdir().unwrap();
    // Another test (or the operator) may have swap on right now: only the empty case is sure.
    let _serial = ZRAM_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    if read_swaps().unwrap().is_empty() {
        let err = OffloadPool::open(&PoolSpec::Swap, dir.path()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--offload-pool swap: no swap is configured; use zram:SIZE or configure swap"
        );
    } else {
        eprintln!("skipping: swap is configured on this host");
    }
}

#[test]
fn stale_markers_of_another_boot_or_garbage_remove_nothing() {
    let dir = tempfile::tempdir().unwrap();
    assert!(!OffloadPool::cleanup_stale(dir.path()).unwrap());
    marker::write(
        dir.path(),
        &marker::Marker {
            device: Some(0),
            boot_id: "another-boot".into(),
            disksize: 0,
            swap_file: None,
            zswap_turned_on: false,
        },
    )
    .unwrap();
    assert!(!OffloadPool::cleanup_stale(dir.path()).unwrap());
    assert_eq!(marker::read(dir.path()).unwrap(), None);
    std::fs::write(marker::path(dir.path()), "not json").unwrap();
    assert!(!OffloadPool::cleanup_stale(dir.path()).unwrap());
    assert!(!marker::path(dir.path()).exists());
}

#[test]
fn a_failed_open_leaves_no_device_and_no_marker() {
    let Some(_serial) = zram_tests() else { return };
    let dir = tempfile::tempdir().unwrap();
    let before: Vec<_> = zram_devices();
    // The kernel cannot allocate the page table of a 1 PiB device: disksize fails.
    let err = OffloadPool::open(&PoolSpec::Zram { bytes: 1 << 50 }, dir.path()).unwrap_err();
    assert!(err.to_string().contains(": disksize: "), "{err}");
    assert_eq!(zram_devices(), before);
    assert_eq!(marker::read(dir.path()).unwrap(), None);
}

/// The zram block devices present now, sorted (a test checks it leaves none behind).
pub(super) fn zram_devices() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/block")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("zram"))
        .collect();
    names.sort();
    names
}

#[test]
fn compaction_gives_back_what_freed_pages_left_fragmented() {
    let Some(_serial) = zram_tests() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (pool, _guard) = open_zram(dir.path(), 64 * MIB);
    // 32 MiB paged out, then every other page freed: their compressed objects leave holes
    // in the allocator's pages that only compaction closes.
    let script = r#"
import ctypes, mmap, os, sys
n = 32 << 20
m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for off in range(0, n, 4096):
    m[off:off + 4096] = os.urandom(1024) + bytes(3072)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
libc = ctypes.CDLL(None, use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
ok = libc.madvise(addr, n, 21) == 0
for off in range(0, n, 8192):
    ok = ok and libc.madvise(addr + off, 4096, 4) == 0
print("ready" if ok else "failed", flush=True)
sys.stdin.read()
"#;
    let (child, line) = PagedOutChild::run(script);
    assert_eq!(line.trim(), "ready");
    let before = pool.stats();
    pool.compact().unwrap();
    let after = pool.stats();
    eprintln!("before {before:?}\nafter {after:?}");
    assert!(
        after.memory_bytes < before.memory_bytes,
        "compaction freed nothing"
    );
    assert_eq!(after.stored_bytes, before.stored_bytes);
    drop(child);
    pool.close().unwrap();
}
