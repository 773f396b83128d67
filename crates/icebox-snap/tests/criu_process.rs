//! The pager and the image code against real CRIU dumps of a real process (tests/memtool.py).
//! They need root and the CRIU build (scripts/criu/build.sh, run by scripts/setup.sh) and
//! fail without them.

use icebox_snap::checksum;
use icebox_snap::compact::compact_zero_pages;
use icebox_snap::criu::{Criu, DumpOptions, RestoreOptions};
use icebox_snap::image::{load_all, read_pstree};
use icebox_snap::loadset_file::{self, TouchedPage};
use icebox_snap::pager::{Pager, PagerConfig, PagerMode, PagerStats};
use std::io::{Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn criu() -> Criu {
    let euid = rustix::process::geteuid().as_raw();
    assert_eq!(euid, 0, "these tests need root (criu)");
    // criu --restore-detached leaves the restored process to the nearest subreaper: this
    // process, which reaps it at once (the machine's init may take seconds, and a zombie
    // still holds the pid the next restore needs).
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .expect("PR_SET_CHILD_SUBREAPER");
    Criu::discover(None, Some(&repo())).expect("criu must be built: run scripts/criu/build.sh")
}

struct Memtool {
    name: String,
    child: Child,
}

fn spawn(dir: &Path) -> Memtool {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("icebox-snap-test-{}-{n}", std::process::id());
    let ready = dir.join("ready");
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/memtool.py"))
        .arg(&name)
        .arg(&ready)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid between fork and exec: its own session, so criu dumps it alone.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "memtool did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Memtool { name, child }
}

fn ask(name: &str, cmd: &str) -> String {
    eprintln!("ask {cmd}");
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let mut conn = UnixStream::connect_addr(&addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    conn.write_all(cmd.as_bytes()).unwrap();
    let mut out = String::new();
    conn.read_to_string(&mut out).unwrap();
    out
}

/// A restored process: killed (by pid) and waited for when dropped, then its pager stops.
struct Restored {
    pid: u32,
    pager: Option<Pager>,
    lazy_daemon: Option<tokio::process::Child>,
    _work: tempfile::TempDir,
}

impl Drop for Restored {
    fn drop(&mut self) {
        // The process this test restored (our child, as the subreaper).
        if let Some(pid) = rustix::process::Pid::from_raw(self.pid.cast_signed()) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
        }
        if let Some(pager) = &self.pager {
            pager.stop();
        }
        if let Some(child) = self.lazy_daemon.as_mut() {
            let _ = child.start_kill();
        }
    }
}

async fn restore(
    criu: &Criu,
    images: &Path,
    mode: Option<PagerMode>,
    stock_lazy: bool,
) -> Restored {
    let work = tempfile::tempdir().unwrap();
    let pager = mode.map(|mode| {
        Pager::start(PagerConfig {
            images: images.to_path_buf(),
            work_dir: work.path().to_path_buf(),
            mode,
            loadset_dir: Some(images.to_path_buf()),
            fault_pages: 1,
            on_fatal: None,
            checksums: None,
        })
        .unwrap()
    });
    let lazy_daemon = if stock_lazy {
        Some(criu.lazy_pages(images, work.path()).await.unwrap())
    } else {
        None
    };
    let pid = criu
        .restore(
            &RestoreOptions {
                images,
                work_dir: work.path(),
                root: None,
                externals: &[],
                inherit_pipes: &[],
                lazy_pages: pager.is_some() || stock_lazy,
                tcp_close: false,
                empty_net_ns: false,
                verbosity: 4,
                timeout: Some(Duration::from_secs(60)),
            },
            |_| {},
        )
        .await
        .unwrap();
    Restored {
        pid,
        pager,
        lazy_daemon,
        _work: work,
    }
}

fn stats(r: &Restored) -> PagerStats {
    r.pager.as_ref().unwrap().stats()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dump_compact_and_restore_a_real_process_in_every_mode() {
    let criu = criu();
    let scratch = tempfile::tempdir().unwrap();
    let images = scratch.path().join("images");
    std::fs::create_dir(&images).unwrap();
    let mut tool = spawn(scratch.path());
    let name = tool.name.clone();
    assert_eq!(ask(&name, "check"), "ok");
    criu.dump(&DumpOptions {
        pid: tool.child.id(),
        images: &images,
        externals: &[],
        tcp_established: false,
        empty_net_ns: false,
    })
    .await
    .unwrap();
    tool.child.wait().unwrap();

    // The images as read: one task, its VMAs, lazy anonymous memory, sizes that agree.
    let tree = read_pstree(&images).unwrap();
    assert_eq!(tree.len(), 1);
    let before = load_all(&images).unwrap();
    let task = &before[0];
    assert!(task.vmas.iter().any(|v| v.can_be_lazy()));
    assert!(task.stored().any(|s| s.lazy));
    let stored_before: u64 = task.stored().map(|s| s.pages).sum();
    assert_eq!(stored_before * 4096, task.data_bytes);

    // 16 MiB of written zeros (4096 pages) leave; everything else stays.
    let compacted = compact_zero_pages(&images).unwrap();
    assert_eq!(compacted.pages_before, stored_before);
    assert!(compacted.zero_pages_dropped >= 4096, "{compacted:?}");
    let after = load_all(&images).unwrap();
    let stored_after: u64 = after[0].stored().map(|s| s.pages).sum();
    assert_eq!(stored_after, stored_before - compacted.zero_pages_dropped);
    // A second pass finds nothing more.
    assert_eq!(compact_zero_pages(&images).unwrap().zero_pages_dropped, 0);

    // Eager: criu restores everything itself.
    {
        let _r = restore(&criu, &images, None, false).await;
        assert_eq!(ask(&name, "check"), "ok");
    }

    // On demand: faults, a fork whose child reads lazy memory, madvise(DONTNEED), mremap.
    {
        let r = restore(&criu, &images, Some(PagerMode::OnDemand), false).await;
        assert_eq!(ask(&name, "check"), "ok");
        assert_eq!(ask(&name, "fork"), "ok");
        assert_eq!(ask(&name, "remove"), "ok");
        assert_eq!(ask(&name, "remap"), "ok");
        let s = stats(&r);
        assert!(s.faults > 1000, "{s:?}");
        assert!(s.zero_pages > 0, "{s:?}");
        assert!(s.forks >= 1 && s.removes >= 1 && s.remaps >= 1, "{s:?}");
        assert_eq!(s.loader_pages, 0);
        assert!(s.error.is_none(), "{s:?}");
        // Once its tasks are gone (the forked child exited long ago), the pager ends by itself.
        // SAFETY: killing and reaping the process this test restored.
        unsafe {
            libc::kill(r.pid.cast_signed(), libc::SIGKILL);
            libc::waitpid(r.pid.cast_signed(), std::ptr::null_mut(), 0);
        }
        let pager = r.pager.as_ref().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while pager.is_running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!pager.is_running(), "the pager outlived its tasks");
        assert_eq!(pager.stats().spaces_gone, pager.stats().spaces);
    }

    // Record the first request, build the loading set, then restore with it.
    {
        let r = restore(&criu, &images, Some(PagerMode::Record), false).await;
        assert_eq!(ask(&name, "check"), "ok");
        let touched = r.pager.as_ref().unwrap().take_record();
        assert!(touched.len() > 2000, "{}", touched.len());
        let index = loadset_file::write(&images, &images, &after, &touched).unwrap();
        assert!(index.working_set_pages > 2000);
        assert!(index.zero_pages > 0, "zero pages were touched: {index:?}");
        assert!(index.pages() >= index.working_set_pages - index.zero_pages);
        assert_eq!(loadset_file::read(&images).unwrap(), index);
    }
    for mode in [PagerMode::Faasnap, PagerMode::Reap] {
        let r = restore(&criu, &images, Some(mode), false).await;
        assert_eq!(ask(&name, "check"), "ok", "{mode:?}");
        assert_eq!(ask(&name, "fork"), "ok", "{mode:?}");
        assert_eq!(ask(&name, "remove"), "ok", "{mode:?}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while stats(&r).loader_ms.is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let s = stats(&r);
        assert!(s.loader_pages > 0, "{mode:?}: {s:?}");
        assert!(s.bytes_from_loadset > 0, "{mode:?}: {s:?}");
        assert!(s.error.is_none(), "{s:?}");
    }

    // The stock lazy-pages daemon, the baseline.
    {
        let _r = restore(&criu, &images, None, true).await;
        assert_eq!(ask(&name, "check"), "ok");
    }
}

#[test]
fn a_truncated_dump_is_refused() {
    let criu = criu();
    let scratch = tempfile::tempdir().unwrap();
    let images = scratch.path().join("images");
    std::fs::create_dir(&images).unwrap();
    let mut tool = spawn(scratch.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(criu.dump(&DumpOptions {
        pid: tool.child.id(),
        images: &images,
        externals: &[],
        tcp_established: false,
        empty_net_ns: false,
    }))
    .unwrap();
    tool.child.wait().unwrap();
    let task = &load_all(&images).unwrap()[0];
    let pages = task.pages_path(&images);
    let len = std::fs::metadata(&pages).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&pages)
        .unwrap()
        .set_len(len - 4096)
        .unwrap();
    let err = load_all(&images).unwrap_err().to_string();
    assert!(err.contains("pagemap says"), "{err}");
    let work = tempfile::tempdir().unwrap();
    let started = Pager::start(PagerConfig {
        images: images.clone(),
        work_dir: work.path().to_path_buf(),
        mode: PagerMode::OnDemand,
        loadset_dir: None,
        fault_pages: 1,
        on_fatal: None,
        checksums: None,
    });
    assert!(started.is_err());
    let mm = images.join(format!("mm-{}.img", task.pid));
    let data = std::fs::read(&mm).unwrap();
    std::fs::write(&mm, &data[..data.len() / 2]).unwrap();
    assert!(load_all(&images).is_err());
}

/// Overwrites 4 KiB of `path` at `at` with garbage, its size unchanged.
#[expect(
    clippy::cast_possible_truncation,
    reason = "test bytes: only the low bits are wanted"
)]
fn scribble(path: &Path, at: u64) {
    use std::os::unix::fs::FileExt;
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 13) as u8).collect();
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .write_all_at(&garbage, at)
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_pages_are_never_installed() {
    let criu = criu();
    let scratch = tempfile::tempdir().unwrap();
    let images = scratch.path().join("images");
    std::fs::create_dir(&images).unwrap();
    let mut tool = spawn(scratch.path());
    let name = tool.name.clone();
    criu.dump(&DumpOptions {
        pid: tool.child.id(),
        images: &images,
        externals: &[],
        tcp_established: false,
        empty_net_ns: false,
    })
    .await
    .unwrap();
    tool.child.wait().unwrap();
    compact_zero_pages(&images).unwrap();
    let tasks = load_all(&images).unwrap();
    let task = &tasks[0];
    // A loading set of the task's lazy pages, as a recording would make.
    let touched: Vec<TouchedPage> = task
        .stored()
        .filter(|s| s.lazy)
        .flat_map(|s| (0..s.pages).map(move |i| s.vaddr + i * 4096))
        .map(|vaddr| TouchedPage {
            pid: task.pid,
            vaddr,
        })
        .collect();
    assert!(touched.len() > 1000, "{}", touched.len());
    let index = loadset_file::write(&images, &images, &tasks, &touched).unwrap();
    let sums = checksum::of_dir(&images).unwrap();
    let config = |mode, work: &Path| PagerConfig {
        images: images.clone(),
        work_dir: work.to_path_buf(),
        mode,
        loadset_dir: Some(images.clone()),
        fault_pages: 1,
        on_fatal: None,
        checksums: Some(sums.clone()),
    };

    // Intact, the checks pass and the pager starts.
    let work = tempfile::tempdir().unwrap();
    Pager::start(config(PagerMode::Faasnap, work.path())).unwrap();

    // Garbage in the middle of the loading set: refused before the restore begins.
    let data = images.join(loadset_file::DATA_FILE);
    scribble(&data, (index.data_bytes / 2) & !4095);
    let work = tempfile::tempdir().unwrap();
    let err = Pager::start(config(PagerMode::Faasnap, work.path()))
        .err()
        .expect("a damaged loading set is refused")
        .to_string();
    assert!(
        err.contains("loadset.img") && err.contains("checksum"),
        "{err}"
    );

    // Garbage in a lazy page of the pages image: the pager fails at the first fault there
    // instead of installing it.
    let lazy = task
        .stored()
        .filter(|s| s.lazy)
        .max_by_key(|s| s.pages)
        .unwrap();
    let pages = task.pages_path(&images);
    scribble(&pages, lazy.offset + (lazy.pages / 2) * 4096);
    let work = tempfile::tempdir().unwrap();
    let pager = Pager::start(config(PagerMode::OnDemand, work.path())).unwrap();
    let pid = criu
        .restore(
            &RestoreOptions {
                images: &images,
                work_dir: work.path(),
                root: None,
                externals: &[],
                inherit_pipes: &[],
                lazy_pages: true,
                tcp_close: false,
                empty_net_ns: false,
                verbosity: 4,
                timeout: Some(Duration::from_secs(60)),
            },
            |_| {},
        )
        .await
        .unwrap();
    let restored = Restored {
        pid,
        pager: Some(pager),
        lazy_daemon: None,
        _work: work,
    };
    // The check reads all of the task's memory; its answer never comes.
    std::thread::spawn(move || {
        let _ = std::panic::catch_unwind(|| ask(&name, "check"));
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while stats(&restored).error.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let error = stats(&restored).error.unwrap_or_default();
    assert!(
        error.contains(&format!("pages-{}.img", task.pages_id)) && error.contains("checksum"),
        "{error}"
    );
}
