//! Page-outs of real processes: forked children that map a file privately, and a Node.js
//! process. Assertions are on shares of memory dropped, never on times.

use super::*;
use crate::{file_mappings, mapped_files, pageout_candidates, smaps_rollup, FileMapping};
use icebox_core::units::{MIB, MIB_USIZE};
use rustix::process::{kill_process, waitpid, Pid, Signal, WaitOptions};
use std::collections::HashSet;
use std::ffi::CString;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

const PAGE: usize = 4096;
const FILE_BYTES: usize = 16 * MIB_USIZE;

/// A 16 MiB file whose page `i` is filled with `fill(i)`, removed on drop. Written and synced
/// so its page-cache pages are clean: the kernel does not drop dirty file pages on a page-out.
struct TestFile {
    path: PathBuf,
    inode: u64,
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "test bytes: only the low bits are wanted"
)]
fn fill(page: usize) -> u8 {
    (page % 251 + 1) as u8
}

impl TestFile {
    fn create(name: &str) -> TestFile {
        let path = disk_dir().join(format!("icebox-mem-{name}-{}", std::process::id()));
        let mut file = std::fs::File::create(&path).unwrap();
        for page in 0..FILE_BYTES / PAGE {
            file.write_all(&[fill(page); PAGE]).unwrap();
        }
        file.sync_all().unwrap();
        let inode = file.metadata().unwrap().ino();
        TestFile { path, inode }
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A directory on a disk file system. tmpfs pages are swap-backed, not file-backed: without
/// swap a page-out cannot drop them, so a tmpfs temp dir would not test anything.
#[allow(clippy::unnecessary_cast)] // f_type's type differs between architectures.
fn disk_dir() -> PathBuf {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let tmp = std::env::temp_dir();
    if rustix::fs::statfs(&tmp).is_ok_and(|fs| fs.f_type as i64 != TMPFS_MAGIC) {
        return tmp;
    }
    std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A forked copy of this process that maps a [`TestFile`] `MAP_PRIVATE`, `PROT_READ`, and on
/// request reads every page of it, checking its contents. The child runs only
/// async-signal-safe calls, as required after fork in a threaded process.
struct Mapper {
    pid: libc::pid_t,
    to_child: OwnedFd,
    from_child: OwnedFd,
    inode: u64,
}

impl Mapper {
    fn spawn(file: &TestFile) -> Mapper {
        let path = CString::new(file.path.as_os_str().as_bytes()).unwrap();
        let (p2c_r, p2c_w) = pipe();
        let (c2p_r, c2p_w) = pipe();
        // SAFETY: the child only calls open/mmap/close/read/write/_exit and reads its mapping.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            // SAFETY: the forked child, which mapper_child requires; path and descriptors are valid.
            unsafe { mapper_child(&path, p2c_r.as_fd(), c2p_w.as_fd()) }
        }
        let m = Mapper {
            pid,
            to_child: p2c_w,
            from_child: c2p_r,
            inode: file.inode,
        };
        assert_eq!(m.reply(), b'r', "child could not map {:?}", file.path);
        m
    }

    fn pid(&self) -> u32 {
        self.pid.cast_unsigned()
    }

    fn reply(&self) -> u8 {
        let mut b = [0u8];
        let n = rustix::io::read(&self.from_child, &mut b);
        assert_eq!(n, Ok(1), "child did not reply");
        b[0]
    }

    /// Has the child read every page; panics if any content was wrong.
    fn touch(&self) {
        assert_eq!(rustix::io::write(&self.to_child, b"t"), Ok(1));
        assert_eq!(
            self.reply(),
            b'd',
            "the child read wrong contents from its mapping"
        );
    }

    /// The child's mapping of the test file.
    fn mapping(&self) -> FileMapping {
        let all = file_mappings(self.pid()).unwrap();
        let found = all.iter().find(|m| m.inode == self.inode).cloned();
        found.unwrap_or_else(|| panic!("test file (inode {}) not mapped: {all:#?}", self.inode))
    }

    fn child(&self) -> Pid {
        Pid::from_raw(self.pid).expect("a forked child's pid")
    }

    fn stop(&self) {
        kill_process(self.child(), Signal::STOP).expect("SIGSTOP to our child");
        // WUNTRACED returns once the child has actually stopped.
        let (pid, status) = waitpid(Some(self.child()), WaitOptions::UNTRACED)
            .expect("waitpid")
            .expect("a status");
        assert_eq!(pid, self.child());
        assert!(status.stopped(), "status {:#x}", status.as_raw());
    }

    fn resume(&self) {
        kill_process(self.child(), Signal::CONT).expect("SIGCONT to our child");
    }
}

impl Drop for Mapper {
    /// Kills and reaps our own child.
    fn drop(&mut self) {
        let _ = kill_process(self.child(), Signal::KILL);
        let _ = waitpid(Some(self.child()), WaitOptions::empty());
    }
}

/// Runs in the forked child; never returns. Replies 'r' once mapped, then 'd' (contents
/// right) or 'x' (wrong) to each request to read the mapping; exits when the parent is gone.
/// rustix's open, read and write are bare syscalls, safe after fork.
unsafe fn mapper_child(
    path: &CString,
    from_parent: BorrowedFd<'_>,
    to_parent: BorrowedFd<'_>,
) -> ! {
    let Ok(fd) = rustix::fs::open(
        path.as_c_str(),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) else {
        libc::_exit(1);
    };
    let flags = libc::MAP_PRIVATE;
    let p = libc::mmap(
        std::ptr::null_mut(),
        FILE_BYTES,
        libc::PROT_READ,
        flags,
        fd.as_raw_fd(),
        0,
    );
    drop(fd);
    if p == libc::MAP_FAILED {
        libc::_exit(2);
    }
    let _ = rustix::io::write(to_parent, b"r");
    let mut b = [0u8];
    while rustix::io::read(from_parent, &mut b) == Ok(1) {
        let mut ok = true;
        for page in 0..FILE_BYTES / PAGE {
            let first = std::ptr::read_volatile(p.cast::<u8>().add(page * PAGE));
            let last = std::ptr::read_volatile(p.cast::<u8>().add(page * PAGE + PAGE - 1));
            ok &= first == fill(page) && last == fill(page);
        }
        let _ = rustix::io::write(to_parent, if ok { b"d" } else { b"x" });
    }
    libc::_exit(0)
}

fn pipe() -> (OwnedFd, OwnedFd) {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).expect("pipe2")
}

fn no_exclude() -> HashSet<(String, u64)> {
    HashSet::new()
}

/// Pages out every candidate of `mapper` and checks the test file's mapping lost at least
/// 90% of its resident pages and the process's USS fell by about as much.
fn assert_candidates_page_out(mapper: &Mapper) {
    let before = mapper.mapping();
    assert!(
        before.rss >= FILE_BYTES as u64 * 9 / 10,
        "touched pages not resident: {before:?}"
    );
    assert_eq!(
        before.private_clean, before.rss,
        "pages should be private and clean: {before:?}"
    );
    let uss_before = smaps_rollup(mapper.pid()).unwrap().uss;

    let candidates = pageout_candidates(&file_mappings(mapper.pid()).unwrap(), &no_exclude());
    assert!(
        candidates.contains(&(before.start, before.end)),
        "{candidates:x?}"
    );
    let report = pageout(mapper.pid(), &candidates).unwrap();
    assert_eq!(
        report.ranges + report.skipped,
        candidates.len(),
        "{report:?}"
    );
    assert!(report.bytes_advised >= FILE_BYTES as u64, "{report:?}");

    let after = mapper.mapping();
    let uss_after = smaps_rollup(mapper.pid()).unwrap().uss;
    let dropped = before.rss - after.rss;
    assert!(
        dropped >= before.rss * 9 / 10,
        "mapping Rss {} → {}",
        before.rss,
        after.rss
    );
    // Not all of `dropped`: pages this child shares copy-on-write with the test process
    // become private to it whenever a test thread writes to them.
    let uss_dropped = uss_before.saturating_sub(uss_after);
    assert!(
        uss_dropped >= dropped * 9 / 10,
        "USS {uss_before} → {uss_after}, mapping −{dropped}"
    );
}

#[test]
fn pages_out_a_private_file_mapping_and_it_reads_back_intact() {
    let file = TestFile::create("plain");
    let mapper = Mapper::spawn(&file);
    mapper.touch();
    assert_candidates_page_out(&mapper);
    mapper.touch();
    assert!(
        mapper.mapping().rss >= FILE_BYTES as u64 * 9 / 10,
        "pages fault back in"
    );
}

#[test]
fn pages_out_a_stopped_process() {
    let file = TestFile::create("stopped");
    let mapper = Mapper::spawn(&file);
    mapper.touch();
    mapper.stop();
    assert_candidates_page_out(&mapper);
    mapper.resume();
    mapper.touch();
}

#[test]
fn files_mapped_by_a_running_instance_are_kept() {
    let file = TestFile::create("shared");
    let frozen = Mapper::spawn(&file);
    frozen.touch();
    // Maps the file without reading it: the frozen one's pages stay private to it, so only
    // the exclude set protects them.
    let running = Mapper::spawn(&file);
    let before = frozen.mapping();
    assert_eq!(before.private_clean, before.rss, "{before:?}");

    let exclude = mapped_files(running.pid()).unwrap();
    assert!(
        exclude.contains(&(before.dev.clone(), before.inode)),
        "{exclude:?}"
    );
    let all = file_mappings(frozen.pid()).unwrap();
    let candidates = pageout_candidates(&all, &exclude);
    assert!(
        candidates
            .iter()
            .all(|&(s, e)| e <= before.start || s >= before.end),
        "{candidates:x?}"
    );
    assert!(pageout_candidates(&all, &no_exclude()).contains(&(before.start, before.end)));

    pageout(frozen.pid(), &candidates).unwrap();
    let after = frozen.mapping();
    assert!(
        after.rss >= before.rss * 9 / 10,
        "excluded file paged out: {} → {}",
        before.rss,
        after.rss
    );
}

#[test]
fn batches_beyond_iov_max_and_skips_refused_ranges() {
    let file = TestFile::create("batches");
    let mapper = Mapper::spawn(&file);
    mapper.touch();
    let m = mapper.mapping();
    // One range per page: 4096 ranges, so four process_madvise batches.
    let mut ranges: Vec<(u64, u64)> = (m.start..m.end)
        .step_by(PAGE)
        .map(|a| (a, a + PAGE as u64))
        .collect();
    assert!(ranges.len() > 3 * IOV_MAX);
    // Never mapped (below mmap_min_addr): ENOMEM, as for a range unmapped since it was listed.
    ranges.insert(IOV_MAX - 1, (0x1000, 0x3000));
    // Not page-aligned: EINVAL.
    ranges.insert(2 * IOV_MAX + 7, (m.start + 1, m.start + 1 + PAGE as u64));
    ranges.insert(5, (m.start, m.start)); // empty: ignored

    let report = pageout(mapper.pid(), &ranges).unwrap();
    let pages = FILE_BYTES / PAGE;
    assert_eq!(
        report,
        PageoutReport {
            ranges: pages,
            skipped: 2,
            bytes_advised: FILE_BYTES as u64
        }
    );
    let after = mapper.mapping();
    assert!(
        after.rss <= m.rss / 10,
        "mapping Rss {} → {}",
        m.rss,
        after.rss
    );
    mapper.touch();
}

#[test]
fn a_missing_process_is_gone_and_nothing_to_do_is_no_call() {
    let err = pageout(i32::MAX as u32, &[(0x10000, 0x11000)]).unwrap_err();
    assert!(crate::smaps::is_gone(&err), "{err}");
    let nothing = pageout(i32::MAX as u32, &[(0x10000, 0x10000)]).unwrap();
    assert_eq!(nothing, PageoutReport::default());
}

/// Re-runs this test binary without CAP_SYS_NICE (through `setpriv`) to page out a child:
/// the kernel refuses, and the error must say why.
#[test]
fn without_cap_sys_nice_the_error_says_so() {
    let file = TestFile::create("nocap");
    let mapper = Mapper::spawn(&file);
    let out = Command::new("setpriv")
        .args(["--inh-caps=-sys_nice", "--bounding-set=-sys_nice", "--"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "pageout::tests::permission_probe",
            "--ignored",
            "--nocapture",
        ])
        .env(PROBE_ENV, mapper.pid().to_string())
        .output();
    let out = match out {
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            eprintln!("setpriv is not installed: the permission test cannot drop CAP_SYS_NICE");
            return;
        }
        other => other.unwrap(),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const PROBE_ENV: &str = "ICEBOX_MEM_PAGEOUT_PROBE_PID";

#[test]
#[ignore = "run by without_cap_sys_nice_the_error_says_so, in a process without CAP_SYS_NICE"]
fn permission_probe() {
    let Ok(pid) = std::env::var(PROBE_ENV) else {
        return;
    };
    let err = pageout(pid.parse().unwrap(), &[(0x10000, 0x11000)]).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains("CAP_SYS_NICE"), "{err}");
}

/// Memory of a Node.js process around a page-out of all its candidates.
#[derive(Debug)]
struct NodeMeasurement {
    uss_before: u64,
    uss_after: u64,
    /// Private_Clean of the candidate mappings.
    clean_before: u64,
    clean_after: u64,
    report: PageoutReport,
}

impl NodeMeasurement {
    fn print(&self, what: &str) {
        let mb = |b: u64| b as f64 / MIB as f64;
        eprintln!(
            "{what}: USS {:.1} → {:.1} MB; private clean file pages {:.1} → {:.1} MB; {:?}",
            mb(self.uss_before),
            mb(self.uss_after),
            mb(self.clean_before),
            mb(self.clean_after),
            self.report,
        );
    }
}

/// Starts `node` (the program at `program`) idling on a timer, pages out its candidates.
/// `None` when there is no such program.
fn measure_node(program: &std::path::Path) -> Option<NodeMeasurement> {
    let child = Command::new(program)
        .args([
            "-e",
            "process.stdout.write('ready\\n'); setInterval(() => {}, 1000)",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn();
    let mut child = match child {
        Err(err) if err.kind() == io::ErrorKind::NotFound => return None,
        other => other.unwrap(),
    };
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    let pid = child.id();

    let uss_before = smaps_rollup(pid).unwrap().uss;
    let mappings = file_mappings(pid).unwrap();
    let candidates = pageout_candidates(&mappings, &no_exclude());
    let clean_before = private_clean_in(&mappings, &candidates);
    let report = pageout(pid, &candidates).unwrap();
    let uss_after = smaps_rollup(pid).unwrap().uss;
    let clean_after = private_clean_in(&file_mappings(pid).unwrap(), &candidates);
    child.kill().unwrap();
    child.wait().unwrap();
    Some(NodeMeasurement {
        uss_before,
        uss_after,
        clean_before,
        clean_after,
        report,
    })
}

/// Private_Clean bytes of the mappings that start one of `ranges`.
fn private_clean_in(mappings: &[FileMapping], ranges: &[(u64, u64)]) -> u64 {
    let starts: HashSet<u64> = ranges.iter().map(|r| r.0).collect();
    mappings
        .iter()
        .filter(|m| starts.contains(&m.start))
        .map(|m| m.private_clean)
        .sum()
}

/// The full `path` of the `node` on PATH, if any.
fn which_node() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("node"))
        .find(|p| p.is_file())
}

/// A Node.js whose binary no other process maps — the case §4.6 targets: a runtime used by
/// one frozen instance only. A private copy of `node` gets its own page cache, so its pages
/// are in this process's USS however many other Node.js processes run on the machine.
#[test]
fn node_with_its_own_binary_drops_most_of_its_file_pages() {
    let Some(node) = which_node() else {
        eprintln!("node is not installed: skipping the Node.js page-out measurement");
        return;
    };
    let copy = disk_dir().join(format!("icebox-mem-node-{}", std::process::id()));
    // Copied by `cp`, not here: a writable descriptor in this process could leak into a
    // concurrently forked test child and make the exec fail with ETXTBSY.
    assert!(Command::new("cp")
        .arg(&node)
        .arg(&copy)
        .status()
        .unwrap()
        .success());
    let _remove = RemoveOnDrop(copy.clone());
    // Written pages are dirty until synced, and the kernel does not drop dirty file pages.
    std::fs::File::open(&copy).unwrap().sync_all().unwrap();

    let m = measure_node(&copy).unwrap();
    m.print("node (own binary)");
    assert!(m.clean_before >= 16 * MIB, "few private file pages: {m:?}");
    assert!(m.clean_after <= m.clean_before / 4, "{m:?}");
    let freed = m.clean_before - m.clean_after;
    assert!(
        m.uss_before.saturating_sub(m.uss_after) >= freed * 3 / 4,
        "{m:?}"
    );
}

/// The system's `node`, whose binary other Node.js processes may map too: the kernel leaves
/// pages they map alone, so only the pages private to this one go, however few.
#[test]
fn node_from_path_drops_its_private_file_pages() {
    let Some(m) = which_node().and_then(|node| measure_node(&node)) else {
        eprintln!("node is not installed: skipping the Node.js page-out measurement");
        return;
    };
    m.print("node (system binary)");
    assert!(m.clean_after <= m.clean_before / 2, "{m:?}");
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn errors_name_the_missing_capability() {
    let err = explain(io::Error::from_raw_os_error(libc::EPERM), 42);
    assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
    assert!(
        err.to_string().contains("CAP_SYS_NICE") && err.to_string().contains("42"),
        "{err}"
    );
    let gone = explain(io::Error::from_raw_os_error(libc::ESRCH), 42);
    assert_eq!(gone.raw_os_error(), Some(libc::ESRCH));
}

/// Share of `file`'s pages in the page cache, read with mincore on a mapping of this process
/// that is never touched (so it neither faults pages in nor shares the child's).
fn cached_share(file: &TestFile) -> f64 {
    let f = std::fs::File::open(&file.path).unwrap();
    // SAFETY: a read-only shared mapping of a file we keep open for its lifetime; unmapped below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            FILE_BYTES,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    let mut vec = vec![0u8; FILE_BYTES / PAGE];
    // SAFETY: `vec` has one byte per page of the mapping.
    let rc = unsafe { libc::mincore(p, FILE_BYTES, vec.as_mut_ptr()) };
    // SAFETY: unmaps the mapping made above, which nothing uses any more.
    unsafe { libc::munmap(p, FILE_BYTES) };
    assert_eq!(rc, 0, "mincore: {}", io::Error::last_os_error());
    vec.iter().filter(|b| **b & 1 == 1).count() as f64 / vec.len() as f64
}

#[test]
fn recache_keeps_paged_out_pages_in_the_page_cache_but_out_of_the_process() {
    for keep in [false, true] {
        let file = TestFile::create(if keep { "recache" } else { "evict" });
        let mapper = Mapper::spawn(&file);
        mapper.touch();
        mapper.stop();
        let m = mapper.mapping();
        let evicted = crate::exclusive_file_pages(mapper.pid(), &[&m]).unwrap();
        let noted: u64 = evicted.iter().map(|e| e.bytes()).sum();
        assert!(
            noted >= m.rss * 9 / 10,
            "resident exclusive pages noted: {noted} of Rss {}",
            m.rss
        );
        pageout(mapper.pid(), &[(m.start, m.end)]).unwrap();
        // MADV_PAGEOUT evicts file pages no one else maps from the page cache too.
        assert!(
            cached_share(&file) < 0.1,
            "evicted from the page cache: {}",
            cached_share(&file)
        );
        if keep {
            assert_eq!(crate::recache(mapper.pid(), &evicted).unwrap(), noted);
            // Readahead is asynchronous: wait (bounded) for it rather than assume a time.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while cached_share(&file) < 0.9 && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            assert!(
                cached_share(&file) >= 0.9,
                "back in the page cache: {}",
                cached_share(&file)
            );
        }
        // Either way the pages are out of the process: its USS does not take them back.
        let after = mapper.mapping();
        assert!(
            after.rss <= m.rss / 10,
            "mapping Rss {} → {}",
            m.rss,
            after.rss
        );
        mapper.resume();
        mapper.touch();
    }
}

#[test]
fn recache_of_a_gone_mapping_is_nothing_to_do() {
    let gone = crate::EvictedPages {
        start: 0x10000,
        end: 0x11000,
        runs: vec![(0, 4096)],
    };
    assert_eq!(crate::recache(std::process::id(), &[gone]).unwrap(), 0);
    let unmapped = FileMapping {
        start: 0x10000,
        end: 0x11000,
        ..FileMapping::default()
    };
    assert!(
        crate::exclusive_file_pages(std::process::id(), &[&unmapped])
            .unwrap()
            .is_empty()
    );
}
