//! Proactive reclaim of one cgroup's memory through the kernel's own LRU (TMO-style): the
//! kernel picks the coldest pages of the cgroup, dropping clean file pages and swapping anon
//! pages when there is swap. It acts on the cgroup's memory, not its tasks, so it works on a
//! frozen cgroup too.

use super::fs as cgfs;
use super::{Cgroup, Location};
use std::io;
use std::path::Path;
use std::sync::Mutex;

/// v1 reclaims by lowering the limit for a moment: two reclaims of one cgroup at once would
/// let the second read the first's lowered limit as the one to restore.
static V1_RECLAIM: Mutex<()> = Mutex::new(());

impl Cgroup {
    /// Asks the kernel to reclaim `bytes` of this cgroup's memory; returns the bytes its
    /// memory counter dropped by (less than `bytes` when the kernel found too little to
    /// reclaim, e.g. anonymous memory without swap). v2 writes memory.reclaim; v1 lowers
    /// memory.limit_in_bytes to usage − bytes and restores the original limit afterwards,
    /// whatever happened. `Unsupported` without a memory controller (or memory.reclaim).
    ///
    /// On v1, while the limit is lowered (milliseconds), a running instance that allocates
    /// when nothing more is reclaimable (no swap) can be OOM-killed: reclaim frozen or idle
    /// instances there.
    pub fn reclaim_memory(&self, bytes: u64) -> io::Result<u64> {
        match &self.location {
            Location::V1(d) => reclaim_v1(&d.memory, bytes),
            Location::V2(d) => reclaim_v2(d, bytes),
        }
    }
}

fn usage(file: &Path) -> io::Result<u64> {
    cgfs::read_u64(file).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{}: no memory counter to reclaim from", file.display()),
        )
    })
}

fn reclaim_v2(dir: &Path, bytes: u64) -> io::Result<u64> {
    let current = dir.join("memory.current");
    let before = usage(&current)?;
    if bytes == 0 {
        return Ok(0);
    }
    let file = dir.join("memory.reclaim");
    match cgfs::write_raw(&file, &bytes.to_string()) {
        Ok(()) => {}
        // The kernel reclaimed less than asked: the counter tells how much it did.
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "{}: missing (memory.reclaim needs Linux 5.19)",
                    file.display()
                ),
            ))
        }
        Err(e) => return Err(cgfs::with_path(e, &file)),
    }
    Ok(before.saturating_sub(cgfs::read_u64(&current).unwrap_or(before)))
}

/// Only memory.limit_in_bytes moves. memsw (memory + swap) stays: swapped-out pages remain
/// charged to it, so lowering it too would forbid the very swap-out that frees memory; and
/// memsw ≥ limit holds throughout since the limit only goes down and back.
fn reclaim_v1(memory: &Path, bytes: u64) -> io::Result<u64> {
    let usage_file = memory.join("memory.usage_in_bytes");
    let limit_file = memory.join("memory.limit_in_bytes");
    let _serial = V1_RECLAIM.lock().unwrap_or_else(|e| e.into_inner());
    let before = usage(&usage_file)?;
    let original = cgfs::read(&limit_file)?.trim().to_string();
    let original_bytes: u64 = original.parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {original:?}", limit_file.display()),
        )
    })?;
    // At least a page: 0 would be a request to drop everything there is.
    let target = before.saturating_sub(bytes).max(PAGE);
    if bytes == 0 || target >= original_bytes {
        return Ok(0);
    }
    // The write returns once usage is under the target, or with EBUSY once a reclaim round
    // freed nothing (no swap, or only unevictable pages left): partial success.
    let lowered = match cgfs::write_raw(&limit_file, &target.to_string()) {
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Ok(()),
        other => other,
    };
    let after = cgfs::read_u64(&usage_file).unwrap_or(before);
    if let Err(e) = cgfs::write_raw(&limit_file, &original) {
        return Err(io::Error::new(
            e.kind(),
            format!(
                "{}: cannot restore the memory limit {original} after reclaim: {e}",
                limit_file.display()
            ),
        ));
    }
    lowered.map_err(|e| cgfs::with_path(e, &limit_file))?;
    Ok(before.saturating_sub(after))
}

