//! A swap file icebox creates for its offload pool (the disk tier): allocated in full (a swap
//! file must have no holes), 0600, labelled `icebox-offload` by mkswap, swapped on below
//! icebox's zram device and above the operator's swap. It is removed at close, and after a
//! crash by the next start — only when its header still carries icebox's label, so a file
//! somebody else put at that path since is never touched.
//!
//! The kernel refuses to unlink or rename an active swap file (EPERM), but its path can still
//! stop naming it: its directory renamed, its filesystem lazily unmounted or mounted over.
//! swapoff takes only a path, so the file is held open from swapon to swapoff and swapped off
//! through `/proc/self/fd/N`, which opens the very file wherever it went.

use super::space;
use super::swaps::read_swaps;
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

/// Below zram's 32767, so the compressed tier fills first.
pub(crate) const PRIORITY: i32 = 32766;
/// <sys/swap.h>; the libc crate does not export these.
const SWAP_FLAG_PREFER: i32 = 0x8000;
const SWAP_FLAG_PRIO_MASK: i32 = 0x7fff;
/// mkswap's label for icebox's swap areas (the zram device's too).
pub(crate) const LABEL: &str = "icebox-offload";
/// Where a swap header keeps its volume label, and its signature (the last 10 bytes of the
/// first page): include/linux/swap.h `union swap_header`.
const LABEL_OFFSET: u64 = 1024 + 4 + 4 + 4 + 16;
const SIGNATURE: &[u8] = b"SWAPSPACE2";

#[derive(Debug)]
pub(crate) struct SwapFile {
    /// Where it was created (and where the operator asked for it).
    pub path: PathBuf,
    /// Open from before swapon until the SwapFile goes: names the file for swapoff and for
    /// /proc/swaps wherever its path went. None for a crashed daemon's file, known by path only.
    held: Option<File>,
    /// The path stopped naming the file and that was logged (once).
    moved_logged: AtomicBool,
}

impl SwapFile {
    /// A file known only by its path (a crashed daemon's): swapped off and removed there.
    pub fn at(path: &Path) -> SwapFile {
        SwapFile {
            path: path.to_path_buf(),
            held: None,
            moved_logged: AtomicBool::new(false),
        }
    }

    /// Creates, formats and swaps on `bytes` at `path`; on failure nothing is left. A
    /// filesystem without room for all of it is refused before anything is written.
    pub fn create(path: &Path, bytes: u64) -> io::Result<SwapFile> {
        let mut file = SwapFile::at(path);
        let dir = path.parent().unwrap_or(Path::new("/"));
        // When the directory cannot be measured, creating the file reports why.
        if let Ok(free) = space::available(dir) {
            if bytes > free {
                return Err(space::no_room(path, bytes, free));
            }
        }
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| file.error("create", e))?;
        let result = (|| {
            allocate(&made, bytes).map_err(|e| file.no_room_or(dir, bytes, e))?;
            drop(made);
            file.mkswap()?;
            file.held = Some(File::open(path).map_err(|e| file.error("open", e))?);
            file.swapon()
        })();
        if let Err(e) = result {
            file.held = None;
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        Ok(file)
    }

    fn error(&self, step: &str, err: io::Error) -> io::Error {
        io::Error::new(
            err.kind(),
            format!("{}: {step}: {err}", self.path.display()),
        )
    }

    /// fallocate's ENOSPC with the figures: the space check before it can pass and the
    /// allocation still fail (the filesystem's own metadata for the file, another writer).
    fn no_room_or(&self, dir: &Path, bytes: u64, err: io::Error) -> io::Error {
        if err.raw_os_error() != Some(libc::ENOSPC) {
            return self.error("allocate", err);
        }
        let _ = std::fs::remove_file(&self.path);
        match space::available(dir) {
            Ok(free) => space::no_room(&self.path, bytes, free),
            Err(_) => self.error("allocate", err),
        }
    }

