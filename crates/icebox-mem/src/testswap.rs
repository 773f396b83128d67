//! A small zram swap device for the tests that need anonymous pages to really leave RAM.
//! Swap on makes the machine's own reclaim (and its DAMON scheme) page out other processes
//! too, so it is on only while a test holds it, one test at a time, and a drop guard removes
//! it even when the test panics.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

static SWAP: Mutex<()> = Mutex::new(());

/// A zram device swapped on with the highest priority; off and removed on drop.
pub(crate) struct TestSwap {
    id: u32,
    swapped_on: bool,
    _lock: MutexGuard<'static, ()>,
}

/// Holds the swap lock for a test that needs no swap on; `None` (after saying why) when the
/// machine has swap of its own.
pub(crate) fn without_swap(test: &str) -> Option<MutexGuard<'static, ()>> {
    let lock = SWAP.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if swap_is_on() {
        eprintln!("skipping {test}: the machine has swap on");
        return None;
    }
    Some(lock)
}

/// Whether any swap device or file is on (/proc/swaps lists more than its header).
pub(crate) fn swap_is_on() -> bool {
    std::fs::read_to_string("/proc/swaps").is_ok_and(|swaps| swaps.lines().count() > 1)
}

impl TestSwap {
    /// The device, or `None` (after saying why) when this machine cannot make one.
    pub fn create(test: &str) -> Option<TestSwap> {
        let control = Path::new("/sys/class/zram-control/hot_add");
        if !rustix::process::geteuid().is_root() || !control.exists() {
            eprintln!(
                "skipping {test}: needs root and /sys/class/zram-control for a zram swap device"
            );
            return None;
        }
        let lock = SWAP.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let id: u32 = std::fs::read_to_string(control)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let mut swap = TestSwap {
            id,
            swapped_on: false,
            _lock: lock,
        };
        swap.write("comp_algorithm", "lz4");
        swap.write("disksize", "256M");
        let dev = swap.dev();
        run("mkswap", &[&dev]);
        run("swapon", &["-p", "32767", &dev]);
        swap.swapped_on = true;
        Some(swap)
    }

    fn dev(&self) -> String {
        format!("/dev/zram{}", self.id)
    }

    fn sys(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("/sys/block/zram{}/{name}", self.id))
    }

    fn write(&self, name: &str, value: &str) {
        std::fs::write(self.sys(name), value)
            .unwrap_or_else(|err| panic!("writing {value} to zram{} {name}: {err}", self.id));
    }
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Drop for TestSwap {
    fn drop(&mut self) {
        if self.swapped_on {
            let _ = Command::new("swapoff").arg(self.dev()).status();
        }
        let _ = std::fs::write(self.sys("reset"), "1");
        let _ = std::fs::write("/sys/class/zram-control/hot_remove", self.id.to_string());
    }
}