use icebox_core::units::PAGE;

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{join_self_in_child, CgroupLimits, CgroupRoot};
    use super::*;
    use icebox_mem::{OffloadPool, PoolSpec};
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    use std::path::PathBuf;
    use std::process::{Child, Command, Stdio};
    use std::sync::MutexGuard;

    use icebox_core::units::MIB;

    /// The tests with and without swap must not overlap: one's swap would serve the other.
    static SWAP_TESTS: Mutex<()> = Mutex::new(());

    fn serial() -> MutexGuard<'static, ()> {
        SWAP_TESTS.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A temporary zram swap, removed on drop (also on panic); `None` when zram is missing.
    fn zram_swap(dir: &Path) -> Option<OffloadPool> {
        match OffloadPool::open(&PoolSpec::Zram { bytes: 128 * MIB }, dir) {
            Ok(pool) => Some(pool),
            Err(e) => {
                eprintln!("skipping: no zram swap: {e}");
                None
            }
        }
    }

    /// python3 inside `cg` holding 32 MiB of touched, half-random anonymous memory.
    struct Holder(Child);

    impl Holder {
        fn start(cg: &Cgroup) -> Holder {
            let script = r#"
import mmap, os, sys
n = 32 << 20
m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for off in range(0, n, 4096):
    m[off:off + 4096] = os.urandom(2048) + bytes(2048)
print("ready", flush=True)
sys.stdin.read()
"#;
            let files = cg.procs_files();
            let mut cmd = Command::new("python3");
            cmd.args(["-c", script])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped());
            // SAFETY: join_self_in_child is async-signal-safe.
            unsafe { cmd.pre_exec(move || join_self_in_child(&files)) };
            let mut child = Holder(cmd.spawn().unwrap());
            let mut line = String::new();
            BufReader::new(child.0.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            assert_eq!(line.trim(), "ready");
            child
        }

        fn alive(&mut self) -> bool {
            self.0.try_wait().unwrap().is_none()
        }
    }

    impl Drop for Holder {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// The memory limit files of `cg` and their contents.
    fn limits(cg: &Cgroup) -> Vec<(PathBuf, String)> {
        let names: &[&str] = match &cg.location {
            Location::V1(_) => &["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"],
            Location::V2(_) => &["memory.max", "memory.swap.max", "memory.high"],
        };
        cg.paths()
            .iter()
            .flat_map(|d| names.iter().map(move |n| d.join(n)))
            .filter(|p| p.exists())
            .map(|p| {
                let text = std::fs::read_to_string(&p).unwrap();
                (p, text)
            })
            .collect()
    }

    fn has_memory_controller(cg: &Cgroup) -> bool {
        match &cg.location {
            Location::V1(_) => true,
            Location::V2(d) => d.join("memory.current").exists(),
        }
    }

    fn swap_is_on() -> bool {
        std::fs::read_to_string("/proc/swaps")
            .unwrap()
            .lines()
            .count()
            > 1
    }

    /// With swap, reclaim frees memory of a running and of a frozen cgroup, and leaves the
    /// limits exactly as they were.
    fn reclaims_with_swap(root: CgroupRoot) {
        let _serial = serial();
        let scratch = Scratch::new(root.clone());
        let limit = CgroupLimits {
            memory_bytes: Some(256 * MIB),
            ..Default::default()
        };
        let cg = root.create(&scratch.rel("inst"), &limit).unwrap();
        if !has_memory_controller(&cg) {
            let err = cg.reclaim_memory(8 * MIB).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::Unsupported, "{err}");
            eprintln!("skipping the reclaim itself: no memory controller here");
            return;
        }
        let state = tempfile::tempdir().unwrap();
        let Some(pool) = zram_swap(state.path()) else {
            return;
        };
        let mut holder = Holder::start(&cg);
        let before = limits(&cg);
        assert!(!before.is_empty());

        let freed = cg.reclaim_memory(8 * MIB).unwrap();
        eprintln!("reclaimed {freed} bytes with swap");
        assert!(freed > 0, "nothing reclaimed");
        assert_eq!(limits(&cg), before);

        cg.freeze().unwrap();
        let frozen_freed = cg.reclaim_memory(8 * MIB);
        cg.thaw().unwrap();
        assert!(frozen_freed.unwrap() > 0, "nothing reclaimed while frozen");
        assert_eq!(limits(&cg), before);
        assert!(pool.stats().stored_bytes > 0);
        assert!(holder.alive());

        drop(holder);
        pool.close().unwrap();
    }

    /// Without swap anonymous memory has nowhere to go: little or nothing is freed, and the
    /// limits are restored all the same.
    fn reclaims_little_without_swap(root: CgroupRoot) {
        let _serial = serial();
        let scratch = Scratch::new(root.clone());
        let limit = CgroupLimits {
            memory_bytes: Some(256 * MIB),
            ..Default::default()
        };
        let cg = root.create(&scratch.rel("inst"), &limit).unwrap();
        if !has_memory_controller(&cg) {
            eprintln!("skipping: no memory controller here");
            return;
        }
        let mut holder = Holder::start(&cg);
        let before = limits(&cg);
        let freed = cg.reclaim_memory(8 * MIB).unwrap();
        eprintln!("reclaimed {freed} bytes without swap");
        assert_eq!(limits(&cg), before);
        if swap_is_on() {
            eprintln!("not checking the amount: someone else has swap on");
        } else {
            assert!(freed < 8 * MIB, "{freed} bytes freed without swap");
        }
        assert_eq!(cg.reclaim_memory(0).unwrap(), 0);
        assert_eq!(limits(&cg), before);
        assert!(holder.alive());
    }

    #[test]
    fn v1_reclaims_with_swap_and_restores_the_limits() {
        let Some(root) = v1_root() else { return };
        reclaims_with_swap(root);
    }

    #[test]
    fn v1_reclaims_little_without_swap_and_restores_the_limits() {
        let Some(root) = v1_root() else { return };
        reclaims_little_without_swap(root);
    }

    #[test]
    fn v2_reclaims_with_swap_and_restores_the_limits() {
        let Some(root) = v2_root() else { return };
        reclaims_with_swap(root);
    }

    #[test]
    fn v2_reclaims_little_without_swap_and_restores_the_limits() {
        let Some(root) = v2_root() else { return };
        reclaims_little_without_swap(root);
    }
}