    fn mkswap(&self) -> io::Result<()> {
        let program = super::zram::find_mkswap().ok_or_else(|| {
            self.error(
                "mkswap",
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "mkswap not found (install util-linux)",
                ),
            )
        })?;
        let out = Command::new(program)
            .arg("-L")
            .arg(LABEL)
            .arg(&self.path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| self.error("mkswap", e))?;
        if !out.status.success() {
            return Err(self.error(
                "mkswap",
                io::Error::other(String::from_utf8_lossy(&out.stderr).trim().to_string()),
            ));
        }
        Ok(())
    }

    fn c_path(path: &Path) -> CString {
        CString::new(path.as_os_str().as_bytes()).expect("no NUL in a path")
    }

    /// What to hand swapon/swapoff: the held file's /proc/self/fd link, else the path.
    fn syscall_path(&self) -> PathBuf {
        match &self.held {
            Some(f) => PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd())),
            None => self.path.clone(),
        }
    }

    fn swapon(&self) -> io::Result<()> {
        let path = Self::c_path(&self.path);
        let flags = SWAP_FLAG_PREFER | (PRIORITY & SWAP_FLAG_PRIO_MASK);
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::swapon(path.as_ptr(), flags) } != 0 {
            return Err(self.error("swapon", io::Error::last_os_error()));
        }
        Ok(())
    }

    /// The name /proc/swaps shows for the file: where it is now (both are the kernel's d_path
    /// of the same file, as this process sees it), else the path it was made at.
    pub fn name(&self) -> String {
        self.held
            .as_ref()
            .and_then(|f| std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())).ok())
            .unwrap_or_else(|| self.path.clone())
            .display()
            .to_string()
    }

    pub fn is_swapped_on(&self) -> io::Result<bool> {
        let name = self.name();
        Ok(read_swaps()?.iter().any(|a| a.path == name))
    }

    /// Where the file is now, when its path no longer leads to it (logged once): it is still
    /// the pool, and still swapped off and removed at close.
    pub fn moved(&self) -> Option<String> {
        let name = self.name();
        if Path::new(&name) == self.path {
            return None;
        }
        if !self.moved_logged.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                path = %self.path.display(),
                now = %name,
                "the offload pool's swap file is no longer at its path; it stays in use and \
                 is still swapped off and removed at stop"
            );
        }
        Some(name)
    }

    /// swapoff (which brings its pages back into RAM) if it is on, then the file goes.
    pub fn teardown(&self) -> io::Result<()> {
        if self.is_swapped_on()? {
            let path = Self::c_path(&self.syscall_path());
            // SAFETY: a valid NUL-terminated path.
            if unsafe { libc::swapoff(path.as_ptr()) } != 0 {
                return Err(self.error("swapoff", io::Error::last_os_error()));
            }
        }
        self.remove()
    }

    /// Removes the file: at its path, or where it went if it moved. A held file is removed only
    /// under a name that still leads to that very file (never a file someone put in its place).
    fn remove(&self) -> io::Result<()> {
        let Some(held) = &self.held else {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(self.error("remove", e)),
                _ => Ok(()),
            };
        };
        let ours = held.metadata().map_err(|e| self.error("fstat", e))?;
        if ours.nlink() == 0 {
            return Ok(());
        }
        let now = PathBuf::from(self.name());
        for candidate in [&self.path, &now] {
            let same = std::fs::symlink_metadata(candidate)
                .is_ok_and(|m| (m.dev(), m.ino()) == (ours.dev(), ours.ino()));
            if same {
                return std::fs::remove_file(candidate).map_err(|e| self.error("remove", e));
            }
        }
        tracing::warn!(
            path = %self.path.display(),
            now = %now.display(),
            "the offload pool's swap file is swapped off but out of reach (its filesystem \
             unmounted or mounted over): not removed"
        );
        Ok(())
    }

    /// Whether the file at `path` is a swap area icebox formatted (its label).
    pub fn is_ours(path: &Path) -> bool {
        let Ok(mut f) = std::fs::File::open(path) else {
            return false;
        };
        let mut label = [0u8; 16];
        let mut signature = [0u8; 10];
        let read = f.seek(SeekFrom::Start(LABEL_OFFSET)).is_ok()
            && f.read_exact(&mut label).is_ok()
            && f.seek(SeekFrom::Start(4096 - 10)).is_ok()
            && f.read_exact(&mut signature).is_ok();
        let name = label.split(|b| *b == 0).next().unwrap_or_default();
        read && signature == SIGNATURE && name == LABEL.as_bytes()
    }
}

/// The whole size, with real blocks (fallocate), as swapon requires.
fn allocate(file: &std::fs::File, bytes: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "swap file size too large"))?;
    // SAFETY: a valid open file descriptor; mode 0 allocates and extends the file.
    if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The kernel's zswap: a compressed cache in front of disk swap. Turned on for icebox's swap
/// file only where the kernel has it and it is off, and turned off again at close.
pub(crate) mod zswap {
    use std::io;

    const ENABLED: &str = "/sys/module/zswap/parameters/enabled";

    pub fn available() -> bool {
        std::path::Path::new(ENABLED).exists()
    }

    pub fn enabled() -> io::Result<bool> {
        Ok(std::fs::read_to_string(ENABLED)?.trim() == "Y")
    }

    pub fn set(on: bool) -> io::Result<()> {
        std::fs::write(ENABLED, if on { "Y" } else { "N" })
            .map_err(|e| io::Error::new(e.kind(), format!("{ENABLED}: {e}")))
    }

    /// RAM zswap's pool uses now, and the (uncompressed) bytes it holds: /proc/meminfo
    /// `Zswap` and `Zswapped`.
    pub fn usage() -> (u64, u64) {
        let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .map_or(0, |kb| kb * 1024)
        };
        (field("Zswap"), field("Zswapped"))
    }
}
