//! A swap file icebox creates for its offload pool (the disk tier): allocated in full (a swap
//! file must have no holes), 0600, labelled `icebox-offload` by mkswap, swapped on below
//! icebox's zram device and above the operator's swap. It is removed at close, and after a
//! crash by the next start — only when its header still carries icebox's label, so a file
//! somebody else put at that path since is never touched.

use super::swaps::read_swaps;
use std::ffi::CString;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
    pub path: PathBuf,
}

impl SwapFile {
    /// Creates, formats and swaps on `bytes` at `path`; on failure nothing is left.
    pub fn create(path: &Path, bytes: u64) -> io::Result<SwapFile> {
        let file = SwapFile {
            path: path.to_path_buf(),
        };
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| file.error("create", e))?;
        let result = (|| {
            allocate(&made, bytes).map_err(|e| file.error("allocate", e))?;
            drop(made);
            file.mkswap()?;
            file.swapon()
        })();
        if let Err(e) = result {
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

    fn c_path(&self) -> CString {
        CString::new(self.path.as_os_str().as_bytes()).expect("no NUL in a path")
    }

    fn swapon(&self) -> io::Result<()> {
        let path = self.c_path();
        let flags = SWAP_FLAG_PREFER | (PRIORITY & SWAP_FLAG_PRIO_MASK);
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::swapon(path.as_ptr(), flags) } != 0 {
            return Err(self.error("swapon", io::Error::last_os_error()));
        }
        Ok(())
    }

    pub fn is_swapped_on(&self) -> io::Result<bool> {
        Ok(read_swaps()?
            .iter()
            .any(|a| Path::new(&a.path) == self.path))
    }

    /// swapoff (which brings its pages back into RAM) if it is on, then the file goes.
    pub fn teardown(&self) -> io::Result<()> {
        if self.is_swapped_on()? {
            let path = self.c_path();
            // SAFETY: a valid NUL-terminated path.
            if unsafe { libc::swapoff(path.as_ptr()) } != 0 {
                return Err(self.error("swapoff", io::Error::last_os_error()));
            }
        }
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(self.error("remove", e)),
            _ => Ok(()),
        }
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
    use std::os::fd::AsRawFd;
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
