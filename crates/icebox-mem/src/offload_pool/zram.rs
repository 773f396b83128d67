//! One zram device used as swap: the sysfs steps to create, configure and remove it.
//! Every error names the device and the step that failed.

use super::swaps::read_swaps;
use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) const CONTROL: &str = "/sys/class/zram-control";

/// <sys/swap.h>; the libc crate does not export these.
const SWAP_FLAG_PREFER: i32 = 0x8000;
const SWAP_FLAG_PRIO_MASK: i32 = 0x7fff;

/// The highest swap priority: the kernel fills icebox's device before any operator swap.
pub(crate) const PRIORITY: i32 = 32767;

/// udev may still hold the device open (blkid after mkswap) for a moment after swapoff.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Zram {
    pub id: u32,
}

impl Zram {
    /// Creates a new, unconfigured device: reading `hot_add` allocates it and returns its id.
    pub fn hot_add() -> io::Result<Zram> {
        let path = Path::new(CONTROL).join("hot_add");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("zram hot_add: {e}")))?;
        let id = text.trim().parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("zram hot_add: unexpected answer {text:?}"),
            )
        })?;
        Ok(Zram { id })
    }

    pub fn dev_path(&self) -> String {
        format!("/dev/zram{}", self.id)
    }

    fn sys(&self, file: &str) -> PathBuf {
        PathBuf::from(format!("/sys/block/zram{}/{file}", self.id))
    }

    pub fn compact(&self) -> io::Result<()> {
        self.write("compact", "1", "compact")
    }

    pub fn exists(&self) -> bool {
        self.sys("disksize").exists()
    }

    fn error(&self, step: &str, err: impl std::fmt::Display, kind: io::ErrorKind) -> io::Error {
        io::Error::new(kind, format!("{}: {step}: {err}", self.dev_path()))
    }

    fn io_error(&self, step: &str, err: io::Error) -> io::Error {
        self.error(step, &err, err.kind())
    }

    fn write(&self, file: &str, value: &str, step: &str) -> io::Result<()> {
        std::fs::write(self.sys(file), value).map_err(|e| self.io_error(step, e))
    }

    pub fn disksize(&self) -> io::Result<u64> {
        let text = std::fs::read_to_string(self.sys("disksize"))
            .map_err(|e| self.io_error("disksize", e))?;
        text.trim()
            .parse()
            .map_err(|_| self.error("disksize", format!("{text:?}"), io::ErrorKind::InvalidData))
    }

    /// lz4 (fastest of the kernel's compressors); lzo-rle, the kernel's usual default, when
    /// lz4 is not built in.
    pub fn set_comp_algorithm(&self) -> io::Result<()> {
        let text = std::fs::read_to_string(self.sys("comp_algorithm"))
            .map_err(|e| self.io_error("comp_algorithm", e))?;
        let choice = choose_algorithm(&text);
        if choice != "lz4" {
            tracing::warn!(
                device = %self.dev_path(),
                available = text.trim(),
                "zram has no lz4 compressor: using {choice}"
            );
        }
        self.write("comp_algorithm", choice, "comp_algorithm")
    }

    pub fn set_disksize(&self, bytes: u64) -> io::Result<()> {
        self.write("disksize", &bytes.to_string(), "disksize")
    }

    pub fn mkswap(&self) -> io::Result<()> {
        let program = find_mkswap().ok_or_else(|| {
            self.error(
                "mkswap",
                "mkswap not found in /usr/sbin, /sbin or PATH (install util-linux)",
                io::ErrorKind::NotFound,
            )
        })?;
        let out = Command::new(&program)
            .args(["-L", "icebox-offload", &self.dev_path()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| self.io_error("mkswap", e))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(self.error(
                "mkswap",
                format!(
                    "{} {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                io::ErrorKind::Other,
            ))
        }
    }

    pub fn swapon(&self) -> io::Result<()> {
        let path = self.c_path();
        let flags = SWAP_FLAG_PREFER | (PRIORITY & SWAP_FLAG_PRIO_MASK);
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::swapon(path.as_ptr(), flags) } != 0 {
            return Err(self.io_error("swapon", io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Moves every page the device holds back into RAM (that is what swapoff does).
    pub fn swapoff(&self) -> io::Result<()> {
        let path = self.c_path();
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::swapoff(path.as_ptr()) } != 0 {
            return Err(self.io_error("swapoff", io::Error::last_os_error()));
        }
        Ok(())
    }

    fn c_path(&self) -> CString {
        CString::new(self.dev_path()).expect("no NUL in a device path")
    }

    pub fn is_swapped_on(&self) -> io::Result<bool> {
        let dev = self.dev_path();
        Ok(read_swaps()?.iter().any(|a| a.path == dev))
    }

    pub fn reset(&self) -> io::Result<()> {
        retry_busy(|| std::fs::write(self.sys("reset"), "1")).map_err(|e| self.io_error("reset", e))
    }

    pub fn hot_remove(&self) -> io::Result<()> {
        retry_busy(|| std::fs::write(Path::new(CONTROL).join("hot_remove"), self.id.to_string()))
            .map_err(|e| self.io_error("hot_remove", e))
    }

    /// swapoff (if swapped on), reset, hot_remove. Stops at the first failure: each step
    /// needs the previous one (a swapped-on device is busy and cannot be reset).
    pub fn teardown(&self) -> io::Result<()> {
        if self
            .is_swapped_on()
            .map_err(|e| self.io_error("reading /proc/swaps", e))?
        {
            self.swapoff()?;
        }
        if self.exists() {
            self.reset()?;
            self.hot_remove()?;
        }
        Ok(())
    }
}

/// `[lzo-rle] lzo lz4` → `lz4`; without lz4 the kernel default lzo-rle, else whatever is
/// selected now.
pub(crate) fn choose_algorithm(listing: &str) -> &str {
    let names: Vec<&str> = listing
        .split_whitespace()
        .map(|w| w.trim_start_matches('[').trim_end_matches(']'))
        .collect();
    ["lz4", "lzo-rle"]
        .into_iter()
        .find(|want| names.contains(want))
        .or_else(|| {
            listing
                .split_whitespace()
                .find(|w| w.starts_with('['))
                .map(|w| w.trim_start_matches('[').trim_end_matches(']'))
        })
        .unwrap_or("lzo-rle")
}

pub(crate) fn find_mkswap() -> Option<PathBuf> {
    let fixed = ["/usr/sbin/mkswap", "/sbin/mkswap"].map(PathBuf::from);
    let path = std::env::var_os("PATH").unwrap_or_default();
    let on_path = std::env::split_paths(&path).map(|d| d.join("mkswap"));
    fixed.into_iter().chain(on_path).find(|p| p.is_file())
}

fn retry_busy(mut op: impl FnMut() -> io::Result<()>) -> io::Result<()> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        match op() {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// Boot id of the running kernel: a marker from another boot names a device that is gone.
pub(crate) fn boot_id() -> io::Result<String> {
    let path = "/proc/sys/kernel/random/boot_id";
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))
}

/// zram rounds disksize up to whole pages.
pub(crate) fn page_aligned(bytes: u64) -> u64 {
    bytes.div_ceil(crate::offload_pool::PAGE) * crate::offload_pool::PAGE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_lz4_then_lzo_rle() {
        assert_eq!(choose_algorithm("[lzo-rle] lzo lz4\n"), "lz4");
        assert_eq!(choose_algorithm("lzo [lz4] zstd"), "lz4");
        assert_eq!(choose_algorithm("[lzo] lzo-rle"), "lzo-rle");
        assert_eq!(choose_algorithm("lzo [zstd]"), "zstd");
    }

    #[test]
    fn aligns_to_pages() {
        assert_eq!(page_aligned(1_000_000_000), 1_000_001_536);
        assert_eq!(page_aligned(64 << 20), 64 << 20);
    }
}
